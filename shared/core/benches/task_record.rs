//! What reading and writing one task record costs: `Task::from_record`
//! then `serde_json::to_string`, as every store write of a task does, for
//! a waiting task with an approval, a question, a vote and a streamed
//! answer (about 1 KB of JSON).
//!
//! `cargo bench -p baton-core --bench task_record`. Results and the
//! machine: docs/performance.md.

use baton_core::Task;
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

const ROW: &str = concat!(
    r#"{"id":"0190a5e4-7f3b-7cc0-8a1e-2b3c4d5e6f70","status":"waiting","agent":"default","#,
    r#""origin":{"kind":"http"},"created_at":1767225600000,"updated_at":1767225601000,"#,
    r#""steps":2,"segments":1,"next_seq":5,"usage":{"input_tokens":10,"output_tokens":3},"#,
    r#""limits":{"max_steps":50,"max_segments":200,"deadline_at":1767229200000},"#,
    r#""waiting_for":{"kind":"timer","until":"2026-01-01T00:10:00.000Z"},"#,
    r#""last_commit":null,"#,
    r#""approvals":[{"approval_id":"ap-1-c1","step":1,"call_id":"c1","tool":"http_request","#,
    r#""summary":"POST https://x.test","requested_at":1767225600500,"expires_at":1767229200000,"#,
    r#""decision":{"verdict":"approved","by":"U1","at":1767225600900}}],"#,
    r#""questions":[{"step":2,"call_id":"c2","question":"Which env?","#,
    r#""asked_at":1767225601000,"expires_at":1767229200000,"#,
    r#""reply":{"text":"staging","by":"U1","at":1767225602000}}],"#,
    r#""feedback":[{"user":"U2","rating":"positive","at":1767225603000,"#,
    r#""action_ts":"1767225603.000100"}],"#,
    r#""answer_stream":{"opened_at":1767225602500,"message":{"channel":"C1","ts":"1.0"}}}"#,
);

fn task_record(c: &mut Criterion) {
    c.bench_function("read and write a task record", |b| {
        b.iter(|| {
            let t = Task::from_record(black_box(ROW), 1).expect("a valid record");
            black_box(serde_json::to_string(&t).expect("serialisable"))
        })
    });
}

criterion_group!(benches, task_record);
criterion_main!(benches);
