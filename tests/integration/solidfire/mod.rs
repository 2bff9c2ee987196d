//! SolidFire (Element JSON-RPC): the simulator binary spoken to over HTTPS (`sim`), the
//! solidfire-san driver against canned answers (`canned`; `adopt`: what an interrupted create
//! may adopt), the conformance suite against the in-process simulator (`conformance`), the
//! driver's error cases and paging against it (`drivers`), per-host access (publish,
//! unpublish) against the simulator binary (`publish`), the driver under the core (`core`),
//! and SIGKILL of `storch serve` under load (`crash`).

mod adopt;
mod canned;
mod conformance;
mod core;
mod crash;
mod drivers;
mod publish;
mod sim;
