//! The REST API.
