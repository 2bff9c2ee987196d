//! SolidFire (Element JSON-RPC): the simulator binary spoken to over HTTPS (`sim`), the
//! solidfire-san driver against canned answers (`canned`) and the conformance suite against
//! the in-process simulator (`conformance`).

mod canned;
mod conformance;
mod sim;
