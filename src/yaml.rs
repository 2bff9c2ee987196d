//! JSON and YAML documents as JSON values: the one reader of documents for config files,
//! request bodies and CLI input. Both refuse a key given twice in one mapping and nesting
//! deeper than [`MAX_DEPTH`].

use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// How deep a YAML document may nest.
pub const MAX_DEPTH: usize = 64;

/// Parses YAML (JSON is YAML too) into a JSON value, with resource budgets (depth, aliases,
/// node counts) and without the source snippet in the message (it could show a password).
pub fn parse(text: &str) -> Result<Value, String> {
    let options = serde_saphyr::options! {
        with_snippet: false,
        budget: serde_saphyr::budget! { max_depth: MAX_DEPTH },
    };
    serde_saphyr::from_str_with_options::<Value>(text, options).map_err(|e| {
        let mut msg = tidy_message(e.to_string());
        if let Some(loc) = e.location()
            && !msg.contains("line")
        {
            msg = format!("{msg} at line {} column {}", loc.line(), loc.column());
        }
        msg
    })
}

/// Parses JSON strictly: one value, nothing after it but whitespace, no key twice in an
/// object (serde_json keeps the last one silently), at most [`MAX_DEPTH`] levels. Errors give
/// the line and column and never quote the document.
pub fn parse_json(text: &[u8]) -> Result<Value, String> {
    let mut de = serde_json::Deserializer::from_slice(text);
    let value = Strict { depth: 0 }
        .deserialize(&mut de)
        .map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(value)
}

/// A JSON value read with the checks of [`parse_json`].
struct Strict {
    depth: usize,
}

impl Strict {
    fn nested<E: serde::de::Error>(&self) -> Result<Strict, E> {
        if self.depth >= MAX_DEPTH {
            return Err(E::custom(format!(
                "the document nests deeper than {MAX_DEPTH} levels"
            )));
        }
        Ok(Strict {
            depth: self.depth + 1,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.nested()?)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(A::Error::custom(format!(
                    "duplicate key {}",
                    crate::model::quote(&key)
                )));
            }
            let value = map.next_value_seed(self.nested()?)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// Drops the parser's advice to Rust programmers from its messages.
fn tidy_message(msg: String) -> String {
    for advice in [
        ", set DuplicateKeyPolicy in Options if acceptable",
        "; use from_str_multiple or from_str_multiple_with_options",
    ] {
        if let Some(at) = msg.find(advice) {
            return format!("{}{}", &msg[..at], &msg[at + advice.len()..]);
        }
    }
    msg
}

#[cfg(test)]
mod tests {
    #[test]
    fn yaml_and_json() {
        assert_eq!(
            super::parse("a: 1\nb: [x]\n").unwrap(),
            serde_json::json!({"a": 1, "b": ["x"]})
        );
        assert_eq!(
            super::parse(r#"{"a": 1}"#).unwrap(),
            serde_json::json!({"a": 1})
        );
        assert!(super::parse("a: [").is_err());
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(super::parse(&deep).is_err());
    }

    #[test]
    fn a_key_given_twice_is_refused_in_both_languages() {
        let e = super::parse_json(br#"{"a": 1, "b": {"c": 1, "c": 2}}"#).unwrap_err();
        assert!(e.contains("duplicate key \"c\""), "{e}");
        assert!(e.contains("line 1"), "{e}");
        let e = super::parse("a: 1\na: 2\n").unwrap_err();
        assert!(e.contains("duplicate"), "{e}");
        assert_eq!(
            super::parse_json(br#"{"a": [1, {"b": null}], "c": "x"}"#).unwrap(),
            serde_json::json!({"a": [1, {"b": null}], "c": "x"})
        );
    }

    #[test]
    fn json_is_read_strictly() {
        let deep = "[".repeat(super::MAX_DEPTH + 1) + &"]".repeat(super::MAX_DEPTH + 1);
        let e = super::parse_json(deep.as_bytes()).unwrap_err();
        assert!(e.contains("deeper than 64"), "{e}");
        let ok = "[".repeat(super::MAX_DEPTH) + &"]".repeat(super::MAX_DEPTH);
        assert!(super::parse_json(ok.as_bytes()).is_ok());
        assert!(super::parse_json(b"{} {}").is_err());
        assert!(super::parse_json(b"{\"a\": 1,}").is_err());
        assert!(super::parse_json(b"").is_err());
    }
}
