//! The Kubernetes frontend: the fake API server itself, the frontend in-process against it,
//! SolidFire, E-Series and NexentaStor volumes through it (iSCSI PVs, CHAP Secrets, raw block),
//! claim expansion, orphaned volumes and retry state of deleted objects, and the real binary
//! against it.

mod drift;
mod e2e;
mod eseries;
mod expand;
mod fake_api;
mod frontend;
mod nexentastor;
mod orphans;
mod solidfire;
