//! docs/architecture.md names every action of the loop and every module
//! of the segment: a variant of `Next` or a `segment` module added
//! without its line there fails here, so the page stays the map of the
//! loop (#39).

use std::path::Path;

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The variants of `enum Next` in `segment/next.rs`: the lines of its body
/// indented one level that start with a capital.
fn next_variants(source: &str) -> Vec<String> {
    let start = source
        .find("pub(super) enum Next {")
        .expect("segment/next.rs defines `enum Next`");
    let body = &source[start..];
    let end = body.find("\n}").expect("the enum ends");
    body[..end]
        .lines()
        .skip(1)
        .filter_map(|l| l.strip_prefix("    "))
        .filter(|l| l.starts_with(|c: char| c.is_ascii_uppercase()))
        .map(|l| {
            l.chars()
                .take_while(char::is_ascii_alphanumeric)
                .collect::<String>()
        })
        .collect()
}

/// The modules `segment/mod.rs` declares (`mod NAME;`).
fn segment_modules(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod "))
        .filter_map(|l| l.strip_suffix(';'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_page_names_every_action_of_the_loop() {
    let variants = next_variants(&read("src/segment/next.rs"));
    assert!(variants.len() >= 10, "read the enum: {variants:?}");
    let doc = read("../../docs/architecture.md");
    let block_start = doc.find("enum Next {").expect("the page shows `enum Next`");
    let block = &doc[block_start..block_start + doc[block_start..].find("\n}").unwrap_or(0)];
    let missing: Vec<&String> = variants
        .iter()
        .filter(|v| {
            !block
                .split(|c: char| !c.is_ascii_alphanumeric())
                .any(|w| w == v.as_str())
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md's `enum Next` lacks {missing:?}"
    );
}

#[test]
fn the_page_names_every_module_of_the_segment() {
    let modules = segment_modules(&read("src/segment/mod.rs"));
    assert!(modules.len() >= 10, "read the modules: {modules:?}");
    let doc = read("../../docs/architecture.md");
    let missing: Vec<&String> = modules
        .iter()
        .filter(|m| !doc.contains(&format!("`segment::{m}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md has no line for segment module(s) {missing:?}"
    );
}
