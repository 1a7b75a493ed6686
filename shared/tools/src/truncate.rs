//! Cutting long tool results down to size with an explicit marker, so the
//! model knows something is missing instead of silently reading a fragment.

/// Characters of the original text kept after the marker, at most.
const MAX_TAIL_CHARS: usize = 2_000;

/// The marker put where text was cut.
fn marker(cut: usize) -> String {
    format!("\n[... {cut} characters truncated ...]\n")
}

/// Shortens `text` to at most `max_chars` characters (Unicode scalar values).
///
/// Text that fits is returned unchanged with a cut of `0`. Otherwise the
/// result keeps the head, then a marker saying how many characters were cut
/// (`[... N characters truncated ...]`), then a short tail (a fifth of the
/// kept characters, at most 2000), because the end of an output often holds
/// the error or the summary. The result, marker included, is at most
/// `max_chars` characters long — unless `max_chars` is smaller than the
/// marker itself, in which case the result is the marker alone.
///
/// Returns the text and the number of characters cut from `text`.
///
/// ```
/// let long = "x".repeat(1000);
/// let (out, cut) = baton_tools::truncate_output(&long, 100);
/// assert!(out.chars().count() <= 100);
/// assert!(out.contains(&format!("[... {cut} characters truncated ...]")));
/// assert_eq!(baton_tools::truncate_output("short", 100), ("short".to_owned(), 0));
/// ```
pub fn truncate_output(text: &str, max_chars: usize) -> (String, u64) {
    let total = text.chars().count();
    if total <= max_chars {
        return (text.to_owned(), 0);
    }
    // The marker's length depends on the number it reports. Reserve room for
    // the longest it can be (cutting everything); the real one is no longer.
    let reserved = marker(total).chars().count();
    let kept = max_chars.saturating_sub(reserved);
    let tail = (kept / 5).min(MAX_TAIL_CHARS);
    let head = kept - tail;
    let cut = total - kept;

    let head_end = byte_offset(text, head);
    let tail_start = byte_offset(text, total - tail);
    let mut out = String::with_capacity(head_end + (text.len() - tail_start) + reserved);
    out.push_str(&text[..head_end]);
    out.push_str(&marker(cut));
    out.push_str(&text[tail_start..]);
    (out, cut as u64)
}

/// Byte offset of the `chars`-th character (or the end of the text).
fn byte_offset(text: &str, chars: usize) -> usize {
    text.char_indices()
        .nth(chars)
        .map_or(text.len(), |(offset, _)| offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_text_is_untouched() {
        assert_eq!(truncate_output("hello", 5), ("hello".to_owned(), 0));
        assert_eq!(truncate_output("", 0), (String::new(), 0));
        assert_eq!(truncate_output("", 10), (String::new(), 0));
    }

    #[test]
    fn long_text_keeps_head_marker_and_tail() {
        let text: String = (0..10_000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let (out, cut) = truncate_output(&text, 1_000);
        assert!(out.chars().count() <= 1_000);
        assert!(cut > 9_000);
        assert!(out.starts_with("abcdefghij"));
        assert!(out.contains(&format!("[... {cut} characters truncated ...]")));
        // The tail is the real end of the text.
        let tail = out.rsplit('\n').next().unwrap_or_default();
        assert!(!tail.is_empty());
        assert!(text.ends_with(tail));
        assert_eq!(
            out.chars().count() as u64 - marker(cut as usize).chars().count() as u64 + cut,
            10_000
        );
    }

    #[test]
    fn multibyte_characters_are_counted_not_bytes() {
        let text = "ä".repeat(300);
        assert_eq!(truncate_output(&text, 300).1, 0);
        let (out, cut) = truncate_output(&text, 100);
        assert!(out.chars().count() <= 100);
        assert!(cut > 200);
        assert!(out.starts_with("ää"));
    }

    #[test]
    fn tiny_budget_yields_marker_only() {
        let (out, cut) = truncate_output("abcdefghijklmnop", 3);
        assert_eq!(cut, 16);
        assert_eq!(out, marker(16));
    }

    proptest! {
        #[test]
        fn truncation_is_honest(text in "\\PC{0,400}", max in 0usize..300) {
            let total = text.chars().count();
            let (out, cut) = truncate_output(&text, max);
            if total <= max {
                prop_assert_eq!(cut, 0);
                prop_assert_eq!(&out, &text);
            } else {
                let cut = cut as usize;
                prop_assert!(cut > 0 && cut <= total);
                let m = marker(cut);
                let len = out.chars().count();
                prop_assert!(len <= max.max(m.chars().count()));
                // out == head of text + marker + tail of text, with head + tail == kept.
                let kept = total - cut;
                let chars: Vec<char> = text.chars().collect();
                let found = (0..=kept).any(|head| {
                    let h: String = chars[..head].iter().collect();
                    let t: String = chars[total - (kept - head)..].iter().collect();
                    out == format!("{h}{m}{t}")
                });
                prop_assert!(found, "output is not head + marker + tail: {:?}", out);
            }
        }
    }
}
