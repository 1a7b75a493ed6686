//! The local stack a run starts when it is given no `--url`: this very
//! binary as `baton dev` (the same wiring, the environment's model
//! settings and agents file), on a fresh temporary data directory and a
//! loopback port the OS chooses, with a token made for the run. It is
//! stopped, and its data deleted, when the run ends.

use anyhow::Context;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub(crate) struct LocalStack {
    pub(crate) url: String,
    pub(crate) token: String,
    child: Child,
    // Deleted on drop, after the child is gone.
    dir: tempfile::TempDir,
}

/// How long the stack may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(60);

impl LocalStack {
    pub(crate) async fn start() -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("baton-eval-")
            .tempdir()
            .context("creating the eval's data directory")?;
        let token = format!("eval-{}", uuid::Uuid::new_v4().simple());
        let exe = std::env::current_exe().context("finding the baton binary")?;
        let log_path = dir.path().join("baton.log");
        let log = std::fs::File::create(&log_path).context("creating the stack's log")?;
        let mut child = Command::new(exe)
            .args(["dev", "--listen", "127.0.0.1:0", "--backend", "embedded"])
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .env("BATON_API_TOKEN", &token)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("starting the local stack (baton dev)")?;
        let stdout = child.stdout.take().context("the stack's output")?;
        let mut lines = BufReader::new(stdout).lines();
        let listening = async {
            while let Some(line) = lines.next_line().await? {
                if let Some(rest) = line.strip_prefix("baton dev listening on ") {
                    let url = rest.split_whitespace().next().unwrap_or_default();
                    return Ok::<_, std::io::Error>(Some(url.to_owned()));
                }
            }
            Ok(None)
        };
        let url = match tokio::time::timeout(START_TIMEOUT, listening).await {
            Ok(Ok(Some(url))) => url,
            _ => {
                let _ = child.kill().await;
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                anyhow::bail!("the local stack did not start: {}", tail.join(" / ").trim());
            }
        };
        // Keep reading so the stack never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(LocalStack {
            url,
            token,
            child,
            dir,
        })
    }

    /// Stops the stack and deletes its data.
    pub(crate) async fn stop(mut self) {
        let _ = self.child.kill().await;
        let _ = self.child.wait().await;
        drop(self.dir);
    }
}
