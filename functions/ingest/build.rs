//! Links the ingest binary as a position-dependent executable (`-no-pie`).
//!
//! A PIE must be relocated by the dynamic loader at every start: it reads
//! all of `.rela.dyn` (2.2 MiB here, one entry per pointer in the SDK's
//! vtables and tables) and writes every page of `.data.rel.ro` (1.9 MiB),
//! which then count as private memory. Linked at a fixed address, neither
//! happens: 3-4 MiB less peak RSS and less start-up work
//! (docs/performance-lambda.md). The cost is that the executable's own
//! image is not randomised (ASLR still randomises the stack, heap, mmap and
//! libc); the ingest is a short, single-purpose process behind API Gateway.
//! Only this binary is linked so; other crates and test executables are not.
//!
//! `BATON_INGEST_PIE=1` keeps the default PIE link (for a linker that
//! refuses `-no-pie`, or to trade the memory back for a randomised image).
fn main() {
    println!("cargo:rerun-if-env-changed=BATON_INGEST_PIE");
    let keep_pie = std::env::var("BATON_INGEST_PIE").is_ok_and(|v| v == "1");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") && !keep_pie {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
