//! Growth is a decision, not an accident (#39): the methods of `Segment`
//! and `Ingest` and the public items of `Task` are counted from the
//! sources and may not exceed what is recorded here. A change that adds
//! one either takes one away elsewhere or raises the number below in the
//! same commit, where a reviewer sees it; one that removes some lowers
//! it, so the room is not spent again unnoticed.
//!
//! Counted: `fn` items directly inside `impl Segment<'_>` (or `<'a>`)
//! blocks of `shared/agent/src/segment`, inside `impl Ingest` blocks of
//! `shared/ingest/src`, the `pub` fields of `struct Task` (at most 20,
//! the rest grouped into its parts) and the `pub fn`s of `impl Task`
//! blocks of `shared/core/src`, leaving out test code (`tests.rs`,
//! `harness.rs`, `testing.rs`, `tests/` and what follows a top-level
//! inline `#[cfg(test)]` block).

use std::path::{Path, PathBuf};

/// The recorded ceilings: (what, at most).
const SEGMENT_METHODS: usize = 69;
const INGEST_METHODS: usize = 110;
const TASK_PUBLIC_FIELDS: usize = 14;
const TASK_PUBLIC_METHODS: usize = 18;

// Task keeps at most 20 public fields: group the rest into its parts.
const _: () = assert!(TASK_PUBLIC_FIELDS <= 20);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The non-test Rust sources under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                if name != "tests" {
                    stack.push(p);
                }
            } else if name.ends_with(".rs")
                && !["tests.rs", "harness.rs", "testing.rs"].contains(&name.as_str())
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The source before its first top-level inline `#[cfg(test)]` block (a
/// `#[cfg(test)] mod harness;` declaration near the top does not end it).
fn non_test(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut from = 0;
    while let Some(i) = text[from..].find("\n#[cfg(test)]\n").map(|i| i + from) {
        let next = text[i + 14..].lines().next().unwrap_or_default();
        if next.trim_end().ends_with('{') {
            return text[..i].to_owned();
        }
        from = i + 14;
    }
    text
}

fn is_pub_fn(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("pub fn ") || t.starts_with("pub async fn ")
}

fn is_fn(line: &str) -> bool {
    let t = line.trim_start();
    let t = t
        .strip_prefix("pub ")
        .or_else(|| t.strip_prefix("pub(crate) "))
        .or_else(|| t.strip_prefix("pub(super) "))
        .unwrap_or(t);
    let t = t.strip_prefix("async ").unwrap_or(t);
    t.starts_with("fn ")
}

/// The `fn`s directly inside blocks opened by a line `opens` accepts.
fn methods(dir: &Path, opens: impl Fn(&str) -> bool) -> usize {
    count(dir, opens, is_fn)
}

/// The `pub fn`s directly inside blocks opened by a line `opens` accepts.
fn public_methods(dir: &Path, opens: impl Fn(&str) -> bool) -> usize {
    count(dir, opens, is_pub_fn)
}

fn count(dir: &Path, opens: impl Fn(&str) -> bool, counted: fn(&str) -> bool) -> usize {
    let mut n = 0;
    for path in sources(dir) {
        let mut depth: Option<i64> = None;
        for line in non_test(&path).lines() {
            let delta = line.matches('{').count() as i64 - line.matches('}').count() as i64;
            match depth {
                None if opens(line) => depth = Some(delta),
                None => {}
                Some(d) => {
                    if d == 1 && counted(line) {
                        n += 1;
                    }
                    let d = d + delta;
                    depth = (d > 0).then_some(d);
                }
            }
        }
    }
    n
}

fn segment_methods() -> usize {
    methods(&root().join("shared/agent/src/segment"), |l| {
        l.starts_with("impl Segment<'_> {") || l.starts_with("impl<'a> Segment<'a> {")
    })
}

fn ingest_methods() -> usize {
    methods(&root().join("shared/ingest/src"), |l| {
        l.starts_with("impl Ingest {")
    })
}

/// The `pub` fields of `struct Task`: what anyone may read and write.
fn task_public_fields() -> usize {
    let record = non_test(&root().join("shared/core/src/task/record.rs"));
    let start = record.find("pub struct Task {").unwrap_or(0);
    let body = &record[start..];
    let body = &body[..body.find("\n}").unwrap_or(body.len())];
    body.lines().filter(|l| l.starts_with("    pub ")).count()
}

fn task_public_methods() -> usize {
    public_methods(&root().join("shared/core/src"), |l| {
        l.starts_with("impl Task {")
    })
}

fn hold(what: &str, now: usize, ceiling: usize) {
    assert!(
        now <= ceiling,
        "{what}: {now}, over the recorded {ceiling}. Take one away, or raise the \
         number in shared/agent/tests/ratchet.rs and say why in the commit"
    );
    assert!(
        now + 3 > ceiling,
        "{what}: {now}, well under the recorded {ceiling}: lower the number in \
         shared/agent/tests/ratchet.rs to {now}"
    );
}

#[test]
fn segment_does_not_grow_unnoticed() {
    hold("Segment's methods", segment_methods(), SEGMENT_METHODS);
}

#[test]
fn ingest_does_not_grow_unnoticed() {
    hold("Ingest's methods", ingest_methods(), INGEST_METHODS);
}

#[test]
fn task_does_not_grow_unnoticed() {
    hold(
        "Task's public fields",
        task_public_fields(),
        TASK_PUBLIC_FIELDS,
    );
    hold(
        "Task's public methods",
        task_public_methods(),
        TASK_PUBLIC_METHODS,
    );
}
