//! The ONTAP REST API's JSON as the drivers use it (wire-protocols §5): error bodies and job
//! records, the error codes and their classes, `_links`, the cluster version and the choice
//! between REST and ZAPI, the volume record and create body, Unix modes.

use serde_json::{Value, json};

use super::client::OntapError;
use super::wire::{VolumeCreate, VolumeRecord};
use crate::drivers::DriverError;

/// The error codes the drivers act on (wire-protocols §5.6).
pub mod codes {
    pub const DUPLICATE: u64 = 1;
    pub const INVALID_FIELD: u64 = 2;
    pub const NOT_SUPPORTED: u64 = 3;
    pub const ENTRY_NOT_FOUND: u64 = 4;
    pub const VOLUME_EXISTS: u64 = 917526;
    pub const VOLUME_BEING_CREATED: u64 = 13107405;
    pub const AGGREGATE_NOT_FOUND: u64 = 917508;
    pub const SIZE_TOO_SMALL: u64 = 917534;
    pub const NAME_TOO_LONG: u64 = 917886;
    pub const NAME_BAD_START: u64 = 917887;
    pub const PARENT_NOT_FOUND: u64 = 524601;
    /// ONTAP's "object not found" (ZAPI's errno 15661), which REST answers carry too, e.g.
    /// for a clone's missing parent snapshot (§5.6 names no code for that case).
    pub const OBJECT_NOT_FOUND: u64 = 15661;
    pub const VOLUME_HAS_CLONES: u64 = 524615;
    pub const VOLUME_BUSY: u64 = 524486;
    pub const SNAPSHOT_BUSY: u64 = 1638555;
    pub const SVM_NOT_FOUND: u64 = 2621462;
    pub const VOLUME_NOT_FOUND: u64 = 917927;
    pub const QTREE_NOT_FOUND: u64 = 5242927;
    pub const QTREE_DELETES_BUSY: u64 = 5242925;
    pub const QTREE_HAS_LUNS: u64 = 5242916;
    pub const QUOTA_RESIZE_FAILED: u64 = 5308568;
    pub const QUOTA_RESIZE_SKIPPED: u64 = 5308571;
    pub const IGROUP_EXISTS: u64 = 5374023;
    pub const INITIATOR_IN_IGROUP: u64 = 5374035;
    pub const IGROUP_NOT_FOUND: u64 = 5374852;
    pub const IGROUP_MAPPED: u64 = 1254213;
    pub const LUN_EXISTS: u64 = 5374242;
    pub const LUN_TOO_SMALL: u64 = 5374124;
    pub const LUN_TOO_LARGE: u64 = 5374125;
    pub const LUN_MAPPED: u64 = 1254197;
    pub const LUN_NOT_FOUND: u64 = 5374875;
    pub const MAP_LUN_NOT_FOUND: u64 = 1254201;
    pub const LUN_ALREADY_MAPPED: u64 = 1254207;
    pub const MAP_NOT_FOUND: u64 = 5374922;
    pub const POLICY_NOT_FOUND: u64 = 1703954;
    pub const RULE_EXISTS: u64 = 1704070;
    pub const POLICY_IN_USE: u64 = 1703945;
}

use codes::*;

/// A code given as a JSON string (Trident's model) or a number (NetApp's page).
pub fn code_of(v: &Value) -> u64 {
    match v {
        Value::Number(n) => n.as_u64().unwrap_or(0),
        Value::String(s) => s.trim().parse().unwrap_or(0),
        _ => 0,
    }
}

/// The error of a non-2xx answer: the `{"error": {message, code, target}}` body, or the bare
/// status when there is none.
pub fn error_from(api: &str, status: u16, body: &Value) -> OntapError {
    let e = &body["error"];
    if e.is_object() {
        OntapError::Rest {
            api: api.to_string(),
            code: code_of(&e["code"]),
            message: e["message"].as_str().unwrap_or_default().to_string(),
            target: e["target"].as_str().unwrap_or_default().to_string(),
        }
    } else {
        OntapError::Http {
            api: api.to_string(),
            status,
        }
    }
}

/// The error a job that ended in `failure` stands for: its `code` and `message` (or those of
/// its `error` object).
pub fn job_error(api: &str, job: &Value) -> OntapError {
    let e = &job["error"];
    let (code, message) = if e.is_object() && !e["code"].is_null() {
        (
            code_of(&e["code"]),
            e["message"].as_str().unwrap_or_default(),
        )
    } else {
        (
            code_of(&job["code"]),
            job["message"].as_str().unwrap_or_default(),
        )
    };
    OntapError::Rest {
        api: format!("{api} (job {})", job["uuid"].as_str().unwrap_or("?")),
        code,
        message: message.to_string(),
        target: String::new(),
    }
}

/// "Does not exist": success when deleting.
pub fn is_not_found_code(code: u64) -> bool {
    matches!(
        code,
        ENTRY_NOT_FOUND
            | VOLUME_NOT_FOUND
            | QTREE_NOT_FOUND
            | IGROUP_NOT_FOUND
            | LUN_NOT_FOUND
            | MAP_NOT_FOUND
            | POLICY_NOT_FOUND
            | PARENT_NOT_FOUND
            | OBJECT_NOT_FOUND
            | MAP_LUN_NOT_FOUND
    )
}

/// The busy class, worth retrying after a pause: a volume busy on delete, too many qtree
/// deletes, and a volume create while another create of that name runs (REST's form of ZAPI's
/// "Job exists", retried with the same bounded policy).
pub fn is_busy_code(code: u64) -> bool {
    matches!(
        code,
        VOLUME_BUSY | QTREE_DELETES_BUSY | VOLUME_BEING_CREATED
    )
}

/// Classifies a REST error code by what the caller can do about it, as ZAPI's errnos are.
pub fn classify(code: u64, msg: String) -> DriverError {
    match code {
        DUPLICATE | VOLUME_EXISTS | IGROUP_EXISTS | LUN_EXISTS | INITIATOR_IN_IGROUP
        | LUN_ALREADY_MAPPED | RULE_EXISTS => DriverError::AlreadyExists(msg),
        AGGREGATE_NOT_FOUND => DriverError::NotFound(msg),
        c if is_not_found_code(c) => DriverError::NotFound(msg),
        SVM_NOT_FOUND => DriverError::Invalid(format!(
            "{msg}; check the backend's svm (the SVM does not exist)"
        )),
        INVALID_FIELD | SIZE_TOO_SMALL | NAME_TOO_LONG | NAME_BAD_START | LUN_TOO_SMALL
        | LUN_TOO_LARGE => DriverError::Invalid(msg),
        NOT_SUPPORTED => {
            DriverError::Unsupported(format!("{msg}: not supported by this array or user"))
        }
        VOLUME_HAS_CLONES | SNAPSHOT_BUSY | QTREE_HAS_LUNS | LUN_MAPPED | IGROUP_MAPPED
        | POLICY_IN_USE => DriverError::Conflict(msg),
        c if is_busy_code(c) => DriverError::Unavailable(msg),
        _ if msg.to_ascii_lowercase().contains("space") => DriverError::Conflict(msg),
        _ => DriverError::Other(msg),
    }
}

/// `_links.next.href` of a collection page.
pub fn next_href(page: &Value) -> Option<String> {
    page["_links"]["next"]["href"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(str::to_string)
}

/// The job link of a 202 answer: `job._links.self.href`, else built from `job.uuid`.
pub fn job_href(answer: &Value) -> Option<String> {
    let job = &answer["job"];
    if let Some(h) = job["_links"]["self"]["href"].as_str() {
        return Some(h.to_string());
    }
    job["uuid"]
        .as_str()
        .map(|u| format!("/api/cluster/jobs/{u}"))
}

/// `version.generation/major/minor` of the cluster record.
pub fn parse_version(cluster: &Value) -> Option<(u32, u32, u32)> {
    let v = &cluster["version"];
    let n = |k: &str| v[k].as_u64().map(|n| n as u32);
    Some((n("generation")?, n("major")?, n("minor")?))
}

/// The ONTAPI version of an ONTAP release (9.1 → 1.110, 9.15 → 1.250), so one version check
/// serves both APIs.
pub fn ontapi_equivalent(v: (u32, u32, u32)) -> (u32, u32) {
    if v.0 >= 9 {
        (1, 100 + 10 * v.1 + 1000 * (v.0 - 9))
    } else {
        (1, 30)
    }
}

/// The oldest ONTAP REST serves the drivers on (Trident's `MinimumONTAPVersion`).
pub const MIN_REST_VERSION: (u32, u32, u32) = (9, 12, 1);
/// From this release REST is the default (Trident's `MinimumONTAPVersionDefault`).
pub const DEFAULT_REST_VERSION: (u32, u32, u32) = (9, 15, 1);
/// Above this placeholder ZAPI is gone.
pub const LAST_ZAPI_VERSION: (u32, u32, u32) = (9, 99, u32::MAX);

/// Whether to use REST, as Trident decides (wire-protocols §5.8): `version` is what
/// `GET /cluster` said, `None` when REST could not be reached. `Err` explains a refusal.
pub fn choose_rest(
    use_rest: Option<bool>,
    version: Option<(u32, u32, u32)>,
) -> Result<bool, String> {
    let Some(v) = version else {
        return match use_rest {
            Some(true) => Err("useREST is true but the ONTAP REST API did not answer".into()),
            _ => Ok(false),
        };
    };
    let shown = format!("{}.{}.{}", v.0, v.1, v.2);
    match use_rest {
        Some(true) if v < MIN_REST_VERSION => Err(format!(
            "useREST is true but ONTAP {shown} is older than 9.12.1, the first release the \
             drivers use REST on"
        )),
        Some(true) => Ok(true),
        Some(false) if v > LAST_ZAPI_VERSION => Err(format!(
            "useREST is false but ONTAP {shown} no longer serves ZAPI"
        )),
        Some(false) => Ok(false),
        None => Ok(v >= DEFAULT_REST_VERSION),
    }
}

/// The volume fields the drivers read.
pub const VOLUME_FIELDS: &str = "name,uuid,style,aggregates,size,nas.path,state,guarantee.type,\
snapshot_policy.name,space.snapshot.reserve_percent,snapshot_directory_access_enabled,\
nas.export_policy.name,nas.unix_permissions,nas.security_style,encryption.enabled,comment,\
is_svm_root,clone.parent_volume.name,clone.parent_snapshot.name";

/// A dotted path into a record (`nas.export_policy.name`).
pub fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(v, |v, k| &v[k])
}

/// A string at a dotted path, `""` when absent.
pub fn str_at<'a>(v: &'a Value, path: &str) -> &'a str {
    at(v, path).as_str().unwrap_or_default()
}

/// The `name`s of a list of references (`aggregates: [{name, uuid}]`).
pub fn names_at(v: &Value, path: &str) -> Vec<String> {
    at(v, path)
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A volume record as the drivers read it.
pub fn volume_record(v: &Value) -> VolumeRecord {
    let aggregates = names_at(v, "aggregates");
    let parent = str_at(v, "clone.parent_volume.name");
    VolumeRecord {
        name: str_at(v, "name").to_string(),
        style: str_at(v, "style").to_string(),
        aggregate: aggregates.first().cloned().unwrap_or_default(),
        aggregates,
        size: at(v, "size").as_u64().unwrap_or(0),
        junction: str_at(v, "nas.path").to_string(),
        state: str_at(v, "state").to_string(),
        space_guarantee: str_at(v, "guarantee.type").to_string(),
        snapshot_policy: str_at(v, "snapshot_policy.name").to_string(),
        snapshot_reserve: at(v, "space.snapshot.reserve_percent").as_u64(),
        snapdir: at(v, "snapshot_directory_access_enabled").as_bool(),
        export_policy: str_at(v, "nas.export_policy.name").to_string(),
        unix_permissions: at(v, "nas.unix_permissions")
            .as_u64()
            .map(|m| format!("0{m}"))
            .unwrap_or_default(),
        security_style: str_at(v, "nas.security_style").to_string(),
        encrypt: at(v, "encryption.enabled").as_bool().unwrap_or(false),
        comment: str_at(v, "comment").to_string(),
        is_root: at(v, "is_svm_root").as_bool().unwrap_or(false),
        clone_parent: (!parent.is_empty()).then(|| {
            (
                parent.to_string(),
                str_at(v, "clone.parent_snapshot.name").to_string(),
            )
        }),
    }
}

/// A Unix mode as REST wants it: an integer whose decimal digits are the octal mode
/// (`---rwxr-xr-x` → 755, `0750` → 750).
pub fn unix_mode(p: &str) -> u64 {
    let octal = super::permissions_to_octal(p);
    let digits = octal.trim_start_matches('0');
    digits.parse().unwrap_or(0)
}

/// The `POST /storage/volumes` body of a FlexVol or FlexGroup: everything the volume is
/// created with, its junction (`nas.path`) and snapshot directory included, so no `PATCH`
/// follows.
pub fn volume_create_body(svm_uuid: &str, v: &VolumeCreate, flexgroup: bool) -> Value {
    let aggregates: Vec<Value> = v.aggregates.iter().map(|a| json!({"name": a})).collect();
    let mut body = json!({
        "name": v.name,
        "svm": {"uuid": svm_uuid},
        "aggregates": aggregates,
        "size": v.size,
        "style": if flexgroup { "flexgroup" } else { "flexvol" },
        "state": "online",
        "guarantee": {"type": v.space_reserve},
        "snapshot_policy": {"name": v.snapshot_policy},
        "comment": v.comment,
        "nas": {"security_style": v.security_style},
    });
    if let Some(r) = v
        .snapshot_reserve
        .as_deref()
        .and_then(|r| r.trim().parse::<u64>().ok())
    {
        body["space"] = json!({"snapshot": {"reserve_percent": r}});
    }
    if let Some(p) = &v.export_policy {
        body["nas"]["export_policy"] = json!({"name": p});
    }
    if let Some(m) = &v.unix_permissions {
        body["nas"]["unix_permissions"] = json!(unix_mode(m));
    }
    if let Some(j) = &v.junction_path {
        body["nas"]["path"] = json!(j);
    }
    if let Some(visible) = v.snapdir {
        body["snapshot_directory_access_enabled"] = json!(visible);
    }
    if v.encrypt {
        body["encryption"] = json!({"enabled": true});
    }
    body
}

/// Epoch seconds of an RFC 3339 time (`create_time`), 0 when unreadable.
pub fn epoch_seconds(t: &str) -> u64 {
    humantime::parse_rfc3339_weak(t.trim())
        .ok()
        .or_else(|| {
            // ONTAP writes offsets (`+00:00`); humantime reads only `Z`.
            let (base, off) = t.trim().split_at(t.trim().len().checked_sub(6)?);
            let (sign, hm) = off.split_at(1);
            let (h, m) = hm.split_once(':')?;
            let secs = h.parse::<u64>().ok()? * 3600 + m.parse::<u64>().ok()? * 60;
            let local = humantime::parse_rfc3339_weak(base).ok()?;
            match sign {
                "+" => local.checked_sub(std::time::Duration::from_secs(secs)),
                "-" => local.checked_add(std::time::Duration::from_secs(secs)),
                _ => None,
            }
        })
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_with_string_or_number_codes() {
        let e = error_from(
            "POST /protocols/san/igroups",
            409,
            &json!({"error": {"message": "exists", "code": "5374023", "target": "name"}}),
        );
        assert_eq!(e.rest_code(), Some(IGROUP_EXISTS));
        assert!(e.to_string().contains("field name"), "{e}");
        assert!(matches!(e.into_driver(), DriverError::AlreadyExists(_)));
        let e = error_from("x", 404, &json!({"error": {"message": "gone", "code": 4}}));
        assert!(e.is_not_found());
        assert!(matches!(
            error_from("x", 502, &Value::Null),
            OntapError::Http { status: 502, .. }
        ));
    }

    #[test]
    fn job_failures_carry_code_and_message() {
        let job = json!({"uuid": "j1", "state": "failure", "code": 917526,
            "message": "Duplicate volume name"});
        let e = job_error("POST /storage/volumes", &job);
        assert_eq!(e.rest_code(), Some(VOLUME_EXISTS));
        assert!(e.to_string().contains("Duplicate volume name"), "{e}");
        let job = json!({"uuid": "j2", "state": "failure",
            "error": {"code": "524615", "message": "has clones"}});
        assert_eq!(job_error("x", &job).rest_code(), Some(VOLUME_HAS_CLONES));
    }

    #[test]
    fn classes() {
        let class = |c: u64| crate::drivers::testing::class_name(&classify(c, "m".into()));
        assert_eq!(class(917526), "exists");
        assert_eq!(class(1704070), "exists");
        assert_eq!(class(5374875), "not_found");
        assert_eq!(class(15661), "not_found");
        assert_eq!(class(917508), "not_found");
        assert_eq!(class(524615), "conflict");
        assert_eq!(class(1638555), "conflict");
        assert_eq!(class(524486), "unavailable");
        assert_eq!(class(13107405), "unavailable");
        assert_eq!(class(917534), "invalid");
        assert_eq!(class(2621462), "invalid");
        assert_eq!(class(3), "unsupported");
        assert_eq!(class(460770), "other");
        assert!(matches!(
            classify(460770, "not enough space in aggregate".into()),
            DriverError::Conflict(_)
        ));
        assert!(!is_not_found_code(917508));
        assert!(is_busy_code(524486) && is_busy_code(13107405) && !is_busy_code(917526));
    }

    #[test]
    fn links() {
        let page = json!({"records": [], "num_records": 0,
            "_links": {"self": {"href": "/api/x"}, "next": {"href": "/api/x?start=2"}}});
        assert_eq!(next_href(&page).as_deref(), Some("/api/x?start=2"));
        assert_eq!(
            next_href(&json!({"_links": {"self": {"href": "/a"}}})),
            None
        );
        let a = json!({"job": {"uuid": "c0de-01",
            "_links": {"self": {"href": "/api/cluster/jobs/c0de-01"}}}});
        assert_eq!(job_href(&a).as_deref(), Some("/api/cluster/jobs/c0de-01"));
        assert_eq!(
            job_href(&json!({"job": {"uuid": "u2"}})).as_deref(),
            Some("/api/cluster/jobs/u2")
        );
    }

    #[test]
    fn version_choice_follows_trident() {
        let v = |s: &str| {
            let p: Vec<u32> = s.split('.').map(|x| x.parse().unwrap()).collect();
            Some((p[0], p[1], p[2]))
        };
        assert_eq!(choose_rest(None, v("9.11.1")), Ok(false));
        assert_eq!(choose_rest(None, v("9.14.1")), Ok(false));
        assert_eq!(choose_rest(None, v("9.15.1")), Ok(true));
        assert_eq!(choose_rest(None, None), Ok(false));
        assert!(choose_rest(Some(true), v("9.11.1")).is_err());
        assert_eq!(choose_rest(Some(true), v("9.12.1")), Ok(true));
        assert!(choose_rest(Some(true), None).is_err());
        assert_eq!(choose_rest(Some(false), v("9.16.1")), Ok(false));
        assert!(choose_rest(Some(false), Some((10, 0, 0))).is_err());
        assert_eq!(choose_rest(Some(false), None), Ok(false));
        let c = json!({"version": {"generation": 9, "major": 15, "minor": 1, "full": "x"}});
        assert_eq!(parse_version(&c), Some((9, 15, 1)));
        assert_eq!(ontapi_equivalent((9, 15, 1)), (1, 250));
        assert_eq!(ontapi_equivalent((9, 1, 0)), (1, 110));
    }

    #[test]
    fn volume_records_and_bodies() {
        let r = json!({"name": "trident_a", "uuid": "u", "style": "flexvol",
            "aggregates": [{"name": "aggr1", "uuid": "a"}], "size": 1073741824,
            "nas": {"path": "/trident_a", "export_policy": {"name": "default"},
                    "unix_permissions": 755, "security_style": "unix"},
            "state": "online", "guarantee": {"type": "none"},
            "snapshot_policy": {"name": "none"}, "space": {"snapshot": {"reserve_percent": 5}},
            "snapshot_directory_access_enabled": false, "comment": "c",
            "clone": {"parent_volume": {"name": "p"}, "parent_snapshot": {"name": "s"}}});
        let v = volume_record(&r);
        assert_eq!(v.aggregate, "aggr1");
        assert_eq!(v.size, 1 << 30);
        assert_eq!(v.junction, "/trident_a");
        assert_eq!(v.snapshot_reserve, Some(5));
        assert_eq!(v.snapdir, Some(false));
        assert_eq!(v.unix_permissions, "0755");
        assert_eq!(v.clone_parent, Some(("p".into(), "s".into())));
        assert_eq!(unix_mode("---rwxr-xr-x"), 755);
        assert_eq!(unix_mode("0750"), 750);
        let spec = VolumeCreate {
            name: "n".into(),
            aggregates: vec!["a1".into(), "a2".into()],
            size: 5,
            space_reserve: "none".into(),
            snapshot_policy: "none".into(),
            snapshot_reserve: Some("0".into()),
            export_policy: Some("default".into()),
            unix_permissions: Some("---rwxrwxrwx".into()),
            security_style: "unix".into(),
            encrypt: true,
            comment: "c".into(),
            junction_path: Some("/n".into()),
            snapdir: Some(false),
        };
        let b = volume_create_body("svm-u", &spec, true);
        assert_eq!(b["snapshot_directory_access_enabled"], false);
        assert_eq!(b["style"], "flexgroup");
        assert_eq!(b["aggregates"][1]["name"], "a2");
        assert_eq!(b["nas"]["unix_permissions"], 777);
        assert_eq!(b["nas"]["path"], "/n");
        assert_eq!(b["svm"]["uuid"], "svm-u");
        assert_eq!(b["encryption"]["enabled"], true);
        assert_eq!(b["space"]["snapshot"]["reserve_percent"], 0);
    }

    #[test]
    fn times() {
        assert_eq!(epoch_seconds("2023-11-14T22:13:20Z"), 1_700_000_000);
        assert_eq!(epoch_seconds("2023-11-14T23:13:20+01:00"), 1_700_000_000);
        assert_eq!(epoch_seconds("junk"), 0);
    }
}
