//! The Kubernetes frontend: the fake API server itself, the frontend in-process against it,
//! SolidFire volumes through it (iSCSI PVs, CHAP Secrets), and the real binary against it.

mod e2e;
mod fake_api;
mod frontend;
mod solidfire;
