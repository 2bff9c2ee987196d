//! Events: past-tense facts, one enum per stream. Pure data (bincode-encoded `model` types,
//! rendered as JSON for audits); no I/O, no sled, no actix, no drivers.
//!
//! Encoding: bincode 2 native (`config::standard()`), schema version [`SCHEMA_VERSION`].
//! Older schema versions are upcast in [`decode`]; `migrations/` keeps a frozen log per version.

mod drift;

pub use drift::{DriftEvent, Noticed};

use std::collections::BTreeMap;

use crate::model::{
    AccessInfo, PoolInfo, PoolRef, Protocol, Publication, Sealed, Segment, StorageClassConfig,
    VolumeConfig,
};

/// The payload schema written by this build.
pub const SCHEMA_VERSION: u16 = 1;

/// Facts about one backend.
#[derive(Debug, Clone, PartialEq, bincode::Encode, bincode::Decode, serde::Serialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
pub enum BackendEvent {
    /// A backend was added. `config` is the config document with secrets removed (JSON);
    /// `secrets` holds them sealed.
    Added {
        driver: String,
        config: String,
        secrets: Option<Sealed>,
    },
    /// The backend's config was replaced (and it is online again if it was offline).
    Updated {
        driver: String,
        config: String,
        secrets: Option<Sealed>,
    },
    /// The backend was renamed by an update; its volumes moved with it.
    Renamed { to: String },
    /// The driver reported pools that differ from the last recorded ones.
    PoolsDiscovered {
        protocol: Protocol,
        pools: Vec<PoolInfo>,
    },
    /// Deleted by a user while it still had volumes: no new volumes land there.
    Offlined,
    /// Removed for good (deleted with no volumes, or its last volume went).
    Purged,
    // Variants are only ever appended (bincode encodes the variant index).
    /// A declarative config file (`source`) now manages the backend; `None`: no longer.
    Declared { source: Option<String> },
    /// Where the backend's pools are reachable from (its config's `supportedTopologies`, or a
    /// driver's own key such as NexentaStor's `zone`); empty: from everywhere.
    TopologyDeclared { segments: Vec<Segment> },
    /// An operator suspended the backend: no new volumes land there; its own volumes are
    /// still served (deletes, snapshots, clones, resizes).
    Suspended,
    /// An operator set the suspended backend back to `normal`: it takes new volumes again.
    Resumed,
    /// What the leader's backend actor observed of the running driver, recorded when it
    /// changes (the driver started after an add, update, boot or retry; it failed to start
    /// with another reason; a discovery gave other free bytes or config), never per volume:
    /// the fold adjusts the free bytes by the volumes created, resized and deleted since.
    Observed(Box<Observation>),
}

/// A backend's health as its leader's actor saw it.
#[derive(Debug, Clone, PartialEq, Eq, bincode::Encode, bincode::Decode, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Health {
    /// The driver started and answered its discovery.
    Online,
    /// The driver failed to start or to discover the array (retried with backoff).
    Failed { reason: String },
}

/// The payload of [`BackendEvent::Observed`].
#[derive(Debug, Clone, PartialEq, Eq, bincode::Encode, bincode::Decode, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Observation {
    pub health: Health,
    /// Unix milliseconds when the leader observed it (a moment before its commit).
    pub observed_ms: u64,
    /// Free bytes per pool as discovered (empty when failed or unknown to the driver).
    pub free_bytes: BTreeMap<String, u64>,
    /// The driver's external config (JSON text, never secrets); `None` when failed.
    pub config: Option<String>,
    /// The volume sizes the driver makes (`drivers::SizeLimits`).
    pub min_bytes: u64,
    pub max_bytes: Option<u64>,
}

/// Facts about one storage class.
#[derive(Debug, Clone, PartialEq, bincode::Encode, bincode::Decode, serde::Serialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
pub enum StorageClassEvent {
    Added {
        config: StorageClassConfig,
    },
    Deleted,
    // Variants are only ever appended (bincode encodes the variant index).
    /// The class's attributes or pool lists changed (declarative config, Kubernetes).
    Updated {
        config: StorageClassConfig,
    },
    /// A declarative config file (`source`) now manages the class; `None`: no longer.
    Declared {
        source: Option<String>,
    },
}

/// Facts about one volume.
#[derive(Debug, Clone, PartialEq, bincode::Encode, bincode::Decode, serde::Serialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
pub enum VolumeEvent {
    /// The intent: durable before any array is touched. `size_bytes` is the parsed `size`.
    Requested {
        config: Box<VolumeConfig>,
        size_bytes: u64,
    },
    /// Candidate pools in the order they will be tried, and the shuffle seed.
    PlacementPlanned {
        candidates: Vec<PoolRef>,
        seed: u64,
    },
    PlacementAttemptFailed {
        pool: PoolRef,
        error: String,
    },
    /// The volume exists on `pool`. `adopted` when found on the array during reconciliation
    /// (or after a create that reported an error). Secrets of `access` are in `secrets`.
    Created {
        pool: PoolRef,
        internal_name: String,
        protocol: Protocol,
        access: Box<AccessInfo>,
        secrets: Option<Sealed>,
        adopted: bool,
    },
    /// Every candidate failed; the name is free again.
    CreationFailed {
        errors: Vec<String>,
    },
    DeleteRequested,
    DeleteFailed {
        error: String,
        attempt: u32,
    },
    Deleted,
    /// A backend update found (or no longer found) the volume on the array.
    OrphanedChanged {
        orphaned: bool,
    },
    // Variants are only ever appended: bincode encodes the variant index, so appending keeps
    // every older log decodable under the same schema version.
    /// A snapshot was asked for: durable before the array is touched.
    SnapshotRequested {
        snapshot: String,
    },
    /// The array made the snapshot (or it was found there when reconciling).
    SnapshotCreated {
        snapshot: String,
        created_ms: u64,
        size_bytes: u64,
    },
    SnapshotCreationFailed {
        snapshot: String,
        error: String,
    },
    SnapshotDeleted {
        snapshot: String,
    },
    /// The array grew the volume; `size` is the new size as the client gave it.
    Resized {
        size: String,
        size_bytes: u64,
    },
    /// The volume was made available to a host (the array granted it access, where the
    /// array needs a grant per host); `node_id` is the frontend's identity of the host.
    Published {
        node_id: String,
        publication: Box<Publication>,
    },
    /// The host's access was taken away.
    Unpublished {
        node_id: String,
    },
    /// Reconciliation with the array, and import (see [`DriftEvent`]).
    Drift(DriftEvent),
    /// A consumer took the volume: `to` names it in its frontend's words (the Kubernetes
    /// frontend: `k8s:pv/NAME`, the PV written for it). Recorded once, the first time; a
    /// volume once bound is never an orphan of its frontend (a consumer deleted by hand never
    /// deletes its volume), across restarts.
    Bound {
        to: String,
    },
}

/// Events about the log itself (stream `log`).
#[derive(Debug, Clone, PartialEq, bincode::Encode, bincode::Decode, serde::Serialize)]
pub enum LogEvent {
    /// At start, the operator (`serve --truncate-corrupt-tail`) accepted a log shorter than
    /// the one acknowledged: it ended at sequence `from` and goes on from `to`; `reason` says
    /// what was wrong with what lay between.
    TailCutBack { from: u64, to: u64, reason: String },
}

/// An event of any stream, with the stream's object name.
#[derive(Debug, Clone, PartialEq, bincode::Encode, bincode::Decode, serde::Serialize)]
#[serde(untagged)]
pub enum Event {
    Backend {
        name: String,
        event: BackendEvent,
    },
    StorageClass {
        name: String,
        event: StorageClassEvent,
    },
    Volume {
        name: String,
        event: VolumeEvent,
    },
    Log {
        event: LogEvent,
    },
}

impl Event {
    pub fn backend(name: impl Into<String>, event: BackendEvent) -> Event {
        Event::Backend {
            name: name.into(),
            event,
        }
    }

    pub fn class(name: impl Into<String>, event: StorageClassEvent) -> Event {
        Event::StorageClass {
            name: name.into(),
            event,
        }
    }

    pub fn volume(name: impl Into<String>, event: VolumeEvent) -> Event {
        Event::Volume {
            name: name.into(),
            event,
        }
    }

    /// The event's type name, e.g. `VolumeCreated`.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Backend { event, .. } => match event {
                BackendEvent::Added { .. } => "BackendAdded",
                BackendEvent::Updated { .. } => "BackendUpdated",
                BackendEvent::Renamed { .. } => "BackendRenamed",
                BackendEvent::PoolsDiscovered { .. } => "BackendPoolsDiscovered",
                BackendEvent::Offlined => "BackendOfflined",
                BackendEvent::Purged => "BackendPurged",
                BackendEvent::Declared { .. } => "BackendDeclared",
                BackendEvent::TopologyDeclared { .. } => "BackendTopologyDeclared",
                BackendEvent::Suspended => "BackendSuspended",
                BackendEvent::Resumed => "BackendResumed",
                BackendEvent::Observed(_) => "BackendObserved",
            },
            Event::StorageClass { event, .. } => match event {
                StorageClassEvent::Added { .. } => "StorageClassAdded",
                StorageClassEvent::Deleted => "StorageClassDeleted",
                StorageClassEvent::Updated { .. } => "StorageClassUpdated",
                StorageClassEvent::Declared { .. } => "StorageClassDeclared",
            },
            Event::Volume { event, .. } => match event {
                VolumeEvent::Requested { .. } => "VolumeRequested",
                VolumeEvent::PlacementPlanned { .. } => "PlacementPlanned",
                VolumeEvent::PlacementAttemptFailed { .. } => "PlacementAttemptFailed",
                VolumeEvent::Created { .. } => "VolumeCreated",
                VolumeEvent::CreationFailed { .. } => "VolumeCreationFailed",
                VolumeEvent::DeleteRequested => "VolumeDeleteRequested",
                VolumeEvent::DeleteFailed { .. } => "VolumeDeleteFailed",
                VolumeEvent::Deleted => "VolumeDeleted",
                VolumeEvent::OrphanedChanged { .. } => "VolumeOrphanedChanged",
                VolumeEvent::SnapshotRequested { .. } => "SnapshotRequested",
                VolumeEvent::SnapshotCreated { .. } => "SnapshotCreated",
                VolumeEvent::SnapshotCreationFailed { .. } => "SnapshotCreationFailed",
                VolumeEvent::SnapshotDeleted { .. } => "SnapshotDeleted",
                VolumeEvent::Resized { .. } => "VolumeResized",
                VolumeEvent::Published { .. } => "VolumePublished",
                VolumeEvent::Unpublished { .. } => "VolumeUnpublished",
                VolumeEvent::Drift(d) => d.kind(),
                VolumeEvent::Bound { .. } => "VolumeBound",
            },
            Event::Log { event } => match event {
                LogEvent::TailCutBack { .. } => "LogTailCutBack",
            },
        }
    }

    /// One line for people, e.g. `volume v1 created on lab/p1 (trident-v1)`.
    pub fn summary(&self) -> String {
        match self {
            Event::Backend { name, event } => match event {
                BackendEvent::Added { driver, .. } => format!("backend {name} added ({driver})"),
                BackendEvent::Updated { driver, .. } => {
                    format!("backend {name} updated ({driver})")
                }
                BackendEvent::Renamed { to } => format!("backend {name} renamed to {to}"),
                BackendEvent::PoolsDiscovered { protocol, pools } => {
                    let names: Vec<&str> = pools.iter().map(|p| p.name.as_str()).collect();
                    let protocol = if *protocol == Protocol::Any {
                        "any"
                    } else {
                        protocol.as_str()
                    };
                    format!("backend {name} ({protocol}) has pools {}", names.join(", "))
                }
                BackendEvent::Offlined => format!("backend {name} taken offline"),
                BackendEvent::Purged => format!("backend {name} removed"),
                BackendEvent::Declared { source: Some(src) } => {
                    format!("backend {name} is managed by {src}")
                }
                BackendEvent::Declared { source: None } => {
                    format!("backend {name} is no longer managed by a config file")
                }
                BackendEvent::TopologyDeclared { segments } if segments.is_empty() => {
                    format!("backend {name} is reachable from every node")
                }
                BackendEvent::TopologyDeclared { segments } => {
                    let s: Vec<String> = segments.iter().map(segment_text).collect();
                    format!("backend {name} is reachable from {}", s.join(" or "))
                }
                BackendEvent::Suspended => {
                    format!("backend {name} suspended by the operator: no new volumes land there")
                }
                BackendEvent::Resumed => {
                    format!("backend {name} resumed: it takes new volumes again")
                }
                BackendEvent::Observed(o) => match &o.health {
                    Health::Online => {
                        let free: Vec<String> = o
                            .free_bytes
                            .iter()
                            .map(|(pool, b)| format!("{pool} {}", crate::model::format_size(*b)))
                            .collect();
                        if free.is_empty() {
                            format!("backend {name} is online")
                        } else {
                            format!("backend {name} is online (free: {})", free.join(", "))
                        }
                    }
                    Health::Failed { reason } => format!("backend {name} failed: {reason}"),
                },
            },
            Event::StorageClass { name, event } => match event {
                StorageClassEvent::Added { .. } => format!("storage class {name} added"),
                StorageClassEvent::Deleted => format!("storage class {name} deleted"),
                StorageClassEvent::Updated { .. } => format!("storage class {name} updated"),
                StorageClassEvent::Declared { source: Some(src) } => {
                    format!("storage class {name} is managed by {src}")
                }
                StorageClassEvent::Declared { source: None } => {
                    format!("storage class {name} is no longer managed by a config file")
                }
            },
            Event::Volume { name, event } => match event {
                VolumeEvent::Requested { config, .. } => {
                    let class = if config.storage_class.is_empty() {
                        String::new()
                    } else {
                        format!(" in class {}", config.storage_class)
                    };
                    if config.clone_source_volume.is_empty() {
                        format!("volume {name} of {} requested{class}", config.size)
                    } else {
                        format!(
                            "volume {name} requested as a clone of {}",
                            config.clone_source_volume
                        )
                    }
                }
                VolumeEvent::PlacementPlanned { candidates, .. } => {
                    let c: Vec<String> = candidates.iter().map(|p| p.to_string()).collect();
                    format!("volume {name} will try {}", c.join(", "))
                }
                VolumeEvent::PlacementAttemptFailed { pool, error } => {
                    format!("volume {name} failed on {pool}: {error}")
                }
                VolumeEvent::Created {
                    pool,
                    internal_name,
                    adopted,
                    ..
                } => {
                    let how = if *adopted { "adopted" } else { "created" };
                    format!("volume {name} {how} on {pool} ({internal_name})")
                }
                VolumeEvent::CreationFailed { errors } => {
                    format!(
                        "volume {name} could not be created ({} pools failed)",
                        errors.len()
                    )
                }
                VolumeEvent::DeleteRequested => format!("volume {name} delete requested"),
                VolumeEvent::DeleteFailed { error, attempt } => {
                    format!("volume {name} delete attempt {attempt} failed: {error}")
                }
                VolumeEvent::Deleted => format!("volume {name} deleted"),
                VolumeEvent::OrphanedChanged { orphaned } => {
                    if *orphaned {
                        format!("volume {name} is missing from its array (orphaned)")
                    } else {
                        format!("volume {name} found on its array again")
                    }
                }
                VolumeEvent::SnapshotRequested { snapshot } => {
                    format!("snapshot {name}/{snapshot} requested")
                }
                VolumeEvent::SnapshotCreated { snapshot, .. } => {
                    format!("snapshot {name}/{snapshot} created")
                }
                VolumeEvent::SnapshotCreationFailed { snapshot, error } => {
                    format!("snapshot {name}/{snapshot} failed: {error}")
                }
                VolumeEvent::SnapshotDeleted { snapshot } => {
                    format!("snapshot {name}/{snapshot} deleted")
                }
                VolumeEvent::Resized { size, .. } => format!("volume {name} resized to {size}"),
                VolumeEvent::Published {
                    node_id,
                    publication,
                } => {
                    let ro = if publication.readonly {
                        ", read-only"
                    } else {
                        ""
                    };
                    format!("volume {name} published to {node_id}{ro}")
                }
                VolumeEvent::Unpublished { node_id } => {
                    format!("volume {name} unpublished from {node_id}")
                }
                VolumeEvent::Drift(d) => d.summary(name),
                VolumeEvent::Bound { to } => format!("volume {name} bound to {to}"),
            },
            Event::Log { event } => match event {
                LogEvent::TailCutBack { from, to, reason } => format!(
                    "event log cut back from sequence {from} to {to} by operator request ({reason})"
                ),
            },
        }
    }

    /// The stream id: `backend/NAME`, `storageclass/NAME`, `volume/NAME`.
    pub fn stream(&self) -> String {
        match self {
            Event::Backend { name, .. } => format!("backend/{name}"),
            Event::StorageClass { name, .. } => format!("storageclass/{name}"),
            Event::Volume { name, .. } => format!("volume/{name}"),
            Event::Log { .. } => "log".to_string(),
        }
    }
}

/// `{k=v, k2=v2}`.
fn segment_text(segment: &Segment) -> String {
    let pairs: Vec<String> = segment.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", pairs.join(", "))
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("unknown event schema version {0}")]
    UnknownSchema(u16),
    #[error("undecodable event payload: {0}")]
    Payload(String),
}

/// Encodes an event with the current schema.
pub fn encode(event: &Event) -> Vec<u8> {
    bincode::encode_to_vec(event, bincode::config::standard())
        .expect("encoding to a Vec cannot fail")
}

/// Decodes a payload written with schema `schema`, upcasting older schemas.
pub fn decode(schema: u16, payload: &[u8]) -> Result<Event, DecodeError> {
    match schema {
        SCHEMA_VERSION => {
            let (event, used) = bincode::decode_from_slice(payload, bincode::config::standard())
                .map_err(|e| DecodeError::Payload(e.to_string()))?;
            if used != payload.len() {
                return Err(DecodeError::Payload(format!(
                    "{} trailing bytes",
                    payload.len() - used
                )));
            }
            Ok(event)
        }
        other => Err(DecodeError::UnknownSchema(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let ev = Event::volume(
            "v1",
            VolumeEvent::PlacementPlanned {
                candidates: vec![PoolRef::new("b", "p")],
                seed: 7,
            },
        );
        let bytes = encode(&ev);
        assert_eq!(decode(SCHEMA_VERSION, &bytes).unwrap(), ev);
        assert_eq!(ev.kind(), "PlacementPlanned");
        assert_eq!(ev.stream(), "volume/v1");
        assert!(decode(99, &bytes).is_err());
        assert!(decode(SCHEMA_VERSION, &bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn observations_round_trip_and_read_for_people() {
        let observation = |health, free: &[(&str, u64)]| Observation {
            health,
            observed_ms: 1_767_323_045_678,
            free_bytes: free.iter().map(|(p, b)| (p.to_string(), *b)).collect(),
            config: Some("{}".into()),
            min_bytes: 1,
            max_bytes: Some(1 << 40),
        };
        let failed = Health::Failed {
            reason: "array unreachable".into(),
        };
        for (o, words) in [
            (
                observation(Health::Online, &[("p1", 10 << 30), ("p2", 512 << 20)]),
                "backend b1 is online (free: p1 10 GiB, p2 512 MiB)",
            ),
            (observation(Health::Online, &[]), "backend b1 is online"),
            (
                observation(failed, &[]),
                "backend b1 failed: array unreachable",
            ),
        ] {
            let ev = Event::backend("b1", BackendEvent::Observed(Box::new(o)));
            assert_eq!(decode(SCHEMA_VERSION, &encode(&ev)).unwrap(), ev);
            assert_eq!(ev.kind(), "BackendObserved");
            assert_eq!(ev.summary(), words);
            assert_eq!(ev.stream(), "backend/b1");
        }
        // Appended after every older variant: their encodings are unchanged.
        let resumed = encode(&Event::backend("b1", BackendEvent::Resumed));
        let observed = Event::backend(
            "b1",
            BackendEvent::Observed(Box::new(observation(Health::Online, &[]))),
        );
        assert!(encode(&observed) > resumed, "a later variant index");
    }

    #[test]
    fn suspension_events_round_trip_and_read_for_people() {
        for (event, kind, words) in [
            (
                BackendEvent::Suspended,
                "BackendSuspended",
                "backend b1 suspended by the operator: no new volumes land there",
            ),
            (
                BackendEvent::Resumed,
                "BackendResumed",
                "backend b1 resumed: it takes new volumes again",
            ),
        ] {
            let ev = Event::backend("b1", event);
            assert_eq!(decode(SCHEMA_VERSION, &encode(&ev)).unwrap(), ev);
            assert_eq!(ev.kind(), kind);
            assert_eq!(ev.summary(), words);
            assert_eq!(ev.stream(), "backend/b1");
        }
        // Appended after the older variants: their encodings (the variant index) are unchanged.
        let older = Event::backend("b1", BackendEvent::Purged);
        let bytes = encode(&older);
        assert_eq!(decode(SCHEMA_VERSION, &bytes).unwrap(), older);
        assert!(
            encode(&Event::backend("b1", BackendEvent::Suspended)) > bytes,
            "a later variant index"
        );
    }

    #[test]
    fn a_binding_round_trips_and_reads_for_people() {
        let ev = Event::volume(
            "default-data-6cb6b",
            VolumeEvent::Bound {
                to: "k8s:pv/default-data-6cb6b".into(),
            },
        );
        assert_eq!(decode(SCHEMA_VERSION, &encode(&ev)).unwrap(), ev);
        assert_eq!(ev.kind(), "VolumeBound");
        assert_eq!(ev.stream(), "volume/default-data-6cb6b");
        assert_eq!(
            ev.summary(),
            "volume default-data-6cb6b bound to k8s:pv/default-data-6cb6b"
        );
        assert_eq!(
            serde_json::to_value(&ev).unwrap(),
            serde_json::json!({"name": "default-data-6cb6b", "event": {"to": "k8s:pv/default-data-6cb6b"}})
        );
    }
}
