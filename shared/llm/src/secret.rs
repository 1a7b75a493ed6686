//! A credential that never shows up in logs, errors or Debug output.

use std::fmt;

/// An API key or token. `Debug` and `Display` print `[redacted]`; the value is
/// only reachable through [`Secret::expose`], at the place it goes on the wire.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a credential.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The raw value, for building a request header. Do not log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Replaces every occurrence of the secret in `text` (e.g. a provider's
    /// error message that quotes the key back) with `[redacted]`.
    pub fn redact_in(&self, text: &str) -> String {
        // Short values would redact unrelated text; real keys are long.
        if self.0.len() < 8 {
            return text.to_string();
        }
        text.replace(&self.0, "[redacted]")
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Secret(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Secret(value.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_hide_the_value() {
        let s = Secret::new("sk-very-secret-value");
        assert!(!format!("{s:?}").contains("very-secret"));
        assert!(!format!("{s}").contains("very-secret"));
        assert_eq!(s.expose(), "sk-very-secret-value");
    }

    #[test]
    fn redact_in_removes_quoted_keys() {
        let s = Secret::new("sk-very-secret-value");
        assert_eq!(
            s.redact_in("bad key sk-very-secret-value!"),
            "bad key [redacted]!"
        );
    }
}
