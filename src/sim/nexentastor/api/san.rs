//! iSCSI targets (portals, CHAP), target groups, host groups, LUN mappings and remote
//! initiators (CHAP of initiators).
//!
//! Names of iSCSI nodes are `iqn.`, `eui.` or `naa.` names. A CHAP secret is 12 to 255
//! characters and is never read back (`chapSecretSet` says whether one is set). A target with
//! `authentication: chap` checks initiators against their remote-initiator CHAP credentials;
//! its own `chapUser`/`chapSecret` (optional) are for mutual CHAP. Group members must exist (targets) or be node names
//! (initiators). `All` is the built-in host or target group of every initiator or target.
//! A LUN mapping ties a zvol to a target group and a host group; without `lun` the appliance
//! picks the lowest number no mapping of an overlapping target group uses. A volume has at
//! most one mapping per reach: a second one whose target group and host group both overlap
//! an existing one's (equal, or `All`) is EEXIST. An initiator is a member of one host group
//! at most (EEXIST naming the other group). A target in a group, or a group in a mapping,
//! cannot be deleted (EBUSY).

use serde_json::{Value, json};

use super::{Ctx, Fail, Fields, R, Req, busy, created, done, exists, invalid, not_found};
use crate::sim::nexentastor::state::{
    Appliance, LunMapping, Portal, RemoteInitiator, Target, valid_component,
};

/// The highest LUN number.
pub const MAX_LUN: u32 = 16383;
const ISCSI_PORT: u16 = 3260;

fn check_node_name(field: &str, n: &str) -> Result<(), Fail> {
    let ok = ["iqn.", "eui.", "naa."].iter().any(|p| n.starts_with(p))
        && n.len() > 4
        && n.len() <= 223
        && !n.chars().any(|c| c.is_whitespace() || c.is_control());
    if ok {
        return Ok(());
    }
    Err(invalid(format!(
        "{field} {n:?} is not an iSCSI name (iqn., eui. or naa., at most 223 characters)"
    )))
}

fn check_secret(s: &str) -> Result<(), Fail> {
    let n = s.chars().count();
    if (12..=255).contains(&n) {
        return Ok(());
    }
    Err(invalid(format!(
        "chapSecret has {n} characters; a CHAP secret has 12 to 255"
    )))
}

fn check_group_name(what: &str, n: &str) -> Result<(), Fail> {
    if !valid_component(n) {
        return Err(invalid(format!(
            "{what} name {n:?}: letters, digits and _ - . : (not empty)"
        )));
    }
    if Appliance::is_all(n) {
        return Err(exists(what, n));
    }
    Ok(())
}

fn target_json(name: &str, t: &Target) -> Value {
    let portals: Vec<Value> = t
        .portals
        .iter()
        .map(|p| json!({"address": p.address, "port": p.port}))
        .collect();
    json!({
        "name": name,
        "alias": t.alias,
        "state": "online",
        "authentication": t.authentication,
        "chapUser": t.chap_user,
        "chapSecretSet": !t.chap_secret.is_empty(),
        "portals": portals,
    })
}

pub(super) fn targets(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let name = req.query.get("name");
    let items = ctx
        .a
        .targets
        .iter()
        .filter(|(n, _)| name.is_none_or(|w| w == n.as_str()))
        .map(|(n, t)| target_json(n, t))
        .collect();
    req.page(ctx, &["name"], items)
}

pub(super) fn target(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let t = ctx
        .a
        .targets
        .get(req.arg(0))
        .ok_or_else(|| not_found("target", req.arg(0)))?;
    req.one(target_json(req.arg(0), t))
}

fn portals(f: &Fields<'_>) -> Result<Option<Vec<Portal>>, Fail> {
    let Some(list) = f.opt_array("portals")? else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for p in list {
        let obj = p
            .as_object()
            .ok_or_else(|| super::bad_arg("field portals: expected objects {address, port}"))?;
        if let Some(k) = obj.keys().find(|k| *k != "address" && *k != "port") {
            return Err(super::bad_arg(format!("portals: unknown field {k:?}")));
        }
        let address = obj
            .get("address")
            .and_then(Value::as_str)
            .ok_or_else(|| super::bad_arg("portals: address is a required string"))?;
        if address.parse::<std::net::IpAddr>().is_err() {
            return Err(invalid(format!(
                "portal address {address:?} is not an IP address"
            )));
        }
        let port = match obj.get("port").filter(|v| !v.is_null()) {
            None => ISCSI_PORT,
            Some(v) => v
                .as_u64()
                .and_then(|n| u16::try_from(n).ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| invalid("portal port: 1 to 65535"))?,
        };
        out.push(Portal {
            address: address.to_string(),
            port,
        });
    }
    Ok(Some(out))
}

const TARGET_FIELDS: &[&str] = &[
    "alias",
    "portals",
    "authentication",
    "chapUser",
    "chapSecret",
];

/// Applies the optional target fields of `f` to `t`, checking CHAP at the end.
fn set_target(t: &mut Target, f: &Fields<'_>) -> Result<(), Fail> {
    if let Some(a) = f.opt_str("alias")? {
        t.alias = a.to_string();
    }
    if let Some(p) = portals(f)? {
        t.portals = p;
    }
    if let Some(u) = f.opt_str("chapUser")? {
        t.chap_user = u.to_string();
    }
    if let Some(s) = f.opt_str("chapSecret")? {
        if !s.is_empty() {
            check_secret(s)?;
        }
        t.chap_secret = s.to_string();
    }
    if let Some(a) = f.opt_str("authentication")? {
        if a != "none" && a != "chap" {
            return Err(invalid(format!("authentication {a:?} is none or chap")));
        }
        t.authentication = a.to_string();
    }
    Ok(())
}

pub(super) fn create_target(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    req.query.allow(&[])?;
    let mut allowed = vec!["name"];
    allowed.extend_from_slice(TARGET_FIELDS);
    let f = req.fields(&allowed)?;
    let name = match f.opt_str("name")? {
        Some(n) => n.to_string(),
        None => {
            format!(
                "iqn.2005-07.com.nexenta:01:{}",
                &ctx.a.guid.to_lowercase()[..12]
            ) + &format!(".{}", ctx.a.next_id())
        }
    };
    check_node_name("name", &name)?;
    if ctx.a.targets.contains_key(&name) {
        return Err(exists("target", &name));
    }
    let mut t = Target {
        alias: String::new(),
        portals: Vec::new(),
        authentication: "none".into(),
        chap_user: String::new(),
        chap_secret: String::new(),
    };
    set_target(&mut t, &f)?;
    ctx.a.targets.insert(name, t);
    ctx.dirty = true;
    created()
}

pub(super) fn update_target(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    req.query.allow(&[])?;
    let f = req.fields(TARGET_FIELDS)?;
    let name = req.arg(0);
    let mut t = ctx
        .a
        .targets
        .get(name)
        .cloned()
        .ok_or_else(|| not_found("target", name))?;
    set_target(&mut t, &f)?;
    ctx.a.targets.insert(name.to_string(), t);
    ctx.dirty = true;
    done()
}

pub(super) fn delete_target(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    req.query.allow(&[])?;
    let name = req.arg(0);
    if !ctx.a.targets.contains_key(name) {
        return Err(not_found("target", name));
    }
    if let Some((g, _)) = ctx
        .a
        .target_groups
        .iter()
        .find(|(_, m)| m.iter().any(|t| t == name))
    {
        return Err(busy(format!(
            "target {name:?} is a member of target group {g:?}"
        )));
    }
    ctx.a.targets.remove(name);
    ctx.dirty = true;
    done()
}

fn group_json(name: &str, members: &[String]) -> Value {
    json!({"name": name, "members": members})
}

/// Which kind of group a handler serves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Targets,
    Hosts,
}

impl Kind {
    fn what(self) -> &'static str {
        match self {
            Kind::Targets => "target group",
            Kind::Hosts => "host group",
        }
    }

    fn groups(self, a: &mut Appliance) -> &mut std::collections::BTreeMap<String, Vec<String>> {
        match self {
            Kind::Targets => &mut a.target_groups,
            Kind::Hosts => &mut a.host_groups,
        }
    }

    fn in_mapping(self, m: &LunMapping, name: &str) -> bool {
        match self {
            Kind::Targets => m.target_group == name,
            Kind::Hosts => m.host_group == name,
        }
    }

    /// The `members` of `f` for the group `group`, checked: existing targets, or iSCSI names
    /// in no other host group; none twice.
    fn members(
        self,
        a: &Appliance,
        group: &str,
        f: &Fields<'_>,
    ) -> Result<Option<Vec<String>>, Fail> {
        let Some(list) = f.opt_strs("members")? else {
            return Ok(None);
        };
        for (i, m) in list.iter().enumerate() {
            match self {
                Kind::Targets if !a.targets.contains_key(*m) => {
                    return Err(not_found("target", m));
                }
                Kind::Hosts => {
                    check_node_name("member", m)?;
                    if let Some((other, _)) = a
                        .host_groups
                        .iter()
                        .find(|(n, ms)| n.as_str() != group && ms.iter().any(|x| x == m))
                    {
                        return Err(exists(
                            "host group member",
                            &format!("{m} (in host group {other})"),
                        ));
                    }
                }
                _ => {}
            }
            if list[..i].contains(m) {
                return Err(invalid(format!("member {m:?} is named twice")));
            }
        }
        Ok(Some(list.into_iter().map(str::to_string).collect()))
    }
}

fn list_groups(ctx: &mut Ctx<'_>, req: &Req<'_>, kind: Kind) -> R {
    let name = req.query.get("name");
    let items = kind
        .groups(ctx.a)
        .iter()
        .filter(|(n, _)| name.is_none_or(|w| w == n.as_str()))
        .map(|(n, m)| group_json(n, m))
        .collect();
    req.page(ctx, &["name"], items)
}

fn get_group(ctx: &mut Ctx<'_>, req: &Req<'_>, kind: Kind) -> R {
    let name = req.arg(0);
    let m = kind
        .groups(ctx.a)
        .get(name)
        .ok_or_else(|| not_found(kind.what(), name))?;
    req.one(group_json(name, m))
}

fn create_group(ctx: &mut Ctx<'_>, req: &Req<'_>, kind: Kind) -> R {
    req.query.allow(&[])?;
    let f = req.fields(&["name", "members"])?;
    let name = f.str("name")?;
    check_group_name(kind.what(), name)?;
    if kind.groups(ctx.a).contains_key(name) {
        return Err(exists(kind.what(), name));
    }
    let members = kind.members(ctx.a, name, &f)?.unwrap_or_default();
    kind.groups(ctx.a).insert(name.to_string(), members);
    ctx.dirty = true;
    created()
}

fn update_group(ctx: &mut Ctx<'_>, req: &Req<'_>, kind: Kind) -> R {
    req.query.allow(&[])?;
    let f = req.fields(&["members"])?;
    let name = req.arg(0);
    if !kind.groups(ctx.a).contains_key(name) {
        return Err(not_found(kind.what(), name));
    }
    if let Some(m) = kind.members(ctx.a, name, &f)? {
        kind.groups(ctx.a).insert(name.to_string(), m);
        ctx.dirty = true;
    }
    done()
}

fn delete_group(ctx: &mut Ctx<'_>, req: &Req<'_>, kind: Kind) -> R {
    req.query.allow(&[])?;
    let name = req.arg(0);
    if !kind.groups(ctx.a).contains_key(name) {
        return Err(not_found(kind.what(), name));
    }
    if let Some((id, _)) = ctx
        .a
        .lun_mappings
        .iter()
        .find(|(_, m)| kind.in_mapping(m, name))
    {
        return Err(busy(format!(
            "{} {name:?} is used by LUN mapping {id}",
            kind.what()
        )));
    }
    kind.groups(ctx.a).remove(name);
    ctx.dirty = true;
    done()
}

pub(super) fn target_groups(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    list_groups(ctx, req, Kind::Targets)
}
pub(super) fn target_group(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    get_group(ctx, req, Kind::Targets)
}
pub(super) fn create_target_group(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    create_group(ctx, req, Kind::Targets)
}
pub(super) fn update_target_group(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    update_group(ctx, req, Kind::Targets)
}
pub(super) fn delete_target_group(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    delete_group(ctx, req, Kind::Targets)
}
pub(super) fn host_groups(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    list_groups(ctx, req, Kind::Hosts)
}
pub(super) fn host_group(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    get_group(ctx, req, Kind::Hosts)
}
pub(super) fn create_host_group(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    create_group(ctx, req, Kind::Hosts)
}
pub(super) fn update_host_group(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    update_group(ctx, req, Kind::Hosts)
}
pub(super) fn delete_host_group(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    delete_group(ctx, req, Kind::Hosts)
}

fn mapping_json(id: &str, m: &LunMapping) -> Value {
    json!({"id": id, "volume": m.volume, "targetGroup": m.target_group,
           "hostGroup": m.host_group, "lun": m.lun})
}

pub(super) fn lun_mappings(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    const KEYS: &[&str] = &["id", "volume", "targetGroup", "hostGroup"];
    let items = ctx
        .a
        .lun_mappings
        .iter()
        .map(|(id, m)| mapping_json(id, m))
        .filter(|v| {
            KEYS.iter()
                .all(|k| req.query.get(k).is_none_or(|w| v[*k].as_str() == Some(w)))
        })
        .collect();
    req.page(ctx, KEYS, items)
}

pub(super) fn lun_mapping(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let id = req.arg(0);
    let m = ctx
        .a
        .lun_mappings
        .get(id)
        .ok_or_else(|| not_found("LUN mapping", id))?;
    req.one(mapping_json(id, m))
}

/// Whether mappings through these target groups reach a common target.
fn overlap(a: &str, b: &str) -> bool {
    a == b || Appliance::is_all(a) || Appliance::is_all(b)
}

pub(super) fn create_lun_mapping(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    req.query.allow(&[])?;
    let f = req.fields(&["volume", "targetGroup", "hostGroup", "lun"])?;
    let volume = f.str("volume")?;
    let tg = f.str("targetGroup")?;
    let hg = f.str("hostGroup")?;
    let lun = f.opt_u64("lun")?;
    let a = &*ctx.a;
    if !a.volumes.contains_key(volume) {
        return Err(not_found("volume", volume));
    }
    if !Appliance::is_all(tg) && !a.target_groups.contains_key(tg) {
        return Err(not_found("target group", tg));
    }
    if !Appliance::is_all(hg) && !a.host_groups.contains_key(hg) {
        return Err(not_found("host group", hg));
    }
    if let Some(m) = a
        .lun_mappings
        .values()
        .find(|m| m.volume == volume && overlap(&m.target_group, tg) && overlap(&m.host_group, hg))
    {
        return Err(exists(
            "LUN mapping",
            &format!(
                "{volume} to {tg} for {hg} (it is mapped to {} for {})",
                m.target_group, m.host_group
            ),
        ));
    }
    let used: Vec<u32> = a
        .lun_mappings
        .values()
        .filter(|m| overlap(&m.target_group, tg))
        .map(|m| m.lun)
        .collect();
    let lun = match lun {
        Some(n) if n > u64::from(MAX_LUN) => {
            return Err(invalid(format!("lun {n}: 0 to {MAX_LUN}")));
        }
        Some(n) if used.contains(&(n as u32)) => {
            return Err(exists("LUN", &format!("{n} in target group {tg}")));
        }
        Some(n) => n as u32,
        None => (0..=MAX_LUN)
            .find(|n| !used.contains(n))
            .ok_or_else(|| busy(format!("no free LUN in target group {tg:?}")))?,
    };
    let mapping = LunMapping {
        volume: volume.to_string(),
        target_group: tg.to_string(),
        host_group: hg.to_string(),
        lun,
    };
    let id = ctx.a.next_id();
    ctx.a.lun_mappings.insert(id, mapping);
    ctx.dirty = true;
    created()
}

pub(super) fn delete_lun_mapping(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    req.query.allow(&[])?;
    let id = req.arg(0);
    ctx.a
        .lun_mappings
        .remove(id)
        .ok_or_else(|| not_found("LUN mapping", id))?;
    ctx.dirty = true;
    done()
}

fn initiator_json(name: &str, i: &RemoteInitiator) -> Value {
    json!({"name": name, "chapUser": i.chap_user, "chapSecretSet": !i.chap_secret.is_empty()})
}

pub(super) fn initiators(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let name = req.query.get("name");
    let items = ctx
        .a
        .remote_initiators
        .iter()
        .filter(|(n, _)| name.is_none_or(|w| w == n.as_str()))
        .map(|(n, i)| initiator_json(n, i))
        .collect();
    req.page(ctx, &["name"], items)
}

pub(super) fn initiator(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let name = req.arg(0);
    let i = ctx
        .a
        .remote_initiators
        .get(name)
        .ok_or_else(|| not_found("remote initiator", name))?;
    req.one(initiator_json(name, i))
}

fn set_initiator(i: &mut RemoteInitiator, f: &Fields<'_>) -> Result<(), Fail> {
    if let Some(u) = f.opt_str("chapUser")? {
        i.chap_user = u.to_string();
    }
    if let Some(s) = f.opt_str("chapSecret")? {
        check_secret(s)?;
        i.chap_secret = s.to_string();
    }
    Ok(())
}

pub(super) fn create_initiator(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    req.query.allow(&[])?;
    let f = req.fields(&["name", "chapUser", "chapSecret"])?;
    let name = f.str("name")?;
    check_node_name("name", name)?;
    if ctx.a.remote_initiators.contains_key(name) {
        return Err(exists("remote initiator", name));
    }
    let mut i = RemoteInitiator {
        chap_user: String::new(),
        chap_secret: String::new(),
    };
    set_initiator(&mut i, &f)?;
    ctx.a.remote_initiators.insert(name.to_string(), i);
    ctx.dirty = true;
    created()
}

pub(super) fn update_initiator(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    req.query.allow(&[])?;
    let f = req.fields(&["chapUser", "chapSecret"])?;
    let name = req.arg(0);
    let mut i = ctx
        .a
        .remote_initiators
        .get(name)
        .cloned()
        .ok_or_else(|| not_found("remote initiator", name))?;
    set_initiator(&mut i, &f)?;
    ctx.a.remote_initiators.insert(name.to_string(), i);
    ctx.dirty = true;
    done()
}

pub(super) fn delete_initiator(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    req.query.allow(&[])?;
    let name = req.arg(0);
    ctx.a
        .remote_initiators
        .remove(name)
        .ok_or_else(|| not_found("remote initiator", name))?;
    ctx.dirty = true;
    done()
}
