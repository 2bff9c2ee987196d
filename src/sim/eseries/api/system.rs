//! Registration with the proxy, the storage system object, capabilities and `about`.
//!
//! A registration whose controller addresses are all the simulated array's reaches it; any
//! other is kept but never reachable (status `neverContacted`, its array-scoped requests 424).
//! The array's registration is unique: registering it again answers 200 with the same id and
//! takes the new password. Its password is checked against the array's unless the array is
//! offline (then it is kept unchecked and `passwordStatus` is `unknown`).

use serde_json::{Value, json};

use super::{Ctx, Fail, R, Req, no_content, not_found, ok, refuse, retcodes};
use crate::sim::eseries::state::{Array, Registration};

/// Where the proxy says it runs and which version it is.
pub const PROXY_VERSION: &str = "02.30.9000.0003";

fn wrong_password(addresses: &[String]) -> Fail {
    refuse(
        retcodes::AUTH_FAIL_PASSWORD,
        format!(
            "The storage array password for the system at {} is incorrect",
            addresses.join(", ")
        ),
    )
}

pub(super) fn register(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let f = req.fields(&[
        "controllerAddresses",
        "password",
        "wwn",
        "id",
        "enableTrace",
        "metaTags",
    ])?;
    let addresses: Vec<String> = f
        .opt_strs("controllerAddresses")?
        .ok_or_else(|| super::invalid("Missing required field controllerAddresses"))?
        .into_iter()
        .map(str::to_string)
        .collect();
    if addresses.is_empty() || addresses.len() > 2 || addresses.iter().any(|a| a.is_empty()) {
        return Err(super::invalid(
            "Invalid value for field controllerAddresses: one or two addresses",
        ));
    }
    let password = f.opt_str("password")?.unwrap_or_default().to_string();
    let wwn = f.opt_str("wwn")?.map(str::to_string);
    let wanted_id = f.opt_str("id")?;
    f.opt_bool("enableTrace")?;
    f.opt_array("metaTags")?;
    let array = &ctx.p.array;
    let reachable = addresses.iter().all(|a| array.controllers.contains(a));
    if reachable && !array.offline && password != array.password {
        return Err(wrong_password(&addresses));
    }
    let same = |r: &Registration| {
        if reachable {
            r.reachable
        } else {
            !r.reachable && sorted(&r.controller_addresses) == sorted(&addresses)
        }
    };
    if let Some((id, r)) = ctx.p.systems.iter_mut().find(|(_, r)| same(r)) {
        r.stored_password = password;
        r.controller_addresses = addresses;
        let id = id.clone();
        ctx.dirty = true;
        return ok(json!({"id": id, "alreadyExists": true}));
    }
    let id = match wanted_id {
        Some(id) if ctx.p.systems.contains_key(id) => {
            return Err(refuse(
                retcodes::DUPLICATE_LABEL,
                format!("A storage system with id {id:?} is already registered"),
            ));
        }
        Some("") => return Err(super::invalid("Invalid value for field id: empty")),
        Some(id) => id.to_string(),
        None => uuid::Uuid::new_v4().to_string(),
    };
    ctx.p.systems.insert(
        id.clone(),
        Registration {
            controller_addresses: addresses,
            stored_password: password,
            reachable,
            wwn,
        },
    );
    ctx.dirty = true;
    Ok((201, Some(json!({"id": id, "alreadyExists": false}))))
}

fn sorted(v: &[String]) -> Vec<String> {
    let mut v = v.to_vec();
    v.sort();
    v
}

pub(super) fn list(ctx: &mut Ctx<'_>, _: &Req<'_>) -> R {
    let out: Vec<Value> = ctx
        .p
        .systems
        .iter()
        .map(|(id, r)| system_json(&ctx.p.array, id, r))
        .collect();
    ok(Value::Array(out))
}

fn registration<'a>(ctx: &'a Ctx<'_>, id: &str) -> Result<&'a Registration, Fail> {
    ctx.p
        .systems
        .get(id)
        .ok_or_else(|| not_found("storage-system", id))
}

pub(super) fn get(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let id = req.arg(0);
    let r = registration(ctx, id)?;
    ok(system_json(&ctx.p.array, id, r))
}

/// `POST /storage-systems/{id}`: a new stored password (checked like a registration's) and
/// controller addresses.
pub(super) fn update(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let id = req.arg(0).to_string();
    let f = req.fields(&[
        "storedPassword",
        "controllerAddresses",
        "metaTags",
        "removeAllTags",
    ])?;
    let r = registration(ctx, &id)?.clone();
    let password = f.opt_str("storedPassword")?;
    let addresses = f.opt_strs("controllerAddresses")?;
    f.opt_array("metaTags")?;
    f.opt_bool("removeAllTags")?;
    let array = &ctx.p.array;
    if let Some(p) = password
        && r.reachable
        && !array.offline
        && p != array.password
    {
        return Err(wrong_password(&r.controller_addresses));
    }
    if let Some(a) = &addresses
        && (a.is_empty()
            || a.len() > 2
            || a.iter().all(|x| array.controllers.iter().any(|c| c == x)) != r.reachable)
    {
        return Err(super::invalid(
            "Invalid value for field controllerAddresses: the addresses of this system's controllers",
        ));
    }
    let new = Registration {
        stored_password: password.map_or(r.stored_password.clone(), str::to_string),
        controller_addresses: addresses.map_or(r.controller_addresses.clone(), |a| {
            a.into_iter().map(str::to_string).collect()
        }),
        ..r
    };
    let out = system_json(&ctx.p.array, &id, &new);
    ctx.p.systems.insert(id, new);
    ctx.dirty = true;
    ok(out)
}

pub(super) fn unregister(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let id = req.arg(0);
    registration(ctx, id)?;
    ctx.p.systems.remove(id);
    ctx.dirty = true;
    no_content()
}

/// `passwordStatus` of a registration: valid, invalid or unknown.
pub fn password_status(a: &Array, r: &Registration) -> &'static str {
    match (r.reachable, a.offline) {
        (true, false) if r.stored_password == a.password => "valid",
        (true, false) => "invalid",
        _ => "unknown",
    }
}

/// The storage system object.
pub fn system_json(a: &Array, id: &str, r: &Registration) -> Value {
    let ip = |i: usize| r.controller_addresses.get(i).cloned().unwrap_or_default();
    if !r.reachable {
        return json!({
            "id": id, "name": "", "wwn": r.wwn.clone().unwrap_or_default(),
            "status": "neverContacted", "passwordStatus": "unknown", "passwordSet": false,
            "ip1": ip(0), "ip2": ip(1), "managementPaths": r.controller_addresses,
            "model": "", "fwVersion": "", "chassisSerialNumber": "",
            "freePoolSpace": 0, "usedPoolSpace": 0, "unconfiguredSpace": 0,
            "freePoolSpaceAsString": "0", "usedPoolSpaceAsString": "0",
            "unconfiguredSpaceAsString": "0", "driveTypes": [], "hotSpareCount": 0,
            "driveCount": 0, "trayCount": 0, "metaTags": [],
        });
    }
    let online = a.pools.iter().filter(|(_, p)| !p.offline);
    let (free, used) = online.fold((0u64, 0u64), |(f, u), (k, _)| {
        (f + a.pool_free(k), u + a.pool_used(k))
    });
    let mut drive_types: Vec<&str> = Vec::new();
    for p in a.pools.values() {
        let t = if p.media == "ssd" { "ssd" } else { "sas" };
        if !drive_types.contains(&t) {
            drive_types.push(t);
        }
    }
    json!({
        "id": id,
        "name": a.name,
        "wwn": a.wwn,
        "status": if a.offline { "offline" } else { "optimal" },
        "passwordStatus": password_status(a, r),
        "passwordSet": !a.password.is_empty(),
        "ip1": ip(0),
        "ip2": ip(1),
        "managementPaths": r.controller_addresses,
        "model": "2800",
        "fwVersion": "08.40.50.00",
        "appVersion": "08.40.50.00",
        "bootVersion": "08.40.50.00",
        "nvsramVersion": "N280X-840834-D02",
        "chassisSerialNumber": a.serial,
        "freePoolSpace": free,
        "usedPoolSpace": used,
        "unconfiguredSpace": 0,
        "hotSpareSize": 0,
        "freePoolSpaceAsString": free.to_string(),
        "usedPoolSpaceAsString": used.to_string(),
        "unconfiguredSpaceAsString": "0",
        "hotSpareSizeAsString": "0",
        "driveTypes": drive_types,
        "hotSpareCount": 0,
        "hostSpareCountInStandby": 0,
        "driveCount": 12 * a.pools.len(),
        "trayCount": 1,
        "traceEnabled": false,
        "definedPartitionCount": a.groups.len() + a.hosts.len(),
        "securityKeyEnabled": false,
        "simplexModeEnabled": a.controllers.len() < 2,
        "asupEnabled": false,
        "lastContacted": crate::sim::eseries::state::now().to_string(),
        "metaTags": [],
    })
}

/// `GET …/capabilities`: what the array can do. `volumeCopy` and `dynamicVolumeExpansion`
/// are listed, and enabled in `featureStates`, only when `--features` says so.
pub(super) fn capabilities(ctx: &mut Ctx<'_>, _: &Req<'_>) -> R {
    let f = ctx.p.array.features;
    let mut caps = vec!["storagePartitioning", "raid6", "dataAssurance", "diskPools"];
    if f.copy {
        caps.push("volumeCopy");
    }
    if f.expand {
        caps.push("dynamicVolumeExpansion");
    }
    let state = |name: &str, on: bool| {
        json!({"capability": name, "isEnabled": on, "isCompliant": true,
               "isWithinLimits": true, "featureId": name, "limit": 0, "duration": 0,
               "enabledTime": 0, "permanentLicenseApplied": on})
    };
    ok(json!({
        "capabilities": caps,
        "productCapabilities": ["capabilityAutoLoadBalancing"],
        "featureParameters": {
            "cacheBlockSizes": [4096, 8192, 16384, 32768],
            "maxDCEDrives": 2,
            "segmentSizes": super::volumes::SEGMENT_SIZES_KIB.iter().map(|k| k * 1024).collect::<Vec<_>>(),
        },
        "featureBundle": {"bundleSubmodelId": 318},
        "featureStates": [
            state("volumeCopy", f.copy),
            state("dynamicVolumeExpansion", f.expand),
        ],
    }))
}

/// `GET /devmgr/utils/about` (no authentication).
pub fn about(proxy_id: &str) -> Value {
    json!({
        "runningAsProxy": true,
        "version": PROXY_VERSION,
        "systemId": proxy_id,
        "controllerPosition": 0,
        "startTimestamp": "",
        "samlEnabled": false,
    })
}
