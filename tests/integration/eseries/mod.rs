//! E-Series (SANtricity Web Services Proxy REST): the simulator binary spoken to over HTTP(S)
//! with raw requests: registration, faults, restarts and the command line (`sim`, which also
//! holds the shared helpers), pools and volumes (`volumes`), hosts and mappings (`hosts`),
//! expansion and copy jobs (`features`); the eseries-iscsi driver against canned proxy
//! answers (`canned`: the scripted server and discovery; `canned_volumes`: volume
//! operations; `canned_publish`: a host per node and its mapping), the conformance suite against the simulator (`conformance`), its error cases
//! against the simulator (`drivers`), per-host access (publish, unpublish: `publish`), under
//! the core (`core`), and `storch serve` SIGKILLed under load against it (`crash`).

mod canned;
mod canned_publish;
mod canned_volumes;
mod conformance;
pub(crate) mod core;
mod crash;
mod drivers;
mod features;
mod hosts;
mod publish;
mod sim;
mod volumes;
