//! JSON request bodies of the REST simulators, checked field by field: only the fields a
//! request has, each of the type it takes. `E` is the simulator's refusal, built by the
//! constructor given with the message.

use serde_json::{Map, Value};

/// A request body that is a JSON object whose fields are all allowed.
pub struct Fields<'a, E> {
    map: &'a Map<String, Value>,
    err: fn(String) -> E,
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
        if let Some(k) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(err(format!("Unrecognized field {k:?}")));
        }
        Ok(Fields { map, err })
    }

    /// The refusal of a field of the wrong type.
    pub fn wrong(&self, name: &str, expected: &str) -> E {
        (self.err)(format!(
            "Invalid value for field {name}: expected {expected}"
        ))
    }

    /// A field; JSON null counts as absent.
    pub fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    pub fn required(&self, name: &str) -> Result<&'a Value, E> {
        self.get(name)
            .ok_or_else(|| (self.err)(format!("Missing required field {name}")))
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

    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, E> {
        self.get(name)
            .map(|v| v.as_bool().ok_or_else(|| self.wrong(name, "a boolean")))
            .transpose()
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
