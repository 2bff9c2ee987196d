//! The ZAPI calls the simulator answers, with the errno values of
//! docs/wire-notes.md#zapi-errno-values.
//!
//! Every handler validates first and mutates last, so a failed call changes nothing. This file
//! holds the dispatch table and the argument helpers; one file per object family:
//!
//! - `inputs.rs`: the input elements each API takes (anything else is refused).
//! - `query.rs`: iterators (query patterns, paging, `desired-attributes`).
//! - `system.rs`: system, SVMs, aggregates, LIFs, iSCSI service, jobs.
//! - `volumes.rs`: volumes (create, list, mount, state, destroy, size, modify).
//! - `recovery.rs`: the recovery queue of destroyed volumes.
//! - `clones.rs`: volume clones (create, split).
//! - `snapshots.rs`: snapshots.
//! - `qtrees.rs`: qtrees and quotas.
//! - `luns.rs`: LUNs and their maps.
//! - `igroups.rs`: initiator groups.
//! - `exports.rs`: export policies and rules.

mod clones;
mod exports;
mod igroups;
mod inputs;
mod luns;
mod qtrees;
mod query;
mod recovery;
mod snapshots;
mod system;
mod volumes;

use std::collections::BTreeMap;

use super::state::{
    Array, ExportRule, Igroup, Job, Lun, Qtree, QueuedVolume, Snapshot, Svm, Volume, now_secs,
};
use crate::wire::zapi::Node;
use crate::wire::zapi::errno;

use self::clones::*;
use self::exports::*;
use self::igroups::*;
use self::luns::*;
use self::qtrees::*;
use self::query::*;
pub use self::query::{page_after, pattern_matches, project, query_matches};
use self::recovery::*;
use self::snapshots::*;
use self::system::*;
use self::volumes::*;

/// A failed call: errno and reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fail {
    pub errno: u32,
    pub reason: String,
}

pub(super) fn fail(errno: u32, reason: impl Into<String>) -> Fail {
    Fail {
        errno,
        reason: reason.into(),
    }
}

type R = Result<Vec<Node>, Fail>;

/// Knobs that shape answers.
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    /// The most records one iterator page holds, whatever `max-records` asks.
    pub page_cap: usize,
    /// How many `job-get-iter` polls an async job answers `running` before `success`.
    pub async_polls: u32,
}

/// APIs that only exist at cluster scope.
pub const CLUSTER_ONLY: &[&str] = &[
    "aggr-get-iter",
    "aggr-space-get-iter",
    "system-node-get-iter",
];

/// APIs that answer in either scope.
pub const ANY_SCOPE: &[&str] = &[
    "system-get-ontapi-version",
    "system-get-version",
    "vserver-get-iter",
    "net-interface-get-iter",
    "job-get-iter",
];

/// Whether a call may change the array (persisted after it passes).
pub fn is_mutating(api: &str) -> bool {
    !(api.ends_with("-get-iter")
        || api.ends_with("-list-iter")
        || api.ends_with("-entries-iter")
        || matches!(
            api,
            "system-get-ontapi-version"
                | "system-get-version"
                | "vserver-get"
                | "export-policy-get"
                | "iscsi-node-get-name"
                | "lun-map-list-info"
                | "quota-status"
        ))
}

pub(super) struct Ctx<'a> {
    pub a: &'a mut Array,
    pub svm: Option<String>,
    pub tuning: Tuning,
    /// The user is an SVM admin (vsadmin), not a cluster admin.
    pub svm_user: bool,
}

impl Ctx<'_> {
    fn svm_name(&self, api: &str) -> Result<String, Fail> {
        self.svm.clone().ok_or_else(|| {
            fail(
                errno::EAPIERROR,
                format!("{api}: this API needs a vserver context (tunnel it with vfiler)"),
            )
        })
    }

    fn svm(&mut self, api: &str) -> Result<&mut Svm, Fail> {
        let name = self.svm_name(api)?;
        self.a
            .svms
            .get_mut(&name)
            .ok_or_else(|| fail(errno::EVSERVERNOTFOUND, format!("Vserver {name} not found")))
    }
}

fn arg<'n>(api: &'n Node, name: &str) -> Result<&'n str, Fail> {
    api.text_at(name)
        .map(str::trim)
        .ok_or_else(|| fail(errno::EINVALIDINPUTERROR, format!("Missing input: {name}")))
}

fn opt<'n>(api: &'n Node, name: &str) -> Option<&'n str> {
    api.text_at(name).map(str::trim).filter(|s| !s.is_empty())
}

fn flag(api: &Node, name: &str) -> bool {
    opt(api, name) == Some("true")
}

fn leaf(name: &str, v: impl ToString) -> Node {
    Node::leaf(name, v.to_string())
}

fn list(name: &str, item: &str, values: &[String]) -> Node {
    let mut n = Node::new(name);
    for v in values {
        n.push(Node::leaf(item, v));
    }
    n
}

/// Parses a ZAPI size: bytes, or a number with k/m/g/t (binary) suffix.
fn parse_size(s: &str) -> Result<u64, Fail> {
    let s = s.trim();
    let bad = || fail(errno::EINVALIDINPUTERROR, format!("Invalid size \"{s}\""));
    let (num, mult) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        None => (s, 1u64),
        Some((i, _)) => {
            let m = match s[i..].to_ascii_lowercase().as_str() {
                "k" | "kb" => 1 << 10,
                "m" | "mb" => 1 << 20,
                "g" | "gb" => 1 << 30,
                "t" | "tb" => 1 << 40,
                _ => return Err(bad()),
            };
            (&s[..i], m)
        }
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(bad)
}

const MIN_VOLUME: u64 = 20 << 20;
const MIN_LUN: u64 = 1 << 20;
const SNAPSHOT_POLICIES: &[&str] = &["none", "default", "default-1weekly"];

fn valid_volume_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 203
        && n.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn valid_permissions(p: &str) -> bool {
    let octal = (3..=4).contains(&p.len()) && p.chars().all(|c| ('0'..='7').contains(&c));
    let symbolic = (p.len() == 9 || p.len() == 12)
        && p.chars()
            .rev()
            .take(9)
            .zip("xwrxwrxwr".chars())
            .all(|(c, want)| c == want || c == '-')
        && p.chars().take(p.len() - 9).all(|c| c == '-');
    octal || symbolic
}

pub(super) fn dispatch(ctx: &mut Ctx<'_>, api: &Node) -> R {
    inputs::check(api)?;
    match api.name.as_str() {
        "system-get-ontapi-version" => ontapi_version(ctx),
        "system-get-version" => Ok(vec![
            leaf("version", {
                let [g, ma, mi] = ctx.a.release();
                format!(
                    "NetApp Release {g}.{ma}.{mi} (storch-sim, ONTAPI {}.{})",
                    ctx.a.ontapi_major, ctx.a.ontapi_minor
                )
            }),
            leaf("is-clustered", true),
            leaf("build-timestamp", 1_600_000_000),
        ]),
        "vserver-get-iter" => vserver_get_iter(ctx, api),
        "vserver-get" => vserver_get(ctx),
        "vserver-show-aggr-get-iter" => vserver_show_aggr(ctx, api),
        "aggr-get-iter" => aggr_get_iter(ctx, api),
        "net-interface-get-iter" => net_interface_get_iter(ctx, api),
        "iscsi-service-get-iter" => iscsi_service_get_iter(ctx, api),
        "iscsi-node-get-name" => iscsi_node_get_name(ctx),
        "iscsi-interface-get-iter" => iscsi_interface_get_iter(ctx, api),
        "job-get-iter" => job_get_iter(ctx, api),
        "volume-create" => volume_create(ctx, api, false),
        "volume-create-async" => volume_create(ctx, api, true),
        "volume-get-iter" => volume_get_iter(ctx, api),
        "volume-mount" => volume_mount(ctx, api),
        "volume-unmount" => volume_unmount(ctx, api),
        "volume-offline" => volume_state(ctx, api, "offline"),
        "volume-online" => volume_state(ctx, api, "online"),
        "volume-destroy" => volume_destroy(ctx, api, false),
        "volume-destroy-async" => volume_destroy(ctx, api, true),
        "volume-recovery-queue-get-iter" => recovery_queue_get_iter(ctx, api),
        "volume-recovery-queue-purge" => recovery_queue_purge(ctx, api),
        "volume-size" => volume_size(ctx, api, false),
        "volume-size-async" => volume_size(ctx, api, true),
        "volume-modify-iter" => volume_modify_iter(ctx, api, false),
        "volume-modify-iter-async" => volume_modify_iter(ctx, api, true),
        "volume-clone-create" => volume_clone_create(ctx, api),
        "volume-clone-split-start" => volume_clone_split(ctx, api),
        "snapshot-create" => snapshot_create(ctx, api),
        "snapshot-get-iter" => snapshot_get_iter(ctx, api),
        "snapshot-delete" => snapshot_delete(ctx, api),
        "qtree-create" => qtree_create(ctx, api),
        "qtree-delete" => qtree_delete(ctx, api, false),
        "qtree-delete-async" => qtree_delete(ctx, api, true),
        "qtree-rename" => qtree_rename(ctx, api),
        "qtree-list-iter" => qtree_list_iter(ctx, api),
        "quota-set-entry" => quota_set_entry(ctx, api),
        "quota-delete-entry" => quota_delete_entry(ctx, api),
        "quota-list-entries-iter" => quota_list_iter(ctx, api),
        "quota-on" | "quota-resize" => quota_switch(ctx, api, true),
        "quota-off" => quota_switch(ctx, api, false),
        "quota-status" => quota_status(ctx, api),
        "lun-create-by-size" => lun_create(ctx, api),
        "lun-get-iter" => lun_get_iter(ctx, api),
        "lun-map" => lun_map(ctx, api),
        "lun-unmap" => lun_unmap(ctx, api),
        "lun-map-list-info" => lun_map_list_info(ctx, api),
        "lun-offline" => lun_online(ctx, api, false),
        "lun-online" => lun_online(ctx, api, true),
        "lun-destroy" => lun_destroy(ctx, api),
        "lun-resize" => lun_resize(ctx, api),
        "lun-set-attribute" => {
            let path = arg(api, "path")?;
            if !ctx.svm(&api.name)?.luns.contains_key(path) {
                return Err(fail(
                    errno::EOBJECTNOTFOUND,
                    format!("LUN {path} not found"),
                ));
            }
            Ok(vec![])
        }
        "igroup-create" => igroup_create(ctx, api),
        "igroup-get-iter" => igroup_get_iter(ctx, api),
        "igroup-add" => igroup_add(ctx, api),
        "igroup-remove" => igroup_remove(ctx, api),
        "igroup-destroy" => igroup_destroy(ctx, api),
        "export-policy-create" => export_policy_create(ctx, api),
        "export-policy-get" => export_policy_get(ctx, api),
        "export-policy-destroy" => export_policy_destroy(ctx, api),
        "export-rule-create" => export_rule_create(ctx, api),
        "export-rule-get-iter" => export_rule_get_iter(ctx, api),
        "export-rule-destroy" => export_rule_destroy(ctx, api),
        other => Err(fail(
            errno::EAPINOTFOUND,
            format!("Unable to find API: {other}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(pattern_matches("abc", "abc"));
        assert!(!pattern_matches("abc", "abcd"));
        assert!(pattern_matches("ab*", "abcd"));
        assert!(pattern_matches("*", "x"));
        assert!(pattern_matches("!ab*", "xy"));
        assert!(!pattern_matches("!ab*", "abc"));
        assert!(pattern_matches("a|b", "b"));
        assert!(pattern_matches(">5", "6"));
        assert!(!pattern_matches(">5", "5"));
    }

    #[test]
    fn queries_and_projection() {
        let r = Node::new("volume-attributes")
            .with(
                Node::new("volume-id-attributes")
                    .with_leaf("name", "trident_a")
                    .with_leaf("style-extended", "flexvol"),
            )
            .with(Node::new("volume-state-attributes").with_leaf("state", "online"));
        let q = Node::new("volume-attributes").with(
            Node::new("volume-id-attributes")
                .with_leaf("name", "trident_*")
                .with_leaf("style-extended", "flexvol"),
        );
        assert!(query_matches(&q, &r));
        let q2 = Node::new("volume-attributes")
            .with(Node::new("volume-state-attributes").with_leaf("state", "offline"));
        assert!(!query_matches(&q2, &r));
        let d = Node::new("volume-attributes")
            .with(Node::new("volume-id-attributes").with(Node::new("name")));
        let p = project(&d, &r);
        assert_eq!(p.children.len(), 1);
        assert_eq!(p.str_at("volume-id-attributes/name"), "trident_a");
        assert_eq!(p.text_at("volume-id-attributes/style-extended"), None);
    }

    #[test]
    fn volume_candidates_narrow_like_the_query() {
        let a = Array::new(
            "s",
            &crate::sim::ontap::AggregateSpec::parse_list("aggr1:ssd:1TiB").unwrap(),
            (1, 180),
        );
        let mut svm = a.svms["s"].clone();
        let root = svm.volumes.values().next().unwrap().clone();
        svm.volumes.clear();
        for n in ["a", "ab", "abc", "b", "ba"] {
            svm.volumes.insert(n.to_string(), root.clone());
        }
        let names = |pattern: Option<&str>| -> Vec<String> {
            let q = pattern.map(|p| {
                Node::new("volume-attributes")
                    .with(Node::new("volume-id-attributes").with_leaf("name", p))
            });
            volume_candidates(&svm, q.as_ref())
                .map(|(n, _)| n.clone())
                .collect()
        };
        assert_eq!(names(Some("ab")), ["ab"]);
        assert_eq!(names(Some("zz")), Vec::<String>::new());
        assert_eq!(names(Some("ab*")), ["ab", "abc"]);
        // Patterns the index cannot narrow keep every volume (the query filters them).
        assert_eq!(names(Some("a|b")).len(), 5);
        assert_eq!(names(Some("!a")).len(), 5);
        assert_eq!(names(Some("*b*")).len(), 5);
        assert_eq!(names(Some("")).len(), 5);
        assert_eq!(names(None).len(), 5);
    }

    #[test]
    fn sizes_and_names() {
        assert_eq!(parse_size("1g").unwrap(), 1 << 30);
        assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
        assert!(parse_size("lots").is_err());
        assert!(valid_volume_name("trident_a1"));
        assert!(!valid_volume_name("a-b"));
        assert!(!valid_volume_name("1a"));
        assert!(valid_permissions("---rwxrwxrwx"));
        assert!(valid_permissions("rwxr-x---"));
        assert!(valid_permissions("0755"));
        assert!(!valid_permissions("0855"));
        assert!(!valid_permissions("rwxrwxrwz"));
    }
}
