//! NexentaStor 5 (NEF REST): the simulator binary spoken to over real HTTPS with raw
//! requests: login, tokens, faults, restarts, the HA pair and the command line (`sim`, which
//! also holds the shared helpers), pools, volume groups, zvols, snapshots, clones, jobs and
//! paging (`storage`), targets, CHAP, groups and LUN mappings (`san`); the nexentastor-iscsi
//! driver against canned answers over HTTPS (`canned`), the conformance suite against the
//! in-process simulator (`conformance`), and the driver against the simulator binary: an HA
//! pair failing over mid-run, tokens expiring, adoption (`driver`).

mod canned;
mod classes;
mod conformance;
mod crash;
mod driver;
mod e2e;
mod publish;
mod san;
mod sim;
mod storage;
