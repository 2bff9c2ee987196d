//! Storage attributes: the registry of names and types, pool offers and class requests
//! (trident-compat.md §3.1–3.3).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// The type of a registered attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttrType {
    Bool,
    Int,
    String,
}

/// What a pool offers for one attribute. JSON: `{"offer":true}`, `{"min":N,"max":M}`,
/// `{"offer":["a","b"]}`.
#[derive(Debug, Clone, PartialEq, Eq, bincode::Encode, bincode::Decode)]
pub enum Offer {
    Bool(bool),
    Int { min: i64, max: i64 },
    Strings(BTreeSet<String>),
}

/// What a storage class requests for one attribute, parsed from its string value.
#[derive(Debug, Clone, PartialEq, Eq, bincode::Encode, bincode::Decode)]
pub enum Request {
    Bool(bool),
    Int(i64),
    String(String),
}

/// The attribute registry: name (case-sensitive) → type. `None` for unknown names.
pub fn attr_type(name: &str) -> Option<AttrType> {
    let _ = name;
    todo!("attribute registry (trident-compat §3.1)")
}

impl Offer {
    /// Whether this offer satisfies a request (trident-compat §3.3).
    pub fn matches(&self, request: &Request) -> bool {
        let _ = request;
        todo!()
    }
}

impl Request {
    /// Parses a request value for attribute `name` (trident-compat §3.2).
    pub fn parse(name: &str, value: &str) -> Result<Request, String> {
        let _ = (name, value);
        todo!()
    }
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::Bool(b) => write!(f, "{b}"),
            Request::Int(i) => write!(f, "{i}"),
            Request::String(s) => f.write_str(s),
        }
    }
}

impl Serialize for Offer {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let _ = s;
        todo!()
    }
}

impl<'de> Deserialize<'de> for Offer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let _ = d;
        todo!()
    }
}
