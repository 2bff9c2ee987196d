//! One module per command.

pub mod serve;
