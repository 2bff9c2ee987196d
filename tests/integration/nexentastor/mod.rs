//! NexentaStor 5 (NEF REST): the nexentastor-iscsi driver against canned answers over HTTPS
//! (`canned`).

mod canned;
mod conformance;
