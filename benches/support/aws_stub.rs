//! A minimal in-process stand-in for DynamoDB and SQS, for benchmarks only.
//!
//! moto (a Python server) answers a DynamoDB transaction in tens of
//! milliseconds, which hides Baton's own cold-start cost. This stub answers
//! the few operations the ingest path makes — `GetItem`, `PutItem`,
//! `DeleteItem`, `TransactWriteItems`, `Query` (DynamoDB JSON 1.0) and
//! `SendMessage` (SQS JSON) — in microseconds, keeping items in memory so a
//! write is read back. It does **not** check conditions, expressions, types,
//! signatures or limits: it is not a test double for correctness, only a
//! fast, well-formed peer, so the number measured is the function's own
//! work plus real HTTP round trips over loopback.

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

type Items = Arc<Mutex<BTreeMap<(String, String), Value>>>;

/// The stub server; stops when dropped.
pub(crate) struct AwsStub {
    addr: std::net::SocketAddr,
    handle: tokio::task::JoinHandle<()>,
    /// Requests answered, by operation name.
    pub calls: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl AwsStub {
    /// Serves on `listener` (bound beforehand, so its address can go into
    /// the environment before any thread starts).
    pub(crate) fn start(listener: std::net::TcpListener) -> std::io::Result<Self> {
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let addr = listener.local_addr()?;
        let items: Items = Arc::default();
        let calls: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
        let seq = Arc::new(AtomicU64::new(0));
        let (i, c) = (items.clone(), calls.clone());
        let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
            let (items, calls, seq) = (i.clone(), c.clone(), seq.clone());
            async move { answer(&items, &calls, &seq, &headers, &body) }
        });
        let handle = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(AwsStub {
            addr,
            handle,
            calls,
        })
    }

    /// `http://127.0.0.1:<port>`, for `AWS_ENDPOINT_URL`.
    pub(crate) fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A queue URL the stub accepts (any URL is accepted).
    pub(crate) fn queue_url(&self) -> String {
        format!("{}/000000000000/bench-work", self.endpoint())
    }
}

impl Drop for AwsStub {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

fn key_of(item: &Value) -> Option<(String, String)> {
    Some((
        item["pk"]["S"].as_str()?.to_owned(),
        item["sk"]["S"].as_str()?.to_owned(),
    ))
}

fn reply(content_type: &str, body: Value) -> Response {
    (
        StatusCode::OK,
        [("content-type", content_type.to_owned())],
        body.to_string(),
    )
        .into_response()
}

fn answer(
    items: &Items,
    calls: &Mutex<BTreeMap<String, u64>>,
    seq: &AtomicU64,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let target = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let req: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    if let Ok(mut c) = calls.lock() {
        *c.entry(target.clone()).or_default() += 1;
    }
    let Ok(mut items) = items.lock() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    const DDB: &str = "application/x-amz-json-1.0";
    match target.as_str() {
        "DynamoDB_20120810.GetItem" => {
            let found = key_of(&req["Key"]).and_then(|k| items.get(&k).cloned());
            reply(DDB, found.map_or(json!({}), |i| json!({ "Item": i })))
        }
        "DynamoDB_20120810.PutItem" => {
            if let Some(k) = key_of(&req["Item"]) {
                items.insert(k, req["Item"].clone());
            }
            reply(DDB, json!({}))
        }
        "DynamoDB_20120810.DeleteItem" => {
            if let Some(k) = key_of(&req["Key"]) {
                items.remove(&k);
            }
            reply(DDB, json!({}))
        }
        "DynamoDB_20120810.TransactWriteItems" => {
            for t in req["TransactItems"].as_array().into_iter().flatten() {
                if let Some(k) = key_of(&t["Put"]["Item"]) {
                    items.insert(k, t["Put"]["Item"].clone());
                } else if let Some(k) = key_of(&t["Delete"]["Key"]) {
                    items.remove(&k);
                }
            }
            reply(DDB, json!({}))
        }
        "DynamoDB_20120810.Query" => {
            // The key conditions the table adapter writes: `pk = :pk` with
            // `begins_with(sk, :prefix)` or `sk BETWEEN :lo AND :hi`; the
            // adapter filters the bounds itself.
            let v = &req["ExpressionAttributeValues"];
            let pk = v[":pk"]["S"].as_str().unwrap_or("");
            let prefix = v[":prefix"]["S"].as_str().unwrap_or("");
            let lo = v[":lo"]["S"].as_str().unwrap_or("");
            let hi = v[":hi"]["S"].as_str();
            let found: Vec<Value> = items
                .iter()
                .filter(|((p, s), _)| {
                    p == pk
                        && s.starts_with(prefix)
                        && s.as_str() >= lo
                        && hi.is_none_or(|h| s.as_str() <= h)
                })
                .map(|(_, i)| i.clone())
                .collect();
            let n = found.len();
            reply(
                DDB,
                json!({ "Items": found, "Count": n, "ScannedCount": n }),
            )
        }
        "AmazonSQS.SendMessage" => {
            let n = seq.fetch_add(1, Ordering::Relaxed);
            reply(
                "application/x-amz-json-1.0",
                json!({ "MessageId": format!("00000000-0000-4000-8000-{n:012}") }),
            )
        }
        other => (
            StatusCode::BAD_REQUEST,
            [("content-type", DDB)],
            json!({
                "__type": "com.amazon.coral.validate#UnknownOperationException",
                "message": format!("the bench stub does not answer `{other}`"),
            })
            .to_string(),
        )
            .into_response(),
    }
}
