//! YAML documents as JSON values: the one YAML reader for config files, request bodies and
//! CLI input.

use serde_json::Value;

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
}
