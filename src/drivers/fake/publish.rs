//! `perHostAccess`: volumes a host reaches only once the array grants it access, as on an
//! array with an access group per host. `publish` grants (a block volume gets the lowest LUN
//! number free among that host's mappings, and needs the host's iSCSI initiator), `unpublish`
//! revokes; grants are part of the array's state (and its state file).

use std::collections::BTreeSet;

use super::client::Grant;
use super::{FakeDriver, not_found};
use crate::drivers::{DriverError, DriverResult, HostAccess, PublishContext};
use crate::model::Protocol;

/// What a grant tells the host: its access group, and the LUN number for a block volume.
fn context(node: &str, grant: &Grant) -> PublishContext {
    let mut ctx = PublishContext::new();
    ctx.insert("accessGroup".into(), format!("fake-{node}"));
    if let Some(lun) = grant.lun {
        ctx.insert(crate::drivers::PUBLISH_LUN_KEY.into(), lun.to_string());
    }
    ctx
}

impl FakeDriver {
    /// Grants `host` access to the volume; a repeat returns the same context.
    pub(super) async fn grant(
        &self,
        internal_name: &str,
        host: &HostAccess,
    ) -> DriverResult<PublishContext> {
        self.delay().await;
        let (ctx, pending) = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let used: BTreeSet<u32> = st
                .volumes
                .iter()
                .filter(|(name, _)| name.as_str() != internal_name)
                .filter_map(|(_, v)| v.hosts.get(&host.node).and_then(|g| g.lun))
                .collect();
            let v = st
                .volumes
                .get_mut(internal_name)
                .ok_or_else(|| not_found(internal_name))?;
            if let Some(g) = v.hosts.get(&host.node)
                && g.initiator == host.iscsi_initiator
            {
                return Ok(context(&host.node, g));
            }
            if v.protocol == Protocol::Block && host.iscsi_initiator.is_none() {
                return Err(DriverError::Invalid(format!(
                    "host {} has no iSCSI initiator; volume {internal_name} is an iSCSI LUN and \
                     is mapped to initiators",
                    host.node
                )));
            }
            // A host whose initiator changed keeps its LUN number.
            let lun = match v.hosts.get(&host.node).and_then(|g| g.lun) {
                Some(lun) => Some(lun),
                None => (v.protocol == Protocol::Block)
                    .then(|| (0..).find(|n| !used.contains(n)).unwrap_or(0)),
            };
            let grant = Grant {
                initiator: host.iscsi_initiator.clone(),
                lun,
            };
            let ctx = context(&host.node, &grant);
            v.hosts.insert(host.node.clone(), grant);
            (ctx, self.commit(st))
        };
        self.persist(pending).await?;
        Ok(ctx)
    }

    /// Takes `host`'s access away; a host without access or a volume gone is success.
    pub(super) async fn revoke(&self, internal_name: &str, host: &HostAccess) -> DriverResult<()> {
        self.change_if_held(internal_name, |v| v.hosts.remove(&host.node).is_some())
            .await
    }

    /// The hosts granted access to a volume, by node name (tests).
    pub fn hosts_of(&self, internal_name: &str) -> Vec<String> {
        self.lock()
            .volumes
            .get(internal_name)
            .map(|v| v.hosts.keys().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::{GIB, driver, state_cfg};
    use super::*;
    use crate::drivers::StorageDriver;
    use crate::drivers::testing::req;

    fn host(node: &str, iqn: Option<&str>) -> HostAccess {
        HostAccess {
            node: node.into(),
            iscsi_initiator: iqn.map(str::to_string),
        }
    }

    #[tokio::test]
    async fn without_the_knob_every_host_reaches_every_volume() {
        let d = driver(json!({}));
        assert!(!d.needs_publish());
        d.create(&req("v", "p1", GIB)).await.unwrap();
        assert!(d.publish("v", &host("n1", None)).await.unwrap().is_empty());
        assert!(d.hosts_of("v").is_empty());
        d.unpublish("v", &host("n1", None)).await.unwrap();
    }

    #[tokio::test]
    async fn block_grants_take_the_lowest_free_lun_per_host() {
        let d = driver(json!({"protocol": "block", "perHostAccess": true}));
        assert!(d.needs_publish());
        for v in ["a", "b"] {
            d.create(&req(v, "p1", GIB)).await.unwrap();
        }
        let n1 = host("n1", Some("iqn.2026-01.io.storch:n1"));
        let a = d.publish("a", &n1).await.unwrap();
        assert_eq!(a["iscsiLunNumber"], "0");
        assert_eq!(a["accessGroup"], "fake-n1");
        assert_eq!(
            d.publish("a", &n1).await.unwrap(),
            a,
            "a repeat is the same grant"
        );
        assert_eq!(d.publish("b", &n1).await.unwrap()["iscsiLunNumber"], "1");
        let n2 = host("n2", Some("iqn.2026-01.io.storch:n2"));
        assert_eq!(d.publish("b", &n2).await.unwrap()["iscsiLunNumber"], "0");
        assert_eq!(d.hosts_of("b"), ["n1", "n2"]);
        match d.publish("a", &host("n3", None)).await {
            Err(DriverError::Invalid(m)) => assert!(m.contains("no iSCSI initiator"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            d.publish("gone", &n1).await,
            Err(DriverError::NotFound(_))
        ));
        d.unpublish("a", &n1).await.unwrap();
        d.unpublish("a", &n1).await.unwrap();
        d.unpublish("gone", &n1).await.unwrap();
        assert!(d.hosts_of("a").is_empty());
        // LUN 0 is free again for n1.
        d.create(&req("c", "p1", GIB)).await.unwrap();
        assert_eq!(d.publish("c", &n1).await.unwrap()["iscsiLunNumber"], "0");
    }

    #[tokio::test]
    async fn grants_survive_a_restart_with_a_state_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let mut doc = state_cfg(&path);
        doc["perHostAccess"] = json!(true);
        {
            let d = FakeDriver::new(&doc).unwrap();
            d.create(&req("v", "p1", GIB)).await.unwrap();
            let ctx = d.publish("v", &host("n1", None)).await.unwrap();
            assert!(
                !ctx.contains_key("iscsiLunNumber"),
                "a file volume has no LUN"
            );
        }
        let d = FakeDriver::new(&doc).unwrap();
        assert_eq!(d.hosts_of("v"), ["n1"]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"hosts\""), "{text}");
        assert_eq!(d.external_config()["perHostAccess"], true);
    }
}
