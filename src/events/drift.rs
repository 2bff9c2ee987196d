//! Drift: what reconciliation with an array found that differs from the log, and volumes
//! adopted from an array (import). One variant of [`super::VolumeEvent`] holds them, so the
//! volume stream's other facts stay where they are.

use crate::model::{AccessInfo, PoolRef, Protocol, Sealed, VolumeConfig};

/// How a drift was noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, bincode::Encode, bincode::Decode, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Noticed {
    /// The backend's start (its first listing after a restart or a driver rebuild).
    Start,
    /// The periodic reconciliation (`serve --reconcile-interval`).
    Periodic,
    /// Asked for over the API (`POST /trident/v1/backend/{b}/reconcile`).
    Requested,
}

impl Noticed {
    pub fn as_str(self) -> &'static str {
        match self {
            Noticed::Start => "start",
            Noticed::Periodic => "periodic",
            Noticed::Requested => "requested",
        }
    }
}

/// Facts reconciliation and import record about one volume.
#[derive(Debug, Clone, PartialEq, bincode::Encode, bincode::Decode, serde::Serialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
pub enum DriftEvent {
    /// The array no longer holds the volume (a complete listing lacked it and a lookup by
    /// name confirmed it). Nothing is deleted on that basis.
    Missing {
        /// Unix milliseconds.
        noticed_at: u64,
        how: Noticed,
    },
    /// A volume shown missing is on its array again.
    Found { noticed_at: u64, how: Noticed },
    /// The array reports another size or pool than the log held (resized or moved behind
    /// storch's back); the projection takes the array's.
    ChangedOnArray {
        size_bytes: u64,
        pool: String,
        how: Noticed,
    },
    /// An array volume adopted under a storch name and class. `managed: false`: storch never
    /// destroys it (a delete forgets it).
    Imported {
        config: Box<VolumeConfig>,
        size_bytes: u64,
        pool: PoolRef,
        protocol: Protocol,
        access: Box<AccessInfo>,
        secrets: Option<Sealed>,
        managed: bool,
    },
}

impl DriftEvent {
    /// The event's type name.
    pub fn kind(&self) -> &'static str {
        match self {
            DriftEvent::Missing { .. } => "VolumeMissing",
            DriftEvent::Found { .. } => "VolumeFound",
            DriftEvent::ChangedOnArray { .. } => "VolumeChangedOnArray",
            DriftEvent::Imported { .. } => "VolumeImported",
        }
    }

    /// One line for people about volume `name`.
    pub fn summary(&self, name: &str) -> String {
        match self {
            DriftEvent::Missing { how, .. } => format!(
                "volume {name} is missing from its array (noticed at {})",
                how.as_str()
            ),
            DriftEvent::Found { how, .. } => format!(
                "volume {name} is on its array again (noticed at {})",
                how.as_str()
            ),
            DriftEvent::ChangedOnArray {
                size_bytes, pool, ..
            } => format!("volume {name} changed on its array: {size_bytes} bytes in pool {pool}"),
            DriftEvent::Imported {
                config,
                pool,
                managed,
                ..
            } => {
                let how = if *managed { "" } else { " (not managed)" };
                format!(
                    "volume {name} imported from {pool} ({}){how}",
                    config.internal_name
                )
            }
        }
    }
}
