//! Source text as the graph reads it: comments gone, string and char
//! literals emptied, `#[cfg(test)]` items removed. Every newline is kept,
//! so a byte offset of the result is on the same line as in the file.

/// A file's code, and the modules it declares for tests only
/// (`#[cfg(test)] mod NAME;`: their files are test code too).
pub(crate) struct Cleaned {
    pub(crate) code: String,
    pub(crate) test_modules: Vec<String>,
}

pub(crate) fn clean(src: &str) -> Cleaned {
    strip_test_items(&strip_comments_and_literals(src))
}

fn strip_comments_and_literals(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let start = i;
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            push_newlines(&mut out, &b[start..i.min(b.len())]);
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && starts_raw_string(&b, i) {
            // A raw string: r"…", r#"…"#, br"…".
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                // `r#ident`, a raw identifier.
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            while j < b.len() {
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            push_newlines(&mut out, &b[i..j.min(b.len())]);
            i = j;
        } else if c == '"' {
            let start = i;
            i += 1;
            while i < b.len() && b[i] != '"' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
            push_newlines(&mut out, &b[start..i.min(b.len())]);
        } else if c == '\'' {
            // A char literal ('x', '\n', '\'', '\u{..}'), or a lifetime.
            if next == Some('\\') {
                let mut j = i + 3;
                while j < b.len() && b[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn push_newlines(out: &mut String, skipped: &[char]) {
    out.extend(skipped.iter().filter(|c| **c == '\n'));
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether the `r` at `i` starts a raw string rather than ends a name:
/// nothing of a name before it, or a lone `b` (`br"…"`).
fn starts_raw_string(b: &[char], i: usize) -> bool {
    let before = |k: usize| k > 0 && is_ident(b[k - 1]);
    !before(i) || (b[i - 1] == 'b' && !before(i - 1))
}

fn strip_test_items(src: &str) -> Cleaned {
    const TEST: &str = "#[cfg(test)]";
    let mut code = src.to_owned();
    let mut test_modules = Vec::new();
    let mut from = 0;
    while let Some(k) = code[from..].find(TEST) {
        let at = from + k;
        let item = &code[at + TEST.len()..];
        let end = at + TEST.len() + item_end(item);
        if let Some(name) = declared_module(&code[at + TEST.len()..end]) {
            test_modules.push(name);
        }
        let newlines: String = code[at..end].chars().filter(|c| *c == '\n').collect();
        code.replace_range(at..end, &newlines);
        from = at + newlines.len();
    }
    Cleaned { code, test_modules }
}

/// Where the item that starts `item` ends: after its `;` (a `use` or a
/// `mod NAME;`, or any item with no body), else after its `{…}`.
fn item_end(item: &str) -> usize {
    let is_use = without_attributes_and_visibility(item).is_some_and(|r| r.starts_with("use "));
    let semi = item.find(';');
    let brace = item.find('{');
    match (semi, brace) {
        (Some(sc), _) if is_use => sc + 1,
        (Some(sc), Some(br)) if sc < br => sc + 1,
        (_, Some(br)) => {
            let mut depth = 0;
            for (k, ch) in item[br..].char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            return br + k + 1;
                        }
                    }
                    _ => {}
                }
            }
            item.len()
        }
        (Some(sc), None) => sc + 1,
        (None, None) => item.len(),
    }
}

/// `NAME` of an item `[pub[(…)]] mod NAME;`.
fn declared_module(item: &str) -> Option<String> {
    let rest = without_attributes_and_visibility(item)?;
    let name = rest.strip_prefix("mod ")?.trim().strip_suffix(';')?.trim();
    name.chars().all(is_ident).then(|| name.to_owned())
}

/// An item from its keyword: its attributes (`#[…]`) and its `pub`,
/// `pub(…)` left out.
fn without_attributes_and_visibility(item: &str) -> Option<&str> {
    let mut rest = item.trim_start();
    while rest.starts_with("#[") {
        rest = rest[rest.find(']')? + 1..].trim_start();
    }
    if let Some(r) = rest.strip_prefix("pub") {
        if r.starts_with('(') {
            rest = r[r.find(')')? + 1..].trim_start();
        } else if r.starts_with(char::is_whitespace) {
            rest = r.trim_start();
        }
    }
    Some(rest)
}

#[cfg(test)]
mod tests {
    use super::clean;

    #[test]
    fn comments_strings_and_chars_are_emptied_and_lines_kept() {
        let src = "a /* x\n y */ b // c\n\"s\\\"\nt\" r#\"u\n\"# br\"v\" '\\'' 'w' &'a x";
        let out = clean(src).code;
        assert_eq!(out, "a \n b \n\"\"\n \"\"\n b\"\" ' ' ' ' &'a x");
    }

    #[test]
    fn test_items_go_and_test_modules_are_named() {
        let src = "use a::b;\n#[cfg(test)]\nuse c::{d, e};\n#[cfg(test)]\n\
                   #[path = \"x.rs\"]\nmod harness;\n#[cfg(test)]\nmod tests {\n    \
                   use crate::f;\n}\nfn g() {}\n";
        let out = clean(src);
        assert_eq!(out.test_modules, ["harness"]);
        assert_eq!(out.code, "use a::b;\n\n\n\n\n\n\n\n\n\nfn g() {}\n");
    }
}
