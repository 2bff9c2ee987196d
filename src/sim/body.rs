//! JSON request bodies of the REST simulators, and the `params` of a JSON-RPC call
//! (SolidFire), checked field by field: only the fields a request has, each of the type it
//! takes. `E` is the simulator's refusal, built by the constructor given with the message.

use serde_json::{Map, Value};

/// A request body (or a call's parameters) that is a JSON object whose fields are all allowed.
pub struct Fields<'a, E> {
    map: Option<&'a Map<String, Value>>,
    err: fn(String) -> E,
    /// What refusals call a field: `field`, or a call's `parameter`.
    noun: &'static str,
}

impl<'a, E> Fields<'a, E> {
    /// Checks `body`: an object whose fields are all in `allowed`; `err` makes the refusal.
    pub fn new(
        body: Option<&'a Value>,
        allowed: &[&str],
        err: fn(String) -> E,
    ) -> Result<Fields<'a, E>, E> {
        let map = match body {
            Some(Value::Object(m)) => m,
            Some(_) => return Err(err("The request body must be a JSON object".into())),
            None => return Err(err("The request has no body".into())),
        };
        Fields::checked(Some(map), allowed, err, "field")
    }

    /// Checks the `params` of a JSON-RPC call: an object whose parameters are all in
    /// `allowed`, or null (absent) for a call without any.
    pub fn params(
        params: &'a Value,
        allowed: &[&str],
        err: fn(String) -> E,
    ) -> Result<Fields<'a, E>, E> {
        let map = match params {
            Value::Null => None,
            Value::Object(m) => Some(m),
            _ => return Err(err("params must be a JSON object".into())),
        };
        Fields::checked(map, allowed, err, "parameter")
    }

    fn checked(
        map: Option<&'a Map<String, Value>>,
        allowed: &[&str],
        err: fn(String) -> E,
        noun: &'static str,
    ) -> Result<Fields<'a, E>, E> {
        if let Some(k) = map
            .into_iter()
            .flat_map(Map::keys)
            .find(|k| !allowed.contains(&k.as_str()))
        {
            return Err(err(format!("Unrecognized {noun} {k:?}")));
        }
        Ok(Fields { map, err, noun })
    }

    /// A refusal with this message.
    pub fn invalid(&self, message: String) -> E {
        (self.err)(message)
    }

    /// The refusal of a field of the wrong type.
    pub fn wrong(&self, name: &str, expected: &str) -> E {
        self.invalid(format!(
            "Invalid value for {} {name}: expected {expected}",
            self.noun
        ))
    }

    /// A field; JSON null counts as absent.
    pub fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.and_then(|m| m.get(name)).filter(|v| !v.is_null())
    }

    pub fn required(&self, name: &str) -> Result<&'a Value, E> {
        self.get(name)
            .ok_or_else(|| self.invalid(format!("Missing required {} {name}", self.noun)))
    }

    pub fn opt_str(&self, name: &str) -> Result<Option<&'a str>, E> {
        self.get(name)
            .map(|v| v.as_str().ok_or_else(|| self.wrong(name, "a string")))
            .transpose()
    }

    /// An optional ref or identifier: an empty string counts as absent, as JSON null does.
    pub fn opt_ref(&self, name: &str) -> Result<Option<&'a str>, E> {
        Ok(self.opt_str(name)?.filter(|s| !s.is_empty()))
    }

    pub fn str(&self, name: &str) -> Result<&'a str, E> {
        self.required(name)?;
        Ok(self.opt_str(name)?.unwrap_or_default())
    }

    pub fn opt_u64(&self, name: &str) -> Result<Option<u64>, E> {
        self.get(name)
            .map(|v| {
                v.as_u64()
                    .ok_or_else(|| self.wrong(name, "a non-negative integer"))
            })
            .transpose()
    }

    pub fn u64(&self, name: &str) -> Result<u64, E> {
        self.required(name)?;
        Ok(self.opt_u64(name)?.unwrap_or_default())
    }

    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, E> {
        self.get(name)
            .map(|v| v.as_bool().ok_or_else(|| self.wrong(name, "a boolean")))
            .transpose()
    }

    pub fn bool(&self, name: &str) -> Result<bool, E> {
        self.required(name)?;
        Ok(self.opt_bool(name)?.unwrap_or_default())
    }

    pub fn opt_array(&self, name: &str) -> Result<Option<&'a Vec<Value>>, E> {
        self.get(name)
            .map(|v| v.as_array().ok_or_else(|| self.wrong(name, "an array")))
            .transpose()
    }

    /// An array of strings.
    pub fn opt_strs(&self, name: &str) -> Result<Option<Vec<&'a str>>, E> {
        let Some(a) = self.opt_array(name)? else {
            return Ok(None);
        };
        a.iter()
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| self.wrong(name, "an array of strings"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}
