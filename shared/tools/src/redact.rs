//! Keeping credentials out of outputs and logs.

use secrecy::{ExposeSecret, SecretString};
use url::Url;

/// What replaces a secret value in outputs.
pub const REDACTED: &str = "[redacted]";

/// The secret values a tool was configured with (what its `${NAME}`
/// references resolved to), scrubbed from whatever it returns or reports.
#[derive(Clone, Default)]
pub struct Secrets {
    /// Longest first, so a secret containing another is scrubbed whole.
    values: Vec<SecretString>,
}

impl Secrets {
    pub fn new(values: Vec<SecretString>) -> Self {
        let mut values: Vec<SecretString> = values
            .into_iter()
            .filter(|s| !s.expose_secret().is_empty())
            .collect();
        values.sort_by_key(|s| std::cmp::Reverse(s.expose_secret().len()));
        Secrets { values }
    }

    /// `text` with every secret value replaced by `[redacted]`, as written
    /// and as it reads once percent-encoded into a URL.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for s in &self.values {
            let s = s.expose_secret();
            let encoded: String = url::form_urlencoded::byte_serialize(s.as_bytes()).collect();
            for form in [s, encoded.as_str()] {
                if out.contains(form) {
                    out = out.replace(form, REDACTED);
                }
            }
        }
        out
    }
}

/// Fragments of header and query-parameter names that usually carry a
/// credential (`Authorization`, `X-Api-Key`, `X-Auth-Token`, `Cookie`, ...).
const SENSITIVE: &[&str] = &[
    "auth",
    "token",
    "key",
    "secret",
    "pass",
    "cookie",
    "session",
    "credential",
    "signature",
];

/// Whether a header (or query parameter) name looks like it carries a
/// credential, so its value must never be echoed or logged.
pub fn is_sensitive_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SENSITIVE.iter().any(|s| name.contains(s))
}

/// The URL as it may be shown or logged: user info and the values of
/// credential-like query parameters replaced by `***`.
pub fn redact_url(url: &Url) -> String {
    let mut shown = url.clone();
    if !shown.username().is_empty() || shown.password().is_some() {
        // Only fails for URLs that cannot have user info, which have none.
        let _ = shown.set_username("***");
        let _ = shown.set_password(None);
    }
    if shown.query_pairs().any(|(k, _)| is_sensitive_name(&k)) {
        let pairs: Vec<(String, String)> = shown
            .query_pairs()
            .map(|(k, v)| {
                let v = if is_sensitive_name(&k) {
                    "***".into()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        shown.query_pairs_mut().clear().extend_pairs(pairs);
    }
    shown.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_headers_are_recognised() {
        for name in [
            "Authorization",
            "X-Api-Key",
            "x-auth-token",
            "Cookie",
            "Proxy-Authorization",
            "X-Client-Secret",
        ] {
            assert!(is_sensitive_name(name), "{name}");
        }
        for name in ["Accept", "Content-Type", "User-Agent", "X-Request-Id"] {
            assert!(!is_sensitive_name(name), "{name}");
        }
    }

    #[test]
    fn urls_lose_user_info_and_secret_query_values() {
        let url = Url::parse("https://me:hunter2@example.com/p?q=1&api_key=abc123&token=t0k")
            .expect("url");
        let shown = redact_url(&url);
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("abc123"), "{shown}");
        assert!(!shown.contains("t0k"), "{shown}");
        assert!(shown.contains("q=1"), "{shown}");
        let plain = Url::parse("https://example.com/a?b=c").expect("url");
        assert_eq!(redact_url(&plain), "https://example.com/a?b=c");
    }
}
