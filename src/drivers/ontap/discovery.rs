//! Discovery: what the array offers this backend (ONTAPI version, SVM, aggregates and their
//! media, data LIFs, iSCSI target) and the pools made from it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::api::OntapApi;
use super::client::OntapError;
use super::config::Variant;
use super::rest_wire;
use super::{OntapDriver, economy};
use crate::drivers::{DriverError, DriverResult};
use crate::model::{Offer, PoolInfo};

/// The oldest ONTAPI the drivers accept: 1.30 (ONTAP 8.3).
pub const MIN_ONTAPI: (u32, u32) = (1, 30);

/// The ONTAPI version that brought volume encryption (ONTAP 9.1).
pub const ENCRYPTION_ONTAPI: (u32, u32) = (1, 110);

/// What discovery learnt about the array; every volume operation works from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovered {
    pub svm: String,
    pub ontapi: (u32, u32),
    /// The pools' aggregates (all of the SVM's, or the configured one), sorted by name.
    pub aggregates: Vec<Aggregate>,
    /// NAS: the NFS data LIF; SAN: the first iSCSI LIF.
    pub data_lif: String,
    /// SAN: every iSCSI portal used (one when `dataLIF` is set).
    pub iscsi_portals: Vec<String>,
    /// SAN: the target IQN.
    pub iqn: String,
    pub backend_name: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Aggregate {
    pub name: String,
    /// `hdd`, `hybrid` or `ssd` when the array says so.
    pub media: Option<String>,
    pub available: u64,
    /// `is-nve-capable`; assumed until `vserver-show-aggr-get-iter` says otherwise, so a user
    /// who may not read it leaves the decision to the array.
    pub nve_capable: bool,
}

impl OntapDriver {
    /// The last discovery, running one when there is none yet.
    pub async fn ctx(&self) -> DriverResult<Arc<Discovered>> {
        if let Some(d) = self
            .discovered
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            return Ok(d);
        }
        self.run_discovery().await
    }

    fn svm_hint(&self) -> Option<String> {
        self.discovered
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|d| d.svm.clone())
            .or_else(|| self.cfg.svm.clone())
    }

    pub(super) async fn run_discovery(&self) -> DriverResult<Arc<Discovered>> {
        let d = Arc::new(self.discover_array().await?);
        *self.discovered.write().unwrap_or_else(|e| e.into_inner()) = Some(d.clone());
        Ok(d)
    }

    /// Version check, SVM, aggregates and their media, data LIFs, iSCSI target.
    async fn discover_array(&self) -> DriverResult<Discovered> {
        self.choose_api().await?;
        let ontapi = self.check_ontapi().await?;
        let svm = match self.svm_hint() {
            Some(s) => s,
            None => self.derive_svm().await?,
        };
        let mut aggregates = self.svm_aggregates(&svm).await?;
        self.read_media(&svm, &mut aggregates).await?;
        let (data_lif, iscsi_portals, iqn) = if self.cfg.variant.is_san() {
            self.iscsi_target(&svm).await?
        } else {
            (self.nfs_lif(&svm).await?, Vec::new(), String::new())
        };
        if self.cfg.variant == Variant::NasEconomy {
            self.api()
                .ensure_export_policy(&svm, economy::EXPORT_POLICY, "0.0.0.0/0")
                .await
                .map_err(init_error)?;
        }
        let backend_name = match &self.common.backend_name {
            Some(n) => n.clone(),
            None => format!("{}{}", self.cfg.variant.default_name_prefix(), data_lif),
        };
        Ok(Discovered {
            svm,
            ontapi,
            aggregates,
            data_lif,
            iscsi_portals,
            iqn,
            backend_name,
        })
    }

    /// Chooses REST or ZAPI once, as Trident does (wire-protocols §5.8): `GET /cluster` over
    /// REST; no answer means ZAPI unless `useREST` is true; else the version and `useREST`
    /// decide. The choice and its reason are logged and shown in the external config. A
    /// fallback because REST did not answer is asked again at the next discovery.
    async fn choose_api(&self) -> DriverResult<()> {
        if self.chosen_api().is_some() && !self.reprobe.load(Ordering::Relaxed) {
            return Ok(());
        }
        let probe = self.rest.cluster_version().await;
        let version = probe.as_ref().ok().copied();
        let rest = match rest_wire::choose_rest(self.cfg.use_rest, version) {
            Ok(rest) => rest,
            Err(why) => {
                let detail = match probe {
                    Err(e) => format!(": {e}"),
                    Ok(_) => String::new(),
                };
                return Err(DriverError::Invalid(format!("{why}{detail}")));
            }
        };
        let api: Arc<dyn OntapApi> = if rest {
            self.rest.clone()
        } else {
            self.zapi.clone()
        };
        tracing::info!(
            managementLIF = %self.cfg.management_lif,
            api = api.api_name(),
            useREST = ?self.cfg.use_rest,
            ontap = ?version,
            rest_probe = %probe.err().map(|e| e.to_string()).unwrap_or_else(|| "ok".into()),
            "chose the ONTAP API"
        );
        self.reprobe.store(version.is_none(), Ordering::Relaxed);
        *self.chosen.write().unwrap_or_else(|e| e.into_inner()) = Some(api);
        Ok(())
    }

    /// The array's ONTAPI version, refused when older than [`MIN_ONTAPI`].
    async fn check_ontapi(&self) -> DriverResult<(u32, u32)> {
        let ontapi = self.api().ontapi_version().await.map_err(init_error)?;
        if ontapi < MIN_ONTAPI {
            return Err(DriverError::Invalid(format!(
                "ONTAP {}.{} is too old: ONTAPI {}.{} (ONTAP 8.3) or later is required",
                ontapi.0, ontapi.1, MIN_ONTAPI.0, MIN_ONTAPI.1
            )));
        }
        Ok(ontapi)
    }

    /// The SVM's aggregates (or the configured one), sorted by name; none is an error.
    async fn svm_aggregates(&self, svm: &str) -> DriverResult<Vec<Aggregate>> {
        let Some(mut aggregates) = self.api().svm_aggregates(svm).await.map_err(init_error)? else {
            return Err(DriverError::Invalid(format!(
                "could not find SVM {svm} (check the backend's svm and credentials)"
            )));
        };
        aggregates.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(want) = &self.cfg.aggregate {
            aggregates.retain(|a| &a.name == want);
            if aggregates.is_empty() {
                return Err(DriverError::Invalid(format!(
                    "aggregate {want} is not assigned to SVM {svm}"
                )));
            }
        }
        if aggregates.is_empty() {
            return Err(DriverError::Invalid(format!(
                "SVM {svm} has no aggregates assigned"
            )));
        }
        Ok(aggregates)
    }

    /// Media type and encryption capability, where this user may read them.
    async fn read_media(&self, svm: &str, aggregates: &mut [Aggregate]) -> DriverResult<()> {
        let kinds = self.api().aggregate_kinds(svm).await.map_err(init_error)?;
        if kinds.is_empty() {
            tracing::info!(svm = %svm, "cannot read aggregate types; pools get no media");
        }
        for k in &kinds {
            if let Some(a) = aggregates.iter_mut().find(|a| a.name == k.name) {
                a.media = match k.media.as_str() {
                    m @ ("hdd" | "hybrid" | "ssd") => Some(m.to_string()),
                    _ => None,
                };
                a.nve_capable = k.nve_capable;
            }
        }
        Ok(())
    }

    /// SAN: the first portal, every portal used (only `dataLIF` when set) and the target IQN;
    /// creates the backend's igroup when missing (not with per-node igroups).
    async fn iscsi_target(&self, svm: &str) -> DriverResult<(String, Vec<String>, String)> {
        let c = self.api();
        let lifs = self.data_lifs(svm, "iscsi").await?;
        let portals = match &self.cfg.data_lif {
            Some(lif) => {
                if !lifs.contains(lif) {
                    return Err(DriverError::Invalid(format!(
                        "dataLIF {lif} is not an iSCSI data LIF of SVM {svm}"
                    )));
                }
                vec![lif.clone()]
            }
            None => lifs.clone(),
        };
        let iqn = c.iscsi_target_name(svm).await.map_err(|e| {
            DriverError::Invalid(format!(
                "SVM {svm} has no usable iSCSI service: {}",
                e.into_driver()
            ))
        })?;
        if !self.cfg.per_node_igroups {
            c.ensure_igroup(svm, &self.cfg.igroup_name)
                .await
                .map_err(init_error)?;
        }
        Ok((portals[0].clone(), portals, iqn))
    }

    /// NAS: the NFS data LIF (`dataLIF` when set, else the SVM's first).
    async fn nfs_lif(&self, svm: &str) -> DriverResult<String> {
        let lifs = self.data_lifs(svm, "nfs").await?;
        match &self.cfg.data_lif {
            Some(lif) => {
                let is_ip = lif.parse::<std::net::IpAddr>().is_ok();
                if is_ip && !lifs.contains(lif) {
                    return Err(DriverError::Invalid(format!(
                        "dataLIF {lif} is not an NFS data LIF of SVM {svm}"
                    )));
                }
                Ok(lif.clone())
            }
            None => Ok(lifs[0].clone()),
        }
    }

    /// The only data SVM these credentials see.
    async fn derive_svm(&self) -> DriverResult<String> {
        let names: BTreeSet<String> = self
            .api()
            .data_svms()
            .await
            .map_err(init_error)?
            .into_iter()
            .collect();
        match names.len() {
            1 => Ok(names.into_iter().next().unwrap_or_default()),
            0 => Err(DriverError::Invalid(
                "cannot derive the SVM: the credentials see no data SVM; set svm".into(),
            )),
            n => Err(DriverError::Invalid(format!(
                "cannot derive the SVM: the credentials see {n} data SVMs; set svm"
            ))),
        }
    }

    /// Addresses of the SVM's data LIFs that are up and serve `protocol`.
    async fn data_lifs(&self, svm: &str, protocol: &str) -> DriverResult<Vec<String>> {
        let lifs = self
            .api()
            .data_lifs(svm, protocol)
            .await
            .map_err(init_error)?;
        if lifs.is_empty() {
            return Err(DriverError::Invalid(format!(
                "SVM {svm}: no data LIFs meet the provided criteria (protocol {protocol}, up)"
            )));
        }
        Ok(lifs)
    }

    pub(super) fn pools(&self, d: &Discovered) -> (Vec<PoolInfo>, BTreeMap<String, u64>) {
        let v = self.cfg.variant;
        let backend_type = Offer::Strings(BTreeSet::from([v.driver_name().to_string()]));
        if v == Variant::NasFlexgroup {
            let mut offers = BTreeMap::new();
            offers.insert("backendType".to_string(), backend_type);
            offers.insert("snapshots".to_string(), Offer::Bool(true));
            offers.insert("clones".to_string(), Offer::Bool(false));
            // A FlexGroup spreads over every aggregate: each must be able to encrypt.
            let nve = d.ontapi >= ENCRYPTION_ONTAPI && d.aggregates.iter().all(|a| a.nve_capable);
            offers.insert("encryption".to_string(), Offer::Bool(nve));
            let free = d.aggregates.iter().map(|a| a.available).sum();
            let pool = PoolInfo {
                name: d.svm.clone(),
                offers,
                total_bytes: None,
            };
            return (vec![pool], BTreeMap::from([(d.svm.clone(), free)]));
        }
        let features = v != Variant::NasEconomy;
        let mut pools = Vec::new();
        let mut free = BTreeMap::new();
        for a in &d.aggregates {
            let mut offers = BTreeMap::new();
            offers.insert("backendType".to_string(), backend_type.clone());
            offers.insert("snapshots".to_string(), Offer::Bool(features));
            offers.insert("clones".to_string(), Offer::Bool(features));
            // Per aggregate, as ONTAP reports it: offering NVE on an aggregate that says
            // `is-nve-capable false` only makes encrypted creates fail there.
            offers.insert(
                "encryption".to_string(),
                Offer::Bool(d.ontapi >= ENCRYPTION_ONTAPI && a.nve_capable),
            );
            offers.insert(
                "provisioningType".to_string(),
                Offer::strings(["thick", "thin"]),
            );
            if let Some(m) = &a.media {
                offers.insert("media".to_string(), Offer::strings([m.as_str()]));
            }
            pools.push(PoolInfo {
                name: a.name.clone(),
                offers,
                total_bytes: None,
            });
            free.insert(a.name.clone(), a.available);
        }
        (pools, free)
    }
}

/// Errors while contacting the array at start-up: transport problems stay retryable.
fn init_error(e: OntapError) -> DriverError {
    e.into_driver()
}
