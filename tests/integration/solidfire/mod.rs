//! SolidFire (Element JSON-RPC): the simulator binary spoken to over HTTPS (`sim`) and the
//! solidfire-san driver against canned answers (`canned`).

mod canned;
mod sim;
