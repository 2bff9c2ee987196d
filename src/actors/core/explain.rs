//! Explain: for every pool of every backend, would a create in a class take it, and if not,
//! why (the placement policy's filters, spelled out).

use super::Core;
use crate::actors::error::CoreError;
use crate::actors::placement::{SUSPENDED, outside, serves};
use crate::model::{CompiledClass, Protocol, TopologyRequirement};
use crate::projections::{BackendState, Explanation, PoolExplanation};

impl Core {
    /// For every pool of every backend: would a create in `class` (with `protocol` and `size`)
    /// try it, and if not, why.
    pub fn explain(
        &self,
        class: &str,
        protocol: Protocol,
        size_bytes: Option<u64>,
    ) -> Result<Explanation, CoreError> {
        self.explain_in(class, protocol, size_bytes, None)
    }

    /// [`Core::explain`] for a create that must be reachable from `topology`: a pool outside
    /// it says so.
    pub fn explain_in(
        &self,
        class: &str,
        protocol: Protocol,
        size_bytes: Option<u64>,
        topology: Option<&TopologyRequirement>,
    ) -> Result<Explanation, CoreError> {
        self.shared.ensure_readable()?;
        let config = self
            .shared
            .projection
            .read(|s| s.classes.get(class).cloned())
            .ok_or_else(|| CoreError::NotFound(format!("storage class {class} was not found")))?;
        let compiled = CompiledClass::compile(config).map_err(CoreError::Internal)?;
        let backends = self.shared.projection.read(|s| s.backends.clone());
        let mut pools = Vec::new();
        for (name, rec) in &backends {
            // Health as the actor sees it where it runs, else as the leader recorded it; the
            // free bytes and size limits as the leader recorded them, on every instance.
            let observed = rec.observed.as_ref();
            let state = self
                .live_state(name)
                .unwrap_or_else(|| BackendState::recorded(observed));
            let limits = observed.map(|o| crate::drivers::SizeLimits {
                min_bytes: o.min_bytes,
                max_bytes: o.max_bytes,
            });
            for pool in &rec.pools {
                let mut reasons = Vec::new();
                let verdict = compiled.check(name, pool);
                if !verdict.is_match() {
                    reasons.push(verdict.to_string());
                }
                if rec.suspended {
                    reasons.push(format!("backend {name} is {SUSPENDED}"));
                }
                if !rec.online {
                    reasons.push(format!(
                        "backend {name} is offline (deleted while it still has volumes)"
                    ));
                } else {
                    match &state {
                        BackendState::Online => {}
                        BackendState::Failed(why) => {
                            reasons.push(format!("backend {name} has failed: {why}"))
                        }
                        other => reasons.push(match other.reason() {
                            Some(why) => format!("backend {name} is {}: {why}", other.as_str()),
                            None => format!("backend {name} is {}", other.as_str()),
                        }),
                    }
                }
                if !serves(rec.protocol, protocol) {
                    reasons.push(format!(
                        "protocol mismatch: the class was asked for {protocol}, backend {name} serves {}",
                        if rec.protocol == Protocol::Any { "any" } else { rec.protocol.as_str() }
                    ));
                }
                if let (Some(size), Some(limits)) = (size_bytes, limits)
                    && let Err(why) = limits.check(size)
                {
                    reasons.push(format!("size outside what the driver takes: {why}"));
                }
                let free = observed.and_then(|o| o.free_bytes.get(&pool.name));
                if let (Some(size), Some(free)) = (size_bytes, free)
                    && *free < size
                {
                    reasons.push(format!(
                        "not enough free capacity: {} requested, {} free",
                        crate::model::format_size(size),
                        crate::model::format_size(*free)
                    ));
                }
                if let Some(why) = outside(&rec.topology, topology) {
                    reasons.push(why);
                }
                pools.push(PoolExplanation {
                    backend: name.clone(),
                    pool: pool.name.clone(),
                    candidate: reasons.is_empty(),
                    reasons,
                });
            }
        }
        Ok(Explanation {
            storage_class: class.to_string(),
            protocol,
            size_bytes,
            pools,
        })
    }
}
