//! The ONTAP drivers against the simulator: the conformance suite, behaviour beyond it, the
//! ZAPI and REST plumbing against canned answers, the simulator's REST API, per-host publish,
//! the recovery queue, and the real binary end to end.

mod adopt;
mod bench;
mod conformance;
mod drivers;
mod e2e;
mod publish;
mod recovery;
mod rest_canned;
mod rest_driver;
mod rest_sim;
mod zapi;
