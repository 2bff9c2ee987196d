//! The Container Storage Interface frontend (CSI v1.12.0, ../shared/spec/csi.md).
pub mod proto;
