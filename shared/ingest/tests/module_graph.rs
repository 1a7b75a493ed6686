//! No module cycle in this crate but those `baton_module_graph::ALLOWED`
//! names (#39).

#[test]
fn no_module_cycle_but_the_allowed() {
    baton_module_graph::check(env!("CARGO_MANIFEST_DIR"));
}
