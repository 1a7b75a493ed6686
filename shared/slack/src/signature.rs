//! Slack request signatures (version `v0`).
//!
//! Slack signs every request it sends with HMAC-SHA256 over
//! `v0:{X-Slack-Request-Timestamp}:{raw body}` keyed with the app's signing
//! secret, and sends `v0={hex digest}` in `X-Slack-Signature`. A request is
//! accepted only if the signature matches (compared in constant time) and the
//! timestamp is within five minutes of now, which bounds replays.

use secrecy::{ExposeSecret, SecretString};
use std::fmt;

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Header carrying the request's Unix timestamp (seconds).
pub const TIMESTAMP_HEADER: &str = "X-Slack-Request-Timestamp";
/// Header carrying `v0=<hex HMAC-SHA256>`.
pub const SIGNATURE_HEADER: &str = "X-Slack-Signature";
/// Header Slack sets on redeliveries (1, 2, 3).
pub const RETRY_NUM_HEADER: &str = "X-Slack-Retry-Num";
/// Header Slack sets on redeliveries naming why it retried (e.g. `http_timeout`).
pub const RETRY_REASON_HEADER: &str = "X-Slack-Retry-Reason";
/// How far (either direction) a request's timestamp may be from now.
pub const MAX_CLOCK_SKEW_SECS: i64 = 5 * 60;

const VERSION_PREFIX: &str = "v0=";
/// Hex length of a SHA-256 digest.
const DIGEST_HEX_LEN: usize = 64;

/// The Slack app's signing secret: a [`SecretString`], so its `Debug` never
/// shows the value and it is zeroed on drop.
#[derive(Clone)]
pub struct SigningSecret(SecretString);

impl SigningSecret {
    /// Wraps a signing secret (as shown on the app's "Basic Information" page).
    pub fn new(secret: impl Into<String>) -> Self {
        Self(SecretString::from(secret.into()))
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC accepts keys of any length, so this cannot fail; fall back to an
        // empty key rather than panic to keep library code panic-free.
        HmacSha256::new_from_slice(self.0.expose_secret().as_bytes())
            .unwrap_or_else(|_| HmacSha256::new(&Default::default()))
    }
}

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningSecret(<redacted>)")
    }
}

/// Why a request's signature was rejected. Messages never contain secret
/// material or the expected signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// The named header was absent or empty.
    #[error("missing {0} header")]
    MissingHeader(&'static str),
    /// The named header was present but not in the expected form.
    #[error("malformed {0} header")]
    MalformedHeader(&'static str),
    /// The timestamp is more than five minutes away from now.
    #[error("stale request timestamp ({skew_secs} s from now)")]
    StaleTimestamp {
        /// `timestamp - now` in seconds (negative: in the past).
        skew_secs: i64,
    },
    /// Well-formed, fresh, but the HMAC does not match.
    #[error("signature does not match")]
    BadSignature,
}

/// Computes the `X-Slack-Signature` value for `body` sent at `timestamp`.
///
/// Used by tests, documentation and the CLI to produce requests Slack would
/// send; servers use [`verify`].
pub fn sign(secret: &SigningSecret, timestamp: i64, body: &[u8]) -> String {
    let mut mac = secret.mac();
    feed(&mut mac, &timestamp.to_string(), body);
    format!(
        "{VERSION_PREFIX}{}",
        hex::encode(mac.finalize().into_bytes())
    )
}

/// Verifies a request from Slack.
///
/// `timestamp_header` and `signature_header` are the raw header values (pass
/// `""` when a header is absent), `raw_body` the exact bytes received, and
/// `now_unix_secs` the current time. Checks, in order: both headers present,
/// their format, the five-minute window, then the HMAC in constant time.
pub fn verify(
    secret: &SigningSecret,
    timestamp_header: &str,
    signature_header: &str,
    raw_body: &[u8],
    now_unix_secs: i64,
) -> Result<(), SignatureError> {
    let timestamp_header = timestamp_header.trim();
    let signature_header = signature_header.trim();
    if timestamp_header.is_empty() {
        return Err(SignatureError::MissingHeader(TIMESTAMP_HEADER));
    }
    if signature_header.is_empty() {
        return Err(SignatureError::MissingHeader(SIGNATURE_HEADER));
    }

    // Only plain decimal digits: `+123` or ` 1` would parse but are not what
    // Slack sends, and the signed string must be byte-identical to the header.
    if !timestamp_header.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SignatureError::MalformedHeader(TIMESTAMP_HEADER));
    }
    let timestamp: i64 = timestamp_header
        .parse()
        .map_err(|_| SignatureError::MalformedHeader(TIMESTAMP_HEADER))?;

    let digest_hex = signature_header
        .strip_prefix(VERSION_PREFIX)
        .ok_or(SignatureError::MalformedHeader(SIGNATURE_HEADER))?;
    if digest_hex.len() != DIGEST_HEX_LEN {
        return Err(SignatureError::MalformedHeader(SIGNATURE_HEADER));
    }
    let digest =
        hex::decode(digest_hex).map_err(|_| SignatureError::MalformedHeader(SIGNATURE_HEADER))?;

    let skew_secs = timestamp.saturating_sub(now_unix_secs);
    if skew_secs.unsigned_abs() > MAX_CLOCK_SKEW_SECS.unsigned_abs() {
        return Err(SignatureError::StaleTimestamp { skew_secs });
    }

    let mut mac = secret.mac();
    feed(&mut mac, timestamp_header, raw_body);
    mac.verify_slice(&digest)
        .map_err(|_| SignatureError::BadSignature)
}

fn feed(mac: &mut HmacSha256, timestamp: &str, body: &[u8]) {
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
}

#[cfg(test)]
mod tests {
    use super::*;

    // Slack's published example ("Verifying requests from Slack").
    const DOC_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const DOC_TIMESTAMP: i64 = 1_531_420_618;
    const DOC_BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const DOC_SIGNATURE: &str =
        "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

    fn secret() -> SigningSecret {
        SigningSecret::new(DOC_SECRET)
    }

    fn check(ts: &str, sig: &str, body: &[u8], now: i64) -> Result<(), SignatureError> {
        verify(&secret(), ts, sig, body, now)
    }

    #[test]
    fn sign_reproduces_slack_documentation_vector() {
        assert_eq!(
            sign(&secret(), DOC_TIMESTAMP, DOC_BODY.as_bytes()),
            DOC_SIGNATURE
        );
    }

    #[test]
    fn verify_accepts_slack_documentation_vector() {
        assert_eq!(
            check(
                "1531420618",
                DOC_SIGNATURE,
                DOC_BODY.as_bytes(),
                DOC_TIMESTAMP
            ),
            Ok(())
        );
    }

    #[test]
    fn verify_accepts_at_window_edges() {
        let ts = "1531420618";
        let body = DOC_BODY.as_bytes();
        assert_eq!(check(ts, DOC_SIGNATURE, body, DOC_TIMESTAMP + 300), Ok(()));
        assert_eq!(check(ts, DOC_SIGNATURE, body, DOC_TIMESTAMP - 300), Ok(()));
    }

    #[test]
    fn stale_timestamp_is_rejected() {
        let err = check(
            "1531420618",
            DOC_SIGNATURE,
            DOC_BODY.as_bytes(),
            DOC_TIMESTAMP + 301,
        );
        assert_eq!(err, Err(SignatureError::StaleTimestamp { skew_secs: -301 }));
    }

    #[test]
    fn future_timestamp_is_rejected() {
        let err = check(
            "1531420618",
            DOC_SIGNATURE,
            DOC_BODY.as_bytes(),
            DOC_TIMESTAMP - 301,
        );
        assert_eq!(err, Err(SignatureError::StaleTimestamp { skew_secs: 301 }));
    }

    #[test]
    fn stale_check_happens_even_with_a_valid_signature_for_an_old_time() {
        // A correctly signed replay from an hour ago must still be refused.
        let old = DOC_TIMESTAMP - 3600;
        let sig = sign(&secret(), old, b"{}");
        let err = check(&old.to_string(), &sig, b"{}", DOC_TIMESTAMP);
        assert!(matches!(err, Err(SignatureError::StaleTimestamp { .. })));
    }

    #[test]
    fn tampered_body_is_rejected() {
        let tampered = DOC_BODY.replace("roadrunner", "wileecoyote");
        assert_eq!(
            check(
                "1531420618",
                DOC_SIGNATURE,
                tampered.as_bytes(),
                DOC_TIMESTAMP
            ),
            Err(SignatureError::BadSignature)
        );
    }

    #[test]
    fn tampered_timestamp_is_rejected() {
        assert_eq!(
            check(
                "1531420619",
                DOC_SIGNATURE,
                DOC_BODY.as_bytes(),
                DOC_TIMESTAMP
            ),
            Err(SignatureError::BadSignature)
        );
    }

    #[test]
    fn wrong_secret_is_rejected() {
        let other = SigningSecret::new("not-the-secret");
        assert_eq!(
            verify(
                &other,
                "1531420618",
                DOC_SIGNATURE,
                DOC_BODY.as_bytes(),
                DOC_TIMESTAMP
            ),
            Err(SignatureError::BadSignature)
        );
    }

    #[test]
    fn missing_headers_are_reported_by_name() {
        let body = DOC_BODY.as_bytes();
        assert_eq!(
            check("", DOC_SIGNATURE, body, DOC_TIMESTAMP),
            Err(SignatureError::MissingHeader(TIMESTAMP_HEADER))
        );
        assert_eq!(
            check("1531420618", "  ", body, DOC_TIMESTAMP),
            Err(SignatureError::MissingHeader(SIGNATURE_HEADER))
        );
    }

    #[test]
    fn malformed_headers_are_rejected() {
        let body = DOC_BODY.as_bytes();
        let digest = DOC_SIGNATURE.trim_start_matches("v0=");
        let cases: Vec<(&str, String, &'static str)> = vec![
            // No `v0=` prefix.
            ("1531420618", digest.to_string(), SIGNATURE_HEADER),
            // Unknown version.
            ("1531420618", format!("v1={digest}"), SIGNATURE_HEADER),
            // Too short / too long.
            (
                "1531420618",
                DOC_SIGNATURE[..DOC_SIGNATURE.len() - 2].to_string(),
                SIGNATURE_HEADER,
            ),
            ("1531420618", format!("{DOC_SIGNATURE}00"), SIGNATURE_HEADER),
            // Right length, not hex.
            (
                "1531420618",
                format!("v0={}", "z".repeat(64)),
                SIGNATURE_HEADER,
            ),
            // Timestamp not a plain integer.
            ("15314206l8", DOC_SIGNATURE.to_string(), TIMESTAMP_HEADER),
            ("-1531420618", DOC_SIGNATURE.to_string(), TIMESTAMP_HEADER),
            ("1531420618.5", DOC_SIGNATURE.to_string(), TIMESTAMP_HEADER),
            (
                "99999999999999999999999",
                DOC_SIGNATURE.to_string(),
                TIMESTAMP_HEADER,
            ),
        ];
        for (ts, sig, header) in cases {
            assert_eq!(
                check(ts, &sig, body, DOC_TIMESTAMP),
                Err(SignatureError::MalformedHeader(header)),
                "ts={ts:?} sig={sig:?}"
            );
        }
    }

    #[test]
    fn uppercase_hex_digest_is_accepted() {
        // Hex decoding is case-insensitive; the bytes are what is compared.
        let upper = format!("v0={}", DOC_SIGNATURE[3..].to_uppercase());
        assert_eq!(
            check("1531420618", &upper, DOC_BODY.as_bytes(), DOC_TIMESTAMP),
            Ok(())
        );
    }

    #[test]
    fn errors_and_debug_do_not_leak_the_secret() {
        let s = secret();
        assert!(!format!("{s:?}").contains(DOC_SECRET));
        let errors = [
            SignatureError::MissingHeader(TIMESTAMP_HEADER),
            SignatureError::MalformedHeader(SIGNATURE_HEADER),
            SignatureError::StaleTimestamp { skew_secs: 1000 },
            SignatureError::BadSignature,
        ];
        for e in errors {
            let text = format!("{e} {e:?}");
            assert!(!text.contains(DOC_SECRET));
            assert!(!text.contains(&DOC_SIGNATURE[3..]));
        }
    }

    #[test]
    fn extreme_now_values_do_not_overflow() {
        let body = DOC_BODY.as_bytes();
        assert!(matches!(
            check("1531420618", DOC_SIGNATURE, body, i64::MIN),
            Err(SignatureError::StaleTimestamp { .. })
        ));
        assert!(matches!(
            check("1531420618", DOC_SIGNATURE, body, i64::MAX),
            Err(SignatureError::StaleTimestamp { .. })
        ));
    }
}
