//! One module per command.

pub mod audit;
pub mod bench;
pub mod client;
pub mod csi;
pub mod drift;
pub mod events;
pub mod explain;
pub mod install;
pub mod objects;
pub mod serve;
pub mod version;
