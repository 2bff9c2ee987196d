//! The `fake` driver: an in-memory array for tests and benchmarks (trident-compat §4.11),
//! with latency and failure injection and an optional fsynced state file.
