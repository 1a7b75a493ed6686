//! `kill -9` at an arbitrary moment loses no acknowledged write.
//!
//! The test re-runs this test binary as a child process (selecting the
//! ignored `crash_child` test, which only acts when the environment
//! variable below names a data dir). The child writes in a loop and prints
//! `ack {i}` after each write is acknowledged; the parent SIGKILLs it
//! mid-stream, reopens the store and checks that everything acknowledged
//! is there and the store is consistent. Three rounds, each resuming from
//! what the previous one left, so recovery is also followed by more writes.

use std::io::{BufRead, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::time::Duration;

use baton_core::{BlobStore, Condition, Item, Key, Table, WorkQueue, Write};
use baton_embedded::{EmbeddedBackend, QueueConfig};

const CHILD_ENV: &str = "BATON_EMBEDDED_CRASH_CHILD_DIR";

fn counter_key() -> Key {
    Key::new("crash", "COUNTER")
}

fn item(key: Key, version: u64, data: String) -> Item {
    Item {
        key,
        version,
        data,
        index: None,
        expires_at: None,
        listing: None,
    }
}

#[test]
#[ignore = "helper process for kill9_loses_no_acknowledged_write"]
fn crash_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let b = EmbeddedBackend::open(&dir, QueueConfig::default()).unwrap();
        // Resume after what the previous (killed) run committed.
        let mut next = b
            .table
            .get(&counter_key())
            .await
            .unwrap()
            .map_or(0, |c| c.version);
        let mut out = std::io::stdout();
        loop {
            let i = next;
            let condition = if i == 0 {
                Condition::NotExists
            } else {
                Condition::VersionIs(i)
            };
            // One transaction: the item and the counter move together.
            b.table
                .transact(vec![
                    Write::Put {
                        item: item(Key::new("crash", format!("{i:08}")), 1, i.to_string()),
                        condition: Condition::NotExists,
                    },
                    Write::Put {
                        item: item(counter_key(), i + 1, i.to_string()),
                        condition,
                    },
                ])
                .await
                .unwrap();
            b.queue.send(&i.to_string(), Duration::ZERO).await.unwrap();
            if i % 10 == 0 {
                b.blobs
                    .put(&format!("crash/{i:08}"), vec![i as u8; 4096])
                    .await
                    .unwrap();
            }
            writeln!(out, "ack {i}").unwrap();
            out.flush().unwrap();
            next += 1;
        }
    });
}

/// Runs the child until it has acknowledged `acks` writes, lets it run on
/// for `grace`, kills it with SIGKILL, and returns the last acknowledgement
/// read (the child may have gone further).
fn run_child_and_kill(dir: &std::path::Path, acks: usize, grace: Duration) -> u64 {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "crash::crash_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut last = None;
    let mut seen = 0;
    // Kept open until the kill: a closed pipe would make the child's next
    // write fail and end it before the kill comes.
    let mut lines = BufReader::new(stdout).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        // The harness's own "test crash_child ... " shares the first line.
        if let Some((_, n)) = line.split_once("ack ") {
            last = Some(n.trim().parse::<u64>().unwrap());
            seen += 1;
            if seen >= acks {
                break;
            }
        }
    }
    std::thread::sleep(grace);
    // `Child::kill` is SIGKILL on Unix: no destructor, no flush, no close.
    child.kill().unwrap();
    let status = child.wait().unwrap();
    drop(lines);
    // Killed by the signal, not ended by itself (an exit code).
    assert_eq!(status.code(), None, "child ended on its own: {status}");
    last.expect("child acknowledged nothing")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut start = 0;
    let mut acked_ranges = Vec::new();
    for (acks, grace_us) in [(150, 0), (333, 700), (71, 2300)] {
        let path = dir.path().to_owned();
        let grace = Duration::from_micros(grace_us);
        let last_acked =
            tokio::task::spawn_blocking(move || run_child_and_kill(&path, acks, grace))
                .await
                .unwrap();

        let b = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
        b.database.integrity_check().await.unwrap();
        let committed = b.table.get(&counter_key()).await.unwrap().unwrap().version;
        // Everything acknowledged is there (the child may have committed
        // more that the parent did not read, and one unacknowledged).
        assert!(
            committed > last_acked,
            "acked {last_acked}, committed {committed}"
        );
        let items = b.table.query("crash", "0", None, usize::MAX).await.unwrap();
        // The item and the counter were one transaction: never one alone.
        assert_eq!(items.len() as u64, committed);
        for (i, it) in items.iter().enumerate() {
            assert_eq!(it.key.sk, format!("{i:08}"));
            assert_eq!(it.data, i.to_string());
        }
        // Earlier rounds' messages were deleted: what is queued is this
        // round's, from where the child resumed, without a gap up to at
        // least the last acknowledged one, and none beyond the committed.
        let queued = b.queue.len().await.unwrap() as u64;
        let mut bodies = Vec::new();
        loop {
            let batch = b.queue.receive(10, Duration::ZERO).await.unwrap();
            if batch.is_empty() {
                break;
            }
            for d in batch {
                b.queue.delete(&d.receipt).await.unwrap();
                bodies.push(d.body.parse::<u64>().unwrap());
            }
        }
        assert_eq!(bodies.len() as u64, queued);
        let expected: Vec<u64> = (start..start + queued).collect();
        assert_eq!(bodies, expected, "resumed at {start}");
        assert!(
            start + queued > last_acked && start + queued <= committed,
            "resumed at {start}, acked {last_acked}, queued {queued}, committed {committed}"
        );
        // Blobs of every write acknowledged in any round so far (a write
        // committed but killed before its blob was put is not among them).
        acked_ranges.push(start..=last_acked);
        for i in acked_ranges
            .iter()
            .cloned()
            .flatten()
            .filter(|i| i % 10 == 0)
        {
            let blob = b.blobs.get(&format!("crash/{i:08}")).await.unwrap();
            assert!(
                blob.as_deref() == Some(&[i as u8; 4096][..]),
                "blob {i}: {:?} bytes (acked {last_acked}, resumed at {start})",
                blob.map(|b| b.len())
            );
        }
        start = committed;
        eprintln!("round: acked {last_acked}, committed {committed}, queued {queued}");
    }
}
