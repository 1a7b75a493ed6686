//! The crates are layers: each may depend (for its normal build) only on
//! the workspace crates below it. `cargo metadata` tells what each declares;
//! this test fails, naming the edge, when one reaches where its layer may
//! not (the ingest Lambda linking the agent loop, the domain knowing Slack).
//!
//! Declared edges are not the whole story: a crate's optional dependencies
//! come with the features its dependents turn on. So the ingest Lambda's
//! *resolved* graph (`cargo tree -p ingest`, features as `cargo lambda
//! build` of that package resolves them) is checked too: it must not reach
//! the agent loop, the LLM providers, the tools, MCP, JSON Schema or the
//! embedded backend. Neither Lambda function may reach what only `baton`
//! on a workstation needs from the AWS SDK (SSO profiles), and the ingest's
//! TLS is *ring* alone (no aws-lc, no second HTTP stack).

use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;

/// Each workspace crate and the workspace crates it may depend on.
const ALLOWED: &[(&str, &[&str])] = &[
    ("baton-core", &[]),
    ("baton-settings", &["baton-core"]),
    ("baton-schedule", &["baton-core"]),
    ("baton-slack", &["baton-core"]),
    ("baton-llm", &["baton-core"]),
    ("baton-tools", &["baton-core", "baton-schedule"]),
    ("baton-embedded", &["baton-core", "baton-schedule"]),
    ("baton-aws", &["baton-core", "baton-schedule"]),
    // OpenTelemetry export: spans in, OTLP out; the worker and the ingest
    // reach it only through core's `SpanExport` port (the runtime wires it).
    ("baton-otel", &["baton-core"]),
    // Cedar tool policies: plain strings in, a verdict out; the worker
    // side (agent, runtime's `worker` feature) asks, the ingest never.
    ("baton-policy", &[]),
    // Per-person OAuth connections: the flows and the Credentials; the
    // ingest runs the callback, the worker refreshes.
    ("baton-connect", &["baton-core", "baton-settings"]),
    // The ingest handler verifies, dedupes and enqueues: it never runs the
    // loop, so the agent, its tools and the LLM providers stay out of it.
    (
        "baton-ingest",
        &[
            "baton-core",
            "baton-settings",
            "baton-schedule",
            "baton-slack",
            "baton-connect",
        ],
    ),
    // The loop talks to the model and to people only through core's ports.
    (
        "baton-agent",
        &[
            "baton-core",
            "baton-settings",
            "baton-schedule",
            "baton-policy",
        ],
    ),
    (
        "baton-runtime",
        &[
            "baton-core",
            "baton-settings",
            "baton-schedule",
            "baton-slack",
            "baton-llm",
            "baton-tools",
            "baton-embedded",
            "baton-aws",
            "baton-ingest",
            "baton-agent",
            "baton-otel",
            "baton-policy",
            "baton-connect",
        ],
    ),
    ("ingest", &["baton-runtime", "baton-ingest", "baton-core"]),
    // `/mcp` on AWS: the ingest handler with its MCP server.
    ("mcp", &["baton-runtime"]),
    (
        "worker",
        &[
            "baton-runtime",
            "baton-agent",
            "baton-core",
            "baton-settings",
        ],
    ),
    // Your own tools (docs/tools.md): the builder and its re-exports are
    // all a crate adding tools needs.
    ("baton-example-custom-tool", &["baton-runtime"]),
    // Dev-only (every crate's tests/module_graph.rs): std and nothing else.
    ("baton-module-graph", &[]),
];

#[test]
fn every_crate_depends_only_on_the_layers_below_it() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let members: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut wrong = Vec::new();
    for p in packages {
        let name = p["name"].as_str().unwrap_or_default();
        if name == "baton" {
            continue; // the CLI and `baton dev`: the top, may use anything
        }
        let Some(may) = allowed.get(name) else {
            wrong.push(format!(
                "{name}: not in the layer table of tests/e2e/layers.rs"
            ));
            continue;
        };
        for d in p["dependencies"].as_array().into_iter().flatten() {
            let dep = d["name"].as_str().unwrap_or_default();
            let normal = d["kind"].is_null();
            if normal && members.contains(&dep) && !may.contains(&dep) {
                wrong.push(format!("{name} depends on {dep}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "dependencies that break the layering:\n  {}",
        wrong.join("\n  ")
    );
}

/// What the ingest Lambda must not link: it verifies, dedupes and
/// enqueues, and never runs the loop (issue #21 item 3).
const NOT_IN_INGEST: &[&str] = &[
    "baton-agent",
    "baton-llm",
    "baton-tools",
    "baton-embedded",
    // The JSON Schema validation of tool arguments is the worker's. (rmcp
    // is checked by feature below: the ingest may link its OAuth
    // discovery and registration, for the Connect routes, not its server.)
    "jsonschema",
    // Policies are decided in the worker; the Cedar engine would weigh on
    // the ingest's binary size and cold start.
    "baton-policy",
    "cedar-policy",
];

/// The normal dependencies `package` resolves to on Lambda's platforms,
/// each as its path from the package: `["ingest",
/// "baton-runtime", "baton-agent"]`. A dependency reached more than once
/// is listed at its first place (cargo tree prints its subtree once).
fn resolved_paths(package: &str) -> Vec<Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-p",
            package,
            "-e",
            "normal",
            // Lambda's two architectures (cargo lambda builds arm64 by
            // default); not `all`, whose crates may not be downloaded.
            "--target",
            "x86_64-unknown-linux-gnu",
            "--target",
            "aarch64-unknown-linux-gnu",
            "--prefix",
            "depth",
            "--format",
            "{p}",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut stack: Vec<String> = Vec::new();
    let mut paths = Vec::new();
    // `3rmcp v3.11.0`: the depth, then the package and its version.
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let digits = line.chars().take_while(char::is_ascii_digit).count();
        let Ok(depth) = line[..digits].parse::<usize>() else {
            continue;
        };
        let name = line[digits..].split_whitespace().next().unwrap_or_default();
        stack.truncate(depth);
        stack.push(name.to_owned());
        paths.push(stack.clone());
    }
    paths
}

/// The first path from `package` to each crate of `names` it reaches.
fn reaches(package: &str, names: &[&str]) -> Vec<String> {
    let mut found: BTreeMap<String, String> = BTreeMap::new();
    for path in resolved_paths(package) {
        let Some(last) = path.last() else { continue };
        if names.contains(&last.as_str()) && !found.contains_key(last) {
            found.insert(last.clone(), path.join(" -> "));
        }
    }
    found.into_values().collect()
}

#[test]
fn the_ingest_lambda_links_no_worker_side() {
    // The scan sees what is there: the worker runs the loop, so its graph
    // reaches all of it (were cargo tree's output misread, both checks
    // would pass for nothing).
    let worker = reaches("worker", NOT_IN_INGEST);
    assert_eq!(
        worker.len(),
        NOT_IN_INGEST.len(),
        "the worker's graph should reach every crate of NOT_IN_INGEST; found only:\n  {}",
        worker.join("\n  ")
    );
    let wrong = reaches("ingest", NOT_IN_INGEST);
    assert!(
        wrong.is_empty(),
        "the ingest Lambda's resolved dependencies reach the worker side:\n  {}",
        wrong.join("\n  ")
    );
    // The `mcp` function is the ingest with rmcp's server side, no more.
    let wrong = reaches("mcp", NOT_IN_INGEST);
    assert!(
        wrong.is_empty(),
        "the mcp Lambda's resolved dependencies reach the worker side:\n  {}",
        wrong.join("\n  ")
    );
    let server = |package: &str| {
        rmcp_features(package)
            .split(',')
            .any(|f| f == "server" || f.starts_with("transport-streamable-http-server"))
    };
    assert!(server("mcp"), "the mcp Lambda serves MCP");
    assert!(
        !server("ingest"),
        "the ingest Lambda links rmcp's server side ({}): `/mcp` is the mcp function's",
        rmcp_features("ingest")
    );
}

/// The features `package`'s build resolves rmcp with (comma-separated;
/// empty when it does not link rmcp).
fn rmcp_features(package: &str) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args(["tree", "--offline", "-p", package, "-e", "normal"])
        .args(["--target", "x86_64-unknown-linux-gnu", "--prefix", "none"])
        .args(["--format", "{p} {f}", "-i", "rmcp"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    // Not linked: cargo tree says no package matched and fails.
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap_or_default()
        .to_owned()
}

/// What neither Lambda function links, though `baton` does: what a
/// workstation needs from the AWS SDK and a function never uses (its
/// credentials are in its environment): the SSO and SSO-OIDC clients of
/// `aws-config`'s `sso` feature (baton-aws's `workstation` feature).
const NOT_IN_LAMBDA: &[&str] = &["aws-sdk-sso", "aws-sdk-ssooidc"];

#[test]
fn the_lambda_functions_link_no_workstation_extras() {
    // As above: the scan must see them where they are.
    let baton = reaches("baton", NOT_IN_LAMBDA);
    assert_eq!(
        baton.len(),
        NOT_IN_LAMBDA.len(),
        "baton's graph should reach every crate of NOT_IN_LAMBDA; found only:\n  {}",
        baton.join("\n  ")
    );
    for function in ["ingest", "worker", "mcp"] {
        let wrong = reaches(function, NOT_IN_LAMBDA);
        assert!(
            wrong.is_empty(),
            "the {function} Lambda's resolved dependencies reach workstation-only crates:\n  {}",
            wrong.join("\n  ")
        );
    }
}

/// What the ingest Lambda does not link, though `baton` does: aws-lc (its
/// TLS is *ring*: Baton's AWS client and reqwest without a provider of its
/// own), and the SDK's default HTTPS client with HTTP/2
/// (docs/performance-lambda.md).
const NOT_IN_INGEST_TLS: &[&str] = &["aws-lc-rs", "aws-lc-sys", "aws-smithy-http-client", "h2"];

#[test]
fn the_ingest_lambdas_tls_is_ring_alone() {
    let baton = reaches("baton", NOT_IN_INGEST_TLS);
    assert_eq!(
        baton.len(),
        NOT_IN_INGEST_TLS.len(),
        "baton's graph should reach every crate of NOT_IN_INGEST_TLS; found only:\n  {}",
        baton.join("\n  ")
    );
    let wrong = reaches("ingest", NOT_IN_INGEST_TLS);
    assert!(
        wrong.is_empty(),
        "the ingest Lambda's resolved dependencies reach a second crypto library or HTTP stack:\n  {}",
        wrong.join("\n  ")
    );
    let ring = reaches("ingest", &["ring"]);
    assert_eq!(ring.len(), 1, "the ingest should use ring");
}
