//! storch: a storage orchestrator over an append-only event log.
//!
//! Dependencies point one way: `model ← events ← log ← projections ← actors → drivers`, the
//! frontends (`api`, `k8s`, `cli`) on top; `net` and `wire` sit below everything that speaks
//! HTTP or an array's encoding. ARCHITECTURE.md has the picture and the rules.
//!
//! Layout, one line per module:
//!
//! - `model`: shared value types: names, sizes, offers, configs, requests parsed once. Leaf.
//! - `events`: past-tense facts, one enum per stream; bincode with a schema version.
//! - `log`: the sled event log (envelopes, hash chain, group commit, checkpoints).
//! - `projections`: `State`, the fold of every event, and the read views built from it.
//! - `secrets`: splitting secrets out of backend configs and sealing them.
//! - `replication`: the optional etcd replication of the log (leader, standbys, fencing).
//! - `actors`: backend, class and volume actors, placement, boot; `Core`, their handle.
//! - `drivers`: the `StorageDriver` trait, its limit, its conformance suite; a folder a family.
//! - `net`: client HTTP (crypto provider, reqwest client factory, backoff and retry).
//! - `wire`: encodings a driver shares with its simulator (ONTAP ZAPI).
//! - `api`: the Trident-compatible REST API (axum), its DTOs and error mapping.
//! - `k8s`: the Kubernetes frontend (StorageClasses, PVCs, PVs; kube-rs).
//! - `csi`: the Container Storage Interface frontend (gRPC over a unix socket; tonic).
//! - `cli`: the `storch` command line (clap): `serve`, REST client verbs, audits, `bench`.
//! - `config`: the `serve --config` file; `yaml`: the one YAML reader.
//! - `bench`: `storch bench` (provisioning and replay benchmarks).
//! - `sim`: array simulators (ONTAP ZAPI, SolidFire Element, E-Series SANtricity) for tests,
//!   labs and `storch-sim`.

pub mod actors;
pub mod api;
pub mod bench;
pub mod cli;
pub mod config;
pub mod csi;
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
