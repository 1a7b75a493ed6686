//! MCP servers that nobody on the project wrote, for testing Baton's MCP
//! client end to end: a small issue tracker on the official Python SDK
//! (`tests/fixtures/mcp/tracker_server.py`, in `.venv`) and the reference
//! `@modelcontextprotocol/server-everything` (Node, in `.mcp-servers/`), both
//! over streamable HTTP on loopback. `./scripts/test.sh` installs them.

use serde_json::Value;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Tries for server-everything, which may lose its port to another process
/// between our picking it and its binding it.
const EVERYTHING_ATTEMPTS: usize = 3;
const INSTALL_HINT: &str = "run ./scripts/test.sh once to install the MCP test servers";

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn venv_python() -> PathBuf {
    repo_root().join(".venv/bin/python")
}

fn tracker_script() -> PathBuf {
    repo_root().join("tests/fixtures/mcp/tracker_server.py")
}

fn everything_entry() -> PathBuf {
    repo_root()
        .join(".mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

/// How to run the tracker server.
#[derive(Clone, Debug, Default)]
pub(crate) struct TrackerOptions {
    /// If set, every HTTP request without `Authorization: Bearer <token>` gets 401.
    pub required_token: Option<String>,
    /// Stateless streamable HTTP (no `Mcp-Session-Id`); default is sessions.
    pub stateless: bool,
    /// JSON instead of SSE responses; `None` = JSON iff stateless.
    pub json_response: Option<bool>,
    /// How long `search` sleeps when its query contains "slow" (server default 3 s).
    pub slow: Option<Duration>,
}

/// A running MCP test server, killed on drop.
pub(crate) struct McpServer {
    /// The MCP endpoint, e.g. `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    pub port: u16,
    child: Child,
    /// The tracker's JSON-lines call log (empty for server-everything).
    log_path: PathBuf,
    /// The server's stdout and stderr, for diagnostics.
    output_path: PathBuf,
    name: &'static str,
    _dir: tempfile::TempDir,
}

impl McpServer {
    /// The tracker server (`search` read-only, `create_issue` destructive,
    /// `fail` a tool error). `required_token`: the bearer token every
    /// request must carry; `stateless`: no sessions (and JSON responses).
    pub(crate) fn tracker(required_token: Option<&str>, stateless: bool) -> McpServer {
        McpServer::tracker_with(TrackerOptions {
            required_token: required_token.map(str::to_owned),
            stateless,
            ..TrackerOptions::default()
        })
    }

    pub(crate) fn tracker_with(options: TrackerOptions) -> McpServer {
        let python = venv_python();
        assert!(
            python.exists(),
            "{} is missing: {INSTALL_HINT} (the tracker MCP server needs the `mcp` package in .venv)",
            python.display()
        );
        let dir = tempfile::tempdir().expect("tempdir for the MCP tracker server");
        let log_path = dir.path().join("calls.jsonl");
        let output_path = dir.path().join("output.log");
        let mut command = Command::new(&python);
        command
            .arg(tracker_script())
            .arg("0")
            .env("MCP_CALL_LOG", &log_path)
            .env("MCP_STATELESS", if options.stateless { "1" } else { "0" })
            .env_remove("MCP_REQUIRED_TOKEN")
            .env_remove("MCP_JSON_RESPONSE")
            .env_remove("PORT")
            .env("PYTHONUNBUFFERED", "1");
        if let Some(token) = &options.required_token {
            command.env("MCP_REQUIRED_TOKEN", token);
        }
        if let Some(json) = options.json_response {
            command.env("MCP_JSON_RESPONSE", if json { "1" } else { "0" });
        }
        if let Some(slow) = options.slow {
            command.env("MCP_SLOW_SECONDS", slow.as_secs_f64().to_string());
        }
        let child = spawn_logged(&mut command, &output_path, "the tracker MCP server");
        let mut server = McpServer {
            url: String::new(),
            port: 0,
            child,
            log_path,
            output_path,
            name: "tracker MCP server",
            _dir: dir,
        };
        // It binds port 0 itself and prints `READY <port>` once listening.
        let deadline = Instant::now() + START_TIMEOUT;
        let port = loop {
            if let Some(port) = ready_port(&server.output()) {
                break port;
            }
            server.check_alive_until(deadline);
            std::thread::sleep(Duration::from_millis(50));
        };
        server.port = port;
        server.url = format!("http://127.0.0.1:{port}/mcp");
        server.wait_until_answers(deadline);
        server
    }

    /// `@modelcontextprotocol/server-everything` over streamable HTTP
    /// (sessions required; SSE responses), at `http://127.0.0.1:PORT/mcp`.
    pub(crate) fn everything() -> McpServer {
        let entry = everything_entry();
        assert!(
            entry.exists(),
            "{} is missing: {INSTALL_HINT} (npm install --prefix .mcp-servers @modelcontextprotocol/server-everything)",
            entry.display()
        );
        let mut failures = Vec::new();
        for _ in 0..EVERYTHING_ATTEMPTS {
            let dir = tempfile::tempdir().expect("tempdir for server-everything");
            let output_path = dir.path().join("output.log");
            let port = free_port();
            let mut command = Command::new("node");
            command
                .arg(&entry)
                .arg("streamableHttp")
                .env("PORT", port.to_string());
            let child = spawn_logged(&mut command, &output_path, "server-everything (node)");
            let mut server = McpServer {
                url: format!("http://127.0.0.1:{port}/mcp"),
                port,
                child,
                log_path: dir.path().join("calls.jsonl"),
                output_path,
                name: "server-everything",
                _dir: dir,
            };
            let deadline = Instant::now() + START_TIMEOUT;
            loop {
                if answers(port) {
                    return server;
                }
                match server.child.try_wait() {
                    // Probably lost the port: try another one.
                    Ok(Some(status)) => {
                        failures.push(format!("exited ({status}):\n{}", server.output()));
                        break;
                    }
                    Ok(None) => {}
                    Err(e) => panic!("waiting for server-everything: {e}"),
                }
                if Instant::now() >= deadline {
                    panic!(
                        "server-everything did not listen on port {port} within {}s; its output:\n{}",
                        START_TIMEOUT.as_secs(),
                        server.output()
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        panic!(
            "server-everything did not start in {EVERYTHING_ATTEMPTS} attempts:\n{}",
            failures.join("\n---\n")
        );
    }

    /// Every tool call the tracker received so far, oldest first: one
    /// `{"tool", "args", "authorization"}` object each, written when the call
    /// started (so a call cut short still counts). Empty for server-everything.
    pub(crate) fn calls(&self) -> Vec<Value> {
        let text = match std::fs::read_to_string(&self.log_path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(e) => panic!("reading {}: {e}", self.log_path.display()),
        };
        text.lines()
            // A line being written right now may be incomplete: skip it.
            .filter(|line| line.ends_with('}'))
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// The calls to one tool.
    pub(crate) fn calls_to(&self, tool: &str) -> Vec<Value> {
        self.calls()
            .into_iter()
            .filter(|call| call["tool"] == tool)
            .collect()
    }

    /// Waits (polling) until at least `n` calls were logged; panics after `timeout`.
    pub(crate) async fn wait_for_calls(&self, n: usize, timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let calls = self.calls();
            if calls.len() >= n {
                return calls;
            }
            assert!(
                Instant::now() < deadline,
                "the {} got {} tool calls, not {n}, within {timeout:?}: {calls:?}",
                self.name,
                calls.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// What the server printed so far (stdout and stderr).
    pub(crate) fn output(&self) -> String {
        std::fs::read_to_string(&self.output_path).unwrap_or_default()
    }

    /// Kills the server now (e.g. to test an unreachable server); idempotent.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn check_alive_until(&mut self, deadline: Instant) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "the {} exited ({status}) before listening ({INSTALL_HINT} if a module is missing); its output:\n{}",
                self.name,
                self.output()
            );
        }
        if Instant::now() >= deadline {
            panic!(
                "the {} did not listen within {}s; its output:\n{}",
                self.name,
                START_TIMEOUT.as_secs(),
                self.output()
            );
        }
    }

    fn wait_until_answers(&mut self, deadline: Instant) {
        while !answers(self.port) {
            self.check_alive_until(deadline);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Spawns `command` with stdout and stderr both appended to `output`.
fn spawn_logged(command: &mut Command, output: &Path, what: &str) -> Child {
    let out = std::fs::File::create(output).expect("server output file");
    let err = out.try_clone().expect("server output file");
    command
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {what}: {e} ({INSTALL_HINT})"))
}

/// The port of a `READY <port>` line, if printed yet.
fn ready_port(output: &str) -> Option<u16> {
    output
        .lines()
        .find_map(|line| line.strip_prefix("READY ")?.trim().parse().ok())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

fn answers(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}
