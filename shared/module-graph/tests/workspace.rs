//! Every crate of the workspace runs the module-graph check, and the
//! workspace keeps at most two module cycles, each with its reason (#39).

use baton_module_graph::ALLOWED;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `members` of the workspace's Cargo.toml.
fn members() -> Vec<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    let start = manifest.find("members = [").expect("a members list");
    let list = &manifest[start..start + manifest[start..].find(']').expect("its end")];
    list.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_crate_runs_the_check() {
    let members = members();
    assert!(members.len() > 10, "read the members: {members:?}");
    let call = "baton_module_graph::check(env!(\"CARGO_MANIFEST_DIR\"))";
    let missing: Vec<&String> = members
        .iter()
        .filter(|m| {
            std::fs::read_to_string(root().join(m).join("tests/module_graph.rs"))
                .map_or(true, |test| !test.contains(call))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "crates without a tests/module_graph.rs calling `{call}`: {missing:?}"
    );
}

#[test]
fn at_most_two_cycles_are_allowed_each_with_a_reason() {
    assert!(ALLOWED.len() <= 2, "{} cycles allowed", ALLOWED.len());
    let members = members();
    for a in ALLOWED {
        assert!(
            members.iter().any(|m| m == a.crate_dir),
            "{}: not a crate of the workspace",
            a.crate_dir
        );
        assert!(!a.why.trim().is_empty(), "{}: say why", a.cycle);
    }
}
