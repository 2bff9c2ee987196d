//! LUNs: create, list, map, online/offline, destroy, resize.

use super::*;

pub(super) fn lun_missing(path: &str) -> Fail {
    fail(
        errno::EOBJECTNOTFOUND,
        format!("LUN \"{path}\" does not exist"),
    )
}

/// ONTAP makes a LUN a whole number of cylinders of 255 heads × 63 sectors of 512 bytes: a
/// LUN asked for as 1 GiB is 1,077,511,680 bytes.
const LUN_CYLINDER: u64 = 255 * 63 * 512;

fn lun_actual_size(asked: u64) -> u64 {
    asked.div_ceil(LUN_CYLINDER).saturating_mul(LUN_CYLINDER)
}

/// What the LUNs of a volume may hold: its size less the snapshot reserve.
pub(super) fn usable_for_luns(v: &Volume) -> u64 {
    (u128::from(v.size) * u128::from(100 - v.snapshot_reserve.min(100)) / 100) as u64
}

/// Refuses a LUN of `size` bytes beside `others` bytes of LUNs in `volume`.
fn check_lun_space(volume: &str, v: &Volume, others: u64, size: u64) -> Result<(), Fail> {
    let usable = usable_for_luns(v);
    if others.saturating_add(size) > usable {
        return Err(fail(
            errno::ENOSPC,
            format!(
                "Not enough space in volume {volume} for a LUN of {size} bytes: {usable} bytes \
                 outside the snapshot reserve, {others} of them used by other LUNs"
            ),
        ));
    }
    Ok(())
}

pub(super) fn lun_create(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let path = arg(api, "path")?.to_string();
    let size = lun_actual_size(parse_size(arg(api, "size")?)?);
    let ostype = opt(api, "ostype").unwrap_or("linux").to_string();
    if !matches!(
        ostype.as_str(),
        "linux"
            | "windows"
            | "windows_2008"
            | "vmware"
            | "xen"
            | "hyper_v"
            | "solaris"
            | "aix"
            | "hpux"
    ) {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Invalid ostype \"{ostype}\""),
        ));
    }
    let reserved = flag(api, "space-reservation-enabled");
    let Some(volume) = lun_volume(&path).map(str::to_string) else {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Invalid LUN path \"{path}\""),
        ));
    };
    let serial = serial(ctx.a);
    let uuid = ctx.a.uuid();
    let svm = ctx.svm(&api.name)?;
    let Some(v) = svm.volumes.get(&volume) else {
        return Err(fail(
            errno::NO_SUCH_VOLUME,
            format!("Volume \"{volume}\" does not exist"),
        ));
    };
    if svm.luns.contains_key(&path) {
        return Err(fail(
            errno::VDISK_EXISTS,
            format!("LUN \"{path}\" already exists"),
        ));
    }
    if size < MIN_LUN {
        return Err(fail(errno::SIZE_TOO_SMALL, "The LUN size is too small"));
    }
    let used: u64 = svm
        .luns
        .iter()
        .filter(|(p, _)| lun_volume(p) == Some(volume.as_str()))
        .map(|(_, l)| l.size)
        .sum();
    check_lun_space(&volume, v, used, size)?;
    svm.luns.insert(
        path,
        Lun {
            size,
            serial,
            uuid,
            online: true,
            ostype,
            space_reserved: reserved,
            comment: opt(api, "comment").unwrap_or("").to_string(),
            maps: BTreeMap::new(),
        },
    );
    Ok(vec![leaf("actual-size", size)])
}

pub(super) fn lun_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let mut records = Vec::new();
    for s in visible_svms(ctx) {
        let Some(svm) = ctx.a.svms.get(&s) else {
            continue;
        };
        for (path, l) in &svm.luns {
            records.push((
                format!("{s}/{path}"),
                Node::new("lun-info")
                    .with_leaf("path", path)
                    .with_leaf("volume", lun_volume(path).unwrap_or(""))
                    .with_leaf("qtree", "")
                    .with_leaf("vserver", &s)
                    .with_leaf("size", l.size.to_string())
                    .with_leaf("size-used", "0")
                    .with_leaf("online", l.online.to_string())
                    .with_leaf("mapped", (!l.maps.is_empty()).to_string())
                    .with_leaf("serial-number", &l.serial)
                    .with_leaf("multiprotocol-type", &l.ostype)
                    .with_leaf("is-space-reservation-enabled", l.space_reserved.to_string())
                    .with_leaf("block-size", "512")
                    .with_leaf("uuid", &l.uuid)
                    .with_leaf("comment", &l.comment)
                    .with_leaf("state", if l.online { "online" } else { "offline" }),
            ));
        }
    }
    iterate(ctx, api, records)
}

pub(super) fn lun_map(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let igroup = arg(api, "initiator-group")?.to_string();
    let path = arg(api, "path")?.to_string();
    let wanted = match opt(api, "lun-id") {
        Some(id) => Some(
            id.parse::<u32>()
                .map_err(|_| fail(errno::EINVALIDINPUTERROR, "Invalid lun-id"))?,
        ),
        None => None,
    };
    let svm = ctx.svm(&api.name)?;
    if !svm.igroups.contains_key(&igroup) {
        return Err(fail(
            errno::NO_SUCH_INITGROUP,
            format!("Initiator group \"{igroup}\" does not exist"),
        ));
    }
    let l = svm.luns.get(&path).ok_or_else(|| lun_missing(&path))?;
    if l.maps.contains_key(&igroup) {
        return Err(fail(
            errno::INITGROUP_HAS_VDISK,
            format!("LUN {path} is already mapped to initiator group {igroup}"),
        ));
    }
    let taken: Vec<u32> = svm
        .luns
        .values()
        .filter_map(|l| l.maps.get(&igroup).copied())
        .collect();
    let id = match wanted {
        Some(id) if taken.contains(&id) => {
            return Err(fail(
                errno::INITGROUP_HAS_LUN,
                format!("LUN ID {id} is already used in initiator group {igroup}"),
            ));
        }
        Some(id) => id,
        None => (0..).find(|i| !taken.contains(i)).unwrap_or(0),
    };
    if let Some(l) = svm.luns.get_mut(&path) {
        l.maps.insert(igroup, id);
    }
    Ok(vec![leaf("lun-id-assigned", id)])
}

pub(super) fn lun_unmap(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let igroup = arg(api, "initiator-group")?.to_string();
    let path = arg(api, "path")?.to_string();
    let svm = ctx.svm(&api.name)?;
    let l = svm.luns.get_mut(&path).ok_or_else(|| lun_missing(&path))?;
    if l.maps.remove(&igroup).is_none() {
        return Err(fail(
            errno::NO_SUCH_LUNMAP,
            format!("LUN {path} is not mapped to initiator group {igroup}"),
        ));
    }
    Ok(vec![])
}

pub(super) fn lun_map_list_info(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let path = arg(api, "path")?.to_string();
    let svm = ctx.svm(&api.name)?;
    let l = svm.luns.get(&path).ok_or_else(|| lun_missing(&path))?;
    let mut groups = Node::new("initiator-groups");
    for (g, id) in &l.maps {
        let ig = svm.igroups.get(g);
        groups.push(
            Node::new("initiator-group-info")
                .with_leaf("initiator-group-name", g)
                .with_leaf("lun-id", id.to_string())
                .with_leaf(
                    "initiator-group-type",
                    ig.map(|i| i.kind.clone()).unwrap_or_default(),
                )
                .with_leaf(
                    "initiator-group-os-type",
                    ig.map(|i| i.os_type.clone()).unwrap_or_default(),
                ),
        );
    }
    Ok(vec![groups])
}

pub(super) fn lun_online(ctx: &mut Ctx<'_>, api: &Node, online: bool) -> R {
    let path = arg(api, "path")?.to_string();
    let l = ctx
        .svm(&api.name)?
        .luns
        .get_mut(&path)
        .ok_or_else(|| lun_missing(&path))?;
    if l.online == online {
        return Err(if online {
            fail(
                errno::VDISK_NOT_DISABLED,
                format!("LUN {path} is already online"),
            )
        } else {
            fail(
                errno::VDISK_NOT_ENABLED,
                format!("LUN {path} is already offline"),
            )
        });
    }
    l.online = online;
    Ok(vec![])
}

pub(super) fn lun_destroy(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let path = arg(api, "path")?.to_string();
    let force = flag(api, "force");
    let svm = ctx.svm(&api.name)?;
    let l = svm.luns.get(&path).ok_or_else(|| lun_missing(&path))?;
    if !force && !l.maps.is_empty() {
        return Err(fail(
            errno::EAPIERROR,
            format!("LUN {path} is mapped; unmap it first"),
        ));
    }
    if !force && l.online {
        return Err(fail(
            errno::EAPIERROR,
            format!("LUN {path} is online; offline it first"),
        ));
    }
    svm.luns.remove(&path);
    Ok(vec![])
}

pub(super) fn lun_resize(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let path = arg(api, "path")?.to_string();
    let size = lun_actual_size(parse_size(arg(api, "size")?)?);
    let svm = ctx.svm(&api.name)?;
    let l = svm.luns.get(&path).ok_or_else(|| lun_missing(&path))?;
    let volume = lun_volume(&path).unwrap_or("").to_string();
    let v = svm
        .volumes
        .get(&volume)
        .ok_or_else(|| vol_missing(&volume))?;
    let others: u64 = svm
        .luns
        .iter()
        .filter(|(p, _)| *p != &path && lun_volume(p) == Some(volume.as_str()))
        .map(|(_, l)| l.size)
        .sum();
    if size < MIN_LUN {
        return Err(fail(errno::SIZE_TOO_SMALL, "The LUN size is too small"));
    }
    check_lun_space(&volume, v, others, size)?;
    let _ = l;
    if let Some(l) = svm.luns.get_mut(&path) {
        l.size = size;
    }
    Ok(vec![leaf("actual-size", size)])
}
