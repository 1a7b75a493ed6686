//! Files a task sends out (`send_file`): the name a file is given, made
//! safe whatever the model asked for, and what is kept of a file sent to
//! an HTTP client.
//!
//! A name is one plain file name: no directories (`../x` is `x`), no
//! control characters, only ASCII letters, digits, `.`, `_` and `-` (any
//! other character becomes `_`), no leading dot, at most
//! [`MAX_NAME_CHARS`] characters with its extension kept. Such a name is
//! safe as a Slack file name, a blob key segment and a URL path segment
//! as it is, so the route `GET /tasks/{id}/files/{name}` needs no decoding.

use serde::{Deserialize, Serialize};

/// The longest name a sent file keeps.
pub const MAX_NAME_CHARS: usize = 100;

/// The name of a file that has none left after sanitising.
pub const FALLBACK_NAME: &str = "file";

/// The longest extension kept whole when a long name is cut.
const MAX_EXTENSION_CHARS: usize = 16;

/// `raw` as a safe file name (see the module docs). Never empty.
pub fn sanitize_name(raw: &str) -> String {
    // Only the last path segment, whichever separator the model used.
    let base = raw.rsplit(['/', '\\']).next().unwrap_or_default();
    let mut name = String::with_capacity(base.len());
    for c in base.chars() {
        let keep = c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        let c = if keep { c } else { '_' };
        // One `_` for a run of replaced characters.
        if !(c == '_' && !keep && name.ends_with('_')) {
            name.push(c);
        }
    }
    // No hidden files, no `.` or `..`, nothing that ends in a dot.
    let name = name.trim_start_matches(['.', '_']).trim_end_matches('.');
    let name = if name.is_empty() { FALLBACK_NAME } else { name };
    cut(name)
}

/// `name` (ASCII) at most [`MAX_NAME_CHARS`] long, its extension kept.
fn cut(name: &str) -> String {
    if name.len() <= MAX_NAME_CHARS {
        return name.to_owned();
    }
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e)
        .filter(|e| !e.is_empty() && e.len() <= MAX_EXTENSION_CHARS);
    match ext {
        Some(ext) => {
            let stem = &name[..MAX_NAME_CHARS - ext.len() - 1];
            format!("{stem}.{ext}")
        }
        None => name[..MAX_NAME_CHARS].to_owned(),
    }
}

/// Whether `name` is one [`sanitize_name`] could have made: the route
/// answers 404 at once for anything else.
pub fn is_sanitized(name: &str) -> bool {
    !name.is_empty() && sanitize_name(name) == name
}

/// A file a task sent to its HTTP client: listed in the task's status
/// (`files`) and served by `GET /tasks/{id}/files/{name}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentFile {
    /// Its sanitised name, unique among the task's files.
    pub name: String,
    pub media_type: String,
    /// Its length in bytes.
    pub size: u64,
    /// Where its bytes are in the blob store.
    pub blob_key: String,
    /// The idempotency key of the `send_file` call that sent it
    /// (`task:step:call`): the same call run again finds its own file.
    pub call: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lose_paths_control_characters_and_length() {
        let cases = [
            ("report.csv", "report.csv"),
            ("../x", "x"),
            ("../../etc/passwd", "passwd"),
            ("..\\..\\boot.ini", "boot.ini"),
            ("dir/", FALLBACK_NAME),
            ("..", FALLBACK_NAME),
            ("", FALLBACK_NAME),
            (".env", "env"),
            ("a\u{0}b\nc\td.txt", "a_b_c_d.txt"),
            ("my report (final).pdf", "my_report_final_.pdf"),
            ("Grüße.txt", "Gr_e.txt"),
            ("name.", "name"),
            ("__init__.py", "init__.py"),
            ("a%2Fb.txt", "a_2Fb.txt"),
        ];
        for (raw, want) in cases {
            assert_eq!(sanitize_name(raw), want, "{raw:?}");
            assert!(is_sanitized(want), "{want:?}");
        }
    }

    #[test]
    fn long_names_keep_their_extension() {
        let long = format!("{}.json", "a".repeat(300));
        let name = sanitize_name(&long);
        assert_eq!(name.len(), MAX_NAME_CHARS);
        assert!(name.ends_with("a.json"), "{name}");
        let no_ext = "b".repeat(300);
        assert_eq!(sanitize_name(&no_ext), "b".repeat(MAX_NAME_CHARS));
        let long_ext = format!("x.{}", "c".repeat(200));
        assert_eq!(sanitize_name(&long_ext).len(), MAX_NAME_CHARS);
    }

    #[test]
    fn only_sanitised_names_are_looked_up() {
        assert!(!is_sanitized("../x"));
        assert!(!is_sanitized(""));
        assert!(!is_sanitized("a b"));
        assert!(is_sanitized("a_b.txt"));
    }
}
