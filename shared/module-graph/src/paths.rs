//! The paths code names: those of `use` statements (each with the name it
//! brings in) and the `crate::…`, `super::…` and `self::…` paths written
//! inline. Each comes with its byte offset in the code, for its line.

/// A `use` statement: whether it is `pub` (any visibility), where it
/// starts, and the paths of its tree with the name each brings in (`*`
/// for a glob).
pub(crate) struct Use {
    pub(crate) public: bool,
    pub(crate) at: usize,
    pub(crate) paths: Vec<(Vec<String>, String)>,
}

pub(crate) fn uses(code: &str) -> Vec<Use> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = find_word(code, from, "use") {
        let Some(end) = code[at..].find(';') else {
            break;
        };
        out.push(Use {
            public: visibility_before(&code[..at]),
            at,
            paths: expand(&code[at + 3..at + end]),
        });
        from = at + end;
    }
    out
}

/// Whether `before` ends with `pub` or `pub(…)`.
fn visibility_before(before: &str) -> bool {
    let before = before.trim_end();
    let before = match before.strip_suffix(')') {
        Some(inner) => inner.rsplit_once('(').map_or("", |(b, _)| b.trim_end()),
        None => before,
    };
    before
        .strip_suffix("pub")
        .is_some_and(|b| !b.ends_with(is_ident))
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The first `word` at or after `from` that stands alone and is followed
/// by white space.
fn find_word(s: &str, mut from: usize, word: &str) -> Option<usize> {
    while let Some(k) = s[from..].find(word) {
        let at = from + k;
        let alone_before = !s[..at].ends_with(is_ident);
        let space_after = s[at + word.len()..]
            .chars()
            .next()
            .is_some_and(char::is_whitespace);
        if alone_before && space_after {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// The paths a `use` tree names, each with the name it brings in.
fn expand(tree: &str) -> Vec<(Vec<String>, String)> {
    let tokens = tokenize(tree);
    let mut out = Vec::new();
    let mut pos = 0;
    walk(&tokens, &mut pos, &[], &mut out);
    out
}

fn tokenize(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if is_ident(c) {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        match c {
            ':' if chars.peek() == Some(&':') => {
                chars.next();
                out.push("::".into());
            }
            '{' | '}' | ',' | '*' => out.push(c.to_string()),
            _ => {}
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

fn walk(t: &[String], pos: &mut usize, prefix: &[String], out: &mut Vec<(Vec<String>, String)>) {
    let mut path = prefix.to_vec();
    while *pos < t.len() {
        match t[*pos].as_str() {
            "{" => {
                *pos += 1;
                while *pos < t.len() && t[*pos] != "}" {
                    walk(t, pos, &path, out);
                    if *pos < t.len() && t[*pos] == "," {
                        *pos += 1;
                    }
                }
                *pos += 1;
                return;
            }
            "::" => *pos += 1,
            "," | "}" => break,
            "*" => {
                *pos += 1;
                out.push((path, "*".into()));
                return;
            }
            "as" => {
                *pos += 1;
                let alias = t.get(*pos).cloned().unwrap_or_default();
                *pos += 1;
                out.push((path, alias));
                return;
            }
            "self" if !path.is_empty() => {
                *pos += 1;
                let name = path.last().cloned().unwrap_or_default();
                out.push((path, name));
                return;
            }
            word => {
                path.push(word.to_owned());
                *pos += 1;
            }
        }
    }
    if let Some(name) = path.last().cloned() {
        out.push((path, name));
    }
}

/// `crate::a::b`, `super::a` and `self::a` paths outside `use`
/// statements, each with its offset.
pub(crate) fn inline_paths(code: &str) -> Vec<(Vec<String>, usize)> {
    let mut out = Vec::new();
    for root in ["crate", "super", "self"] {
        let pat = format!("{root}::");
        let mut from = 0;
        while let Some(k) = code[from..].find(&pat) {
            let at = from + k;
            from = at + pat.len();
            if code[..at].ends_with(|c: char| is_ident(c) || c == ':') {
                continue;
            }
            let mut path = vec![root.to_owned()];
            let mut rest = &code[at + pat.len()..];
            loop {
                let n = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
                if n == 0 {
                    break;
                }
                path.push(rest[..n].to_owned());
                rest = &rest[n..];
                match rest.strip_prefix("::") {
                    Some(r) => rest = r,
                    None => break,
                }
            }
            out.push((path, at));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{inline_paths, uses};

    fn strings(path: &[&str]) -> Vec<String> {
        path.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_use_tree_names_each_path_and_what_it_brings_in() {
        let code = "pub(crate) use crate::a::{b::{self, C as D}, e::*};\nuse x;";
        let all = uses(code);
        assert_eq!(all.len(), 2);
        assert!(all[0].public && !all[1].public);
        assert_eq!(all[1].at, code.find("use x").unwrap());
        let want = [
            (strings(&["crate", "a", "b"]), "b".to_owned()),
            (strings(&["crate", "a", "b", "C"]), "D".to_owned()),
            (strings(&["crate", "a", "e"]), "*".to_owned()),
        ];
        assert_eq!(all[0].paths, want);
    }

    #[test]
    fn inline_paths_stop_at_the_last_name() {
        let code = "fn f(x: crate::a::B) -> super::C { self::g(x).h::<i32>() }";
        let found: Vec<Vec<String>> = inline_paths(code).into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            found,
            [
                strings(&["crate", "a", "B"]),
                strings(&["super", "C"]),
                strings(&["self", "g"]),
            ]
        );
    }
}
