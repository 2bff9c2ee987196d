//! E-Series (SANtricity Web Services Proxy REST): the simulator binary spoken to over HTTP(S)
//! with raw requests (`sim`).

mod sim;
