//! Which driver serves which `storageDriverName`.

use std::sync::Arc;

use super::eseries::{self, EseriesDriver};
use super::fake::{self, FakeDriver};
use super::local::{self, LocalDriver};
use super::nexentastor::{self, NexentaDriver};
use super::ontap::OntapDriver;
use super::ontap::config::Variant;
use super::solidfire::{self, SolidFireDriver};
use super::{Attachment, CommonConfig, DriverError, StorageDriver};
use crate::model::AccessInfo;

/// A driver built from a backend config, with the backend name it reports.
#[derive(Debug, Clone)]
pub struct BuiltDriver {
    pub driver: Arc<dyn StorageDriver>,
    pub common: super::CommonConfig,
}

/// Builds the driver named by the config's `storageDriverName`. Does not contact the array;
/// `discover` does. Errors name the field (`unknown storage driver: X`, …).
///
/// The common fields are validated first (as Trident does), then the driver's own fields.
/// A known Trident driver that this build does not include is `Unsupported`; any other name is
/// `Invalid`.
pub fn build_driver(doc: &serde_json::Value) -> Result<BuiltDriver, DriverError> {
    let mut common = CommonConfig::parse(doc)?;
    let driver: Arc<dyn StorageDriver> = match common.storage_driver_name.as_str() {
        super::fake::DRIVER_NAME => Arc::new(FakeDriver::from_config(doc, &common)?),
        "ontap-nas" | "ontap-nas-economy" | "ontap-nas-flexgroup" | "ontap-san" => {
            Arc::new(OntapDriver::from_config(doc, &common)?)
        }
        super::local::DRIVER_NAME => Arc::new(LocalDriver::from_config(doc, &common)?),
        solidfire::DRIVER_NAME => Arc::new(SolidFireDriver::from_config(doc, &common)?),
        eseries::DRIVER_NAME => Arc::new(EseriesDriver::from_config(doc, &common)?),
        nexentastor::DRIVER_NAME => {
            let driver = NexentaDriver::from_config(doc, &common)?;
            // The seed's `zone` key is this family's way of saying supportedTopologies.
            common.supported_topologies = driver.config().topology(&common.supported_topologies)?;
            Arc::new(driver)
        }
        name => {
            return Err(DriverError::Invalid(format!(
                "unknown storage driver: {name}"
            )));
        }
    };
    Ok(BuiltDriver { driver, common })
}

/// How the volumes of a backend served by `driver` attach, from what is stored for a volume
/// (its backend's driver name and its access info): the one place that knows it, for volumes
/// just created and volumes read from the log alike. `None` for a driver this build does not
/// know.
pub fn attachment(driver: &str, access: &AccessInfo) -> Option<Attachment> {
    match driver {
        fake::DRIVER_NAME => Some(fake::attachment(access)),
        local::DRIVER_NAME => Some(local::ATTACHMENT),
        solidfire::DRIVER_NAME => Some(solidfire::ATTACHMENT),
        eseries::DRIVER_NAME => Some(eseries::ATTACHMENT),
        nexentastor::DRIVER_NAME => Some(nexentastor::ATTACHMENT),
        name => Variant::from_driver_name(name).map(Variant::attachment),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn attachments_follow_the_family() {
        let nfs = AccessInfo::default();
        let iscsi = AccessInfo {
            iscsi_target_iqn: "iqn.2017-06.com.netapp:fake".into(),
            ..AccessInfo::default()
        };
        for name in ["ontap-nas", "ontap-nas-economy", "ontap-nas-flexgroup"] {
            assert_eq!(attachment(name, &nfs), Some(Attachment::Nfs), "{name}");
        }
        for name in [
            "ontap-san",
            "solidfire-san",
            "eseries-iscsi",
            "nexentastor-iscsi",
        ] {
            assert_eq!(attachment(name, &iscsi), Some(Attachment::Iscsi), "{name}");
        }
        assert_eq!(attachment("fake", &nfs), Some(Attachment::Nfs));
        assert_eq!(attachment("fake", &iscsi), Some(Attachment::Iscsi));
        assert_eq!(attachment("local", &nfs), Some(Attachment::LocalPath));
        assert_eq!(attachment("tape", &nfs), None);
    }

    #[test]
    fn nexentastor_zone_is_its_topology() {
        let doc = |extra: serde_json::Value| {
            let mut d = json!({
                "version": 1,
                "storageDriverName": "nexentastor-iscsi",
                "restIp": "https://10.0.0.1:8443",
                "username": "admin",
                "password": "pw",
                "defaultVolumeGroup": "pool/vg",
                "defaultDataIp": "10.0.0.2",
                "dynamicTargetLunAllocation": true,
            });
            for (k, v) in extra.as_object().unwrap() {
                d[k] = v.clone();
            }
            d
        };
        let zoned = build_driver(&doc(json!({"zone": "z1"}))).unwrap();
        assert_eq!(
            zoned.common.supported_topologies,
            [crate::model::Segment::from([(
                crate::model::topology::ZONE_KEY.to_string(),
                "z1".to_string()
            )])]
        );
        let listed = build_driver(&doc(
            json!({"supportedTopologies": [{"topology.kubernetes.io/region": "r1"}]}),
        ))
        .unwrap();
        assert_eq!(listed.common.supported_topologies.len(), 1);
        assert!(
            build_driver(&doc(json!({})))
                .unwrap()
                .common
                .supported_topologies
                .is_empty()
        );
        for bad in [
            json!({"zone": "z1", "supportedTopologies": [{"a": "b"}]}),
            json!({"zone": "not a zone"}),
        ] {
            match build_driver(&doc(bad.clone())) {
                Err(DriverError::Invalid(m)) => assert!(m.contains("zone"), "{bad}: {m}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn fake_is_built() {
        let built = build_driver(&json!({
            "version": 1,
            "storageDriverName": "fake",
            "instanceName": "fake1",
            "pools": {"p1": {"attributes": {}, "sizeBytes": 1u64 << 30}},
        }))
        .unwrap();
        assert_eq!(built.driver.driver_name(), "fake");
        assert_eq!(built.common.storage_driver_name, "fake");
        assert_eq!(built.driver.internal_name("v"), "trident-v");
    }

    #[test]
    fn solidfire_is_built_and_attaches_over_iscsi() {
        let built = build_driver(&json!({
            "version": 1,
            "storageDriverName": "solidfire-san",
            "Endpoint": "https://admin:pw@10.0.0.1/json-rpc/8.0",
            "SVIP": "10.0.0.2:3260",
            "TenantName": "trident",
        }))
        .unwrap();
        assert_eq!(built.driver.driver_name(), "solidfire-san");
        assert_eq!(built.driver.internal_name("a_b.c"), "a-b-c");
        assert_eq!(
            attachment("solidfire-san", &AccessInfo::default()),
            Some(Attachment::Iscsi)
        );
        match build_driver(&json!({"version": 1, "storageDriverName": "solidfire-san"})) {
            Err(DriverError::Invalid(msg)) => assert!(msg.contains("EndPoint"), "{msg}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn eseries_is_built_and_attaches_over_iscsi() {
        let built = build_driver(&json!({
            "version": 1,
            "storageDriverName": "eseries-iscsi",
            "webProxyHostname": "10.0.0.1",
            "username": "rw",
            "password": "rw",
            "controllerA": "10.0.0.5",
            "controllerB": "10.0.0.6",
            "hostDataIP": "10.0.0.101",
        }))
        .unwrap();
        assert_eq!(built.driver.driver_name(), "eseries-iscsi");
        assert_eq!(built.driver.internal_name("v").len(), 30);
        match build_driver(&json!({"version": 1, "storageDriverName": "eseries-iscsi"})) {
            Err(DriverError::Invalid(msg)) => assert!(msg.contains("webProxyHostname"), "{msg}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn fake_config_errors_surface() {
        match build_driver(&json!({"version": 1, "storageDriverName": "fake"})) {
            Err(DriverError::Invalid(msg)) => {
                assert!(
                    msg.contains("backendName") && msg.contains("instanceName"),
                    "{msg}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_driver_is_invalid() {
        match build_driver(&json!({"version": 1, "storageDriverName": "ontap-nass"})) {
            Err(DriverError::Invalid(msg)) => assert_eq!(msg, "unknown storage driver: ontap-nass"),
            other => panic!("{other:?}"),
        }
        // Driver names are case-sensitive, as in Trident.
        match build_driver(&json!({"version": 1, "storageDriverName": "Fake"})) {
            Err(DriverError::Invalid(msg)) => assert_eq!(msg, "unknown storage driver: Fake"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn common_errors_come_first() {
        match build_driver(&json!({"version": 2, "storageDriverName": "nope"})) {
            Err(DriverError::Invalid(msg)) => assert!(msg.contains("version"), "{msg}"),
            other => panic!("{other:?}"),
        }
        match build_driver(&json!({"version": 1})) {
            Err(DriverError::Invalid(msg)) => {
                assert_eq!(msg, "missing storage driver name in configuration file")
            }
            other => panic!("{other:?}"),
        }
    }
}
