//! What a volume is on the node, read from the contexts the controller wrote
//! (`csi::convert::volume_context`: `storch.io/attachment`, portals, IQN, LUN, NFS export,
//! local path, `fsType`) and the ControllerPublish answer (`publish_context`: the same keys,
//! with or without the `storch.io/` prefix, win over the volume context — e.g. the LUN of the
//! node's own mapping), and the CHAP credentials from `secrets`.
//!
//! Secret keys (CSI secret keys may not hold `/`; the names are unique across operations):
//!
//! | key | meaning |
//! |---|---|
//! | `iscsiChapUsername` | the initiator's CHAP user (default: the volume's `storch.io/iscsiUsername`) |
//! | `iscsiChapSecret` | the initiator's CHAP secret |
//! | `iscsiChapTargetUsername`, `iscsiChapTargetSecret` | the target's, for mutual CHAP (both or neither) |
//!
//! The same keys are read from `publish_context` (prefixed or not) when `secrets` lacks them.

use std::collections::HashMap;
use std::path::PathBuf;

use tonic::Status;

use super::host::Chap;
use crate::drivers::Attachment;

/// The prefix of storch's context keys.
pub const PREFIX: &str = "storch.io/";
/// The port of an iSCSI portal given without one.
pub const ISCSI_PORT: u16 = 3260;

pub const CHAP_USERNAME: &str = "iscsiChapUsername";
pub const CHAP_SECRET: &str = "iscsiChapSecret";
pub const CHAP_TARGET_USERNAME: &str = "iscsiChapTargetUsername";
pub const CHAP_TARGET_SECRET: &str = "iscsiChapTargetSecret";

/// How the node reaches a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attach {
    /// `server:/path`, mounted on each target.
    Nfs {
        server: String,
        path: String,
    },
    Iscsi(IscsiVolume),
    /// A directory on this host, bound onto each target.
    Local {
        path: PathBuf,
    },
}

/// An iSCSI LUN: the portals to log in through (the target portal first), the target, the LUN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IscsiVolume {
    pub portals: Vec<String>,
    pub iqn: String,
    pub lun: u32,
    pub chap: ChapNeed,
}

/// The CHAP credentials a login uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChapNeed {
    /// The volume uses no CHAP.
    None,
    Given(Chap),
    /// The volume names a CHAP user but no secret came: a login would be refused.
    Missing {
        username: String,
    },
}

/// A volume as the contexts describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeVolume {
    pub attach: Attach,
    /// The volume's `fsType` (the capability's `fs_type` wins over it).
    pub fs_type: Option<String>,
}

impl NodeVolume {
    /// The attachment kind, for `convert::unsupported`.
    pub fn attachment(&self) -> Attachment {
        match self.attach {
            Attach::Nfs { .. } => Attachment::Nfs,
            Attach::Iscsi(_) => Attachment::Iscsi,
            Attach::Local { .. } => Attachment::LocalPath,
        }
    }

    /// Reads the contexts and secrets; errors name the map and key.
    pub fn read(
        volume_context: &HashMap<String, String>,
        publish_context: &HashMap<String, String>,
        secrets: &HashMap<String, String>,
    ) -> Result<NodeVolume, Status> {
        let ctx = Contexts {
            volume: volume_context,
            publish: publish_context,
        };
        let (field, kind) = ctx.required("attachment")?;
        let attach = match kind.as_str() {
            "nfs" => Attach::Nfs {
                server: ctx.required("nfsServerIp")?.1,
                path: ctx.required("nfsPath")?.1,
            },
            "local" => {
                let (field, path) = ctx.required("localPath")?;
                if !path.starts_with('/') {
                    return Err(invalid(&field, "must be an absolute path"));
                }
                Attach::Local { path: path.into() }
            }
            "iscsi" => Attach::Iscsi(iscsi(&ctx, secrets)?),
            other => {
                return Err(invalid(
                    &field,
                    format!("{other:?} is not an attachment the node knows (nfs, iscsi, local)"),
                ));
            }
        };
        Ok(NodeVolume {
            attach,
            fs_type: ctx.get("fsType").map(|(_, v)| v),
        })
    }
}

fn iscsi(ctx: &Contexts<'_>, secrets: &HashMap<String, String>) -> Result<IscsiVolume, Status> {
    let (_, first) = ctx.required("iscsiTargetPortal")?;
    let mut portals = vec![portal(&first)];
    if let Some((_, more)) = ctx.get("iscsiPortals") {
        for p in more.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let p = portal(p);
            if !portals.contains(&p) {
                portals.push(p);
            }
        }
    }
    let (_, iqn) = ctx.required("iscsiTargetIqn")?;
    let (lun_field, lun) = ctx.required("iscsiLunNumber")?;
    let lun = lun
        .parse::<u32>()
        .map_err(|_| invalid(&lun_field, format!("{lun:?} is not a LUN number")))?;
    Ok(IscsiVolume {
        portals,
        iqn,
        lun,
        chap: chap(ctx, secrets)?,
    })
}

/// CHAP from `secrets`, else from the publish context; the user defaults to the volume's.
fn chap(ctx: &Contexts<'_>, secrets: &HashMap<String, String>) -> Result<ChapNeed, Status> {
    let secret = |key: &str| -> Option<String> {
        secrets
            .get(key)
            .filter(|v| !v.is_empty())
            .cloned()
            .or_else(|| ctx.published(key))
    };
    let username = secret(CHAP_USERNAME).or_else(|| ctx.get("iscsiUsername").map(|(_, v)| v));
    let target = match (secret(CHAP_TARGET_USERNAME), secret(CHAP_TARGET_SECRET)) {
        (Some(u), Some(s)) => Some((u, s)),
        (None, None) => None,
        (Some(_), None) => return Err(missing_secret(CHAP_TARGET_SECRET)),
        (None, Some(_)) => return Err(missing_secret(CHAP_TARGET_USERNAME)),
    };
    Ok(match (username, secret(CHAP_SECRET)) {
        (Some(username), Some(secret)) => ChapNeed::Given(Chap {
            username,
            secret,
            target,
        }),
        (None, Some(_)) => return Err(missing_secret(CHAP_USERNAME)),
        (Some(username), None) => ChapNeed::Missing { username },
        (None, None) if target.is_some() => return Err(missing_secret(CHAP_SECRET)),
        (None, None) => ChapNeed::None,
    })
}

fn missing_secret(key: &str) -> Status {
    invalid(
        &format!("secrets.{key}"),
        "is required with the other CHAP keys",
    )
}

/// A portal with its port (`10.0.0.1` → `10.0.0.1:3260`, `[fd00::1]` → `[fd00::1]:3260`).
pub fn portal(p: &str) -> String {
    let has_port = match p.strip_prefix('[') {
        Some(rest) => rest.contains("]:"),
        None => p.contains(':'),
    };
    if has_port {
        p.to_string()
    } else {
        format!("{p}:{ISCSI_PORT}")
    }
}

/// `server:/path` for a mount (an IPv6 server in brackets).
pub fn nfs_source(server: &str, path: &str) -> String {
    if server.contains(':') && !server.starts_with('[') {
        format!("[{server}]:{path}")
    } else {
        format!("{server}:{path}")
    }
}

struct Contexts<'a> {
    volume: &'a HashMap<String, String>,
    publish: &'a HashMap<String, String>,
}

impl Contexts<'_> {
    /// A key of the publish context, prefixed or not.
    fn published(&self, key: &str) -> Option<String> {
        [format!("{PREFIX}{key}"), key.to_string()]
            .into_iter()
            .find_map(|k| self.publish.get(&k).filter(|v| !v.is_empty()).cloned())
    }

    /// The value of `key` and the field it came from (publish context first).
    fn get(&self, key: &str) -> Option<(String, String)> {
        for k in [format!("{PREFIX}{key}"), key.to_string()] {
            if let Some(v) = self.publish.get(&k).filter(|v| !v.is_empty()) {
                return Some((format!("publish_context.{k:?}"), v.clone()));
            }
        }
        let k = format!("{PREFIX}{key}");
        self.volume
            .get(&k)
            .filter(|v| !v.is_empty())
            .map(|v| (format!("volume_context.{k:?}"), v.clone()))
    }

    fn required(&self, key: &str) -> Result<(String, String), Status> {
        self.get(key).ok_or_else(|| {
            invalid(
                &format!("volume_context.\"{PREFIX}{key}\""),
                "is required (the volume's context as storch's controller wrote it)",
            )
        })
    }
}

fn invalid(field: &str, why: impl std::fmt::Display) -> Status {
    super::super::status::invalid(field, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn iscsi_ctx() -> HashMap<String, String> {
        map(&[
            ("storch.io/attachment", "iscsi"),
            ("storch.io/iscsiTargetPortal", "10.0.0.1"),
            ("storch.io/iscsiPortals", "10.0.0.1:3260,10.0.0.2"),
            ("storch.io/iscsiTargetIqn", "iqn.2010-01.com.example:t1"),
            ("storch.io/iscsiLunNumber", "0"),
            ("storch.io/iscsiUsername", "chapuser"),
            ("storch.io/fsType", "xfs"),
        ])
    }

    #[test]
    fn iscsi_portals_lun_override_and_chap() {
        let v = NodeVolume::read(
            &iscsi_ctx(),
            &map(&[("storch.io/iscsiLunNumber", "7")]),
            &map(&[(CHAP_SECRET, "s")]),
        )
        .unwrap();
        let Attach::Iscsi(i) = &v.attach else {
            panic!("{v:?}")
        };
        assert_eq!(i.portals, ["10.0.0.1:3260", "10.0.0.2:3260"]);
        assert_eq!(i.lun, 7);
        assert_eq!(
            i.chap,
            ChapNeed::Given(Chap {
                username: "chapuser".into(),
                secret: "s".into(),
                target: None
            })
        );
        assert_eq!(v.fs_type.as_deref(), Some("xfs"));
        let unprefixed = NodeVolume::read(
            &iscsi_ctx(),
            &map(&[("iscsiLunNumber", "3")]),
            &HashMap::new(),
        )
        .unwrap();
        let Attach::Iscsi(i) = unprefixed.attach else {
            panic!()
        };
        assert_eq!(i.lun, 3);
        assert_eq!(
            i.chap,
            ChapNeed::Missing {
                username: "chapuser".into()
            }
        );
    }

    #[test]
    fn bad_contexts_name_the_key() {
        let e = NodeVolume::read(&HashMap::new(), &HashMap::new(), &HashMap::new()).unwrap_err();
        assert!(e.message().contains("storch.io/attachment"), "{e:?}");
        let e = NodeVolume::read(
            &iscsi_ctx(),
            &map(&[("storch.io/iscsiLunNumber", "x")]),
            &HashMap::new(),
        )
        .unwrap_err();
        assert!(
            e.message()
                .starts_with("publish_context.\"storch.io/iscsiLunNumber\""),
            "{e:?}"
        );
        let e = NodeVolume::read(
            &iscsi_ctx(),
            &HashMap::new(),
            &map(&[(CHAP_SECRET, "s"), (CHAP_TARGET_USERNAME, "t")]),
        )
        .unwrap_err();
        assert!(e.message().contains(CHAP_TARGET_SECRET), "{e:?}");
        let e = NodeVolume::read(
            &map(&[
                ("storch.io/attachment", "local"),
                ("storch.io/localPath", "rel"),
            ]),
            &HashMap::new(),
            &HashMap::new(),
        )
        .unwrap_err();
        assert!(e.message().contains("absolute"), "{e:?}");
        let e = NodeVolume::read(
            &map(&[("storch.io/attachment", "fc")]),
            &HashMap::new(),
            &HashMap::new(),
        )
        .unwrap_err();
        assert!(e.message().contains("\"fc\""), "{e:?}");
    }

    #[test]
    fn portals_and_nfs_sources() {
        assert_eq!(portal("10.0.0.1"), "10.0.0.1:3260");
        assert_eq!(portal("10.0.0.1:3261"), "10.0.0.1:3261");
        assert_eq!(portal("[fd00::1]"), "[fd00::1]:3260");
        assert_eq!(portal("[fd00::1]:3261"), "[fd00::1]:3261");
        assert_eq!(nfs_source("10.0.0.1", "/vol"), "10.0.0.1:/vol");
        assert_eq!(nfs_source("fd00::1", "/vol"), "[fd00::1]:/vol");
    }
}
