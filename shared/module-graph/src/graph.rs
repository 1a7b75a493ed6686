//! The graph of references between a crate's modules, and its cycles.

use crate::paths::{inline_paths, uses};
use crate::source::clean;
use std::collections::{BTreeMap, BTreeSet};

/// A module, as the path from the crate root (`task::record`; `""` the root).
pub(crate) type Module = String;

/// One reference that makes an edge: the file (under `src/`), its line,
/// and the path as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    pub file: String,
    pub line: usize,
    pub path: String,
}

pub(crate) struct Graph {
    pub(crate) modules: BTreeSet<Module>,
    /// Each module's names a `use` brings in: name → absolute path. A
    /// path through the module to such a name goes on to where it leads.
    imports: BTreeMap<Module, BTreeMap<String, Vec<String>>>,
    /// (from, to) → the first reference that makes the edge.
    pub(crate) edges: BTreeMap<(Module, Module), Reference>,
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

fn is_within(m: &str, ancestor: &str) -> bool {
    ancestor.is_empty() || m == ancestor || m.starts_with(&format!("{ancestor}::"))
}

/// The module a file under `src/` holds: `lib.rs` and `main.rs` the root,
/// `a/mod.rs` and `a.rs` the module `a`.
fn module_of(file: &str) -> Module {
    let p = file.trim_end_matches(".rs");
    let p = p.strip_suffix("/mod").unwrap_or(p);
    if p == "lib" || p == "main" {
        String::new()
    } else {
        p.replace('/', "::")
    }
}

fn line_of(code: &str, at: usize) -> usize {
    code[..at].matches('\n').count() + 1
}

impl Graph {
    /// Builds the graph of `files` (path under `src/` → source). The files
    /// of modules declared `#[cfg(test)]` are test code and left out.
    pub(crate) fn build(files: &BTreeMap<String, String>) -> Graph {
        let mut cleaned: BTreeMap<Module, (&str, String)> = BTreeMap::new();
        let mut test_only: Vec<Module> = Vec::new();
        for (file, src) in files {
            let m = module_of(file);
            let c = clean(src);
            test_only.extend(c.test_modules.iter().map(|t| join(&m, t)));
            cleaned.insert(m, (file.as_str(), c.code));
        }
        cleaned.retain(|m, _| !test_only.iter().any(|t| is_within(m, t)));
        let modules: BTreeSet<Module> = cleaned.keys().cloned().collect();
        // A module with modules below it is a namespace: its `pub use`
        // lines only re-export, they are not dependencies.
        let namespaces: BTreeSet<Module> = modules.iter().map(|m| parent(m)).collect();
        let mut graph = Graph {
            modules,
            imports: BTreeMap::new(),
            edges: BTreeMap::new(),
        };
        for (m, (_, code)) in &cleaned {
            let mut names = BTreeMap::new();
            for u in uses(code) {
                for (path, name) in u.paths {
                    if name == "*" {
                        continue;
                    }
                    if let Some(abs) = graph.absolute(m, &path) {
                        names.insert(name, abs);
                    }
                }
            }
            graph.imports.insert(m.clone(), names);
        }
        for (m, (file, code)) in &cleaned {
            let mut refs: Vec<(Vec<String>, usize)> = Vec::new();
            for u in uses(code) {
                if u.public && namespaces.contains(m) {
                    continue;
                }
                refs.extend(u.paths.into_iter().map(|(p, _)| (p, u.at)));
            }
            refs.extend(inline_paths(code));
            for (path, at) in refs {
                let Some(to) = graph
                    .absolute(m, &path)
                    .and_then(|abs| graph.resolve(&abs, 0))
                else {
                    continue;
                };
                // A module may use its own and its ancestors' items: they
                // are the namespace it lives in.
                if is_within(m, &to) {
                    continue;
                }
                graph
                    .edges
                    .entry((m.clone(), to))
                    .or_insert_with(|| Reference {
                        file: file.to_string(),
                        line: line_of(code, at),
                        path: path.join("::"),
                    });
            }
        }
        graph
    }

    /// `path` as written in module `m`, from the crate root; `None` for
    /// another crate's.
    fn absolute(&self, m: &str, path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        let (base, rest): (Module, &[String]) = match first.as_str() {
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
        abs.extend(rest.iter().cloned());
        Some(abs)
    }

    /// The module that defines what `abs` names, through the names `use`
    /// statements bring in.
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
            if let Some(target) = self.imports.get(&cur).and_then(|e| e.get(seg)) {
                if target.as_slice() == &abs[..=i] {
                    break;
                }
                let mut next = target.clone();
                next.extend(abs[i + 1..].iter().cloned());
                return self.resolve(&next, depth + 1);
            }
            break;
        }
        Some(cur)
    }

    /// Every elementary cycle (Johnson's algorithm), each from its first
    /// module in name order; at most `limit` of them.
    pub(crate) fn cycles(&self, limit: usize) -> Vec<Vec<Module>> {
        let names: Vec<&Module> = self.modules.iter().collect();
        let index: BTreeMap<&str, usize> = names
            .iter()
            .enumerate()
            .map(|(i, m)| (m.as_str(), i))
            .collect();
        let mut next: Vec<Vec<usize>> = vec![Vec::new(); names.len()];
        for (from, to) in self.edges.keys() {
            if let (Some(&f), Some(&t)) = (index.get(from.as_str()), index.get(to.as_str())) {
                next[f].push(t);
            }
        }
        let mut search = Johnson {
            next: &next,
            inside: vec![false; names.len()],
            blocked: vec![false; names.len()],
            blocked_by: vec![BTreeSet::new(); names.len()],
            stack: Vec::new(),
            found: Vec::new(),
            limit,
        };
        for start in 0..names.len() {
            if search.found.len() >= limit {
                break;
            }
            // The modules from `start` on that reach it and that it reaches.
            let from = reach(&next, start, start, false);
            let to = reach(&next, start, start, true);
            search.inside = (0..names.len()).map(|i| from[i] && to[i]).collect();
            search.blocked.fill(false);
            search.blocked_by.iter_mut().for_each(BTreeSet::clear);
            search.circuit(start, start);
        }
        search
            .found
            .into_iter()
            .map(|c| c.into_iter().map(|i| names[i].clone()).collect())
            .collect()
    }
}

/// Which modules numbered `floor` or more `start` reaches (or, `back`,
/// which reach it) through such modules.
fn reach(next: &[Vec<usize>], start: usize, floor: usize, back: bool) -> Vec<bool> {
    let mut seen = vec![false; next.len()];
    let mut todo = vec![start];
    seen[start] = true;
    while let Some(v) = todo.pop() {
        let ws: Vec<usize> = if back {
            (0..next.len()).filter(|u| next[*u].contains(&v)).collect()
        } else {
            next[v].clone()
        };
        for w in ws {
            if w >= floor && !seen[w] {
                seen[w] = true;
                todo.push(w);
            }
        }
    }
    seen
}

struct Johnson<'a> {
    next: &'a [Vec<usize>],
    inside: Vec<bool>,
    blocked: Vec<bool>,
    blocked_by: Vec<BTreeSet<usize>>,
    stack: Vec<usize>,
    found: Vec<Vec<usize>>,
    limit: usize,
}

impl Johnson<'_> {
    fn circuit(&mut self, v: usize, start: usize) -> bool {
        let mut closed = false;
        self.stack.push(v);
        self.blocked[v] = true;
        for &w in &self.next[v] {
            if !self.inside[w] || self.found.len() >= self.limit {
                continue;
            }
            if w == start {
                self.found.push(self.stack.clone());
                closed = true;
            } else if !self.blocked[w] && self.circuit(w, start) {
                closed = true;
            }
        }
        if closed {
            self.unblock(v);
        } else {
            for &w in &self.next[v] {
                if self.inside[w] {
                    self.blocked_by[w].insert(v);
                }
            }
        }
        self.stack.pop();
        closed
    }

    fn unblock(&mut self, v: usize) {
        self.blocked[v] = false;
        for w in std::mem::take(&mut self.blocked_by[v]) {
            if self.blocked[w] {
                self.unblock(w);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Graph;

    fn graph_of(files: &[(&str, &str)]) -> Graph {
        Graph::build(
            &files
                .iter()
                .map(|(p, s)| (p.to_string(), s.to_string()))
                .collect(),
        )
    }

    fn edge(g: &Graph, from: &str, to: &str) -> bool {
        g.edges.contains_key(&(from.into(), to.into()))
    }

    #[test]
    fn a_cycle_is_found_through_a_re_export() {
        // b reaches a through the crate root's re-export of a's item.
        let g = graph_of(&[
            ("lib.rs", "pub mod a; pub mod b; pub use a::Y;"),
            ("a.rs", "use crate::b::{X, self as bee};\npub struct Y;"),
            ("b.rs", "pub struct X;\nfn f(_: crate::Y) {}"),
        ]);
        assert_eq!(g.cycles(10), [["a", "b"]]);
        let back = &g.edges[&("b".into(), "a".into())];
        assert_eq!((back.file.as_str(), back.line), ("b.rs", 2));
        assert_eq!(back.path, "crate::Y");
    }

    #[test]
    fn a_cycle_through_a_directory_and_super_is_found() {
        let g = graph_of(&[
            ("lib.rs", "pub mod g;"),
            ("g/mod.rs", "pub mod x; pub mod y; pub use y::Z;"),
            ("g/x.rs", "pub struct X(super::Z);"),
            ("g/y.rs", "use super::x::X;\npub struct Z;"),
        ]);
        assert_eq!(g.cycles(10), [["g::x", "g::y"]]);
    }

    #[test]
    fn test_code_comments_and_strings_make_no_edge() {
        let g = graph_of(&[
            ("lib.rs", "pub mod a; pub mod b;"),
            ("a.rs", "use crate::b::X;\npub struct Y;"),
            (
                "b.rs",
                "pub struct X;\n// crate::a::Y\nconst S: &str = \"crate::a::Y\";\n\
                 #[cfg(test)]\nmod tests {\n    use crate::a::Y;\n}\n\
                 #[cfg(test)]\nmod harness;\n",
            ),
            ("b/harness.rs", "use crate::a::Y;"),
        ]);
        assert!(g.cycles(10).is_empty());
        assert!(edge(&g, "a", "b"));
        assert!(!g.modules.contains("b::harness"));
    }

    #[test]
    fn a_glob_and_a_name_a_private_use_brings_in_make_edges() {
        let g = graph_of(&[
            ("lib.rs", "mod a; mod b; mod c; mod d;"),
            ("a.rs", "use crate::b::*;"),
            ("b.rs", "pub struct B;"),
            ("c.rs", "pub struct X;"),
            // `super::X` is c's X, through d's private import.
            ("d/mod.rs", "mod e;\nuse crate::c::X;\nfn f(_: X) {}"),
            ("d/e.rs", "fn g(_: super::X) {}"),
        ]);
        assert!(edge(&g, "a", "b"));
        assert!(edge(&g, "d::e", "c"));
    }

    #[test]
    fn every_elementary_cycle_is_listed_once() {
        // A figure eight through a, and a triangle a -> b -> c -> a.
        let g = graph_of(&[
            ("lib.rs", "mod a; mod b; mod c; mod d;"),
            ("a.rs", "use crate::b::B; use crate::d::D; pub struct A;"),
            ("b.rs", "use crate::a::A; use crate::c::C; pub struct B;"),
            ("c.rs", "use crate::a::A; pub struct C;"),
            ("d.rs", "use crate::a::A; pub struct D;"),
        ]);
        let mut found = g.cycles(10);
        found.sort();
        assert_eq!(found, [vec!["a", "b"], vec!["a", "b", "c"], vec!["a", "d"]]);
        assert_eq!(g.cycles(2).len(), 2);
    }
}
