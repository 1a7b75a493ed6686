//! Following a task through its live event stream (`GET
//! /tasks/{id}/stream`, Server-Sent Events): each event as it is written,
//! reconnecting with `Last-Event-ID` when the server closes the stream at
//! its time limit or the connection drops.

use super::Api;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::Value;
use std::time::Duration;

/// The server sends a heartbeat every 15 s; a connection silent for this
/// long is taken as dropped.
const SILENCE: Duration = Duration::from_secs(45);

/// Reconnections in a row that may fail before following falls back to
/// polling.
const ATTEMPTS: u32 = 3;

/// How following by stream ended.
pub(crate) enum Streamed {
    /// The task ended: its `end` event's `{"status", "result", "error"}`.
    Ended(Value),
    /// The stream is not to be had (an older server, a proxy in the way,
    /// the connection failing): poll instead, after the last `seq` seen.
    Unavailable,
}

impl Api {
    /// Calls `seen` with each event of task `id` after `*after`, moving
    /// `*after` on, until the task ends.
    pub(crate) async fn stream_events(
        &self,
        id: &str,
        after: &mut Option<u64>,
        seen: &mut dyn FnMut(&Value),
    ) -> Streamed {
        let Ok(http) = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(SILENCE)
            .build()
        else {
            return Streamed::Unavailable;
        };
        let url = format!(
            "{}/tasks/{}/stream",
            self.stream_base,
            super::percent_encode(id)
        );
        let mut failures = 0;
        loop {
            let mut req = http
                .get(&url)
                .bearer_auth(&self.token)
                .header(reqwest::header::ACCEPT, "text/event-stream");
            if let Some(n) = after {
                req = req.header("Last-Event-ID", n.to_string());
            }
            let resp = match req.send().await {
                Ok(r) if r.status().is_success() => r,
                _ => {
                    failures += 1;
                    if failures >= ATTEMPTS {
                        return Streamed::Unavailable;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            failures = 0;
            let mut events = resp.bytes_stream().eventsource();
            while let Some(item) = events.next().await {
                let Ok(event) = item else {
                    // Dropped mid-stream: reconnect after the last seen.
                    break;
                };
                if event.event == "end" {
                    return Streamed::Ended(serde_json::from_str(&event.data).unwrap_or_default());
                }
                let Ok(e) = serde_json::from_str::<Value>(&event.data) else {
                    continue;
                };
                let Some(seq) = e["seq"].as_u64() else {
                    continue;
                };
                // Each event once, whatever a reconnection repeats.
                if after.is_some_and(|a| seq <= a) {
                    continue;
                }
                *after = Some(seq);
                seen(&e);
            }
        }
    }
}
