//! storch: a storage orchestrator over an append-only event log.
//!
//! Layout (dependencies point down this list's arrows: `model ← events ← log ← projections ←
//! actors → drivers`; frontends on top):
//!
//! - `model`: shared value types (sizes, offers, volume and class configs, names). Leaf.
//! - `drivers`: the `StorageDriver` trait and one module per array family (`fake`, …).
//! - `log`: the sled event log: envelopes, hash chain, group commit, checkpoints.
//! - `actors`: backend, storage class and volume actors, the scheduler; `Core` is their handle.
//! - `api`: the Trident-compatible REST API (axum).
//! - `k8s`: the Kubernetes frontend (StorageClasses, PVCs, PVs; kube-rs).
//! - `sim`: array simulators (ONTAP ZAPI) for driver tests and the `storch-sim` binary.

pub mod actors;
pub mod api;
pub mod bench;
pub mod cli;
pub mod config;
pub mod drivers;
pub mod events;
pub mod k8s;
pub mod log;
pub mod model;
pub mod net;
pub mod projections;
pub mod replication;
pub mod secrets;
pub mod sim;
pub mod wire;
pub mod yaml;
