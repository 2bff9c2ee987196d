//! The CSI v1 messages, services and clients, generated at build time from `proto/csi.proto`
//! (see `build.rs`).
#![allow(clippy::all, clippy::pedantic, missing_docs, unreachable_pub)]

tonic::include_proto!("csi.v1");
