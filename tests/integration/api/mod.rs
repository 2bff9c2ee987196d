//! All REST behaviour on a real socket: the Trident routes (`trident`), storch's own routes
//! (`storch_routes`), the event list and follow streams (`events`), probes and metrics
//! (`health`), and TLS, tokens and listen-address rules (`security`).

mod events;
mod health;
mod security;
mod storch_routes;
mod trident;
