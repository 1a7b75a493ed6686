//! A credential that never shows up in logs, errors or Debug output: a
//! [`SecretString`] (redacted `Debug`, zeroed on drop) with the one thing
//! a provider needs besides sending it — redacting it from text.

use secrecy::{ExposeSecret, SecretString};
use std::fmt;

/// An API key or token. `Debug` and `Display` never show it; the value is
/// only reachable through [`Secret::expose`], at the place it goes on the wire.
#[derive(Clone)]
pub struct Secret(SecretString);

impl Secret {
    /// Wraps a credential.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(SecretString::from(value.into()))
    }

    /// The raw value, for building a request header. Do not log it.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }

    /// Replaces every occurrence of the secret in `text` (e.g. a provider's
    /// error message that quotes the key back) with `[redacted]`.
    pub fn redact_in(&self, text: &str) -> String {
        // Short values would redact unrelated text; real keys are long.
        let secret = self.expose();
        if secret.len() < 8 {
            return text.to_string();
        }
        text.replace(secret, "[redacted]")
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

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        self.expose() == other.expose()
    }
}

impl Eq for Secret {}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Secret::new(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Secret::new(value)
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
