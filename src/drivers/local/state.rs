//! What the driver knows at run time: every volume by pool, and the checks a call makes
//! against it (pool, room, kind, provisioning, permissions).

use super::client::{Pool, open_pool, recover};
use super::wire::{Kind, Provisioning, VolumeRecord, load_records};
use super::{Inner, config};
use crate::drivers::{DriverError, DriverResult};
use crate::model::{Protocol, Request, VolumeConfig};
use std::collections::{BTreeMap, HashMap};
use std::sync::MutexGuard;

/// Every volume, by pool.
#[derive(Debug, Default)]
pub(super) struct State {
    /// Indexed like the opened pools.
    pub(super) pools: Vec<BTreeMap<String, VolumeRecord>>,
    /// Volume name → pool index.
    pub(super) index: HashMap<String, usize>,
}

impl State {
    pub(super) fn find(&self, name: &str) -> Option<(usize, &VolumeRecord)> {
        let &pi = self.index.get(name)?;
        self.pools[pi].get(name).map(|v| (pi, v))
    }

    pub(super) fn find_mut(&mut self, name: &str) -> Option<(usize, &mut VolumeRecord)> {
        let &pi = self.index.get(name)?;
        self.pools[pi].get_mut(name).map(|v| (pi, v))
    }

    pub(super) fn insert(&mut self, pi: usize, name: &str, v: VolumeRecord) {
        self.index.insert(name.to_string(), pi);
        self.pools[pi].insert(name.to_string(), v);
    }

    pub(super) fn remove(&mut self, name: &str) -> Option<VolumeRecord> {
        let pi = self.index.remove(name)?;
        self.pools[pi].remove(name)
    }

    pub(super) fn allocated(&self, pi: usize) -> u64 {
        self.pools[pi]
            .values()
            .fold(0u64, |sum, v| sum.saturating_add(v.allocated()))
    }

    /// Gives back the read slot a clone took on its source.
    pub(super) fn release(&mut self, source: &str, snapshot: Option<&str>) {
        if let Some((_, v)) = self.find_mut(source) {
            match snapshot.and_then(|s| v.snapshots.get_mut(s)) {
                Some(s) => s.readers = s.readers.saturating_sub(1),
                None => v.readers = v.readers.saturating_sub(1),
            }
        }
    }
}

impl Inner {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The opened pools, opening them on first use.
    pub(super) fn ready(&self) -> DriverResult<&[Pool]> {
        if let Some(p) = self.pools.get() {
            return Ok(p);
        }
        let _opening = self.opening.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = self.pools.get() {
            return Ok(p);
        }
        let (pools, state) = self.open_pools()?;
        *self.lock() = state;
        Ok(self.pools.get_or_init(|| pools))
    }

    pub(super) fn open_pools(&self) -> DriverResult<(Vec<Pool>, State)> {
        let mut pools: Vec<Pool> = Vec::with_capacity(self.cfg.pools.len());
        let mut state = State::default();
        for (pi, pc) in self.cfg.pools.iter().enumerate() {
            let pool = open_pool(pc, &pools)?;
            let mut records = load_records(&pool)?;
            recover(&pool, &mut records)?;
            for name in records.keys() {
                if let Some(&other) = state.index.get(name) {
                    return Err(DriverError::Other(format!(
                        "volume {name} is recorded in both pool {} and pool {}",
                        pools[other].name, pool.name
                    )));
                }
                state.index.insert(name.clone(), pi);
            }
            state.pools.push(records);
            pools.push(pool);
        }
        Ok((pools, state))
    }

    pub(super) fn pool<'a>(
        &self,
        pools: &'a [Pool],
        name: &str,
    ) -> DriverResult<(usize, &'a Pool)> {
        if name.is_empty() {
            return Err(DriverError::Invalid(
                "no pool specified for the volume".to_string(),
            ));
        }
        pools
            .iter()
            .enumerate()
            .find(|(_, p)| p.name == name)
            .ok_or_else(|| {
                DriverError::Invalid(format!(
                    "pool {name} does not exist on local backend {}",
                    self.cfg.backend_name
                ))
            })
    }

    /// Refuses what does not fit in the pool's free bytes.
    pub(super) fn check_fits(
        &self,
        pool: &Pool,
        st: &State,
        pi: usize,
        need: u64,
        what: &str,
    ) -> DriverResult<()> {
        let (_, free) = pool.space(st.allocated(pi))?;
        if need > free {
            return Err(DriverError::Conflict(format!(
                "{what} is too large: {need} bytes requested, {free} bytes available in pool {}",
                pool.name
            )));
        }
        Ok(())
    }

    /// How a new volume is stored: the backend's protocol, else the volume's, else file.
    pub(super) fn kind_for(&self, requested: Protocol) -> Kind {
        match (self.cfg.protocol, requested) {
            (Protocol::Block, _) | (Protocol::Any, Protocol::Block) => Kind::Block,
            _ => Kind::File,
        }
    }

    /// Thin or thick: the class's `provisioningType` request, else the volume's
    /// `spaceReserve`, else `defaults.spaceReserve`.
    pub(super) fn provisioning(
        &self,
        requests: &BTreeMap<String, Request>,
        config: &VolumeConfig,
    ) -> DriverResult<Provisioning> {
        match requests.get("provisioningType") {
            Some(Request::String(s)) if s == "thick" => return Ok(Provisioning::Thick),
            Some(Request::String(s)) if s == "thin" => return Ok(Provisioning::Thin),
            Some(other) => {
                return Err(DriverError::Invalid(format!(
                    "invalid value for provisioningType: {:?} is not thin or thick",
                    crate::model::attributes::clip(&other.to_string())
                )));
            }
            None => {}
        }
        match config.space_reserve.as_str() {
            "volume" => Ok(Provisioning::Thick),
            "none" => Ok(Provisioning::Thin),
            "" if self.cfg.default_thick => Ok(Provisioning::Thick),
            "" => Ok(Provisioning::Thin),
            other => Err(DriverError::Invalid(format!(
                "invalid value for spaceReserve: {:?} is not none or volume",
                crate::model::attributes::clip(other)
            ))),
        }
    }

    pub(super) fn unix_permissions(&self, config: &VolumeConfig) -> DriverResult<u32> {
        if config.unix_permissions.is_empty() {
            return Ok(self.cfg.default_unix_permissions);
        }
        config::parse_unix_permissions(&config.unix_permissions)
            .map_err(|e| DriverError::Invalid(format!("invalid value for unixPermissions: {e}")))
    }
}
