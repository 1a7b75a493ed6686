//! No module cycle in baton-core but those `baton_module_graph::ALLOWED`
//! names: none depends on another that depends back on it (#21, #39).
//! The graph and its rules are in shared/module-graph.

#[test]
fn no_module_cycle_but_the_allowed() {
    baton_module_graph::check(env!("CARGO_MANIFEST_DIR"));
}
