//! The Markdown Slack's streaming methods take (`markdown_text` of
//! `chat.startStream` / `chat.appendStream`), made as safe as the mrkdwn
//! of every other post ([`crate::mrkdwn::from_markdown`]).
//!
//! A streamed answer is the model's text, which may quote a tool result:
//! `<!everyone>`, `<@U123>` or `<https://evil|safe>` in it would reach
//! Slack as markup (a mention, a disguised link) before the finished
//! answer replaces it. So, before it is streamed:
//!
//! - `&` and `<` become `&amp;` and `&lt;` (standard Markdown shows them
//!   as the characters): no Slack markup (`<…>`) and no entity that
//!   decodes into one can form. A backslash-escaped `\<` or `\&` becomes
//!   the entity, not `\&lt;`. `>` stays, for block quotes: without `<` it
//!   opens nothing.
//! - a link or image whose destination is not `http://`, `https://` or
//!   `mailto:` (`[x](!here)`) is shown as text: its `]` is escaped (`\]`),
//!   which breaks the link. So is every `]` that could close a reference
//!   link or start a link definition (`][`, `]:`), whose destination is
//!   out of sight.
//!
//! Inside code spans the entities and backslashes show as typed while the
//! answer streams (Markdown does not decode them there); the finished
//! answer, converted to mrkdwn, shows the code as written.
//!
//! Streaming cuts the text anywhere — between `\` and `<`, between `]` and
//! `(`, inside `https://`. [`decided`] therefore leaves out the end of a
//! text whose meaning the next characters could change, and what it
//! returns for a text is always the beginning of what it returns for any
//! continuation of it: the chunks streamed are the differences, and they
//! concatenate to [`decided`] of everything streamed so far, a prefix of
//! [`escape`] of it.

/// Destinations a streamed link may keep (compared in lower case).
const SAFE_SCHEMES: &[&str] = &["http://", "https://", "mailto:"];

/// All of `text` made safe, as if nothing follows.
pub fn escape(text: &str) -> String {
    scan(text, true)
}

/// The safe form of as much of `text` as is decided whatever follows it.
pub fn decided(text: &str) -> String {
    scan(text, false)
}

/// What to append to a stream that was sent `decided(before)` once the text
/// has grown to `whole`: `None` when `whole` does not continue what was
/// sent (it does whenever `whole` starts with `before`; the caller then
/// replaces the message instead).
pub fn appended(before: &str, whole: &str) -> Option<String> {
    let sent = decided(before);
    decided(whole)
        .strip_prefix(sent.as_str())
        .map(str::to_owned)
}

/// Escapes `text` left to right. Without `complete`, stops before the first
/// character whose treatment depends on what is not there yet.
fn scan(text: &str, complete: bool) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '\\' => match chars.peek().map(|&(_, n)| n) {
                None if complete => out.push('\\'),
                None => break,
                Some(escaped) => {
                    chars.next();
                    match escaped {
                        '<' => out.push_str("&lt;"),
                        '&' => out.push_str("&amp;"),
                        other => {
                            out.push('\\');
                            out.push(other);
                        }
                    }
                }
            },
            ']' => match closes_a_safe_link(&text[at + 1..], complete) {
                None => break,
                Some(true) => out.push(']'),
                Some(false) => out.push_str("\\]"),
            },
            other => out.push(other),
        }
    }
    out
}

/// Whether a `]` followed by `rest` may stay as it is: it closes no link,
/// or one to a safe destination. `None`: `rest` is too short to tell.
fn closes_a_safe_link(rest: &str, complete: bool) -> Option<bool> {
    let undecided = if complete { Some(false) } else { None };
    let Some(next) = rest.chars().next() else {
        // A `]` that ends the text closes nothing.
        return if complete { Some(true) } else { None };
    };
    match next {
        '[' | ':' => Some(false),
        '(' => {
            // Markdown allows spaces and a line break before the destination.
            let destination = rest[1..].trim_start_matches([' ', '\t', '\n', '\r']);
            let head: String = destination
                .chars()
                .take(8)
                .map(|c| c.to_ascii_lowercase())
                .collect();
            if SAFE_SCHEMES.iter().any(|s| head.starts_with(s)) {
                Some(true)
            } else if SAFE_SCHEMES.iter().any(|s| s.starts_with(head.as_str())) {
                // `](htt` may yet become a web link.
                undecided
            } else {
                Some(false)
            }
        }
        _ => Some(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn slack_markup_and_unsafe_links_are_neutralised() {
        let cases: &[(&str, &str)] = &[
            ("plain **bold** text", "plain **bold** text"),
            ("<!everyone> look", "&lt;!everyone> look"),
            ("<!here|here> and <@U123>", "&lt;!here|here> and &lt;@U123>"),
            ("<https://evil|safe>", "&lt;https://evil|safe>"),
            ("AT&T &lt;!here&gt;", "AT&amp;T &amp;lt;!here&amp;gt;"),
            ("\\<!channel> \\& x", "&lt;!channel> &amp; x"),
            ("\\]( \\\\ \\*", "\\]( \\\\ \\*"),
            ("[x](!here:x)", "[x\\](!here:x)"),
            ("[x](<!here>)", "[x\\](&lt;!here>)"),
            ("![i](javascript:alert(1))", "![i\\](javascript:alert(1))"),
            ("[x](@U123)", "[x\\](@U123)"),
            ("[ref][r]\n\n[r]: !here", "[ref\\][r]\n\n[r\\]: !here"),
            ("[docs](https://a.io/d)", "[docs](https://a.io/d)"),
            ("[docs]( HTTP://a.io)", "[docs]( HTTP://a.io)"),
            ("[mail](mailto:a@b.io)", "[mail](mailto:a@b.io)"),
            ("a [b] c", "a [b] c"),
            ("> quoted", "> quoted"),
            ("ends with ]", "ends with ]"),
            ("ends with \\", "ends with \\"),
            ("x](htt", "x\\](htt"),
        ];
        let mut failures = Vec::new();
        for (md, want) in cases {
            let got = escape(md);
            if got != *want {
                failures.push(format!("{md:?}\n   want {want:?}\n    got {got:?}"));
            }
        }
        assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    }

    #[test]
    fn an_undecided_end_is_held_back() {
        for (text, held) in [
            ("see [the docs]", "see [the docs"),
            ("see [the docs](", "see [the docs"),
            ("see [the docs](  \n htt", "see [the docs"),
            ("a \\", "a "),
            ("a <", "a &lt;"),
        ] {
            assert_eq!(decided(text), held, "{text:?}");
        }
        assert_eq!(decided("[x](https:/"), "[x");
        assert_eq!(decided("[x](https://a"), "[x](https://a");
        assert_eq!(decided("[x](!"), "[x\\](!");
    }

    #[test]
    fn a_link_cut_anywhere_streams_the_same_as_whole() {
        let text = "Hi <!everyone>! [a](!here:x) [b](https://ok.io) \\<@U1> AT&T";
        let whole = escape(text);
        for cut in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
            let first = decided(&text[..cut]);
            let rest = appended(&text[..cut], text).expect("a continuation");
            assert_eq!(format!("{first}{rest}"), decided(text), "cut at {cut}");
        }
        assert_eq!(decided(text), whole, "nothing undecided at the end");
    }

    /// Whether `md` holds Slack markup or a link to an unsafe destination.
    fn unsafe_in(md: &str) -> Option<String> {
        if md.contains('<') {
            return Some("a raw `<`".into());
        }
        let mut chars = md.char_indices();
        while let Some((at, c)) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                ']' => {
                    let rest = &md[at + 1..];
                    if rest.starts_with('[') || rest.starts_with(':') {
                        return Some(format!("a reference at {at}"));
                    }
                    if let Some(dest) = rest.strip_prefix('(') {
                        let dest = dest
                            .trim_start_matches([' ', '\t', '\n', '\r'])
                            .to_ascii_lowercase();
                        if !SAFE_SCHEMES.iter().any(|s| dest.starts_with(s)) {
                            return Some(format!("a link to {dest:?}"));
                        }
                    }
                }
                _ => {}
            }
        }
        None
    }

    proptest! {
        #[test]
        fn streamed_chunks_are_safe_and_add_up(
            s in "[\\[\\]()<>&\\\\:!@ htpsmailo/x\n]{0,80}",
            cuts in proptest::collection::vec(0usize..80, 0..6),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|&c| c <= s.len()).collect();
            cuts.sort_unstable();
            cuts.push(s.len());
            let mut streamed = String::new();
            let mut before = 0;
            for cut in cuts {
                streamed.push_str(&appended(&s[..before], &s[..cut]).expect("grows"));
                before = cut;
            }
            prop_assert_eq!(&streamed, &decided(&s));
            let whole = escape(&s);
            prop_assert!(whole.starts_with(&streamed));
            prop_assert_eq!(unsafe_in(&whole), None, "{:?} -> {:?}", s, whole);
        }

        #[test]
        fn never_panics(s in any::<String>(), cut in 0usize..64) {
            let cut = (0..=cut.min(s.len())).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
            prop_assert!(appended(&s[..cut], &s).is_some());
            prop_assert_eq!(unsafe_in(&escape(&s)), None);
        }
    }
}
