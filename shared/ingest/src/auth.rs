//! Bearer-token authentication of the task routes.

use crate::response::ApiError;
use http::HeaderMap;
use secrecy::{ExposeSecret, SecretString};
use std::fmt;

/// The API bearer token. Its Debug output never shows it.
#[derive(Clone)]
pub struct ApiToken(SecretString);

impl ApiToken {
    /// Refuses tokens too short to be secret.
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.len() < 16 {
            return Err("BATON_API_TOKEN must be at least 16 characters".into());
        }
        Ok(ApiToken(SecretString::from(s.to_owned())))
    }

    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

impl fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiToken([redacted])")
    }
}

/// The credentials of a `Bearer` authorization: the scheme is matched
/// without regard to case (RFC 9110, 11.1), and one or more spaces may
/// follow it (RFC 9110, 11.4).
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, rest) = value.trim_start().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| rest.trim_start_matches(' '))
}

pub(crate) fn check_bearer(
    expected: Option<&ApiToken>,
    headers: &HeaderMap,
) -> Result<(), ApiError> {
    let Some(expected) = expected else {
        return Err(ApiError::unauthorized(
            "the task API is disabled: BATON_API_TOKEN is not set",
        ));
    };
    let given = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_credentials)
        .ok_or_else(|| ApiError::unauthorized("missing bearer token"))?;
    if baton_core::token::constant_time_eq(given.trim().as_bytes(), expected.expose().as_bytes()) {
        Ok(())
    } else {
        Err(ApiError::unauthorized("invalid bearer token"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_bearer_tokens() {
        let t = ApiToken::parse("0123456789abcdef").unwrap();
        let mut h = HeaderMap::new();
        assert!(check_bearer(Some(&t), &h).is_err());
        h.insert("authorization", "Bearer 0123456789abcdeX".parse().unwrap());
        assert!(check_bearer(Some(&t), &h).is_err());
        h.insert("authorization", "Bearer 0123456789abcdef".parse().unwrap());
        assert!(check_bearer(Some(&t), &h).is_ok());
        // The scheme's case does not matter (RFC 9110); the token's does.
        for value in [
            "bearer 0123456789abcdef",
            "BEARER 0123456789abcdef",
            "bEaReR  0123456789abcdef",
        ] {
            h.insert("authorization", value.parse().unwrap());
            assert!(check_bearer(Some(&t), &h).is_ok(), "{value}");
        }
        for value in [
            "Bearer 0123456789ABCDEF",
            "Basic 0123456789abcdef",
            "Bearer0123456789abcdef",
            "0123456789abcdef",
        ] {
            h.insert("authorization", value.parse().unwrap());
            assert!(check_bearer(Some(&t), &h).is_err(), "{value}");
        }
        assert!(check_bearer(None, &h).is_err());
        assert!(!format!("{t:?}").contains("0123"));
        assert!(ApiToken::parse("short").is_err());
    }
}
