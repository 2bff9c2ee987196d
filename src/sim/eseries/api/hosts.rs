//! Host types, hosts and host groups.
//!
//! Host and group labels are unique (per kind) and 1 to 30 characters; an initiator name
//! belongs to one host. A host in no group has the null ref as `clusterRef`. Deleting a host or
//! a group drops the mappings made to it; a deleted group's hosts are left in no group.

use serde_json::{Value, json};

use super::{Ctx, Fail, R, Req, check_label, invalid, no_content, not_found, ok, refuse, retcodes};
use crate::sim::eseries::state::{Array, Host, HostGroup, HostPort, NULL_REF, prefix};

/// The host types the array offers: index, code, name. Clients map a code to its index; the
/// indexes are the simulator's.
pub const HOST_TYPES: &[(u64, &str, &str)] = &[
    (0, "FactoryDefault", "Factory Default"),
    (1, "W2KNETNCL", "Windows"),
    (2, "SOL", "Solaris (v10 or earlier)"),
    (6, "AIX", "AIX MPIO"),
    (7, "HPXTPGS", "HP-UX"),
    (8, "W2KNETCL", "Windows Clustered"),
    (10, "VmwTPGSALUA", "VMware"),
    (17, "SolTPGSALUA", "Solaris (v11 or later)"),
    (22, "MacTPGSALUA", "Mac OS"),
    (27, "LnxTPGSALUA", "Linux (ATTO)"),
    (28, "LnxALUA", "Linux (DM-MP)"),
    (29, "LnxTPGSALUA_PM", "Linux (Pathmanager)"),
];

const PORT_TYPES: &[&str] = &["iscsi", "fc", "sas", "ib"];

pub(super) fn host_types(ctx: &mut Ctx<'_>, _: &Req<'_>) -> R {
    let used: Vec<u64> = ctx.p.array.hosts.values().map(|h| h.host_type).collect();
    ok(HOST_TYPES
        .iter()
        .map(|(index, code, name)| {
            json!({"index": index, "code": code, "name": name,
                   "used": used.contains(index), "default": *index == 0})
        })
        .collect())
}

pub fn host_json(r: &str, h: &Host) -> Value {
    let initiators: Vec<Value> = h
        .ports
        .iter()
        .map(|p| {
            let node = json!({"ioInterfaceType": p.kind, "iscsiNodeName":
                if p.kind == "iscsi" { Value::from(p.address.clone()) } else { Value::Null },
                "remoteNodeWWN": if p.kind == "fc" { Value::from(p.address.clone()) } else { Value::Null }});
            json!({
                "initiatorRef": p.initiator_ref, "id": p.initiator_ref, "label": p.label,
                "nodeName": node, "initiatorNodeName": {"nodeName": node, "interfaceType": p.kind},
                "hostRef": r, "clusterRef": h.group,
            })
        })
        .collect();
    let ports: Vec<Value> = h
        .ports
        .iter()
        .map(|p| json!({"type": p.kind, "address": p.address, "label": p.label, "id": p.initiator_ref}))
        .collect();
    json!({
        "hostRef": r,
        "id": r,
        "label": h.label,
        "name": h.label,
        "clusterRef": h.group,
        "hostTypeIndex": h.host_type,
        "initiators": initiators,
        "hostSidePorts": ports,
        "ports": [],
        "isSAControlled": false,
        "confirmLUNMappingCreation": false,
        "isLargeBlockFormatHost": false,
        "isLun0Restricted": false,
        "protectionInformationCapableAccessMethod": true,
    })
}

pub fn group_json(r: &str, g: &HostGroup) -> Value {
    json!({
        "clusterRef": r,
        "id": r,
        "label": g.label,
        "name": g.label,
        "isSAControlled": false,
        "confirmLUNMappingCreation": false,
        "protectionInformationCapableAccessMethod": true,
        "isLun0Restricted": false,
    })
}

pub(super) fn list(ctx: &mut Ctx<'_>, _: &Req<'_>) -> R {
    ok(ctx
        .p
        .array
        .hosts
        .iter()
        .map(|(r, h)| host_json(r, h))
        .collect())
}

pub(super) fn get(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let r = req.arg(0);
    let h = ctx
        .p
        .array
        .hosts
        .get(r)
        .ok_or_else(|| not_found("host", r))?;
    ok(host_json(r, h))
}

/// `hostType`: `{"index": n}` naming one of [`HOST_TYPES`].
fn host_type(v: &Value) -> Result<u64, Fail> {
    let o = v
        .as_object()
        .filter(|o| o.keys().all(|k| k == "index" || k == "code"))
        .ok_or_else(|| invalid("Invalid value for field hostType: expected {\"index\": n}"))?;
    let index = o
        .get("index")
        .and_then(Value::as_u64)
        .ok_or_else(|| invalid("Missing required field hostType.index"))?;
    if !HOST_TYPES.iter().any(|(i, _, _)| *i == index) {
        return Err(invalid(format!(
            "Invalid value for field hostType.index: no host type {index}"
        )));
    }
    Ok(index)
}

/// `ports`: `[{type, port, label?}]`, each initiator free on the array.
fn ports(a: &mut Array, name: &str, v: Option<&Vec<Value>>) -> Result<Vec<HostPort>, Fail> {
    let bad = || {
        invalid(
            "Invalid value for field ports: expected [{\"type\": \"iscsi\", \"port\": iqn, \"label\": string}]",
        )
    };
    let mut out: Vec<HostPort> = Vec::new();
    for (i, p) in v.into_iter().flatten().enumerate() {
        let o = p
            .as_object()
            .filter(|o| {
                o.keys()
                    .all(|k| ["type", "port", "label", "iscsiChapSecret"].contains(&k.as_str()))
            })
            .ok_or_else(bad)?;
        let kind = o.get("type").and_then(Value::as_str).ok_or_else(bad)?;
        if !PORT_TYPES.contains(&kind) {
            return Err(invalid(format!(
                "Invalid value for field ports.type: {kind:?} (iscsi, fc, sas or ib)"
            )));
        }
        let address = o
            .get("port")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(bad)?;
        if kind == "iscsi" && !is_iscsi_name(address) {
            return Err(invalid(format!(
                "Invalid value for field ports.port: {address:?} is not an iSCSI name (iqn., \
                 eui. or naa.)"
            )));
        }
        let label = match o.get("label") {
            None | Some(Value::Null) => {
                format!("{}_{}", name.chars().take(27).collect::<String>(), i + 1)
            }
            Some(l) => l.as_str().ok_or_else(bad)?.to_string(),
        };
        check_label("ports.label", &label)?;
        let taken = a
            .hosts
            .values()
            .flat_map(|h| &h.ports)
            .chain(&out)
            .any(|q| q.address.eq_ignore_ascii_case(address));
        if taken {
            return Err(refuse(
                retcodes::DUPLICATE_PORT,
                format!("The initiator {address:?} already belongs to a host"),
            ));
        }
        out.push(HostPort {
            kind: kind.to_string(),
            address: address.to_string(),
            label,
            initiator_ref: String::new(),
        });
    }
    Ok(out)
}

/// An iSCSI name (RFC 3720): `iqn.` with a date and a naming authority, or `eui.` / `naa.`
/// and hex digits; letters, digits, `-`, `.` and `:` only.
fn is_iscsi_name(s: &str) -> bool {
    let chars_ok = s
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b':'));
    let lower = s.to_ascii_lowercase();
    let shape = if let Some(rest) = lower.strip_prefix("iqn.") {
        let b = rest.as_bytes();
        b.len() > 8 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-'
    } else {
        lower
            .strip_prefix("eui.")
            .or_else(|| lower.strip_prefix("naa."))
            .is_some_and(|h| !h.is_empty() && h.bytes().all(|c| c.is_ascii_hexdigit()))
    };
    chars_ok && s.len() <= 223 && shape
}

/// `groupId`: an existing host group, or absent / the null ref for none.
fn group_ref(a: &Array, g: Option<&str>) -> Result<String, Fail> {
    match g {
        None => Ok(NULL_REF.to_string()),
        Some(g) if g == NULL_REF => Ok(NULL_REF.to_string()),
        Some(g) if a.groups.contains_key(g) => Ok(g.to_string()),
        Some(g) => Err(refuse(
            retcodes::NOT_FOUND,
            format!("Invalid value for field groupId: no host group {g:?}"),
        )),
    }
}

pub(super) fn create(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let f = req.fields(&["name", "hostType", "groupId", "ports"])?;
    let name = f.str("name")?;
    check_label("name", name)?;
    let host_type = host_type(f.required("hostType")?)?;
    let group = group_ref(&ctx.p.array, f.opt_ref("groupId")?)?;
    let port_values = f.opt_array("ports")?;
    if ctx.p.array.hosts.values().any(|h| h.label == name) {
        return Err(refuse(
            retcodes::DUPLICATE_LABEL,
            format!("A host named {name:?} already exists"),
        ));
    }
    let a = ctx.a();
    let mut ports = ports(a, name, port_values)?;
    for p in &mut ports {
        p.initiator_ref = a.new_ref(prefix::INITIATOR);
    }
    let r = a.new_ref(prefix::HOST);
    let h = Host {
        label: name.to_string(),
        host_type,
        group,
        ports,
    };
    let out = host_json(&r, &h);
    a.hosts.insert(r, h);
    ctx.dirty = true;
    Ok((201, Some(out)))
}

pub(super) fn delete(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let r = req.arg(0);
    let a = ctx.a();
    a.hosts.remove(r).ok_or_else(|| not_found("host", r))?;
    a.mappings.retain(|_, m| m.target != r);
    ctx.dirty = true;
    no_content()
}

pub(super) fn groups(ctx: &mut Ctx<'_>, _: &Req<'_>) -> R {
    ok(ctx
        .p
        .array
        .groups
        .iter()
        .map(|(r, g)| group_json(r, g))
        .collect())
}

pub(super) fn group(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let r = req.arg(0);
    let g = ctx
        .p
        .array
        .groups
        .get(r)
        .ok_or_else(|| not_found("host group", r))?;
    ok(group_json(r, g))
}

/// `POST …/host-groups` `{name, hosts?}`: the listed hosts move into the new group.
pub(super) fn create_group(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let f = req.fields(&["name", "hosts"])?;
    let name = f.str("name")?;
    check_label("name", name)?;
    let hosts = f.opt_strs("hosts")?.unwrap_or_default();
    let a = &ctx.p.array;
    if let Some(h) = hosts.iter().find(|h| !a.hosts.contains_key(**h)) {
        return Err(refuse(
            retcodes::NOT_FOUND,
            format!("Invalid value for field hosts: no host {h:?}"),
        ));
    }
    if a.groups.values().any(|g| g.label == name) {
        return Err(refuse(
            retcodes::DUPLICATE_LABEL,
            format!("A host group named {name:?} already exists"),
        ));
    }
    let a = ctx.a();
    let r = a.new_ref(prefix::HOST_GROUP);
    for h in hosts {
        if let Some(h) = a.hosts.get_mut(h) {
            h.group = r.clone();
        }
    }
    let g = HostGroup {
        label: name.to_string(),
    };
    let out = group_json(&r, &g);
    a.groups.insert(r, g);
    ctx.dirty = true;
    Ok((201, Some(out)))
}

pub(super) fn delete_group(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let r = req.arg(0);
    let a = ctx.a();
    a.groups
        .remove(r)
        .ok_or_else(|| not_found("host group", r))?;
    for h in a.hosts.values_mut().filter(|h| h.group == r) {
        h.group = NULL_REF.to_string();
    }
    a.mappings.retain(|_, m| m.target != r);
    ctx.dirty = true;
    no_content()
}
