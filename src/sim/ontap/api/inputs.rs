//! The input elements each API takes. ONTAP refuses an element an API does not take with
//! errno 13115 ("Extra input: NAME"), and a missing required one with the same errno
//! ("Missing input: NAME", see `arg`). The lists hold the inputs docs/wire-notes.md and
//! ONTAP's API reference name for each call, not only what storch's drivers send. An API
//! missing here is unknown to the simulator (13005), so the table and `dispatch` stay whole.

use super::{Fail, fail};
use crate::wire::zapi::{Node, errno};

/// What every iterator takes.
const ITER: &[&str] = &["max-records", "tag", "query", "desired-attributes"];

const VOLUME_CREATE: &[&str] = &[
    "volume",
    "containing-aggr-name",
    "size",
    "space-reserve",
    "snapshot-policy",
    "percentage-snapshot-reserve",
    "export-policy",
    "unix-permissions",
    "volume-security-style",
    "volume-comment",
    "encrypt",
    "tiering-policy",
    "qos-policy-group-name",
    "qos-adaptive-policy-group-name",
    "volume-type",
    "junction-path",
    "language-code",
    "volume-state",
    "user-id",
    "group-id",
    "snaplock-type",
    "efficiency-policy",
];

const VOLUME_CREATE_ASYNC: &[&str] = &[
    "volume-name",
    "aggr-list",
    "aggr-multiplier",
    "max-constituent-size",
    "size",
    "space-reserve",
    "snapshot-policy",
    "percentage-snapshot-reserve",
    "export-policy",
    "unix-permissions",
    "volume-security-style",
    "volume-comment",
    "encrypt",
    "tiering-policy",
    "qos-policy-group-name",
    "qos-adaptive-policy-group-name",
    "volume-type",
    "junction-path",
    "language-code",
    "user-id",
    "group-id",
    "snaplock-type",
    "efficiency-policy",
];

const MODIFY_ITER: &[&str] = &[
    "query",
    "attributes",
    "continue-on-failure",
    "max-failure-count",
    "return-success-list",
    "return-failure-list",
    "max-records",
    "tag",
];

/// The inputs of `api`, or 13005 when the simulator does not know it.
pub(super) fn accepted(api: &str) -> Result<&'static [&'static str], Fail> {
    Ok(match api {
        "system-get-ontapi-version" | "system-get-version" | "iscsi-node-get-name" => &[],
        "vserver-get" => &["desired-attributes"],
        "vserver-get-iter"
        | "aggr-get-iter"
        | "net-interface-get-iter"
        | "iscsi-service-get-iter"
        | "iscsi-interface-get-iter"
        | "job-get-iter"
        | "volume-get-iter"
        | "snapshot-get-iter"
        | "qtree-list-iter"
        | "quota-list-entries-iter"
        | "lun-get-iter"
        | "igroup-get-iter"
        | "volume-recovery-queue-get-iter"
        | "export-rule-get-iter" => ITER,
        "volume-recovery-queue-purge" => &["volume-name", "vserver-name"],
        "vserver-show-aggr-get-iter" => &[
            "max-records",
            "tag",
            "query",
            "desired-attributes",
            "vserver",
        ],
        "volume-create" => VOLUME_CREATE,
        "volume-create-async" => VOLUME_CREATE_ASYNC,
        "volume-mount" => &[
            "volume-name",
            "junction-path",
            "activate-junction",
            "export-policy-override",
        ],
        "volume-unmount" => &["volume-name", "force"],
        "volume-offline" | "volume-online" => &["name"],
        "volume-destroy" => &["name", "unmount-and-offline"],
        "volume-destroy-async" => &["volume-name", "unmount-and-offline"],
        "volume-size" => &["volume", "new-size"],
        "volume-size-async" => &["volume-name", "new-size"],
        "volume-modify-iter" | "volume-modify-iter-async" => MODIFY_ITER,
        "volume-clone-create" => &[
            "volume",
            "parent-volume",
            "parent-snapshot",
            "space-reserve",
            "qos-policy-group-name",
            "junction-path",
            "junction-active",
            "volume-type",
            "parent-vserver",
            "vserver",
        ],
        "volume-clone-split-start" => &["volume"],
        "snapshot-create" => &["volume", "snapshot", "comment", "async", "snapmirror-label"],
        "snapshot-delete" => &[
            "volume",
            "snapshot",
            "ignore-owners",
            "snapshot-instance-uuid",
        ],
        "qtree-create" => &[
            "volume",
            "qtree",
            "mode",
            "security-style",
            "export-policy",
            "qos-policy-group",
            "oplocks",
        ],
        "qtree-delete" | "qtree-delete-async" => &["qtree", "force"],
        "qtree-rename" => &["qtree", "new-qtree-name"],
        "quota-set-entry" => &[
            "volume",
            "qtree",
            "quota-target",
            "quota-type",
            "disk-limit",
            "file-limit",
            "soft-disk-limit",
            "soft-file-limit",
            "threshold",
            "policy",
            "perform-user-mapping",
        ],
        "quota-delete-entry" => &["volume", "qtree", "quota-target", "quota-type", "policy"],
        "quota-on" | "quota-off" | "quota-resize" | "quota-status" => &["volume"],
        "lun-create-by-size" => &[
            "path",
            "size",
            "ostype",
            "space-reservation-enabled",
            "space-allocation-enabled",
            "qos-policy-group",
            "qos-adaptive-policy-group",
            "comment",
            "class",
            "prefix-size",
            "use-exact-size",
        ],
        "lun-map" => &[
            "initiator-group",
            "path",
            "lun-id",
            "additional-reporting-node",
            "force",
        ],
        "lun-unmap" => &["initiator-group", "path"],
        "lun-map-list-info" => &["path"],
        "lun-offline" => &["path"],
        "lun-online" => &["path", "force"],
        "lun-destroy" => &["path", "force", "destroy-fenced-lun"],
        "lun-resize" => &["path", "size", "force"],
        "lun-set-attribute" => &["path", "name", "value"],
        "igroup-create" => &[
            "initiator-group-name",
            "initiator-group-type",
            "os-type",
            "bind-portset",
        ],
        "igroup-add" | "igroup-remove" => &["initiator-group-name", "initiator", "force"],
        "igroup-destroy" => &["initiator-group-name", "force"],
        "export-policy-create" => &["policy-name", "return-record"],
        "export-policy-get" => &["policy-name", "desired-attributes"],
        "export-policy-destroy" => &["policy-name"],
        "export-rule-create" => &[
            "policy-name",
            "client-match",
            "protocol",
            "ro-rule",
            "rw-rule",
            "super-user-security",
            "anonymous-user-id",
            "rule-index",
            "export-chown-mode",
            "export-ntfs-unix-security-ops",
            "is-allow-dev-is-enabled",
            "is-allow-set-uid-enabled",
        ],
        "export-rule-destroy" => &["policy-name", "rule-index"],
        other => {
            return Err(fail(
                errno::EAPINOTFOUND,
                format!("Unable to find API: {other}"),
            ));
        }
    })
}

/// Refuses an input element `api` does not take, naming it as ONTAP does.
pub(super) fn check(api: &Node) -> Result<(), Fail> {
    let allowed = accepted(&api.name)?;
    match api
        .children
        .iter()
        .find(|c| !allowed.contains(&c.name.as_str()))
    {
        Some(extra) => Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Extra input: {}", extra.name),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_inputs_are_refused_by_name_and_unknown_apis_are_not_found() {
        let ok = Node::new("volume-destroy")
            .with_leaf("name", "v")
            .with_leaf("unmount-and-offline", "true");
        assert_eq!(check(&ok), Ok(()));
        let extra = Node::new("volume-destroy")
            .with_leaf("volume-name", "v")
            .with_leaf("force", "true");
        let f = check(&extra).unwrap_err();
        assert_eq!(f.errno, errno::EINVALIDINPUTERROR);
        assert_eq!(f.reason, "Extra input: volume-name");
        let unknown = check(&Node::new("volume-teleport")).unwrap_err();
        assert_eq!(unknown.errno, errno::EAPINOTFOUND);
        // Iterators take the iterator inputs and nothing else.
        let iter = Node::new("volume-get-iter")
            .with_leaf("max-records", "5")
            .with(Node::new("query"));
        assert_eq!(check(&iter), Ok(()));
        let f = check(&Node::new("lun-get-iter").with_leaf("path", "/vol/v/l")).unwrap_err();
        assert_eq!(f.reason, "Extra input: path");
    }
}
