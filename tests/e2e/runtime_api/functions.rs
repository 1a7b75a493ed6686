//! The `ingest` and `worker` binaries as processes in a Lambda-like
//! environment.
//!
//! Cargo sets `CARGO_BIN_EXE_<name>` only for the binaries of the package
//! whose tests are being built; `ingest` and `worker` are binaries of other
//! workspace members (and binary-only crates cannot be dev-dependencies).
//! So [`binaries`] builds them once per test process with
//! `cargo build -p ingest` and `cargo build -p worker` (apart, as each is
//! deployed: built together, the ingest would get the worker's features)
//! into the same target directory and profile as the running test (or
//! bench), and takes their paths from cargo's JSON messages. Set `BATON_LAMBDA_BIN_DIR` to use prebuilt
//! binaries from a directory instead (e.g. the output of `cargo lambda`).

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Paths of the two function binaries.
#[derive(Clone, Debug)]
pub(crate) struct Binaries {
    /// `functions/ingest`.
    pub ingest: PathBuf,
    /// `functions/worker`.
    pub worker: PathBuf,
}

/// The function binaries, built once per process (see the module docs).
/// Blocks while cargo builds.
pub(crate) fn binaries() -> Result<Binaries, String> {
    static BUILT: OnceLock<Result<Binaries, String>> = OnceLock::new();
    BUILT.get_or_init(locate_or_build).clone()
}

/// The `mcp` function's binary (functions/mcp), built on first use
/// (only its own tests need it), or taken from `BATON_LAMBDA_BIN_DIR`.
pub(crate) fn mcp_binary() -> Result<PathBuf, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| match std::env::var_os("BATON_LAMBDA_BIN_DIR") {
            Some(dir) if !dir.is_empty() => {
                let p = PathBuf::from(dir).join("mcp");
                if p.is_file() {
                    Ok(p)
                } else {
                    Err(format!(
                        "BATON_LAMBDA_BIN_DIR: {} does not exist",
                        p.display()
                    ))
                }
            }
            _ => build_one("mcp"),
        })
        .clone()
}

fn locate_or_build() -> Result<Binaries, String> {
    if let Some(dir) = std::env::var_os("BATON_LAMBDA_BIN_DIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        let b = Binaries {
            ingest: dir.join("ingest"),
            worker: dir.join("worker"),
        };
        for p in [&b.ingest, &b.worker] {
            if !p.is_file() {
                return Err(format!(
                    "BATON_LAMBDA_BIN_DIR: {} does not exist",
                    p.display()
                ));
            }
        }
        return Ok(b);
    }
    build()
}

/// Where the running test executable was built: `(target dir, target
/// triple if cross-building, profile name)`. The executable lives in
/// `<target>[/<triple>]/<profile dir>/deps/`.
fn build_location() -> Result<(PathBuf, Option<String>, String), String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| format!("unexpected test executable location {}", exe.display()))?;
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_owned(),
        Some(name) => name.to_owned(),
        None => return Err(format!("no profile directory above {}", exe.display())),
    };
    let parent = profile_dir
        .parent()
        .ok_or("profile directory has no parent")?;
    // Cargo keeps `.rustc_info.json` (and `CACHEDIR.TAG`) at the top of the
    // target directory; one level further up means a `--target` triple.
    let is_target =
        |d: &Path| d.join(".rustc_info.json").is_file() || d.join("CACHEDIR.TAG").is_file();
    match parent.parent() {
        Some(up) if !is_target(parent) && is_target(up) => {
            let triple = parent
                .file_name()
                .and_then(|n| n.to_str())
                .map(str::to_owned);
            Ok((up.to_path_buf(), triple, profile))
        }
        _ => Ok((parent.to_path_buf(), None, profile)),
    }
}

fn build() -> Result<Binaries, String> {
    let started = Instant::now();
    // One cargo run per function, never `-p ingest -p worker` together:
    // cargo unifies the features of the packages it builds at once, so the
    // ingest would get baton-runtime's `worker` feature (the agent loop,
    // providers and tools) from the worker, which `cargo lambda build` of
    // the ingest alone (what is deployed) never links.
    let ingest = build_one("ingest")?;
    let worker = build_one("worker")?;
    eprintln!(
        "built the function binaries ({}) in {:.1?}",
        build_location()?.2,
        started.elapsed()
    );
    Ok(Binaries { ingest, worker })
}

/// `cargo build -p <package>` in `functions/<package>` into the running
/// test's target directory and profile; the path of its binary.
fn build_one(package: &str) -> Result<PathBuf, String> {
    let (target_dir, triple, profile) = build_location()?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    // From the function's own directory, as SAM builds it: cargo then reads
    // that directory's `.cargo/config.toml` (the ingest's size profile).
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace.join("functions").join(package))
        .args([
            "build",
            "--quiet",
            "-p",
            package,
            "--message-format=json-render-diagnostics",
        ])
        .args(["--profile", &profile])
        .env("CARGO_TARGET_DIR", &target_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(t) = &triple {
        cmd.args(["--target", t]);
    }
    // Cargo gives the running test its own package's CARGO_MANIFEST_DIR,
    // CARGO_PKG_* and so on. Passed on, build scripts that watch them (ring's
    // does) would rerun and rebuild half the dependency tree on every test
    // run, so the nested build gets a clean cargo environment.
    for (key, _) in std::env::vars_os() {
        let Some(k) = key.to_str() else { continue };
        let keep = [
            "CARGO_HOME",
            "CARGO_BUILD_",
            "CARGO_PROFILE_",
            "CARGO_REGISTRIES_",
            "CARGO_NET_",
            "CARGO_HTTP_",
        ]
        .iter()
        .any(|p| k.starts_with(p))
            || matches!(
                k,
                "CARGO_TERM_COLOR" | "CARGO_INCREMENTAL" | "CARGO_TARGET_DIR"
            );
        if (k.starts_with("CARGO_") && !keep) || k == "OUT_DIR" {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd.spawn().map_err(|e| format!("cannot run cargo: {e}"))?;
    let stdout = child.stdout.take().ok_or("no cargo stdout")?;
    let mut exe = None;
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.map_err(|e| format!("reading cargo output: {e}"))?;
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" || msg["target"]["name"] != package {
            continue;
        }
        if let Some(path) = msg["executable"].as_str() {
            exe = Some(PathBuf::from(path));
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for cargo: {e}"))?;
    if !status.success() {
        return Err(format!(
            "`cargo build -p {package} --profile {profile}` failed: {status}"
        ));
    }
    exe.ok_or_else(|| format!("cargo built but did not name the {package} executable"))
}

/// A function binary running as Lambda would run it: a fresh process whose
/// environment is what Lambda sets (runtime API address, function metadata,
/// region, credentials) plus the function's own variables, and nothing
/// inherited from the test. Killed when dropped.
pub(crate) struct FunctionProcess {
    child: Child,
    /// When the process was spawned (cold start begins).
    pub spawned: Instant,
    log: PathBuf,
    name: String,
}

impl FunctionProcess {
    /// Starts `exe` against the Runtime API at `runtime_api` (`host:port`)
    /// with the function variables `vars`. stdout and stderr (the JSON log
    /// lines) go to a temporary file, see [`FunctionProcess::log`].
    pub(crate) fn spawn(
        exe: &Path,
        runtime_api: &str,
        vars: &[(String, String)],
    ) -> std::io::Result<Self> {
        let name = exe
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("function")
            .to_owned();
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = std::env::temp_dir().join(format!(
            "baton-lambda-{name}-{}-{seq}.log",
            std::process::id()
        ));
        let out = std::fs::File::create(&log)?;
        let err = out.try_clone()?;
        let mut cmd = Command::new(exe);
        cmd.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("TZ", ":UTC")
            .env("AWS_LAMBDA_RUNTIME_API", runtime_api)
            .env("AWS_LAMBDA_FUNCTION_NAME", format!("baton-test-{name}"))
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env(
                "AWS_LAMBDA_LOG_GROUP_NAME",
                format!("/aws/lambda/baton-test-{name}"),
            )
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "2026/01/01/[$LATEST]test")
            .env("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand")
            .env("AWS_EXECUTION_ENV", "AWS_Lambda_provided.al2023")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_DEFAULT_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_SESSION_TOKEN", "testing")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let spawned = Instant::now();
        let child = cmd.spawn()?;
        Ok(FunctionProcess {
            child,
            spawned,
            log,
            name,
        })
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Peak resident set size so far, in KiB (`VmHWM` of
    /// `/proc/<pid>/status`); `None` once the process is gone or off Linux.
    pub(crate) fn peak_rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// What the function logged so far (stdout and stderr).
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits at most `timeout` for the process to exit by itself.
    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The exit status, if the process has already exited.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// A context line for assertion messages: the name and the log tail.
    pub(crate) fn describe(&self) -> String {
        let log = self.log();
        let tail: String = log
            .chars()
            .rev()
            .take(4000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("{} (pid {}) log:\n{tail}", self.name, self.child.id())
    }
}

impl Drop for FunctionProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::env::var_os("BATON_KEEP_LAMBDA_LOGS").is_none() {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}
