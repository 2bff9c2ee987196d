//! The ONTAP drivers against the simulator: the conformance suite, behaviour beyond it, the
//! ZAPI plumbing against canned answers, and the real binary end to end.

mod adopt;
mod conformance;
mod drivers;
mod e2e;
mod rest_canned;
mod zapi;
