//! Test support: a throwaway moto server to run the AWS adapters against.
//!
//! Available with the `testing` feature (and in this crate's own tests):
//!
//! ```no_run
//! # async fn t() -> Result<(), Box<dyn std::error::Error>> {
//! let moto = baton_aws::testing::MotoServer::start()?;
//! let cfg = moto.sdk_config().await;
//! let names = baton_aws::ResourceNames::for_stack("t1");
//! let env = baton_aws::bootstrap(&cfg, &names, 3, 30).await?;
//! # let _ = env; Ok(()) }
//! ```
//!
//! moto is found via `BATON_MOTO_SERVER` (path to `moto_server`), else
//! `<workspace>/.venv/bin/moto_server`, else `moto_server` on `PATH`. A
//! missing moto is an error, never a skipped test.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::config::Credentials;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Environment variable naming the `moto_server` executable.
pub const MOTO_ENV: &str = "BATON_MOTO_SERVER";
/// How to get moto, repeated in every "not found" error.
pub const INSTALL_HINT: &str = "install it from the workspace root with \
`python3 -m venv .venv && .venv/bin/pip install 'moto[server]'` \
(or set BATON_MOTO_SERVER=/path/to/moto_server)";
/// How long a fresh server may take to answer.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Spawn attempts (a freshly picked port can be taken before moto binds it).
const ATTEMPTS: usize = 3;

/// Why a moto server could not be started. Its `Debug` is its message, so
/// `MotoServer::start().expect(..)` in a test shows how to install moto.
#[derive(thiserror::Error)]
pub enum MotoError {
    /// No `moto_server` anywhere; the message says how to install it.
    #[error("moto_server not found (looked at ${MOTO_ENV}, {looked}, and PATH); {INSTALL_HINT}")]
    NotFound {
        /// The workspace paths that were tried.
        looked: String,
    },
    /// `BATON_MOTO_SERVER` names a file that does not exist.
    #[error("{MOTO_ENV}={0} does not exist; {INSTALL_HINT}")]
    BadEnv(String),
    /// The executable could not be run.
    #[error("could not start {path}: {source}")]
    Spawn {
        /// The executable.
        path: String,
        /// Why it did not start.
        source: std::io::Error,
    },
    /// The server started but did not answer in time.
    #[error("moto_server did not answer within {secs} s (log: {log})")]
    NotReady {
        /// The time allowed.
        secs: u64,
        /// The end of its log (the file is removed).
        log: String,
    },
    /// The server exited before answering (every attempt).
    #[error("moto_server exited at startup ({status}); log: {log}")]
    Exited {
        /// Its exit status.
        status: String,
        /// The end of its log (the file is removed).
        log: String,
    },
    /// Picking a port or creating the log file failed.
    #[error("moto setup: {0}")]
    Io(#[from] std::io::Error),
}

impl std::fmt::Debug for MotoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// A running moto server on a loopback port, killed when dropped.
#[derive(Debug)]
pub struct MotoServer {
    child: Child,
    port: u16,
    log: PathBuf,
}

/// Finds the `moto_server` executable.
pub fn find_moto() -> Result<PathBuf, MotoError> {
    let mut starts: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
        starts.push(dir.into());
    }
    starts.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    if let Ok(dir) = std::env::current_dir() {
        starts.push(dir);
    }
    locate(
        std::env::var_os(MOTO_ENV),
        &starts,
        std::env::var_os("PATH"),
    )
}

/// [`find_moto`] with its inputs explicit: the `BATON_MOTO_SERVER` value,
/// directories to search upwards from for the workspace, and `PATH`.
fn locate(
    env: Option<OsString>,
    starts: &[PathBuf],
    path: Option<OsString>,
) -> Result<PathBuf, MotoError> {
    if let Some(p) = env.filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(MotoError::BadEnv(p.display().to_string()))
        };
    }
    let mut looked = Vec::new();
    for start in starts {
        if let Some(root) = workspace_root(start) {
            let candidate = root.join(".venv").join("bin").join("moto_server");
            if candidate.is_file() {
                return Ok(candidate);
            }
            looked.push(candidate.display().to_string());
        }
    }
    if let Some(path) = path {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("moto_server");
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    looked.dedup();
    Err(MotoError::NotFound {
        looked: if looked.is_empty() {
            "<no workspace found>/.venv/bin/moto_server".into()
        } else {
            looked.join(", ")
        },
    })
}

/// The last part of the server's log, for startup errors.
fn log_tail(log: &Path) -> String {
    const TAIL: usize = 2000;
    match std::fs::read(log) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(TAIL)..]);
            format!("...{}", text.trim())
        }
        Err(e) => format!("unreadable: {e}"),
    }
}

/// The outermost ancestor of `start` holding a `Cargo.toml` with a
/// `[workspace]` table (the cargo workspace root).
fn workspace_root(start: &Path) -> Option<PathBuf> {
    let mut found = None;
    for dir in start.ancestors() {
        let manifest = dir.join("Cargo.toml");
        if let Ok(text) = std::fs::read_to_string(&manifest) {
            if text.lines().any(|l| l.trim() == "[workspace]") {
                found = Some(dir.to_path_buf());
            }
        }
    }
    found
}

fn free_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

/// True once the server answers an HTTP request.
fn answers(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut buf = [0u8; 5];
    stream.read_exact(&mut buf).is_ok() && &buf == b"HTTP/"
}

/// The wrapper that serialises moto's DynamoDB requests (see
/// `moto_serialized.py`: moto's conditional writes are not atomic under
/// concurrent requests, DynamoDB's are). Run by the Python interpreter
/// beside `moto_server`; plain `moto_server` when there is none.
const SERIALISED_WRAPPER: &str = include_str!("moto_serialized.py");

fn serialised_command(exe: &Path) -> Command {
    let python = exe
        .parent()
        .map(|bin| bin.join("python3"))
        .filter(|p| p.exists());
    let script =
        std::env::temp_dir().join(format!("baton-moto-serialized-{}.py", std::process::id()));
    match python {
        Some(python) if std::fs::write(&script, SERIALISED_WRAPPER).is_ok() => {
            let mut c = Command::new(python);
            c.arg(script);
            c
        }
        _ => Command::new(exe),
    }
}

impl MotoServer {
    /// Starts moto on a free loopback port and waits (up to 20 s) until it
    /// answers. Blocks the calling thread meanwhile.
    pub fn start() -> Result<MotoServer, MotoError> {
        let exe = find_moto()?;
        let mut last = None;
        for _ in 0..ATTEMPTS {
            match Self::spawn(&exe) {
                Ok(server) => return Ok(server),
                // Probably lost the port to someone else: try another one.
                Err(e @ MotoError::Exited { .. }) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or(MotoError::NotReady {
            secs: START_TIMEOUT.as_secs(),
            log: String::new(),
        }))
    }

    fn spawn(exe: &Path) -> Result<MotoServer, MotoError> {
        let port = free_port()?;
        let log =
            std::env::temp_dir().join(format!("baton-moto-{}-{port}.log", std::process::id()));
        let out = std::fs::File::create(&log)?;
        let err = out.try_clone()?;
        let mut command = serialised_command(exe);
        let child = command
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|source| {
                let _ = std::fs::remove_file(&log);
                MotoError::Spawn {
                    path: exe.display().to_string(),
                    source,
                }
            })?;
        // From here on, Drop kills the child on every early return.
        let mut server = MotoServer { child, port, log };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = server.child.try_wait()? {
                return Err(MotoError::Exited {
                    status: status.to_string(),
                    log: log_tail(&server.log),
                });
            }
            if answers(port) {
                return Ok(server);
            }
            if Instant::now() >= deadline {
                return Err(MotoError::NotReady {
                    secs: START_TIMEOUT.as_secs(),
                    log: log_tail(&server.log),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The server's base URL, e.g. `http://127.0.0.1:49152`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// An SDK configuration pointed at this server: region `us-east-1`,
    /// dummy credentials, and Baton's own HTTPS client ([`crate::https`])
    /// whatever the build's features, so that every test against moto
    /// runs the client the Lambda functions use.
    pub async fn sdk_config(&self) -> SdkConfig {
        aws_config::defaults(BehaviorVersion::latest())
            .http_client(crate::https::client())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new(
                "testing",
                "testing",
                None,
                None,
                "baton-moto",
            ))
            .endpoint_url(self.endpoint())
            .load()
            .await
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_workspace_root_from_this_crate() {
        let root = workspace_root(Path::new(env!("CARGO_MANIFEST_DIR")));
        let root = root.expect("this crate lives in a workspace");
        assert!(root.join("shared").join("aws").is_dir(), "{root:?}");
    }

    #[test]
    fn missing_moto_is_an_error_that_says_how_to_install() {
        let nowhere = std::env::temp_dir().join("baton-no-moto-here");
        let e = locate(Some(nowhere.clone().into()), &[], None).unwrap_err();
        assert!(matches!(&e, MotoError::BadEnv(p) if *p == nowhere.display().to_string()));
        assert!(e.to_string().contains("pip install 'moto[server]'"), "{e}");
        // No env var, no workspace, empty PATH.
        let e = locate(
            None,
            std::slice::from_ref(&nowhere),
            Some(nowhere.clone().into()),
        )
        .unwrap_err();
        assert!(matches!(e, MotoError::NotFound { .. }));
        assert!(e.to_string().contains("python3 -m venv .venv"), "{e}");
    }

    #[test]
    fn locates_the_workspace_venv() {
        let found = locate(None, &[PathBuf::from(env!("CARGO_MANIFEST_DIR"))], None)
            .expect("moto must be installed in <workspace>/.venv");
        assert!(found.ends_with(".venv/bin/moto_server"), "{found:?}");
    }

    #[test]
    fn not_found_error_says_how_to_install() {
        let e = MotoError::NotFound {
            looked: "/x/.venv/bin/moto_server".into(),
        };
        let msg = e.to_string();
        assert!(msg.contains("pip install 'moto[server]'"), "{msg}");
        assert!(msg.contains("BATON_MOTO_SERVER"), "{msg}");
    }

    #[test]
    fn starts_answers_and_stops() {
        let moto = MotoServer::start().expect("moto must be installed for these tests");
        let port = moto.port;
        assert!(answers(port));
        drop(moto);
        // Killed on drop: nothing listens on the port any more.
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        assert!(TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err());
    }
}
