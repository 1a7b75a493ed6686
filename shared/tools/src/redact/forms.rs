//! The forms a secret value takes once an API or a log encodes it, so that
//! an API echoing a credential in its JSON, a URL, a hex dump or a base64
//! blob does not put it in front of the model (docs/tools.md, *Secrets*).
//!
//! Covered, for each value: as written; percent-encoded (every byte but
//! letters, digits and `-._~` as `%XX`, upper- or lowercase hex; and the
//! way HTML forms encode it, `+` for a space); JSON-escaped (`\"`, `\\`,
//! control characters, with or without `\/` for `/`, `\uXXXX` for
//! non-ASCII characters, and `\u003c`-style `<`, `>`, `&`, `'`); hex (lower
//! or upper case); and base64 and base64url, with or without padding,
//! wherever the value sits in the encoded data (see [`base64_fragments`]).

use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::Engine;

/// Values shorter than this (in bytes) get no base64 forms: what they
/// encode to, a few characters, turns up in unrelated base64.
pub(super) const MIN_BASE64_BYTES: usize = 6;

/// Base64's two alphabets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Alphabet {
    Standard,
    UrlSafe,
}

/// Whether `c` is a character of either base64 alphabet (padding aside).
pub(super) fn is_base64(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '-' | '_')
}

/// One form of a secret: the text to find, and whether the character
/// just before it, and the one just after it, also carry bits of the
/// secret (base64 packs 6 bits a character, so one that straddles the
/// secret's edge mixes its bits with its neighbours').
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Form {
    pub text: String,
    /// The base64 character before the text, if there is one, holds bits
    /// of the secret.
    pub before: bool,
    /// The base64 character after the text, if there is one, does.
    pub after: bool,
}

impl Form {
    fn plain(text: String) -> Form {
        Form {
            text,
            before: false,
            after: false,
        }
    }
}

/// Every form of `value`, without repeats.
pub(super) fn of(value: &str) -> Vec<Form> {
    let mut out: Vec<Form> = vec![Form::plain(value.to_owned())];
    let mut add = |f: Form| {
        if !f.text.is_empty() && !out.contains(&f) {
            out.push(f);
        }
    };
    for lower in [false, true] {
        add(Form::plain(percent(value, false, lower)));
    }
    add(Form::plain(percent(value, true, false)));
    for slash in [false, true] {
        for ascii in [false, true] {
            for html in [false, true] {
                add(Form::plain(json(value, slash, ascii, html)));
            }
        }
    }
    let hex: String = value.bytes().map(|b| format!("{b:02x}")).collect();
    add(Form::plain(hex.to_ascii_uppercase()));
    add(Form::plain(hex));
    base64(value.as_bytes()).into_iter().for_each(add);
    out
}

/// The base64 and base64url forms of `value` ([`base64_fragments`]), none
/// for a value shorter than [`MIN_BASE64_BYTES`].
pub(super) fn base64(value: &[u8]) -> Vec<Form> {
    let mut out: Vec<Form> = Vec::new();
    if value.len() < MIN_BASE64_BYTES {
        return out;
    }
    for alphabet in [Alphabet::Standard, Alphabet::UrlSafe] {
        for f in base64_fragments(value, alphabet) {
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    out
}

/// `value` percent-encoded: every byte but `A-Za-z0-9-._~` as `%XX`; or,
/// as `application/x-www-form-urlencoded` has it, every byte but
/// `A-Za-z0-9*-._`, with `+` for a space.
fn percent(value: &str, form: bool, lower: bool) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for b in value.bytes() {
        let kept = b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'.' | b'_')
            || (!form && b == b'~')
            || (form && b == b'*');
        if kept {
            out.push(char::from(b));
        } else if form && b == b' ' {
            out.push('+');
        } else if lower {
            out.push_str(&format!("%{b:02x}"));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `value` as a JSON string's contents. Always escaped: `"`, `\`, control
/// characters. `slash`: `/` as `\/` (PHP); `ascii`: every non-ASCII
/// character as `\uXXXX` (Python's default); `html`: `<`, `>`, `&`, `'` as
/// `\u003c` and so on (Go's default).
fn json(value: &str, slash: bool, ascii: bool, html: bool) -> String {
    let mut out = String::with_capacity(value.len() + 8);
    let mut units = [0u16; 2];
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' if slash => out.push_str("\\/"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\'' if html => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c if c.is_control() && c.is_ascii() => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)))
            }
            c if ascii && !c.is_ascii() => {
                for unit in c.encode_utf16(&mut units).iter() {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// The base64 characters that carry only bits of `value` when it sits at
/// each of the three offsets (modulo 3) a byte string can have inside the
/// data being encoded — at its start, or after any prefix. At offset 1
/// and 2 the character before these also holds some of the value's first
/// bits, and unless the value ends on a 3-byte boundary the character after
/// holds some of its last: the form says so, and both are redacted with it.
/// Padding is never part of a form, so padded and unpadded data match.
pub(super) fn base64_fragments(value: &[u8], alphabet: Alphabet) -> Vec<Form> {
    let engine = match alphabet {
        Alphabet::Standard => &STANDARD_NO_PAD,
        Alphabet::UrlSafe => &URL_SAFE_NO_PAD,
    };
    (0..3usize)
        .map(|offset| {
            let mut data = vec![0u8; offset];
            data.extend_from_slice(value);
            let encoded = engine.encode(&data);
            // Characters wholly made of the prefix's bits or mixed with
            // them: 0 at offset 0; 1 + the straddling one at 1 and at 2.
            let skip = [0, 2, 3][offset];
            let bits = 8 * data.len();
            let whole = bits / 6;
            let text = encoded.get(skip..whole).unwrap_or_default().to_owned();
            Form {
                text,
                before: offset != 0,
                after: bits % 6 != 0,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_and_json_forms() {
        let v = "ab/c d+é\"<";
        assert_eq!(percent(v, false, false), "ab%2Fc%20d%2B%C3%A9%22%3C");
        assert_eq!(percent(v, false, true), "ab%2fc%20d%2b%c3%a9%22%3c");
        assert_eq!(percent(v, true, false), "ab%2Fc+d%2B%C3%A9%22%3C");
        assert_eq!(json(v, false, false, false), "ab/c d+é\\\"<");
        assert_eq!(json(v, true, false, false), "ab\\/c d+é\\\"<");
        assert_eq!(json(v, false, true, false), "ab/c d+\\u00e9\\\"<");
        assert_eq!(json(v, false, false, true), "ab/c d+é\\\"\\u003c");
        assert_eq!(
            json("a\u{1}😀", false, true, false),
            "a\\u0001\\ud83d\\ude00"
        );
        // serde_json agrees where it has an opinion.
        assert_eq!(
            serde_json::to_string(v).ok().as_deref(),
            Some(format!("\"{}\"", json(v, false, false, false)).as_str())
        );
    }

    #[test]
    fn a_plain_value_has_few_forms() {
        let forms = of("abcDEF123456");
        let texts: Vec<&str> = forms.iter().map(|f| f.text.as_str()).collect();
        assert!(texts.contains(&"abcDEF123456"));
        assert!(texts.contains(&"616263444546313233343536"));
        assert!(texts.contains(&"YWJjREVGMTIzNDU2"), "{texts:?}");
        // As is, hex (all digits: one case), three base64 offsets (the two
        // alphabets agree here); every other encoding leaves it as is.
        assert_eq!(forms.len(), 5, "{texts:?}");
        let short = of("abc");
        assert!(short.iter().all(|f| !f.before && !f.after), "{short:?}");
    }

    #[test]
    fn fragments_are_the_value_at_each_offset() {
        let value = b"secret!";
        for (offset, prefix) in [(0, &b""[..]), (1, &b"x"[..]), (2, &b"xy"[..])] {
            let mut data = prefix.to_vec();
            data.extend_from_slice(value);
            data.extend_from_slice(b"tail");
            let encoded = STANDARD_NO_PAD.encode(&data);
            let f = &base64_fragments(value, Alphabet::Standard)[offset];
            assert!(
                encoded.contains(&f.text),
                "offset {offset}: {f:?} in {encoded}"
            );
        }
    }
}
