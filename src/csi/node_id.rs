//! The CSI node id storch's node plugin reports (`NodeGetInfo`) and its controller reads
//! (`ControllerPublishVolume`): the node's name, and its iSCSI initiator when it has one,
//! joined by a comma — `worker-1` or `worker-1,iqn.1993-08.org.debian:01:abcdef`.
//!
//! Kubernetes node names are DNS subdomains and iSCSI names (RFC 3720 §3.2.6.2) use only
//! letters, digits, `-`, `.` and `:`, so neither holds a comma. The spec bounds a node id to
//! 256 bytes.

use crate::drivers::HostAccess;

/// The spec's bound on `node_id` (csi.proto: "MUST be <= 256 bytes").
pub const MAX_NODE_ID_BYTES: usize = 256;

/// The node id for `host`.
pub fn format(host: &HostAccess) -> String {
    match &host.iscsi_initiator {
        Some(iqn) => format!("{},{iqn}", host.node),
        None => host.node.clone(),
    }
}

/// Reads a node id; the error says what is wrong with it (the caller names the field).
pub fn parse(node_id: &str) -> Result<HostAccess, String> {
    if node_id.is_empty() {
        return Err("must not be empty".into());
    }
    if node_id.len() > MAX_NODE_ID_BYTES {
        return Err(format!(
            "is {} bytes; at most {MAX_NODE_ID_BYTES}",
            node_id.len()
        ));
    }
    let (node, iqn) = match node_id.split_once(',') {
        Some((n, i)) => (n, Some(i)),
        None => (node_id, None),
    };
    check_node_name(node)?;
    if let Some(iqn) = iqn {
        check_initiator(iqn)?;
    }
    Ok(HostAccess {
        node: node.to_string(),
        iscsi_initiator: iqn.map(str::to_string),
    })
}

/// A node name: a DNS subdomain (lowercase letters, digits, `-` and `.`, alphanumeric at both
/// ends, at most 253 characters).
pub fn check_node_name(name: &str) -> Result<(), String> {
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    let ends = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_alphanumeric());
    if name.is_empty() || name.len() > 253 || !ok_chars {
        return Err(format!(
            "node name {name:?} must be 1-253 lowercase letters, digits, '-' or '.'"
        ));
    }
    if !ends(name.bytes().next()) || !ends(name.bytes().last()) {
        return Err(format!(
            "node name {name:?} must start and end with a letter or digit"
        ));
    }
    Ok(())
}

/// An iSCSI initiator name: `iqn.` or `eui.` form, RFC 3720's characters only.
pub fn check_initiator(iqn: &str) -> Result<(), String> {
    let ok_chars = iqn
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b':');
    let lower = iqn.to_ascii_lowercase();
    if !(lower.starts_with("iqn.") || lower.starts_with("eui.")) || iqn.len() < 5 || !ok_chars {
        return Err(format!(
            "iSCSI initiator {iqn:?} must be an iqn. or eui. name of letters, digits, '-', '.' and ':'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_id_round_trips_with_and_without_an_initiator() {
        for host in [
            HostAccess {
                node: "worker-1".into(),
                iscsi_initiator: None,
            },
            HostAccess {
                node: "worker-1.example.com".into(),
                iscsi_initiator: Some("iqn.1993-08.org.debian:01:abcdef".into()),
            },
        ] {
            assert_eq!(parse(&format(&host)).unwrap(), host);
        }
    }

    #[test]
    fn bad_node_ids_are_refused_with_the_reason() {
        assert!(parse("").unwrap_err().contains("empty"));
        assert!(parse("Worker").unwrap_err().contains("lowercase"));
        assert!(parse("-w").unwrap_err().contains("start and end"));
        assert!(parse("w,notaniqn").unwrap_err().contains("iqn."));
        assert!(parse("w,iqn.x,y").unwrap_err().contains("iqn."));
        assert!(parse(&"a".repeat(300)).unwrap_err().contains("at most 256"));
    }
}
