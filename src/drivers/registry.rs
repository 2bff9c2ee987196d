//! Which driver serves which `storageDriverName`.

use std::sync::Arc;

use super::eseries::config::EseriesConfig;
use super::eseries::{self, EseriesDriver};
use super::fake::{self, FakeConfig, FakeDriver};
use super::local::{self, LocalConfig, LocalDriver};
use super::nexentastor::config::NexentaConfig;
use super::nexentastor::{self, NexentaDriver};
use super::ontap::OntapDriver;
use super::ontap::config::{OntapConfig, Variant};
use super::solidfire::config::SolidFireConfig;
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

/// The keys of a backend config that storch ignores, by path (`fooBar`, `defaults.fooBar`,
/// `Types[1].zzz`), in the order of its maps; empty when the config does not parse (its
/// error says what is wrong). Keys match as the drivers read them (exact, else
/// case-insensitive), so a key read under another case is not ignored, and of two spellings
/// of one key the one not read is. Parses as [`build_driver`] does but builds nothing and
/// reads no file (it logs nothing either: building the backend logs what its config
/// deserves).
pub fn ignored_keys(doc: &serde_json::Value) -> Vec<String> {
    let (parsed, reads) =
        tracing::subscriber::with_default(tracing::subscriber::NoSubscriber::default(), || {
            super::config::recording(|| parse_config(doc))
        });
    match parsed {
        Ok(()) => reads.unread(doc),
        Err(_) => Vec::new(),
    }
}

/// Every read [`build_driver`] and the backend's start make of a config, without building.
fn parse_config(doc: &serde_json::Value) -> Result<(), DriverError> {
    let common = CommonConfig::parse(doc)?;
    super::limit::concurrency_limit(doc).map_err(DriverError::Invalid)?;
    match common.storage_driver_name.as_str() {
        super::fake::DRIVER_NAME => FakeConfig::parse(doc, &common).map(drop),
        "ontap-nas" | "ontap-nas-economy" | "ontap-nas-flexgroup" | "ontap-san" => {
            OntapConfig::parse(doc, &common).map(drop)
        }
        super::local::DRIVER_NAME => LocalConfig::parse(doc, &common).map(drop),
        solidfire::DRIVER_NAME => SolidFireConfig::parse(doc, &common).map(drop),
        eseries::DRIVER_NAME => EseriesConfig::parse(doc, &common).map(drop),
        nexentastor::DRIVER_NAME => NexentaConfig::parse(doc)
            .and_then(|c| c.topology(&common.supported_topologies))
            .map(drop),
        name => Err(DriverError::Invalid(format!(
            "unknown storage driver: {name}"
        ))),
    }
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

    /// `doc` with `extra`'s keys set (`null` removes one).
    fn with(mut doc: serde_json::Value, extra: serde_json::Value) -> serde_json::Value {
        for (k, v) in extra.as_object().unwrap() {
            match v {
                serde_json::Value::Null => drop(doc.as_object_mut().unwrap().remove(k)),
                v => doc[k] = v.clone(),
            }
        }
        doc
    }

    fn ignored(doc: &serde_json::Value) -> Vec<String> {
        build_driver(doc).expect("the config is valid");
        let mut keys = ignored_keys(doc);
        keys.sort();
        keys
    }

    /// A CA certificate the HTTP clients take.
    fn pem() -> String {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        made.cert.pem()
    }

    /// The keys every family takes (common, and read by the backend's start).
    fn common(driver: &str) -> serde_json::Value {
        json!({
            "version": 1,
            "storageDriverName": driver,
            "backendName": "b1",
            "storagePrefix": "p_",
            "supportedTopologies": [{"topology.kubernetes.io/zone": "z1"}],
            "concurrencyLimit": 4,
            "debug": false,
            "debugTraceFlags": {"api": true},
            "disableDelete": false,
        })
    }

    /// One config per family with every key its documentation (the family's `config.rs`)
    /// lists, and a key of its nested objects to misspell.
    fn documented() -> Vec<(&'static str, serde_json::Value, &'static str)> {
        let pem = pem();
        vec![
            (
                "fake",
                with(
                    common("fake"),
                    json!({
                        "instanceName": "f1", "protocol": "file", "latency": "0ms",
                        "failureRate": 0.0, "failPools": {"p1": "boom"}, "failDestroy": "no",
                        "useCHAP": false, "perHostAccess": false, "limitVolumeSize": "1Ti",
                        "username": "u", "password": "pw",
                        "defaults": {"size": "1Gi"},
                        "pools": {"p1": {"attributes": {"media": {"offer": ["ssd"]}}, "sizeBytes": 1u64 << 30}},
                    }),
                ),
                "pools",
            ),
            (
                "local",
                with(
                    common("local"),
                    json!({
                        "protocol": "file",
                        "defaults": {"size": "1Gi", "spaceReserve": "none", "unixPermissions": "0755"},
                        "pools": {"p1": {"path": "/srv/p1", "media": "ssd", "capacity": "10Gi"}},
                    }),
                ),
                "defaults",
            ),
            (
                "ontap-san",
                with(
                    common("ontap-san"),
                    json!({
                        "managementLIF": "10.0.0.1", "dataLIF": "10.0.0.2", "svm": "svm1",
                        "aggregate": "aggr1", "username": "admin", "password": "pw",
                        "igroupName": "ig", "perNodeIgroups": true,
                        "nfsMountOptions": "-o nfsvers=4", "tlsVerify": true,
                        "trustedCACertificate": pem, "qtreesPerFlexvol": 100,
                        "apiTimeout": "30s", "useREST": false, "maxConcurrentRequests": 8,
                        "defaults": {
                            "size": "1Gi", "spaceReserve": "none", "snapshotPolicy": "none",
                            "snapshotReserve": "5", "unixPermissions": "0755",
                            "snapshotDir": "false", "exportPolicy": "default",
                            "securityStyle": "unix", "splitOnClone": "false",
                            "fileSystemType": "ext4", "encryption": "false",
                        },
                    }),
                ),
                "defaults",
            ),
            (
                "solidfire-san",
                with(
                    common("solidfire-san"),
                    json!({
                        "EndPoint": "https://admin:pw@10.0.0.1/json-rpc/8.0", "SVIP": "10.0.0.2:3260",
                        "TenantName": "t", "InitiatorIFace": "default",
                        "LegacyNamePrefix": "netappdvp-", "UseCHAP": true,
                        "DefaultBlockSize": 4096, "tlsVerify": true, "trustedCACertificate": pem,
                        "Types": [
                            {"Type": "gold", "Qos": {"minIOPS": 1, "maxIOPS": 2, "burstIOPS": 3}},
                        ],
                        "AccessGroups": [1], "limitVolumeSize": "1Ti",
                        "apiTimeout": "30s", "cloneTimeout": "5m",
                        "defaults": {"size": "1Gi"},
                    }),
                ),
                "Types",
            ),
            (
                "eseries-iscsi",
                with(
                    common("eseries-iscsi"),
                    json!({
                        "webProxyHostname": "10.0.0.1", "webProxyPort": "8443",
                        "webProxyUseHTTP": false, "webProxyVerifyTLS": true,
                        "username": "rw", "password": "rw", "controllerA": "10.0.0.5",
                        "controllerB": "10.0.0.6", "passwordArray": "pa",
                        "hostDataIP": "10.0.0.101", "poolNameSearchPattern": ".+",
                        "hostType": "linux_dm_mp", "accessGroupName": "trident",
                        "trustedCACertificate": pem, "apiTimeout": "30s", "jobTimeout": "10m",
                        "offerClones": true, "storagePrefix": "t_",
                        "defaults": {"size": "1Gi"},
                    }),
                ),
                "defaults",
            ),
            (
                "nexentastor-iscsi",
                with(
                    common("nexentastor-iscsi"),
                    json!({
                        "restIp": "https://10.0.0.1:8443", "username": "admin", "password": "pw",
                        "defaultDataIp": "10.0.0.2", "defaultVolumeGroup": "pool/vg",
                        "defaultTargetGroup": "tg", "defaultTarget": "t", "defaultHostGroup": "all",
                        "sparseVolume": true, "dynamicTargetLunAllocation": false,
                        "numOfLunsPerTarget": 8, "useChapAuth": true, "chapUser": "u",
                        "chapSecret": "twelve-chars-secret", "insecureSkipVerify": false,
                        "iSCSITimeout": 300, "mountPointPermissions": "750",
                        "trustedCACertificate": pem, "volumeGroups": ["pool/vg2"],
                        "defaults": {"size": "1Gi"},
                    }),
                ),
                "defaults",
            ),
        ]
    }

    #[test]
    fn documented_keys_are_never_ignored() {
        for (family, doc, _) in documented() {
            assert_eq!(ignored(&doc), Vec::<String>::new(), "{family}");
            // Keys match case-insensitively, as the drivers read them (NexentaStor's are
            // spelled as the seed spells them: another case is refused).
            if family != "nexentastor-iscsi" {
                let shouting = with(
                    doc.clone(),
                    json!({"backendName": null, "BACKENDNAME": "b1"}),
                );
                assert_eq!(ignored(&shouting), Vec::<String>::new(), "{family}");
            }
        }
    }

    #[test]
    fn misspelt_keys_are_named_with_their_path() {
        for (family, doc, nested) in documented() {
            let mut typo = doc.clone();
            match nested {
                "pools" => typo["pools"]["p1"]["sizeByte"] = json!(1),
                "Types" => typo["Types"][0]["Qoss"] = json!({}),
                _ => typo["defaults"]["sizee"] = json!("2Gi"),
            }
            let want = match nested {
                "pools" => "pools.p1.sizeByte",
                "Types" => "Types[0].Qoss",
                _ => "defaults.sizee",
            };
            assert_eq!(ignored(&typo), [want], "{family}");
            // A top-level key: ignored where the family accepts unknown keys (E-Series and
            // NexentaStor refuse them instead).
            let top = with(doc.clone(), json!({"storageDriverNmae": "x"}));
            match family {
                "eseries-iscsi" | "nexentastor-iscsi" => {
                    assert!(build_driver(&top).is_err(), "{family}");
                    assert!(ignored_keys(&top).is_empty(), "{family}");
                }
                _ => assert_eq!(ignored(&top), ["storageDriverNmae"], "{family}"),
            }
        }
    }

    #[test]
    fn keys_other_families_read_are_ignored_here() {
        let doc = with(
            documented()[0].1.clone(),
            json!({"managementLIF": "10.0.0.1", "Types": [{"Type": "x"}]}),
        );
        assert_eq!(ignored(&doc), ["Types", "managementLIF"]);
        // A config that does not parse names nothing (its error says what is wrong).
        assert!(
            ignored_keys(&json!({"version": 1, "storageDriverName": "fake", "bogus": 1}))
                .is_empty()
        );
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
