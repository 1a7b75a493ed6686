//! Keeping credentials out of outputs and logs.

mod forms;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use secrecy::{ExposeSecret, SecretString};
use url::Url;

/// What replaces a secret value in outputs.
pub const REDACTED: &str = "[redacted]";

/// The secret values a tool was configured with (what its `${NAME}`
/// references resolved to), scrubbed from whatever it returns or reports,
/// in every form [`forms`] knows.
#[derive(Clone, Default)]
pub struct Secrets {
    /// Every form of every value, longest first, so a form containing
    /// another is scrubbed whole. Held as secrets: zeroed when dropped.
    forms: Vec<(SecretString, bool, bool)>,
}

impl Secrets {
    /// The forms of `values`.
    pub fn new(values: Vec<SecretString>) -> Self {
        Secrets::with_base64_of(values, &[])
    }

    /// The forms of `values`, and the base64 forms of the header values
    /// that carry one of them (`Bearer VALUE`: an API may echo the header
    /// base64-encoded; written out, it holds the value, which goes anyway).
    /// For `Basic` credentials that carry one, also every form of what they
    /// decode to (`user:password`) and of the password.
    pub fn for_endpoint(values: Vec<SecretString>, headers: &[(String, SecretString)]) -> Self {
        let mut all = values.clone();
        let mut headers_carrying = Vec::new();
        for (_, header) in headers {
            let header = header.expose_secret().trim();
            let carries_one = values.iter().any(|v| {
                let v = v.expose_secret();
                !v.is_empty() && header.contains(v)
            });
            if carries_one {
                headers_carrying.push(SecretString::from(header.to_owned()));
                all.extend(basic_credentials(header));
            }
        }
        Secrets::with_base64_of(all, &headers_carrying)
    }

    fn with_base64_of(values: Vec<SecretString>, base64_only: &[SecretString]) -> Self {
        let mut found: Vec<forms::Form> = Vec::new();
        let mut add = |f: forms::Form| {
            if !found.contains(&f) {
                found.push(f);
            }
        };
        for value in values.iter().map(ExposeSecret::expose_secret) {
            if !value.is_empty() {
                forms::of(value).into_iter().for_each(&mut add);
            }
        }
        for value in base64_only.iter().map(ExposeSecret::expose_secret) {
            forms::base64(value.as_bytes())
                .into_iter()
                .for_each(&mut add);
        }
        found.sort_by_key(|f| std::cmp::Reverse(f.text.len()));
        Secrets {
            forms: found
                .into_iter()
                .map(|f| (SecretString::from(f.text), f.before, f.after))
                .collect(),
        }
    }

    /// `text` with every form of every secret value replaced by
    /// `[redacted]` (with the base64 characters that straddle its edges).
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (form, before, after) in &self.forms {
            let form = form.expose_secret();
            if out.contains(form) {
                out = replace(&out, form, *before, *after);
            }
        }
        out
    }
}

/// `text` with each `form` replaced by [`REDACTED`], taking the base64
/// character before it along when `before`, and the one after when `after`.
fn replace(text: &str, form: &str, before: bool, after: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(form) {
        let mut head = &rest[..at];
        if before {
            if let Some(c) = head.chars().next_back().filter(|&c| forms::is_base64(c)) {
                head = &head[..head.len() - c.len_utf8()];
            }
        }
        out.push_str(head);
        out.push_str(REDACTED);
        rest = &rest[at + form.len()..];
        if after {
            if let Some(c) = rest.chars().next().filter(|&c| forms::is_base64(c)) {
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// What a `Basic` header value decodes to, and its password: an API may
/// echo either.
fn basic_credentials(header: &str) -> Vec<SecretString> {
    let Some((scheme, encoded)) = header.split_once(' ') else {
        return Vec::new();
    };
    if !scheme.eq_ignore_ascii_case("basic") {
        return Vec::new();
    }
    let Some(decoded) = STANDARD
        .decode(encoded.trim())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some((_, password)) = decoded.split_once(':').filter(|(_, p)| !p.is_empty()) {
        out.push(SecretString::from(password.to_owned()));
    }
    out.push(SecretString::from(decoded));
    out
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
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    use proptest::prelude::*;

    /// Has `/`, `+`, `=`, a space and a quote: each encoding changes it.
    const TOKEN: &str = "ab/cd+ef=gh ij\"kl-7Hq2";

    fn secrets() -> Secrets {
        Secrets::new(vec![TOKEN.into()])
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn each_encoding_of_the_value_is_scrubbed() {
        let json = serde_json::to_string(TOKEN).unwrap_or_default();
        let json = json.trim_matches('"');
        let cases = [
            ("as is", TOKEN.to_owned()),
            (
                "percent-encoded",
                "ab%2Fcd%2Bef%3Dgh%20ij%22kl-7Hq2".to_owned(),
            ),
            (
                "percent-encoded, lower case",
                "ab%2fcd%2bef%3dgh%20ij%22kl-7Hq2".to_owned(),
            ),
            (
                "form-encoded",
                url::form_urlencoded::byte_serialize(TOKEN.as_bytes()).collect(),
            ),
            ("JSON-escaped", json.to_owned()),
            ("JSON with \\/", json.replace('/', "\\/")),
            ("hex", hex(TOKEN.as_bytes())),
            ("HEX", hex(TOKEN.as_bytes()).to_uppercase()),
            ("base64", STANDARD.encode(TOKEN)),
            ("base64 unpadded", STANDARD_NO_PAD.encode(TOKEN)),
            ("base64url", URL_SAFE.encode(TOKEN)),
            ("base64url unpadded", URL_SAFE_NO_PAD.encode(TOKEN)),
        ];
        let s = secrets();
        for (what, form) in cases {
            let text = format!("the API said {{\"echo\":\"{form}\"}} ok");
            let out = s.scrub(&text);
            assert!(
                !out.contains(&form) && out.contains(REDACTED),
                "{what}: {out}"
            );
            assert!(
                out.starts_with("the API said {\"echo\":\""),
                "{what}: {out}"
            );
            assert!(out.ends_with("\"} ok"), "{what}: {out}");
        }
    }

    #[test]
    fn html_and_non_ascii_json_escapes_are_scrubbed() {
        let s = Secrets::new(vec!["p<a>ss&wörd/1".into()]);
        for form in [
            "p\\u003ca\\u003ess\\u0026wörd/1",
            "p<a>ss&w\\u00f6rd\\/1",
            "p\\u003ca\\u003ess\\u0026w\\u00f6rd\\/1",
        ] {
            assert_eq!(s.scrub(&format!("x{form}y")), "x[redacted]y", "{form}");
        }
    }

    #[test]
    fn base64_of_bearer_and_basic_header_values_is_scrubbed() {
        let token = "tok_9aZ1xQ-very-secret";
        let creds = STANDARD.encode("svc-user:pa55/w0rd!");
        let s = Secrets::for_endpoint(
            vec![token.into(), creds.clone().into()],
            &[
                ("Authorization".into(), format!("Bearer {token}").into()),
                ("X-Creds".into(), format!("Basic {creds}").into()),
                ("Accept".into(), "application/json".into()),
            ],
        );
        // Written out, the header keeps its scheme; the value goes.
        assert_eq!(
            s.scrub(&format!("got Bearer {token}")),
            "got Bearer [redacted]"
        );
        for leaked in [
            STANDARD.encode(format!("Bearer {token}")),
            URL_SAFE_NO_PAD.encode(format!("Bearer {token}")),
            STANDARD.encode(format!("Basic {creds}")),
            "svc-user:pa55/w0rd!".to_owned(),
            "password was pa55/w0rd!".to_owned(),
            hex(format!("Bearer {token}").as_bytes()),
        ] {
            let out = s.scrub(&format!("echo: {leaked}."));
            assert!(out.contains(REDACTED), "{leaked}: {out}");
            assert!(!out.contains(token) && !out.contains("pa55/w0rd"), "{out}");
            assert!(
                !out.contains(&STANDARD_NO_PAD.encode(token)[2..10]),
                "{leaked}: {out}"
            );
        }
        // A header that carries no secret is no secret.
        assert_eq!(s.scrub("application/json"), "application/json");
    }

    /// The characters of base64(`data`) that carry a bit of
    /// `data[from..from + len]`.
    fn carrying(from: usize, len: usize) -> std::ops::Range<usize> {
        (from * 8 / 6)..((from + len) * 8).div_ceil(6)
    }

    proptest! {
        /// Wherever the value sits in the encoded data, base64 or base64url,
        /// padded or not, exactly the characters that carry a bit of it go.
        #[test]
        fn base64_anywhere_in_the_data_is_scrubbed_to_the_bit(
            prefix in proptest::collection::vec(any::<u8>(), 0..7),
            suffix in proptest::collection::vec(any::<u8>(), 0..7),
            url_safe in any::<bool>(),
            padded in any::<bool>(),
        ) {
            let engine = match (url_safe, padded) {
                (false, true) => &STANDARD,
                (false, false) => &STANDARD_NO_PAD,
                (true, true) => &URL_SAFE,
                (true, false) => &URL_SAFE_NO_PAD,
            };
            let mut data = prefix.clone();
            data.extend_from_slice(TOKEN.as_bytes());
            data.extend_from_slice(&suffix);
            let encoded = engine.encode(&data);
            let span = carrying(prefix.len(), TOKEN.len());
            let want = format!("<{}{REDACTED}{}>", &encoded[..span.start], &encoded[span.end..]);
            prop_assert_eq!(secrets().scrub(&format!("<{encoded}>")), want);
        }
    }

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
