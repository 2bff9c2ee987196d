//! A backend's user state: what an operator decided for it (`storch update backend NAME
//! --state`, `POST /trident/v1/backend/{b}/state`), apart from its health.

/// `normal`, or `suspended`: a suspended backend takes no new volumes (placement skips its
/// pools) but still serves its own volumes: deletes, snapshots, clones (a clone lives on its
/// source's pool) and resizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UserState {
    #[default]
    Normal,
    Suspended,
}

impl UserState {
    /// The accepted spellings, for messages and help.
    pub const VALUES: &'static str = "normal, suspended";

    /// Parses the value of field `field`; the error names the field and the accepted values.
    pub fn parse(field: &str, text: &str) -> Result<UserState, String> {
        match text {
            "normal" => Ok(UserState::Normal),
            "suspended" => Ok(UserState::Suspended),
            "" => Err(format!("{field} is mandatory")),
            other => Err(format!(
                "invalid {field} {}; acceptable values: {}",
                super::quote(other),
                Self::VALUES
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            UserState::Normal => "normal",
            UserState::Suspended => "suspended",
        }
    }

    pub fn is_suspended(self) -> bool {
        self == UserState::Suspended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_two_values_and_names_the_field_otherwise() {
        assert_eq!(UserState::parse("state", "normal"), Ok(UserState::Normal));
        assert_eq!(
            UserState::parse("state", "suspended"),
            Ok(UserState::Suspended)
        );
        for bad in ["Suspended", "offline", "suspend", " normal"] {
            let e = UserState::parse("state", bad).unwrap_err();
            assert!(e.starts_with("invalid state "), "{e}");
            assert!(e.ends_with("acceptable values: normal, suspended"), "{e}");
        }
        assert_eq!(
            UserState::parse("state", "").unwrap_err(),
            "state is mandatory"
        );
        assert_eq!(UserState::Suspended.as_str(), "suspended");
        assert!(!UserState::default().is_suspended());
    }
}
