//! The `fake` driver: an in-memory array for tests and benchmarks (trident-compat §4.11),
//! with latency and failure injection and an optional fsynced state file.
//!
//! # Config
//!
//! ```json
//! {"version": 1, "storageDriverName": "fake", "backendName": "optional",
//!  "protocol": "file" | "block" | "", "instanceName": "fake1",
//!  "pools": {"pool1": {"attributes": {"media": {"offer": ["ssd"]}}, "sizeBytes": 107374182400}},
//!  "defaults": {"size": "1G"},
//!  "username": "optional", "password": "optional"}
//! ```
//!
//! - Every pool needs an `attributes` object (it may be `{}`); attribute names must be
//!   registered (`crate::model::attributes`). `backendType=[fake]` is added to every pool.
//!   `sizeBytes` is the pool's capacity (absent: 0).
//! - The backend name is `backendName`, else `instanceName`; one of them is required.
//!   Serial numbers are `["<instanceName>_SN"]`.
//! - `username` / `password` stand for array credentials: accepted, and never shown by
//!   `external_config`, `Debug` or any error message.
//! - Internal names are always `trident-<name>`: like Trident's fake, the driver ignores
//!   `storagePrefix` for names (it is still shown in `external_config`).
//!
//! # Test and benchmark knobs (storch extensions)
//!
//! - `latency`: the time every array call (every async trait method) takes before it runs.
//!   - `"0ms"` (the default): no delay and no timer at all.
//!   - a fixed duration in humantime syntax: `"10ms"`, `"1s"`, `"fixed:10ms"`.
//!   - `"lognormal:<median>"`: a lognormal distribution with that median and σ = 0.5
//!     ([`DEFAULT_LOGNORMAL_SIGMA`]). With σ = 0.5 the mean is 1.13 × median, p90 1.9 ×,
//!     p99 3.2 × and p99.9 4.7 ×. `"lognormal:<median>:<sigma>"` chooses σ (0 to 5). A sample
//!     is capped at 100 × the median.
//! - `failureRate`: a number from 0.0 to 1.0, the probability that a create or clone fails
//!   with `Unavailable` (retryable) before touching the array. 0.0 never fails, 1.0 always.
//! - `failPools`: `{"<pool>": "<message>"}`: every create or clone on that pool fails with
//!   `Other(<message>)`. The pools must be configured.
//! - `useCHAP`: `true` gives block volumes CHAP credentials in their access information (user
//!   `fake-chap-<instanceName>`, fixed initiator and target secrets), as a SAN array with
//!   CHAP would; for tests of what frontends do with them.
//! - `failDestroy`: `"<message>"`: every destroy of a volume the array holds fails with
//!   `Unavailable(<message>)` (retryable), as on an array that refuses deletes for a while;
//!   update the backend without it (with a `statePath`, so the volumes survive) to recover.
//! - `statePath`: a file where the fake array keeps its volumes, snapshots and the remaining
//!   capacity of each pool, so the array outlives the process. It is read when the driver is
//!   built (a missing file is an empty array) and rewritten after every mutation before the
//!   call returns `Ok`: temp file `<statePath>.tmp`, fsync, rename, fsync of the directory.
//!   A temp file left behind by a crash is ignored. The file belongs to one `instanceName`,
//!   and every pool holding a volume must still be configured. If a write fails, the call
//!   returns `Other` but its change stays in memory, like an array whose answer was lost; the
//!   next successful write includes it. Two drivers must not share a state file at once.
//!
//! The hot path (no latency, no statePath) is one uncontended mutex and the few allocations
//! the returned `VolumeInfo` needs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::config::{as_object, field, opt_str, wrong_type};
use super::{
    Attachment, CloneRequest, CommonConfig, CreateRequest, Discovery, DriverError, DriverResult,
    SnapshotInfo, StorageDriver, VolumeInfo,
};
use crate::model::{AccessInfo, Offer, PoolInfo, Protocol};

/// The `storageDriverName` of this driver.
pub const DRIVER_NAME: &str = "fake";

/// The smallest volume the fake array makes: 1 MiB.
pub const MIN_VOLUME_BYTES: u64 = 1 << 20;

/// σ of `latency: "lognormal:<median>"` when none is given.
pub const DEFAULT_LOGNORMAL_SIGMA: f64 = 0.5;

/// Access information the fake hands out (TEST-NET-1 addresses, as Trident's fake).
pub const NFS_SERVER_IP: &str = "192.0.2.1";
pub const ISCSI_TARGET_PORTAL: &str = "192.0.2.1";
pub const ISCSI_PORTAL: &str = "192.0.2.2";
pub const ISCSI_TARGET_IQN: &str = "iqn.2017-06.com.netapp:fake";

/// The version of the state file format.
const STATE_FORMAT: u32 = 1;

/// How long each array call takes (the `latency` knob).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Latency {
    None,
    Fixed(Duration),
    LogNormal { median: Duration, sigma: f64 },
}

impl Latency {
    /// Parses `0ms`, `10ms`, `fixed:10ms`, `lognormal:200ms`, `lognormal:200ms:0.8`.
    pub fn parse(s: &str) -> Result<Latency, String> {
        let s = s.trim();
        let duration = |d: &str| {
            humantime::parse_duration(d.trim())
                .map_err(|e| format!("{d:?} is not a duration such as 10ms ({e})"))
        };
        if let Some(rest) = s.strip_prefix("lognormal:") {
            let (median, sigma) = match rest.split_once(':') {
                Some((m, sg)) => {
                    let sigma: f64 = sg
                        .trim()
                        .parse()
                        .map_err(|_| format!("lognormal sigma {sg:?} is not a number"))?;
                    if !(0.0..=5.0).contains(&sigma) {
                        return Err(format!("lognormal sigma {sigma} is not between 0 and 5"));
                    }
                    (duration(m)?, sigma)
                }
                None => (duration(rest)?, DEFAULT_LOGNORMAL_SIGMA),
            };
            if median.is_zero() {
                return Ok(Latency::None);
            }
            return Ok(Latency::LogNormal { median, sigma });
        }
        let d = duration(s.strip_prefix("fixed:").unwrap_or(s))?;
        Ok(if d.is_zero() {
            Latency::None
        } else {
            Latency::Fixed(d)
        })
    }

    /// One delay, or `None` for no delay.
    pub fn sample(&self) -> Option<Duration> {
        match *self {
            Latency::None => None,
            Latency::Fixed(d) => Some(d),
            Latency::LogNormal { median, sigma } => {
                // Box–Muller: u1 in (0, 1], so ln(u1) is finite.
                let u1 = 1.0 - rand::random::<f64>();
                let u2 = rand::random::<f64>();
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                let factor = (sigma * z).exp().min(100.0);
                Some(median.mul_f64(factor))
            }
        }
    }
}

/// A credential from the config: kept, never shown.
#[derive(Clone)]
struct Secret(#[allow(dead_code)] String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

#[derive(Debug)]
struct Pool {
    /// Name, offers (with `backendType`) and configured capacity, as discovered.
    info: PoolInfo,
    size_bytes: u64,
    /// `failPools` message for this pool.
    fail: Option<String>,
}

/// The fake array's contents: one mutex around all of it.
#[derive(Debug, Default)]
struct ArrayState {
    /// Remaining bytes per pool, indexed like `FakeDriver::pools`.
    free: Vec<u64>,
    volumes: HashMap<String, Volume>,
    /// Bumped on every mutation when persisting; orders state-file writes.
    generation: u64,
}

#[derive(Debug, Clone)]
struct Volume {
    pool: usize,
    size_bytes: u64,
    /// `File` or `Block`: how the volume is served.
    protocol: Protocol,
    snapshots: Vec<Snapshot>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Snapshot {
    name: String,
    created_ms: u64,
    size_bytes: u64,
}

/// The state file, as written and read.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StateFile {
    format: u32,
    instance_name: String,
    pools: BTreeMap<String, PoolRecord>,
    volumes: BTreeMap<String, VolumeRecord>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PoolRecord {
    total_bytes: u64,
    free_bytes: u64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct VolumeRecord {
    pool: String,
    size_bytes: u64,
    protocol: Protocol,
    #[serde(default)]
    snapshots: Vec<Snapshot>,
}

/// Writes the state file atomically; writes are ordered by generation.
#[derive(Debug)]
struct Persister {
    path: PathBuf,
    tmp: PathBuf,
    dir: PathBuf,
    /// The generation last written.
    written: Mutex<u64>,
}

impl Persister {
    fn new(path: PathBuf) -> Persister {
        let mut tmp = path.clone().into_os_string();
        tmp.push(".tmp");
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Persister {
            path,
            tmp: PathBuf::from(tmp),
            dir,
            written: Mutex::new(0),
        }
    }

    /// Writes `bytes` unless a newer generation is already on disk (it includes this one).
    fn write(&self, generation: u64, bytes: &[u8]) -> std::io::Result<()> {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if generation <= *written {
            return Ok(());
        }
        let mut f = fs::File::create(&self.tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&self.tmp, &self.path)?;
        fs::File::open(&self.dir)?.sync_all()?;
        *written = generation;
        Ok(())
    }
}

/// A state write to do after the mutex is released.
struct Pending {
    generation: u64,
    bytes: Vec<u8>,
}

/// The fake array. Build it with [`FakeDriver::new`] or through `build_driver`.
pub struct FakeDriver {
    backend_name: String,
    instance_name: String,
    protocol: Protocol,
    storage_prefix: Option<String>,
    default_size_bytes: u64,
    pools: Vec<Pool>,
    pool_index: HashMap<String, usize>,
    latency: Latency,
    failure_rate: f64,
    /// `failDestroy` message.
    fail_destroy: Option<String>,
    /// `useCHAP`.
    chap: bool,
    // Kept as an array driver keeps its credentials; the fake never sends them anywhere.
    #[allow(dead_code)]
    username: Option<Secret>,
    #[allow(dead_code)]
    password: Option<Secret>,
    persister: Option<Arc<Persister>>,
    state: Mutex<ArrayState>,
}

impl std::fmt::Debug for FakeDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeDriver")
            .field("backend_name", &self.backend_name)
            .field("instance_name", &self.instance_name)
            .field("protocol", &self.protocol)
            .field(
                "pools",
                &self.pools.iter().map(|p| &p.info.name).collect::<Vec<_>>(),
            )
            .field("latency", &self.latency)
            .field("failure_rate", &self.failure_rate)
            .field("state_path", &self.persister.as_ref().map(|p| &p.path))
            .field("credentials", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl FakeDriver {
    /// Parses a whole fake backend config (common part included).
    pub fn new(doc: &Value) -> DriverResult<FakeDriver> {
        let common = CommonConfig::parse(doc)?;
        Self::from_config(doc, &common)
    }

    /// Builds the driver from a backend config whose common part is already parsed. Loads the
    /// state file when `statePath` is set; contacts nothing else.
    pub fn from_config(doc: &Value, common: &CommonConfig) -> DriverResult<FakeDriver> {
        let obj = as_object(doc)?;

        let protocol = match opt_str(obj, "protocol")? {
            None => Protocol::Any,
            Some(p) => Protocol::parse(p).ok_or_else(|| {
                DriverError::Invalid(format!(
                    "invalid value for protocol: {p:?} is not one of file, block or \"\""
                ))
            })?,
        };

        let instance_name = opt_str(obj, "instanceName")?
            .unwrap_or_default()
            .to_string();
        let backend_name = match (&common.backend_name, instance_name.as_str()) {
            (Some(b), _) => b.clone(),
            (None, "") => {
                return Err(DriverError::Invalid(
                    "the fake driver needs backendName or instanceName to name the backend"
                        .to_string(),
                ));
            }
            (None, i) => {
                crate::model::validate_name("instanceName", i)
                    .map_err(|e| DriverError::Invalid(e.to_string()))?;
                i.to_string()
            }
        };

        let mut pools = parse_pools(obj)?;
        let pool_index: HashMap<String, usize> = pools
            .iter()
            .enumerate()
            .map(|(i, p)| (p.info.name.clone(), i))
            .collect();

        let latency = match opt_str(obj, "latency")? {
            None => Latency::None,
            Some(s) => Latency::parse(s)
                .map_err(|e| DriverError::Invalid(format!("invalid value for latency: {e}")))?,
        };

        let failure_rate = match field(obj, "failureRate") {
            None | Some(Value::Null) => 0.0,
            Some(Value::Number(n)) => {
                let r = n.as_f64().unwrap_or(f64::NAN);
                if !(0.0..=1.0).contains(&r) {
                    return Err(DriverError::Invalid(format!(
                        "invalid value for failureRate: {r} is not between 0.0 and 1.0"
                    )));
                }
                r
            }
            Some(other) => return Err(wrong_type("failureRate", "a number", Some(other))),
        };

        match field(obj, "failPools") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (pool, msg) in m {
                    let Some(&i) = pool_index.get(pool) else {
                        return Err(DriverError::Invalid(format!(
                            "invalid value for failPools: pool {pool:?} is not configured"
                        )));
                    };
                    let Value::String(msg) = msg else {
                        return Err(wrong_type(
                            &format!("failPools.{pool}"),
                            "a string",
                            Some(msg),
                        ));
                    };
                    pools[i].fail = Some(msg.clone());
                }
            }
            Some(other) => return Err(wrong_type("failPools", "an object", Some(other))),
        }

        let fail_destroy = match field(obj, "failDestroy") {
            None | Some(Value::Null) => None,
            Some(Value::String(m)) => Some(m.clone()),
            Some(other) => return Err(wrong_type("failDestroy", "a string", Some(other))),
        };

        let chap = match field(obj, "useCHAP") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => return Err(wrong_type("useCHAP", "a boolean", Some(other))),
        };

        let username = opt_str(obj, "username")?.map(|s| Secret(s.to_string()));
        let password = opt_str(obj, "password")?.map(|s| Secret(s.to_string()));

        let persister = match opt_str(obj, "statePath")? {
            None => None,
            Some("") => {
                return Err(DriverError::Invalid(
                    "invalid value for statePath: must not be empty".to_string(),
                ));
            }
            Some(p) => Some(Arc::new(Persister::new(PathBuf::from(p)))),
        };

        let mut state = ArrayState {
            free: pools.iter().map(|p| p.size_bytes).collect(),
            ..ArrayState::default()
        };
        if let Some(p) = &persister {
            load_state(p, &instance_name, &pools, &pool_index, &mut state)?;
        }

        Ok(FakeDriver {
            backend_name,
            instance_name,
            protocol,
            storage_prefix: common.storage_prefix.clone(),
            default_size_bytes: common.default_size_bytes,
            pools,
            pool_index,
            latency,
            failure_rate,
            fail_destroy,
            chap,
            username,
            password,
            persister,
            state: Mutex::new(state),
        })
    }

    /// The backend name: `backendName`, else `instanceName`.
    pub fn backend_name(&self) -> &str {
        &self.backend_name
    }

    fn lock(&self) -> MutexGuard<'_, ArrayState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn delay(&self) {
        if let Some(d) = self.latency.sample() {
            tokio::time::sleep(d).await;
        }
    }

    fn inject_failure(&self) -> DriverResult<()> {
        if self.failure_rate > 0.0 && rand::random::<f64>() < self.failure_rate {
            return Err(DriverError::Unavailable(format!(
                "fake array {}: injected failure (failureRate {})",
                self.backend_name, self.failure_rate
            )));
        }
        Ok(())
    }

    fn pool_failure(&self, pool: usize) -> DriverResult<()> {
        match &self.pools[pool].fail {
            Some(msg) => Err(DriverError::Other(msg.clone())),
            None => Ok(()),
        }
    }

    /// How a new volume is served: the backend's protocol, else the requested one, else file.
    fn volume_protocol(&self, requested: Protocol) -> Protocol {
        match (self.protocol, requested) {
            (Protocol::Any, Protocol::Block) => Protocol::Block,
            (Protocol::Any, _) => Protocol::File,
            (p, _) => p,
        }
    }

    fn info(&self, name: &str, v: &Volume) -> VolumeInfo {
        VolumeInfo {
            internal_name: name.to_string(),
            pool: self.pools[v.pool].info.name.clone(),
            size_bytes: v.size_bytes,
            access: self.access(name, v.protocol),
        }
    }

    /// Records a mutation; with a state file, returns the bytes to write once unlocked.
    fn commit(&self, st: &mut ArrayState) -> Option<Pending> {
        self.persister.as_ref()?;
        st.generation += 1;
        Some(Pending {
            generation: st.generation,
            bytes: self.encode_state(st),
        })
    }

    fn encode_state(&self, st: &ArrayState) -> Vec<u8> {
        let file = StateFile {
            format: STATE_FORMAT,
            instance_name: self.instance_name.clone(),
            pools: self
                .pools
                .iter()
                .zip(&st.free)
                .map(|(p, free)| {
                    let record = PoolRecord {
                        total_bytes: p.size_bytes,
                        free_bytes: *free,
                    };
                    (p.info.name.clone(), record)
                })
                .collect(),
            volumes: st
                .volumes
                .iter()
                .map(|(name, v)| {
                    let record = VolumeRecord {
                        pool: self.pools[v.pool].info.name.clone(),
                        size_bytes: v.size_bytes,
                        protocol: v.protocol,
                        snapshots: v.snapshots.clone(),
                    };
                    (name.clone(), record)
                })
                .collect(),
        };
        // Plain data with string keys: serialising cannot fail.
        serde_json::to_vec_pretty(&file).unwrap_or_default()
    }

    /// Makes a mutation durable before the call returns.
    async fn persist(&self, pending: Option<Pending>) -> DriverResult<()> {
        let (Some(pending), Some(persister)) = (pending, &self.persister) else {
            return Ok(());
        };
        let persister = Arc::clone(persister);
        let result = tokio::task::spawn_blocking(move || {
            persister.write(pending.generation, &pending.bytes)
        })
        .await;
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(DriverError::Other(format!(
                "fake array {}: cannot write its state file: {e}",
                self.backend_name
            ))),
            Err(e) => Err(DriverError::Other(format!(
                "fake array {}: state file writer failed: {e}",
                self.backend_name
            ))),
        }
    }

    /// Checks the size and the pool's room, then takes the bytes.
    fn reserve(&self, free: &mut [u64], pool: usize, size: u64, name: &str) -> DriverResult<()> {
        let available = free[pool];
        if available < size {
            return Err(DriverError::Conflict(format!(
                "requested volume {name} is too large: {size} bytes requested, {available} bytes \
                 available in pool {}",
                self.pools[pool].info.name
            )));
        }
        free[pool] = available - size;
        Ok(())
    }
}

/// The CHAP secrets of `useCHAP` block volumes.
pub const CHAP_INITIATOR_SECRET: &str = "fake-initiator-secret";
pub const CHAP_TARGET_SECRET: &str = "fake-target-secret";

impl FakeDriver {
    fn access(&self, internal_name: &str, protocol: Protocol) -> AccessInfo {
        let mut access = access(internal_name, protocol);
        if self.chap && protocol == Protocol::Block {
            access.iscsi_username = format!("fake-chap-{}", self.instance_name);
            access.iscsi_initiator_secret = CHAP_INITIATOR_SECRET.to_string();
            access.iscsi_target_secret = CHAP_TARGET_SECRET.to_string();
        }
        access
    }
}

/// How a fake volume attaches: iSCSI when its access info names a target, else NFS.
pub fn attachment(access: &AccessInfo) -> Attachment {
    if access.iscsi_target_iqn.is_empty() {
        Attachment::Nfs
    } else {
        Attachment::Iscsi
    }
}

fn access(internal_name: &str, protocol: Protocol) -> AccessInfo {
    match protocol {
        Protocol::Block => AccessInfo {
            iscsi_target_portal: ISCSI_TARGET_PORTAL.to_string(),
            iscsi_portals: vec![ISCSI_PORTAL.to_string()],
            iscsi_target_iqn: ISCSI_TARGET_IQN.to_string(),
            iscsi_lun_number: 0,
            ..AccessInfo::default()
        },
        _ => AccessInfo {
            nfs_server_ip: NFS_SERVER_IP.to_string(),
            nfs_path: format!("/{internal_name}"),
            ..AccessInfo::default()
        },
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn check_name(field: &'static str, name: &str) -> DriverResult<()> {
    crate::model::validate_name(field, name).map_err(|e| DriverError::Invalid(e.to_string()))
}

fn not_found(name: &str) -> DriverError {
    DriverError::NotFound(format!("volume {name} not found"))
}

fn parse_pools(obj: &Map<String, Value>) -> DriverResult<Vec<Pool>> {
    let pools = match field(obj, "pools") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(m)) => m,
        Some(other) => return Err(wrong_type("pools", "an object", Some(other))),
    };
    let mut out = Vec::with_capacity(pools.len());
    for (name, pool) in pools {
        crate::model::validate_name("pool name", name)
            .map_err(|e| DriverError::Invalid(format!("invalid value for pools: {e}")))?;
        let Value::Object(pool) = pool else {
            return Err(wrong_type(
                &format!("pools.{name}"),
                "an object",
                Some(pool),
            ));
        };
        let mut offers = match field(pool, "attributes") {
            None | Some(Value::Null) => {
                return Err(DriverError::Invalid(format!(
                    "missing pools.{name}.attributes: every fake pool needs an attributes \
                     object (it may be {{}})"
                )));
            }
            Some(v @ Value::Object(_)) => {
                crate::model::attributes::parse_offers(v).map_err(|e| {
                    DriverError::Invalid(format!("invalid value for pools.{name}.attributes: {e}"))
                })?
            }
            Some(other) => {
                return Err(wrong_type(
                    &format!("pools.{name}.attributes"),
                    "an object",
                    Some(other),
                ));
            }
        };
        offers.insert(
            "backendType".to_string(),
            Offer::Strings(BTreeSet::from([DRIVER_NAME.to_string()])),
        );
        let size_bytes = match field(pool, "sizeBytes") {
            None | Some(Value::Null) => 0,
            Some(Value::Number(n)) if n.is_u64() => n.as_u64().unwrap_or_default(),
            Some(other) => {
                return Err(DriverError::Invalid(format!(
                    "invalid value for pools.{name}.sizeBytes: expected a non-negative integer, \
                     found {}",
                    super::config::json_type(other)
                )));
            }
        };
        out.push(Pool {
            info: PoolInfo {
                name: name.clone(),
                offers,
                total_bytes: Some(size_bytes),
            },
            size_bytes,
            fail: None,
        });
    }
    out.sort_by(|a, b| a.info.name.cmp(&b.info.name));
    Ok(out)
}

/// Reads the state file into `state`. A missing file is an empty array; the temp file is never
/// read.
fn load_state(
    p: &Persister,
    instance_name: &str,
    pools: &[Pool],
    pool_index: &HashMap<String, usize>,
    state: &mut ArrayState,
) -> DriverResult<()> {
    let path = p.path.display();
    let invalid = |msg: String| DriverError::Invalid(format!("invalid statePath {path}: {msg}"));
    if !p.dir.is_dir() {
        return Err(invalid(format!(
            "directory {} does not exist",
            p.dir.display()
        )));
    }
    let bytes = match fs::read(&p.path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(invalid(format!("cannot read it: {e}"))),
    };
    let file: StateFile = serde_json::from_slice(&bytes)
        .map_err(|e| invalid(format!("not a fake array state file: {e}")))?;
    if file.format != STATE_FORMAT {
        return Err(invalid(format!(
            "state file format {} is not supported (expected {STATE_FORMAT})",
            file.format
        )));
    }
    if file.instance_name != instance_name {
        return Err(invalid(format!(
            "it belongs to fake instance {:?}, not {instance_name:?}",
            file.instance_name
        )));
    }
    let mut used = vec![0u64; pools.len()];
    for (name, v) in file.volumes {
        let Some(&pool) = pool_index.get(&v.pool) else {
            return Err(invalid(format!(
                "volume {name} is in pool {}, which is not configured",
                v.pool
            )));
        };
        used[pool] = used[pool].saturating_add(v.size_bytes);
        let protocol = if v.protocol == Protocol::Block {
            Protocol::Block
        } else {
            Protocol::File
        };
        state.volumes.insert(
            name,
            Volume {
                pool,
                size_bytes: v.size_bytes,
                protocol,
                snapshots: v.snapshots,
            },
        );
    }
    for (i, pool) in pools.iter().enumerate() {
        // What the array had used stays used, even if the configured size changed.
        let used = match file.pools.get(&pool.info.name) {
            Some(r) => r.total_bytes.saturating_sub(r.free_bytes),
            None => used[i],
        };
        state.free[i] = pool.size_bytes.saturating_sub(used);
    }
    Ok(())
}

#[async_trait]
impl StorageDriver for FakeDriver {
    fn driver_name(&self) -> &'static str {
        DRIVER_NAME
    }

    fn external_config(&self) -> Value {
        let st = self.lock();
        let pools: Map<String, Value> = self
            .pools
            .iter()
            .zip(&st.free)
            .map(|(p, free)| {
                let attributes = serde_json::to_value(&p.info.offers).unwrap_or(Value::Null);
                (
                    p.info.name.clone(),
                    json!({"attributes": attributes, "sizeBytes": free}),
                )
            })
            .collect();
        drop(st);
        json!({
            "version": 1,
            "storageDriverName": DRIVER_NAME,
            "storagePrefix": self.storage_prefix,
            "serialNumbers": [format!("{}_SN", self.instance_name)],
            "protocol": self.protocol.as_str(),
            "pools": pools,
            "InstanceName": self.instance_name,
        })
    }

    fn internal_name(&self, volume_name: &str) -> String {
        format!("trident-{volume_name}")
    }

    async fn discover(&self) -> DriverResult<Discovery> {
        self.delay().await;
        let free_bytes = {
            let st = self.lock();
            self.pools
                .iter()
                .zip(&st.free)
                .map(|(p, f)| (p.info.name.clone(), *f))
                .collect()
        };
        Ok(Discovery {
            backend_name: self.backend_name.clone(),
            protocol: self.protocol,
            pools: self.pools.iter().map(|p| p.info.clone()).collect(),
            free_bytes,
        })
    }

    async fn create(&self, req: &CreateRequest) -> DriverResult<VolumeInfo> {
        self.delay().await;
        self.inject_failure()?;
        if req.pool.is_empty() {
            return Err(DriverError::Invalid(
                "no pool specified for the volume".to_string(),
            ));
        }
        let Some(&pool) = self.pool_index.get(&req.pool) else {
            return Err(DriverError::Invalid(format!(
                "pool {} does not exist on fake array {}",
                req.pool, self.backend_name
            )));
        };
        self.pool_failure(pool)?;
        check_name("internalName", &req.internal_name)?;
        let size = if req.size_bytes == 0 {
            self.default_size_bytes
        } else {
            req.size_bytes
        };
        if size < MIN_VOLUME_BYTES {
            return Err(DriverError::Invalid(format!(
                "requested volume size ({size} bytes) is too small; the minimum volume size is \
                 {MIN_VOLUME_BYTES} bytes (1 MiB)"
            )));
        }
        let volume = Volume {
            pool,
            size_bytes: size,
            protocol: self.volume_protocol(req.config.protocol),
            snapshots: Vec::new(),
        };
        let info = self.info(&req.internal_name, &volume);
        let pending = {
            let mut guard = self.lock();
            let st = &mut *guard;
            if st.volumes.contains_key(&req.internal_name) {
                return Err(DriverError::AlreadyExists(format!(
                    "volume {} already exists",
                    req.internal_name
                )));
            }
            self.reserve(&mut st.free, pool, size, &req.internal_name)?;
            st.volumes.insert(req.internal_name.clone(), volume);
            self.commit(st)
        };
        self.persist(pending).await?;
        Ok(info)
    }

    async fn clone_volume(&self, req: &CloneRequest) -> DriverResult<VolumeInfo> {
        self.delay().await;
        self.inject_failure()?;
        check_name("internalName", &req.internal_name)?;
        let (info, pending) = {
            let mut guard = self.lock();
            let st = &mut *guard;
            if st.volumes.contains_key(&req.internal_name) {
                return Err(DriverError::AlreadyExists(format!(
                    "volume {} already exists",
                    req.internal_name
                )));
            }
            let Some(source) = st.volumes.get(&req.source_internal_name) else {
                return Err(DriverError::NotFound(format!(
                    "source volume {} not found",
                    req.source_internal_name
                )));
            };
            let size = match &req.source_snapshot {
                None => source.size_bytes,
                Some(snap) => source
                    .snapshots
                    .iter()
                    .find(|s| &s.name == snap)
                    .map(|s| s.size_bytes)
                    .ok_or_else(|| {
                        DriverError::NotFound(format!(
                            "snapshot {snap} of volume {} not found",
                            req.source_internal_name
                        ))
                    })?,
            };
            let volume = Volume {
                pool: source.pool,
                size_bytes: size,
                protocol: source.protocol,
                snapshots: Vec::new(),
            };
            self.pool_failure(volume.pool)?;
            self.reserve(&mut st.free, volume.pool, size, &req.internal_name)?;
            let info = self.info(&req.internal_name, &volume);
            st.volumes.insert(req.internal_name.clone(), volume);
            (info, self.commit(st))
        };
        self.persist(pending).await?;
        Ok(info)
    }

    async fn get(&self, internal_name: &str) -> DriverResult<Option<VolumeInfo>> {
        self.delay().await;
        let st = self.lock();
        Ok(st
            .volumes
            .get(internal_name)
            .map(|v| self.info(internal_name, v)))
    }

    async fn destroy(&self, internal_name: &str) -> DriverResult<()> {
        self.delay().await;
        let pending = {
            let mut guard = self.lock();
            let st = &mut *guard;
            if !st.volumes.contains_key(internal_name) {
                return Ok(());
            }
            if let Some(msg) = &self.fail_destroy {
                return Err(DriverError::Unavailable(msg.clone()));
            }
            let Some(v) = st.volumes.remove(internal_name) else {
                return Ok(());
            };
            st.free[v.pool] = st.free[v.pool].saturating_add(v.size_bytes);
            self.commit(st)
        };
        self.persist(pending).await
    }

    async fn resize(&self, internal_name: &str, size_bytes: u64) -> DriverResult<()> {
        self.delay().await;
        let pending = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let Some(v) = st.volumes.get_mut(internal_name) else {
                return Err(not_found(internal_name));
            };
            if size_bytes < v.size_bytes {
                return Err(DriverError::Invalid(format!(
                    "cannot shrink volume {internal_name} from {} to {size_bytes} bytes",
                    v.size_bytes
                )));
            }
            if size_bytes == v.size_bytes {
                return Ok(());
            }
            let grow = size_bytes - v.size_bytes;
            self.reserve(&mut st.free, v.pool, grow, internal_name)?;
            v.size_bytes = size_bytes;
            self.commit(st)
        };
        self.persist(pending).await
    }

    async fn create_snapshot(
        &self,
        internal_name: &str,
        snapshot: &str,
    ) -> DriverResult<SnapshotInfo> {
        self.delay().await;
        check_name("snapshot name", snapshot)?;
        let (info, pending) = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let Some(v) = st.volumes.get_mut(internal_name) else {
                return Err(not_found(internal_name));
            };
            if v.snapshots.iter().any(|s| s.name == snapshot) {
                return Err(DriverError::AlreadyExists(format!(
                    "snapshot {snapshot} of volume {internal_name} already exists"
                )));
            }
            let snap = Snapshot {
                name: snapshot.to_string(),
                created_ms: now_ms(),
                size_bytes: v.size_bytes,
            };
            let info = SnapshotInfo {
                name: snap.name.clone(),
                volume_internal_name: internal_name.to_string(),
                created_ms: snap.created_ms,
                size_bytes: snap.size_bytes,
            };
            v.snapshots.push(snap);
            (info, self.commit(st))
        };
        self.persist(pending).await?;
        Ok(info)
    }

    async fn list_snapshots(&self, internal_name: &str) -> DriverResult<Vec<SnapshotInfo>> {
        self.delay().await;
        let st = self.lock();
        let v = st
            .volumes
            .get(internal_name)
            .ok_or_else(|| not_found(internal_name))?;
        Ok(v.snapshots
            .iter()
            .map(|s| SnapshotInfo {
                name: s.name.clone(),
                volume_internal_name: internal_name.to_string(),
                created_ms: s.created_ms,
                size_bytes: s.size_bytes,
            })
            .collect())
    }

    async fn delete_snapshot(&self, internal_name: &str, snapshot: &str) -> DriverResult<()> {
        self.delay().await;
        let pending = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let Some(v) = st.volumes.get_mut(internal_name) else {
                return Ok(());
            };
            let Some(i) = v.snapshots.iter().position(|s| s.name == snapshot) else {
                return Ok(());
            };
            v.snapshots.remove(i);
            self.commit(st)
        };
        self.persist(pending).await
    }

    async fn list_volumes(&self) -> DriverResult<Vec<VolumeInfo>> {
        self.delay().await;
        let mut out: Vec<VolumeInfo> = {
            let st = self.lock();
            st.volumes
                .iter()
                .map(|(name, v)| self.info(name, v))
                .collect()
        };
        out.sort_by(|a, b| a.internal_name.cmp(&b.internal_name));
        Ok(out)
    }

    async fn access_info(&self, internal_name: &str) -> DriverResult<AccessInfo> {
        self.delay().await;
        let st = self.lock();
        let v = st
            .volumes
            .get(internal_name)
            .ok_or_else(|| not_found(internal_name))?;
        Ok(self.access(internal_name, v.protocol))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;
    use crate::drivers::conformance::{self, ConformanceOptions};
    use crate::model::VolumeConfig;

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    /// A fake config with pools `p1` (10 GiB, snapshots offered) and `p2` (1 GiB), plus
    /// `extra` merged over the top level.
    fn cfg(extra: Value) -> Value {
        let mut doc = json!({
            "version": 1,
            "storageDriverName": "fake",
            "instanceName": "fake1",
            "protocol": "file",
            "pools": {
                "p1": {"attributes": {"snapshots": {"offer": true}, "media": {"offer": ["ssd"]}},
                       "sizeBytes": 10 * GIB},
                "p2": {"attributes": {}, "sizeBytes": GIB},
            },
        });
        if let (Value::Object(d), Value::Object(e)) = (&mut doc, extra) {
            d.extend(e);
        }
        doc
    }

    fn driver(extra: Value) -> FakeDriver {
        FakeDriver::new(&cfg(extra)).unwrap()
    }

    fn invalid(doc: Value) -> String {
        match FakeDriver::new(&doc) {
            Err(DriverError::Invalid(msg)) => msg,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    fn req(name: &str, pool: &str, size: u64) -> CreateRequest {
        CreateRequest {
            internal_name: name.to_string(),
            pool: pool.to_string(),
            size_bytes: size,
            config: VolumeConfig::default(),
            requests: BTreeMap::new(),
        }
    }

    fn clone_req(name: &str, source: &str, snap: Option<&str>) -> CloneRequest {
        CloneRequest {
            internal_name: name.to_string(),
            source_internal_name: source.to_string(),
            source_snapshot: snap.map(str::to_string),
            config: VolumeConfig::default(),
        }
    }

    async fn free(d: &FakeDriver, pool: &str) -> u64 {
        d.discover().await.unwrap().free_bytes[pool]
    }

    // ---- config ----

    #[test]
    fn backend_name_and_serials() {
        let d = driver(json!({}));
        assert_eq!(d.backend_name(), "fake1");
        let d = driver(json!({"backendName": "custom"}));
        assert_eq!(d.backend_name(), "custom");
        assert_eq!(d.external_config()["serialNumbers"], json!(["fake1_SN"]));
        // backendName alone is enough.
        let mut doc = cfg(json!({"backendName": "b"}));
        doc.as_object_mut().unwrap().remove("instanceName");
        assert_eq!(FakeDriver::new(&doc).unwrap().backend_name(), "b");
        // Neither: the error names both fields.
        let msg = invalid(cfg(json!({"instanceName": ""})));
        assert!(
            msg.contains("backendName") && msg.contains("instanceName"),
            "{msg}"
        );
        let msg = invalid(cfg(json!({"instanceName": "a/b"})));
        assert!(msg.contains("instanceName"), "{msg}");
        let msg = invalid(cfg(json!({"instanceName": 3})));
        assert!(msg.contains("instanceName"), "{msg}");
    }

    #[test]
    fn protocol_config() {
        for (p, want) in [
            ("file", Protocol::File),
            ("block", Protocol::Block),
            ("", Protocol::Any),
        ] {
            assert_eq!(driver(json!({"protocol": p})).protocol, want);
        }
        let mut doc = cfg(json!({}));
        doc.as_object_mut().unwrap().remove("protocol");
        assert_eq!(FakeDriver::new(&doc).unwrap().protocol, Protocol::Any);
        let msg = invalid(cfg(json!({"protocol": "nfs"})));
        assert!(msg.contains("protocol"), "{msg}");
        let msg = invalid(cfg(json!({"protocol": 1})));
        assert!(msg.contains("protocol"), "{msg}");
    }

    #[test]
    fn pool_config_errors_name_the_field() {
        let msg = invalid(cfg(json!({"pools": {"p": {"sizeBytes": 5}}})));
        assert!(msg.contains("pools.p.attributes"), "{msg}");
        let msg = invalid(cfg(
            json!({"pools": {"p": {"attributes": [], "sizeBytes": 5}}}),
        ));
        assert!(msg.contains("pools.p.attributes"), "{msg}");
        let msg = invalid(cfg(
            json!({"pools": {"p": {"attributes": {"colour": {"offer": true}}}}}),
        ));
        assert!(
            msg.contains("pools.p.attributes") && msg.contains("colour"),
            "{msg}"
        );
        let msg = invalid(cfg(
            json!({"pools": {"p": {"attributes": {"snapshots": {"min": 1, "max": 2}}}}}),
        ));
        assert!(
            msg.contains("pools.p.attributes") && msg.contains("snapshots"),
            "{msg}"
        );
        let msg = invalid(cfg(
            json!({"pools": {"p": {"attributes": {}, "sizeBytes": -1}}}),
        ));
        assert!(msg.contains("pools.p.sizeBytes"), "{msg}");
        let msg = invalid(cfg(
            json!({"pools": {"p": {"attributes": {}, "sizeBytes": "1G"}}}),
        ));
        assert!(msg.contains("pools.p.sizeBytes"), "{msg}");
        let msg = invalid(cfg(json!({"pools": {"p": 5}})));
        assert!(msg.contains("pools.p"), "{msg}");
        let msg = invalid(cfg(json!({"pools": []})));
        assert!(msg.contains("pools"), "{msg}");
        let msg = invalid(cfg(json!({"pools": {"a/b": {"attributes": {}}}})));
        assert!(msg.contains("pool name"), "{msg}");
        let msg = invalid(cfg(json!({"pools": {"..": {"attributes": {}}}})));
        assert!(msg.contains("pool name"), "{msg}");
    }

    #[test]
    fn pools_without_size_or_at_all() {
        let d = driver(json!({"pools": {"p": {"attributes": {}}}}));
        assert_eq!(d.pools[0].size_bytes, 0);
        let d = driver(json!({"pools": null}));
        assert!(d.pools.is_empty());
    }

    #[test]
    fn knob_errors_name_the_field() {
        for (extra, field) in [
            (json!({"latency": "soon"}), "latency"),
            (json!({"latency": 10}), "latency"),
            (json!({"latency": "lognormal:200ms:x"}), "latency"),
            (json!({"latency": "lognormal:200ms:-1"}), "latency"),
            (json!({"failureRate": 1.5}), "failureRate"),
            (json!({"failureRate": -0.1}), "failureRate"),
            (json!({"failureRate": "0.5"}), "failureRate"),
            (json!({"failPools": {"nope": "x"}}), "failPools"),
            (json!({"failPools": {"p1": 5}}), "failPools.p1"),
            (json!({"failPools": ["p1"]}), "failPools"),
            (json!({"statePath": 5}), "statePath"),
            (json!({"statePath": ""}), "statePath"),
            (
                json!({"statePath": "/nonexistent-dir-for-storch/state.json"}),
                "statePath",
            ),
            (json!({"username": 5}), "username"),
            (json!({"password": false}), "password"),
        ] {
            let msg = invalid(cfg(extra.clone()));
            assert!(msg.contains(field), "{extra}: {msg}");
        }
    }

    #[test]
    fn latency_parsing_and_sampling() {
        assert_eq!(Latency::parse("0ms").unwrap(), Latency::None);
        assert_eq!(Latency::parse("0s").unwrap(), Latency::None);
        assert_eq!(
            Latency::parse("10ms").unwrap(),
            Latency::Fixed(Duration::from_millis(10))
        );
        assert_eq!(
            Latency::parse("fixed:1s").unwrap(),
            Latency::Fixed(Duration::from_secs(1))
        );
        assert_eq!(
            Latency::parse("lognormal:200ms").unwrap(),
            Latency::LogNormal {
                median: Duration::from_millis(200),
                sigma: 0.5
            }
        );
        assert_eq!(
            Latency::parse("lognormal:200ms:0.8").unwrap(),
            Latency::LogNormal {
                median: Duration::from_millis(200),
                sigma: 0.8
            }
        );
        assert_eq!(Latency::parse("lognormal:0ms").unwrap(), Latency::None);
        assert!(Latency::parse("lognormal:").is_err());
        assert!(Latency::parse("ten").is_err());
        assert_eq!(Latency::None.sample(), None);
        assert_eq!(
            Latency::Fixed(Duration::from_millis(3)).sample(),
            Some(Duration::from_millis(3))
        );
        // The lognormal's sample median is close to the configured median (a statistical check
        // on the sampled values, no clock involved).
        let l = Latency::parse("lognormal:200ms").unwrap();
        let mut samples: Vec<Duration> = (0..4001).map(|_| l.sample().unwrap()).collect();
        samples.sort();
        let median = samples[2000].as_secs_f64();
        assert!((0.17..0.235).contains(&median), "sample median {median}");
        assert!(
            samples
                .iter()
                .all(|s| *s <= Duration::from_millis(200) * 100)
        );
        assert!(samples[0] < samples[4000], "no spread");
    }

    #[tokio::test]
    async fn latency_is_applied() {
        let d = driver(json!({"latency": "5ms"}));
        let start = std::time::Instant::now();
        d.create(&req("v", "p1", GIB)).await.unwrap();
        // Loose: the call slept at least once (no upper bound).
        assert!(start.elapsed() >= Duration::from_millis(5));
        let d = driver(json!({"latency": "lognormal:1ms"}));
        d.create(&req("v", "p1", GIB)).await.unwrap();
        assert!(d.get("v").await.unwrap().is_some());
    }

    #[test]
    fn keys_are_case_insensitive() {
        let d = FakeDriver::new(&json!({
            "Version": 1, "StorageDriverName": "fake", "InstanceName": "i",
            "Pools": {"p": {"Attributes": {}, "SizeBytes": 5}}, "Protocol": "block",
        }))
        .unwrap();
        assert_eq!(d.backend_name(), "i");
        assert_eq!(d.pools[0].size_bytes, 5);
        assert_eq!(d.protocol, Protocol::Block);
    }

    #[tokio::test]
    async fn secrets_are_never_shown() {
        let canary_user = "canary-user-7731";
        let canary = "canary-password-9917";
        let d = driver(json!({"username": canary_user, "password": canary}));
        let shown = d.external_config().to_string();
        assert!(
            !shown.contains(canary) && !shown.contains(canary_user),
            "{shown}"
        );
        let debug = format!("{d:?}");
        assert!(
            !debug.contains(canary) && !debug.contains(canary_user),
            "{debug}"
        );
        let mut errors = Vec::new();
        errors.push(d.create(&req("v", "nope", GIB)).await.unwrap_err());
        errors.push(d.create(&req("v", "p2", 100 * GIB)).await.unwrap_err());
        errors.push(d.access_info("x").await.unwrap_err());
        for e in &errors {
            assert!(!format!("{e} {e:?}").contains(canary));
        }
        // Config errors do not echo values either.
        let msg = invalid(cfg(json!({"password": canary, "failureRate": "x"})));
        assert!(!msg.contains(canary), "{msg}");
        let msg = invalid(cfg(json!({"password": [canary]})));
        assert!(!msg.contains(canary), "{msg}");
    }

    // ---- behaviour ----

    #[test]
    fn internal_name_ignores_storage_prefix() {
        let d = driver(json!({"storagePrefix": "custom_"}));
        assert_eq!(d.internal_name("pvc-1"), "trident-pvc-1");
        assert_eq!(d.internal_name("a.b_c"), "trident-a.b_c");
        assert_eq!(d.external_config()["storagePrefix"], "custom_");
        assert_eq!(
            driver(json!({})).external_config()["storagePrefix"],
            Value::Null
        );
    }

    #[tokio::test]
    async fn discover_reports_pools_offers_and_capacity() {
        let d = driver(json!({}));
        let disc = d.discover().await.unwrap();
        assert_eq!(disc.backend_name, "fake1");
        assert_eq!(disc.protocol, Protocol::File);
        let names: Vec<&str> = disc.pools.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["p1", "p2"]);
        let p1 = &disc.pools[0];
        assert_eq!(p1.total_bytes, Some(10 * GIB));
        assert_eq!(
            p1.offers["backendType"],
            Offer::Strings(BTreeSet::from(["fake".to_string()]))
        );
        assert_eq!(p1.offers["snapshots"], Offer::Bool(true));
        assert_eq!(
            p1.offers["media"],
            Offer::Strings(BTreeSet::from(["ssd".to_string()]))
        );
        assert_eq!(disc.pools[1].offers.len(), 1);
        assert_eq!(disc.free_bytes["p1"], 10 * GIB);
        d.create(&req("v", "p1", GIB)).await.unwrap();
        let disc = d.discover().await.unwrap();
        assert_eq!(disc.free_bytes["p1"], 9 * GIB);
        assert_eq!(
            disc.pools[0].total_bytes,
            Some(10 * GIB),
            "total stays the configured size"
        );
    }

    #[test]
    fn configured_backend_type_is_overridden() {
        let d = driver(
            json!({"pools": {"p": {"attributes": {"backendType": {"offer": ["ontap-nas"]}}}}}),
        );
        assert_eq!(
            d.pools[0].info.offers["backendType"],
            Offer::Strings(BTreeSet::from(["fake".to_string()]))
        );
    }

    #[tokio::test]
    async fn external_config_shape() {
        let d = driver(json!({"backendName": "b", "password": "secret"}));
        d.create(&req("v", "p2", 256 * MIB)).await.unwrap();
        let ext = d.external_config();
        assert_eq!(
            ext,
            json!({
                "version": 1,
                "storageDriverName": "fake",
                "storagePrefix": null,
                "serialNumbers": ["fake1_SN"],
                "protocol": "file",
                "pools": {
                    "p1": {"attributes": {"backendType": {"offer": ["fake"]},
                                          "media": {"offer": ["ssd"]},
                                          "snapshots": {"offer": true}},
                           "sizeBytes": 10 * GIB},
                    "p2": {"attributes": {"backendType": {"offer": ["fake"]}},
                           "sizeBytes": GIB - 256 * MIB},
                },
                "InstanceName": "fake1",
            })
        );
    }

    #[tokio::test]
    async fn create_get_destroy() {
        let d = driver(json!({}));
        assert_eq!(d.get("trident-v").await.unwrap(), None);
        let info = d.create(&req("trident-v", "p1", 2 * GIB)).await.unwrap();
        assert_eq!(
            info,
            VolumeInfo {
                internal_name: "trident-v".into(),
                pool: "p1".into(),
                size_bytes: 2 * GIB,
                access: AccessInfo {
                    nfs_server_ip: "192.0.2.1".into(),
                    nfs_path: "/trident-v".into(),
                    ..AccessInfo::default()
                },
            }
        );
        assert_eq!(d.get("trident-v").await.unwrap(), Some(info.clone()));
        assert_eq!(free(&d, "p1").await, 8 * GIB);
        match d.create(&req("trident-v", "p2", GIB)).await {
            Err(DriverError::AlreadyExists(msg)) => assert!(msg.contains("trident-v"), "{msg}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            free(&d, "p2").await,
            GIB,
            "a duplicate create took no capacity"
        );
        assert_eq!(d.list_volumes().await.unwrap(), vec![info]);
        d.destroy("trident-v").await.unwrap();
        d.destroy("trident-v").await.unwrap();
        assert_eq!(d.get("trident-v").await.unwrap(), None);
        assert_eq!(free(&d, "p1").await, 10 * GIB);
        assert!(d.list_volumes().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn create_size_rules() {
        let d = driver(json!({"defaults": {"size": "300M"}}));
        // 0 means defaults.size.
        let v = d.create(&req("zero", "p2", 0)).await.unwrap();
        assert_eq!(v.size_bytes, 300 * MIB);
        // Exactly 1 MiB is fine, one byte less is not.
        assert_eq!(
            d.create(&req("min", "p2", MIB)).await.unwrap().size_bytes,
            MIB
        );
        match d.create(&req("small", "p2", MIB - 1)).await {
            Err(DriverError::Invalid(msg)) => assert!(msg.contains("too small"), "{msg}"),
            other => panic!("{other:?}"),
        }
        // The rest of p2 fits exactly; one more byte does not.
        let left = free(&d, "p2").await;
        match d.create(&req("big", "p2", left + 1)).await {
            Err(DriverError::Conflict(msg)) => {
                assert!(msg.contains("p2") && msg.contains("too large"), "{msg}")
            }
            other => panic!("{other:?}"),
        }
        d.create(&req("rest", "p2", left)).await.unwrap();
        assert_eq!(free(&d, "p2").await, 0);
        assert!(matches!(
            d.create(&req("more", "p2", MIB)).await,
            Err(DriverError::Conflict(_))
        ));
        // Default size 1 GiB when defaults are absent.
        let d = driver(json!({}));
        assert_eq!(
            d.create(&req("zero", "p1", 0)).await.unwrap().size_bytes,
            GIB
        );
    }

    #[tokio::test]
    async fn create_pool_and_name_rules() {
        let d = driver(json!({}));
        assert!(matches!(
            d.create(&req("v", "", GIB)).await,
            Err(DriverError::Invalid(_))
        ));
        match d.create(&req("v", "p3", GIB)).await {
            Err(DriverError::Invalid(msg)) => assert!(msg.contains("p3"), "{msg}"),
            other => panic!("{other:?}"),
        }
        for bad in ["", "a/b", "..", "a\nb"] {
            assert!(
                matches!(
                    d.create(&req(bad, "p1", GIB)).await,
                    Err(DriverError::Invalid(_))
                ),
                "{bad:?}"
            );
        }
        assert!(d.list_volumes().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn access_info_per_protocol() {
        let block = AccessInfo {
            iscsi_target_portal: "192.0.2.1".into(),
            iscsi_portals: vec!["192.0.2.2".into()],
            iscsi_target_iqn: "iqn.2017-06.com.netapp:fake".into(),
            iscsi_lun_number: 0,
            ..AccessInfo::default()
        };
        let d = driver(json!({"protocol": "block"}));
        let v = d.create(&req("b", "p1", GIB)).await.unwrap();
        assert_eq!(v.access, block);
        assert_eq!(d.access_info("b").await.unwrap(), block);
        assert!(matches!(
            d.access_info("nope").await,
            Err(DriverError::NotFound(_))
        ));

        // A backend of protocol "" serves each volume as its config asks (file when open).
        let d = driver(json!({"protocol": ""}));
        let mut r = req("b", "p1", GIB);
        r.config.protocol = Protocol::Block;
        assert_eq!(d.create(&r).await.unwrap().access, block);
        let f = d.create(&req("f", "p1", GIB)).await.unwrap();
        assert_eq!(f.access.nfs_path, "/f");
        assert_eq!(f.access.nfs_server_ip, "192.0.2.1");
        // A clone keeps its source's protocol.
        let c = d.clone_volume(&clone_req("c", "b", None)).await.unwrap();
        assert_eq!(c.access, block);
    }

    #[tokio::test]
    async fn clones() {
        let d = driver(json!({}));
        d.create(&req("src", "p2", 300 * MIB)).await.unwrap();
        let c = d.clone_volume(&clone_req("c1", "src", None)).await.unwrap();
        assert_eq!((c.pool.as_str(), c.size_bytes), ("p2", 300 * MIB));
        assert_eq!(c.access.nfs_path, "/c1");
        assert_eq!(free(&d, "p2").await, GIB - 600 * MIB);

        // From a snapshot: the snapshot's size, even after the source grew.
        d.create_snapshot("src", "s1").await.unwrap();
        d.resize("src", 400 * MIB).await.unwrap();
        let c2 = d
            .clone_volume(&clone_req("c2", "src", Some("s1")))
            .await
            .unwrap();
        assert_eq!(c2.size_bytes, 300 * MIB);
        assert_eq!(free(&d, "p2").await, GIB - 1000 * MIB);

        assert!(matches!(
            d.clone_volume(&clone_req("c3", "missing", None)).await,
            Err(DriverError::NotFound(_))
        ));
        match d.clone_volume(&clone_req("c3", "src", Some("nope"))).await {
            Err(DriverError::NotFound(msg)) => assert!(msg.contains("nope"), "{msg}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            d.clone_volume(&clone_req("c1", "src", None)).await,
            Err(DriverError::AlreadyExists(_))
        ));
        // No room left for another 400 MiB clone.
        assert!(matches!(
            d.clone_volume(&clone_req("c3", "src", None)).await,
            Err(DriverError::Conflict(_))
        ));
        assert_eq!(d.get("c3").await.unwrap(), None);
        // A clone is independent of its source.
        d.destroy("src").await.unwrap();
        assert!(d.get("c2").await.unwrap().is_some());
    }

    #[tokio::test]
    async fn snapshots() {
        let d = driver(json!({}));
        assert!(matches!(
            d.create_snapshot("v", "s").await,
            Err(DriverError::NotFound(_))
        ));
        assert!(matches!(
            d.list_snapshots("v").await,
            Err(DriverError::NotFound(_))
        ));
        d.delete_snapshot("v", "s").await.unwrap();

        d.create(&req("v", "p1", GIB)).await.unwrap();
        let s = d.create_snapshot("v", "s1").await.unwrap();
        assert_eq!(
            (
                s.name.as_str(),
                s.volume_internal_name.as_str(),
                s.size_bytes
            ),
            ("s1", "v", GIB)
        );
        assert!(s.created_ms > 0);
        assert!(matches!(
            d.create_snapshot("v", "s1").await,
            Err(DriverError::AlreadyExists(_))
        ));
        assert!(matches!(
            d.create_snapshot("v", "a/b").await,
            Err(DriverError::Invalid(_))
        ));
        d.create_snapshot("v", "s2").await.unwrap();
        let names: Vec<String> = d
            .list_snapshots("v")
            .await
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["s1", "s2"]);
        d.delete_snapshot("v", "s1").await.unwrap();
        d.delete_snapshot("v", "s1").await.unwrap();
        assert_eq!(d.list_snapshots("v").await.unwrap().len(), 1);
        // Snapshots take no pool capacity, and go with their volume.
        assert_eq!(free(&d, "p1").await, 9 * GIB);
        d.destroy("v").await.unwrap();
        d.create(&req("v", "p1", GIB)).await.unwrap();
        assert!(d.list_snapshots("v").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn resize() {
        let d = driver(json!({}));
        assert!(matches!(
            d.resize("v", GIB).await,
            Err(DriverError::NotFound(_))
        ));
        d.create(&req("v", "p2", 256 * MIB)).await.unwrap();
        d.resize("v", 512 * MIB).await.unwrap();
        assert_eq!(d.get("v").await.unwrap().unwrap().size_bytes, 512 * MIB);
        assert_eq!(free(&d, "p2").await, 512 * MIB);
        d.resize("v", 512 * MIB).await.unwrap();
        match d.resize("v", 100 * MIB).await {
            Err(DriverError::Invalid(msg)) => assert!(msg.contains("shrink"), "{msg}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            d.resize("v", GIB + 1).await,
            Err(DriverError::Conflict(_))
        ));
        assert_eq!(d.get("v").await.unwrap().unwrap().size_bytes, 512 * MIB);
        d.resize("v", GIB).await.unwrap();
        assert_eq!(free(&d, "p2").await, 0);
        d.destroy("v").await.unwrap();
        assert_eq!(free(&d, "p2").await, GIB);
    }

    #[tokio::test]
    async fn list_volumes_is_sorted() {
        let d = driver(json!({}));
        for n in ["c", "a", "b"] {
            d.create(&req(n, "p1", GIB)).await.unwrap();
        }
        let names: Vec<String> = d
            .list_volumes()
            .await
            .unwrap()
            .into_iter()
            .map(|v| v.internal_name)
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
    }

    // ---- failure knobs ----

    #[tokio::test]
    async fn failure_rate_one_always_fails() {
        let d = driver(json!({"failureRate": 1.0}));
        for i in 0..50 {
            let e = d
                .create(&req(&format!("v{i}"), "p1", GIB))
                .await
                .unwrap_err();
            assert!(matches!(e, DriverError::Unavailable(_)), "{e:?}");
            assert!(e.is_retryable());
        }
        assert!(d.list_volumes().await.unwrap().is_empty());
        assert_eq!(free(&d, "p1").await, 10 * GIB);
        // Clones fail too; other calls do not.
        let d2 = driver(json!({}));
        d2.create(&req("src", "p1", GIB)).await.unwrap();
        let state = d2.lock().volumes.clone();
        d.lock().volumes = state;
        assert!(matches!(
            d.clone_volume(&clone_req("c", "src", None)).await,
            Err(DriverError::Unavailable(_))
        ));
        d.create_snapshot("src", "s").await.unwrap();
        d.destroy("src").await.unwrap();
    }

    #[tokio::test]
    async fn failure_rate_zero_never_fails() {
        let d = driver(
            json!({"failureRate": 0.0, "pools": {"p": {"attributes": {}, "sizeBytes": 1000 * GIB}}}),
        );
        for i in 0..500 {
            d.create(&req(&format!("v{i}"), "p", GIB)).await.unwrap();
        }
    }

    #[tokio::test]
    async fn failure_rate_half_fails_sometimes() {
        let d = driver(
            json!({"failureRate": 0.5, "pools": {"p": {"attributes": {}, "sizeBytes": 1000 * GIB}}}),
        );
        let mut failed = 0;
        for i in 0..400 {
            if d.create(&req(&format!("v{i}"), "p", GIB)).await.is_err() {
                failed += 1;
            }
        }
        // Far outside these bounds has probability below 1e-20.
        assert!((100..300).contains(&failed), "{failed} of 400 failed");
    }

    #[tokio::test]
    async fn fail_pools() {
        let d = driver(json!({"failPools": {"p2": "pool p2 is on fire"}}));
        match d.create(&req("v", "p2", GIB)).await {
            Err(DriverError::Other(msg)) => assert_eq!(msg, "pool p2 is on fire"),
            other => panic!("{other:?}"),
        }
        assert_eq!(free(&d, "p2").await, GIB);
        d.create(&req("v", "p1", GIB)).await.unwrap();
        // A clone on the failing pool fails too.
        let d = driver(json!({"failPools": {"p1": "nope"}}));
        d.lock().volumes.insert(
            "src".into(),
            Volume {
                pool: 0,
                size_bytes: GIB,
                protocol: Protocol::File,
                snapshots: vec![],
            },
        );
        assert!(matches!(
            d.clone_volume(&clone_req("c", "src", None)).await,
            Err(DriverError::Other(m)) if m == "nope"
        ));
    }

    #[tokio::test]
    async fn fail_destroy_refuses_deletes_of_held_volumes() {
        let d = driver(json!({"failDestroy": "array busy"}));
        d.create(&req("v", "p1", GIB)).await.unwrap();
        match d.destroy("v").await {
            Err(DriverError::Unavailable(msg)) => assert_eq!(msg, "array busy"),
            other => panic!("{other:?}"),
        }
        assert!(d.get("v").await.unwrap().is_some(), "the volume stays");
        // a volume the array does not hold is gone already
        d.destroy("nothing").await.unwrap();
        let msg = invalid(cfg(json!({"failDestroy": 1})));
        assert!(msg.contains("failDestroy"), "{msg}");
    }

    #[tokio::test]
    async fn use_chap_gives_block_volumes_credentials() {
        let d = driver(json!({"useCHAP": true, "protocol": "block"}));
        let mut r = req("v", "p1", GIB);
        r.config.protocol = Protocol::Block;
        let info = d.create(&r).await.unwrap();
        assert_eq!(info.access.iscsi_username, "fake-chap-fake1");
        assert_eq!(info.access.iscsi_initiator_secret, CHAP_INITIATOR_SECRET);
        assert_eq!(info.access.iscsi_target_secret, CHAP_TARGET_SECRET);
        assert_eq!(d.access_info("v").await.unwrap(), info.access);
        let msg = invalid(cfg(json!({"useCHAP": "yes"})));
        assert!(msg.contains("useCHAP"), "{msg}");
    }

    // ---- statePath ----

    fn state_cfg(path: &Path) -> Value {
        cfg(json!({"statePath": path.to_str().unwrap()}))
    }

    #[tokio::test]
    async fn state_survives_drop_and_rebuild() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fake.json");
        {
            let d = FakeDriver::new(&state_cfg(&path)).unwrap();
            d.create(&req("a", "p1", 2 * GIB)).await.unwrap();
            d.create(&req("b", "p2", 300 * MIB)).await.unwrap();
            d.create_snapshot("a", "s1").await.unwrap();
            d.clone_volume(&clone_req("c", "a", Some("s1")))
                .await
                .unwrap();
            d.resize("b", 400 * MIB).await.unwrap();
            d.create(&req("gone", "p1", GIB)).await.unwrap();
            d.destroy("gone").await.unwrap();
            assert!(path.exists());
            assert!(
                !dir.path().join("fake.json.tmp").exists(),
                "temp file renamed away"
            );
        }
        let d = FakeDriver::new(&state_cfg(&path)).unwrap();
        let names: Vec<String> = d
            .list_volumes()
            .await
            .unwrap()
            .into_iter()
            .map(|v| v.internal_name)
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(d.get("b").await.unwrap().unwrap().size_bytes, 400 * MIB);
        assert_eq!(d.get("c").await.unwrap().unwrap().size_bytes, 2 * GIB);
        assert_eq!(d.list_snapshots("a").await.unwrap()[0].name, "s1");
        assert_eq!(free(&d, "p1").await, 6 * GIB);
        assert_eq!(free(&d, "p2").await, GIB - 400 * MIB);
        assert!(matches!(
            d.create(&req("a", "p1", GIB)).await,
            Err(DriverError::AlreadyExists(_))
        ));
        d.destroy("a").await.unwrap();
        drop(d);
        let d = FakeDriver::new(&state_cfg(&path)).unwrap();
        assert_eq!(d.get("a").await.unwrap(), None);
        assert_eq!(free(&d, "p1").await, 8 * GIB);
    }

    #[tokio::test]
    async fn state_block_protocol_survives() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fake.json");
        let doc = cfg(json!({"statePath": path.to_str().unwrap(), "protocol": ""}));
        {
            let d = FakeDriver::new(&doc).unwrap();
            let mut r = req("blk", "p1", GIB);
            r.config.protocol = Protocol::Block;
            d.create(&r).await.unwrap();
        }
        let d = FakeDriver::new(&doc).unwrap();
        assert_eq!(
            d.access_info("blk").await.unwrap().iscsi_target_iqn,
            ISCSI_TARGET_IQN
        );
    }

    #[tokio::test]
    async fn torn_temp_file_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fake.json");
        {
            let d = FakeDriver::new(&state_cfg(&path)).unwrap();
            d.create(&req("a", "p1", GIB)).await.unwrap();
        }
        // A crash mid-write leaves a torn temp file next to the good state file.
        fs::write(
            dir.path().join("fake.json.tmp"),
            b"{\"format\":1,\"instanceNa",
        )
        .unwrap();
        let d = FakeDriver::new(&state_cfg(&path)).unwrap();
        assert!(d.get("a").await.unwrap().is_some());
        // The next write replaces the temp file and works.
        d.create(&req("b", "p1", GIB)).await.unwrap();
        drop(d);
        let d = FakeDriver::new(&state_cfg(&path)).unwrap();
        assert_eq!(d.list_volumes().await.unwrap().len(), 2);

        // A torn temp file and no state file at all: an empty array.
        let path2 = dir.path().join("other.json");
        fs::write(dir.path().join("other.json.tmp"), b"garbage").unwrap();
        let d = FakeDriver::new(&state_cfg(&path2)).unwrap();
        assert!(d.list_volumes().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn bad_state_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fake.json");
        fs::write(&path, b"not json").unwrap();
        let msg = invalid(state_cfg(&path));
        assert!(
            msg.contains("statePath") && msg.contains("fake.json"),
            "{msg}"
        );

        fs::remove_file(&path).unwrap();
        {
            let d = FakeDriver::new(&state_cfg(&path)).unwrap();
            d.create(&req("a", "p2", GIB)).await.unwrap();
        }
        // Another instance's file.
        let msg = invalid(cfg(
            json!({"statePath": path.to_str().unwrap(), "instanceName": "fake2"}),
        ));
        assert!(msg.contains("statePath") && msg.contains("fake1"), "{msg}");
        // A pool holding a volume is no longer configured.
        let msg = invalid(cfg(json!({
            "statePath": path.to_str().unwrap(),
            "pools": {"p1": {"attributes": {}, "sizeBytes": GIB}},
        })));
        assert!(msg.contains("statePath") && msg.contains("p2"), "{msg}");
        // A changed pool size keeps what is used.
        let d = FakeDriver::new(&cfg(json!({
            "statePath": path.to_str().unwrap(),
            "pools": {"p1": {"attributes": {}, "sizeBytes": GIB}, "p2": {"attributes": {}, "sizeBytes": 3 * GIB}},
        })))
        .unwrap();
        assert_eq!(free(&d, "p2").await, 2 * GIB);
    }

    // ---- conformance and load ----

    fn conformance_opts() -> ConformanceOptions {
        ConformanceOptions {
            min_size_bytes: Some(MIN_VOLUME_BYTES),
            size_bytes: 256 * MIB,
            ..ConformanceOptions::default()
        }
    }

    #[tokio::test]
    async fn conformance_file() {
        let d = driver(json!({}));
        conformance::run(&d, "p1", &conformance_opts()).await;
        assert!(
            d.list_volumes().await.unwrap().is_empty(),
            "the suite cleans up"
        );
        assert_eq!(free(&d, "p1").await, 10 * GIB);
        // A small pool with the concurrency check off.
        let opts = ConformanceOptions {
            concurrency: 0,
            ..conformance_opts()
        };
        conformance::run(&d, "p2", &opts).await;
        assert_eq!(free(&d, "p2").await, GIB);
    }

    #[tokio::test]
    async fn conformance_block() {
        let d = driver(json!({"protocol": "block"}));
        conformance::run(&d, "p1", &conformance_opts()).await;
    }

    #[tokio::test]
    async fn conformance_with_state_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = FakeDriver::new(&state_cfg(&dir.path().join("s.json"))).unwrap();
        conformance::run(
            &d,
            "p1",
            &ConformanceOptions {
                concurrency: 4,
                ..conformance_opts()
            },
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn conformance_through_build_driver_with_latency() {
        let built =
            crate::drivers::build_driver(&cfg(json!({"latency": "lognormal:1ms"}))).unwrap();
        conformance::run(built.driver.as_ref(), "p1", &conformance_opts()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_creates_keep_capacity_exact() {
        let d = Arc::new(driver(
            json!({"pools": {"p": {"attributes": {}, "sizeBytes": 1000 * MIB}}}),
        ));
        let tasks: Vec<_> = (0..2000)
            .map(|i| {
                let d = Arc::clone(&d);
                tokio::spawn(async move { d.create(&req(&format!("v{i}"), "p", MIB)).await })
            })
            .collect();
        let mut ok = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(_) => ok += 1,
                Err(DriverError::Conflict(_)) => {}
                Err(e) => panic!("{e:?}"),
            }
        }
        assert_eq!(ok, 1000);
        assert_eq!(free(&d, "p").await, 0);
        assert_eq!(d.list_volumes().await.unwrap().len(), 1000);
    }

    #[tokio::test]
    async fn hot_path_is_cheap() {
        // Not a benchmark: a smoke check that 50k zero-latency creates and destroys run
        // without any per-call I/O or timers.
        let d = driver(json!({"pools": {"p": {"attributes": {}, "sizeBytes": u64::MAX}}}));
        let names: Vec<String> = (0..50_000).map(|i| format!("v{i}")).collect();
        for n in &names {
            d.create(&req(n, "p", MIB)).await.unwrap();
        }
        for n in &names {
            d.destroy(n).await.unwrap();
        }
        assert_eq!(free(&d, "p").await, u64::MAX);
    }
}
