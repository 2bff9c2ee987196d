//! NexentaStor 5 (NEF REST): the simulator binary spoken to over real HTTPS with raw
//! requests: login, tokens, faults, restarts, the HA pair and the command line (`sim`, which
//! also holds the shared helpers), pools, volume groups, zvols, snapshots, clones, jobs and
//! paging (`storage`), targets, CHAP, groups and LUN mappings (`san`).

mod san;
mod sim;
mod storage;
