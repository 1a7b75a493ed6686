//! Dev-only: no module cycles in a crate but those named here.
//!
//! [`cycles`] reads a crate's `src/`, builds the graph of references
//! between its module files (`crate::…`, `super::…`, `self::…` and the
//! names a `use` brings in, each followed through the `use` statements on
//! its way to the module that defines it) and lists every cycle, with one
//! reference per edge. Every crate of the workspace has a
//! `tests/module_graph.rs` that calls [`check`], which fails on any cycle
//! [`ALLOWED`] does not name (#39: at most two in the whole tree, each
//! with its reason).
//!
//! Left out: test code (`#[cfg(test)]` items, and the files of modules
//! declared `#[cfg(test)]`), comments and literals; a module's references
//! to itself and to its ancestors (the namespace it lives in); the `pub
//! use` lines of a module with modules below it (`lib.rs`, a directory's
//! `mod.rs`), which re-export and are not dependencies; and `src/bin/`
//! (each file there is a crate of its own, one module).

mod graph;
mod paths;
mod source;

pub use graph::Reference;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// A module cycle the workspace keeps on purpose.
pub struct Allowed {
    /// The crate's directory from the workspace root (`shared/core`, `.`).
    pub crate_dir: &'static str,
    /// The cycle as [`Cycle::name`] writes it.
    pub cycle: &'static str,
    /// Why it stays, in a line.
    pub why: &'static str,
}

/// The module cycles kept on purpose: at most two in the whole workspace
/// (`tests/workspace.rs` holds the number), each with its reason. Any other
/// cycle fails its crate's `tests/module_graph.rs`, and so does an entry
/// here whose cycle is gone.
pub const ALLOWED: &[Allowed] = &[Allowed {
    crate_dir: "shared/core",
    cycle: "task::record -> task::wait -> task::record",
    why: "a task holds what it waits for, and a wait's rules (is it over, when is its wake due) read the rest of that task: the data and its rules stay together, one module per kind",
}];

/// The most cycles listed for one crate.
const LIMIT: usize = 100;

/// A module cycle: `modules[0]` uses `modules[1]`, …, and the last uses
/// `modules[0]` again, through `references[i]` for the edge from
/// `modules[i]`. It starts at the module first in name order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cycle {
    pub modules: Vec<String>,
    pub references: Vec<Reference>,
}

impl Cycle {
    /// `a -> b -> a`.
    pub fn name(&self) -> String {
        let mut names = self.modules.clone();
        names.extend(self.modules.first().cloned());
        names.join(" -> ")
    }
}

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "module cycle: {}", self.name())?;
        let n = self.modules.len();
        for (i, r) in self.references.iter().enumerate() {
            let (from, to) = (&self.modules[i], &self.modules[(i + 1) % n]);
            write!(
                f,
                "\n  {from} -> {to}: src/{}:{} `{}`",
                r.file, r.line, r.path
            )?;
        }
        Ok(())
    }
}

/// Every module cycle of the crate whose sources are `src` (the first
/// hundred, if there are more).
pub fn cycles(src: &Path) -> Vec<Cycle> {
    let g = graph::Graph::build(&read_src(src));
    g.cycles(LIMIT)
        .into_iter()
        .map(|modules| {
            let n = modules.len();
            let references = (0..n)
                .map(|i| g.edges[&(modules[i].clone(), modules[(i + 1) % n].clone())].clone())
                .collect();
            Cycle {
                modules,
                references,
            }
        })
        .collect()
}

/// Fails, naming each cycle with one reference per edge, when the crate
/// at `crate_dir` (its `CARGO_MANIFEST_DIR`) has a module cycle
/// [`ALLOWED`] does not name, or when a cycle named there for it is gone.
pub fn check(crate_dir: &str) {
    let dir = Path::new(crate_dir);
    let key = workspace_relative(dir);
    let src = dir.join("src");
    assert!(
        !read_src(&src).is_empty(),
        "{}: no sources read",
        src.display()
    );
    let found = cycles(&src);
    let allowed: Vec<&Allowed> = ALLOWED.iter().filter(|a| a.crate_dir == key).collect();
    let mut problems: Vec<String> = found
        .iter()
        .filter(|c| !allowed.iter().any(|a| a.cycle == c.name()))
        .map(Cycle::to_string)
        .collect();
    if problems.len() >= LIMIT {
        problems.push(format!("(the first {LIMIT}; there may be more)"));
    }
    if !problems.is_empty() {
        problems.push(
            "Break each (move the item to the module it belongs to, or invert the \
             dependency), or name it in baton_module_graph::ALLOWED with why."
                .into(),
        );
    }
    for a in &allowed {
        if !found.iter().any(|c| c.name() == a.cycle) {
            problems.push(format!(
                "ALLOWED names `{}` in {key}, which has it no more: take it out",
                a.cycle
            ));
        }
    }
    assert!(problems.is_empty(), "{key}:\n{}", problems.join("\n"));
}

/// `dir` from the workspace root, `.` for the root itself.
fn workspace_relative(dir: &Path) -> String {
    let root = workspace_root();
    let dir = dir
        .canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let rel = dir.strip_prefix(&root).unwrap_or_else(|_| {
        panic!(
            "{} is not in the workspace at {}",
            dir.display(),
            root.display()
        )
    });
    match rel.to_string_lossy().replace('\\', "/") {
        r if r.is_empty() => ".".into(),
        r => r,
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

/// The `.rs` files under `src` but `src/bin/`: path under `src/` → text.
fn read_src(src: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    read_dir(src, "", &mut files);
    assert!(
        !(files.contains_key("lib.rs") && files.contains_key("main.rs")),
        "{}: both lib.rs and main.rs, two crates this reads as one",
        src.display()
    );
    files
}

fn read_dir(dir: &Path, under: &str, out: &mut BTreeMap<String, String>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let name = path
            .file_name()
            .expect("a file name")
            .to_string_lossy()
            .into_owned();
        let rel = if under.is_empty() {
            name.clone()
        } else {
            format!("{under}/{name}")
        };
        if path.is_dir() {
            if rel != "bin" {
                read_dir(&path, &rel, out);
            }
        } else if name.ends_with(".rs") {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            out.insert(rel, text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Cycle, Reference};

    #[test]
    fn a_cycle_is_named_with_one_reference_per_edge() {
        let reference = |file: &str, line, path: &str| Reference {
            file: file.into(),
            line,
            path: path.into(),
        };
        let c = Cycle {
            modules: vec!["a".into(), "b::c".into()],
            references: vec![
                reference("a.rs", 3, "crate::b::c::X"),
                reference("b/c.rs", 7, "crate::Y"),
            ],
        };
        assert_eq!(c.name(), "a -> b::c -> a");
        assert_eq!(
            c.to_string(),
            "module cycle: a -> b::c -> a\n  \
             a -> b::c: src/a.rs:3 `crate::b::c::X`\n  \
             b::c -> a: src/b/c.rs:7 `crate::Y`"
        );
    }
}
