//! No cycles among baton-core's modules: reads `src/`, builds the graph of
//! references between module files (`crate::…`, `super::…` and the names
//! a `use` brings in, each followed through `pub use` re-exports to the
//! module that defines it), and fails naming the cycle if there is one.
//!
//! Test code (`#[cfg(test)]` items) and comments are left out: a test may
//! use any module. `pub use` lines of `lib.rs` and of a directory's
//! `mod.rs` only re-export, so they are not dependencies.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module, as the path from the crate root (`task::record`; `""` the root).
type Module = String;

struct Graph {
    /// Each module's `pub use` names: name → absolute path.
    exports: BTreeMap<Module, BTreeMap<String, Vec<String>>>,
    modules: BTreeSet<Module>,
    /// (from, to) → one reference that makes the edge, for the message.
    edges: BTreeMap<(Module, Module), String>,
}

fn join(m: &str, child: &str) -> Module {
    if m.is_empty() {
        child.to_owned()
    } else {
        format!("{m}::{child}")
    }
}

fn parent(m: &str) -> Module {
    m.rsplit_once("::")
        .map(|(p, _)| p.to_owned())
        .unwrap_or_default()
}

/// Source without comments, string and char literals (emptied), and
/// without `#[cfg(test)]` items.
fn clean(src: &str) -> String {
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
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&b, i) {
            // A raw string: r"…", r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}'), or a lifetime.
            if next == Some('\\') {
                let mut j = i + 2;
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
    strip_test_items(&out)
}

fn ident_before(b: &[char], i: usize) -> bool {
    i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')
}

fn strip_test_items(src: &str) -> String {
    let mut s = src.to_owned();
    while let Some(at) = s.find("#[cfg(test)]") {
        let rest = &s[at..];
        let semi = rest.find(';');
        let brace = rest.find('{');
        let end = match (semi, brace) {
            (Some(sc), Some(br)) if sc < br => at + sc + 1,
            (_, Some(br)) => {
                let mut depth = 0;
                let mut end = s.len();
                for (k, ch) in s[at + br..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = at + br + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (Some(sc), None) => at + sc + 1,
            (None, None) => s.len(),
        };
        s.replace_range(at..end, "");
    }
    s
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
        if c.is_alphanumeric() || c == '_' {
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

/// `use` statements: (is `pub`, tree).
fn uses(src: &str) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(at) = find_word(rest, "use") {
        let before = rest[..at].trim_end();
        let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
        let Some(end) = rest[at..].find(';') else {
            break;
        };
        out.push((public, rest[at + 3..at + end].to_owned()));
        rest = &rest[at + end..];
    }
    out
}

fn find_word(s: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(k) = s[from..].find(word) {
        let at = from + k;
        let ok_before = s[..at]
            .chars()
            .last()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        let ok_after = s[at + word.len()..]
            .chars()
            .next()
            .is_some_and(char::is_whitespace);
        if ok_before && ok_after {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// `crate::a::b` and `super::a` paths outside `use` statements.
fn inline_paths(src: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for root in ["crate", "super"] {
        let mut from = 0;
        let pat = format!("{root}::");
        while let Some(k) = src[from..].find(&pat) {
            let at = from + k;
            from = at + pat.len();
            if src[..at]
                .chars()
                .last()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
            {
                continue;
            }
            let mut path = vec![root.to_owned()];
            let mut rest = &src[at + pat.len()..];
            loop {
                let n = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
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
            out.push(path);
        }
    }
    out
}

impl Graph {
    /// Builds the graph of `files` (path under `src/` → source).
    fn build(files: &BTreeMap<String, String>) -> Graph {
        let module_of = |path: &str| -> Module {
            let p = path.trim_end_matches(".rs");
            let p = p.strip_suffix("/mod").unwrap_or(p);
            if p == "lib" {
                String::new()
            } else {
                p.replace('/', "::")
            }
        };
        let cleaned: BTreeMap<Module, (bool, String)> = files
            .iter()
            .map(|(path, src)| {
                let structural = path == "lib.rs" || path.ends_with("/mod.rs");
                (module_of(path), (structural, clean(src)))
            })
            .collect();
        let modules: BTreeSet<Module> = cleaned.keys().cloned().collect();
        let mut graph = Graph {
            exports: BTreeMap::new(),
            modules,
            edges: BTreeMap::new(),
        };
        for (m, (_, src)) in &cleaned {
            let mut names = BTreeMap::new();
            for (public, tree) in uses(src) {
                if !public {
                    continue;
                }
                for (path, name) in expand(&tree) {
                    if let Some(abs) = graph.absolute(m, &path) {
                        names.insert(name, abs);
                    }
                }
            }
            graph.exports.insert(m.clone(), names);
        }
        for (m, (structural, src)) in &cleaned {
            let mut refs: Vec<Vec<String>> = Vec::new();
            for (public, tree) in uses(src) {
                if public && *structural {
                    continue;
                }
                refs.extend(expand(&tree).into_iter().map(|(p, _)| p));
            }
            refs.extend(inline_paths(src));
            for path in refs {
                let Some(abs) = graph.absolute(m, &path) else {
                    continue;
                };
                let Some(to) = graph.resolve(&abs, 0) else {
                    continue;
                };
                if &to != m && !to.is_empty() && !m.starts_with(&format!("{to}::")) {
                    graph
                        .edges
                        .entry((m.clone(), to))
                        .or_insert_with(|| path.join("::"));
                }
            }
        }
        graph
    }

    /// `path` as written in module `m`, from the crate root; `None` for
    /// another crate's.
    fn absolute(&self, m: &str, path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        let (mut base, rest): (Module, &[String]) = match first.as_str() {
            "crate" => (String::new(), &path[1..]),
            "self" => (m.to_owned(), &path[1..]),
            "super" => {
                let mut base = parent(m);
                let mut rest = &path[1..];
                while rest.first().is_some_and(|s| s == "super") {
                    base = parent(&base);
                    rest = &rest[1..];
                }
                (base, rest)
            }
            child if self.modules.contains(&join(m, child)) => (m.to_owned(), path),
            _ => return None,
        };
        let mut abs: Vec<String> = if base.is_empty() {
            Vec::new()
        } else {
            base.split("::").map(str::to_owned).collect()
        };
        base.clear();
        abs.extend(rest.iter().cloned());
        Some(abs)
    }

    /// The module that defines what `abs` names, through re-exports.
    fn resolve(&self, abs: &[String], depth: usize) -> Option<Module> {
        if depth > 16 {
            return None;
        }
        let mut cur = String::new();
        for (i, seg) in abs.iter().enumerate() {
            let child = join(&cur, seg);
            if self.modules.contains(&child) {
                cur = child;
                continue;
            }
            if let Some(target) = self.exports.get(&cur).and_then(|e| e.get(seg)) {
                let mut next = target.clone();
                next.extend(abs[i + 1..].iter().cloned());
                return self.resolve(&next, depth + 1);
            }
            break;
        }
        Some(cur)
    }

    /// A cycle, as the modules on it (the first repeated at the end).
    fn cycle(&self) -> Option<Vec<Module>> {
        let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (from, to) in self.edges.keys() {
            next.entry(from).or_default().push(to);
        }
        // 0: unseen, 1: on the stack, 2: done.
        let mut state: BTreeMap<&str, u8> = BTreeMap::new();
        for start in self.modules.iter() {
            let mut stack: Vec<&str> = Vec::new();
            if let Some(c) = visit(start, &next, &mut state, &mut stack) {
                return Some(c);
            }
        }
        None
    }

    fn describe(&self, cycle: &[Module]) -> String {
        let hops: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                let via = &self.edges[&(w[0].clone(), w[1].clone())];
                format!("  {} -> {}  (`{via}`)", w[0], w[1])
            })
            .collect();
        format!("module cycle: {}\n{}", cycle.join(" -> "), hops.join("\n"))
    }
}

fn visit<'a>(
    m: &'a str,
    next: &BTreeMap<&'a str, Vec<&'a str>>,
    state: &mut BTreeMap<&'a str, u8>,
    stack: &mut Vec<&'a str>,
) -> Option<Vec<Module>> {
    match state.get(m) {
        Some(2) => return None,
        Some(1) => {
            let from = stack.iter().position(|s| *s == m).unwrap_or(0);
            let mut cycle: Vec<Module> = stack[from..].iter().map(|s| s.to_string()).collect();
            cycle.push(m.to_owned());
            return Some(cycle);
        }
        _ => {}
    }
    state.insert(m, 1);
    stack.push(m);
    for to in next.get(m).into_iter().flatten() {
        if let Some(c) = visit(to, next, state, stack) {
            return Some(c);
        }
    }
    stack.pop();
    state.insert(m, 2);
    None
}

fn read_src(dir: &Path, under: &str, out: &mut BTreeMap<String, String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read src")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let rel = if under.is_empty() {
            name.clone()
        } else {
            format!("{under}/{name}")
        };
        if path.is_dir() {
            read_src(&path, &rel, out);
        } else if name.ends_with(".rs") {
            out.insert(rel, std::fs::read_to_string(&path).expect("read file"));
        }
    }
}

#[test]
fn baton_core_has_no_module_cycle() {
    let mut files = BTreeMap::new();
    read_src(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        "",
        &mut files,
    );
    let graph = Graph::build(&files);
    // The graph is read at all: the task store uses the task record.
    assert!(
        graph
            .edges
            .contains_key(&("store::tasks".into(), "task::record".into())),
        "edges: {:?}",
        graph.edges.keys().collect::<Vec<_>>()
    );
    if let Some(cycle) = graph.cycle() {
        panic!("{}", graph.describe(&cycle));
    }
}

fn graph_of(files: &[(&str, &str)]) -> Graph {
    Graph::build(
        &files
            .iter()
            .map(|(p, s)| (p.to_string(), s.to_string()))
            .collect(),
    )
}

#[test]
fn a_cycle_is_found_and_named() {
    // b reaches a through the crate root's re-export of a's item.
    let g = graph_of(&[
        ("lib.rs", "pub mod a; pub mod b; pub use a::Y;"),
        ("a.rs", "use crate::b::{X, self as bee};\npub struct Y;"),
        ("b.rs", "pub struct X;\nfn f(_: crate::Y) {}"),
    ]);
    let cycle = g.cycle().expect("a cycle");
    let text = g.describe(&cycle);
    assert!(text.contains("a -> b") && text.contains("b -> a"), "{text}");
}

#[test]
fn a_cycle_through_a_directory_and_super_is_found() {
    let g = graph_of(&[
        ("lib.rs", "pub mod g;"),
        ("g/mod.rs", "pub mod x; pub mod y; pub use y::Z;"),
        ("g/x.rs", "pub struct X(super::Z);"),
        ("g/y.rs", "use super::x::X;\npub struct Z;"),
    ]);
    let cycle = g.cycle().expect("a cycle");
    assert!(cycle.contains(&"g::x".to_owned()) && cycle.contains(&"g::y".to_owned()));
}

#[test]
fn test_code_comments_and_strings_make_no_edge() {
    let g = graph_of(&[
        ("lib.rs", "pub mod a; pub mod b;"),
        ("a.rs", "use crate::b::X;\npub struct Y;"),
        (
            "b.rs",
            "pub struct X;\n// crate::a::Y\nconst S: &str = \"crate::a::Y\";\n\
             #[cfg(test)]\nmod tests {\n    use crate::a::Y;\n}\n",
        ),
    ]);
    assert_eq!(g.cycle(), None);
    assert!(g.edges.contains_key(&("a".into(), "b".into())));
}
