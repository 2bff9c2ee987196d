//! SolidFire (Element JSON-RPC): the simulator binary spoken to over HTTPS (`sim`).

mod sim;
