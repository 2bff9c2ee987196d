//! The one integration test binary: one module per area, one `support` module for everything
//! tests share (starting a core or a server, the fake Kubernetes API, etcd, the simulators).
//! Run one area with `cargo test --test integration api::`; CONTRIBUTING.md says where a new
//! test goes.

mod support;

mod api;
mod bench;
mod cli;
mod core;
mod crash;
mod csi;
mod deploy;
mod drift;
mod eseries;
mod install;
mod k8s;
mod lab;
mod layering;
mod local;
mod migrations;
mod nexentastor;
mod ontap;
mod replay;
mod replication;
mod secrets;
mod solidfire;
mod suspend;
mod ui;
