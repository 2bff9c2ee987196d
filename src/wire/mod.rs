//! Wire formats shared by a driver and its simulator, so neither imports the other.
//!
//! - `zapi.rs`: ONTAP's ZAPI XML codec (element tree, envelopes, pages, errno values).

pub mod zapi;
