//! Per-person OAuth connections (#24, docs/connections.md) through the
//! real binary, against an MCP server and authorization server built on
//! the official Python MCP SDK's auth support
//! (`tests/fixtures/oauth/server.py`): two Slack people connect, each with
//! a Connect button only they see, and each call carries that person's
//! token; an expired token is refreshed, a revoked one asks again; a
//! replayed, foreign or expired `state` is refused and changes nothing;
//! the tokens show nowhere (events, status, trace, log, model, Slack, the
//! store in clear); an HTTP tool with `[oauth.NAME]`; what an operator
//! sees and revokes (`baton connections`, `disconnect NAME`).

use crate::common::oauth::{Browser, OAuthServer, STATIC_CLIENT_ID, STATIC_CLIENT_SECRET};
use crate::common::{Backend, Options, TestApp};
use baton_slack::testing::FakeSlack;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(90);
/// Long enough never to expire during a test.
const HOUR: Duration = Duration::from_secs(3600);
const CHANNEL: &str = "C1";
const TEAM: &str = "T1";
/// The model connects to `acme` when that is all it is offered.
const CONNECT: &str = "#tool=acme__connect #args={}";
const WHOAMI: &str = "#tool=acme__whoami #args={}";
const ME: &str = "#tool=me #args={}";

fn agents_file(server: &OAuthServer, connection: &str) -> String {
    format!(
        r#"
[mcp.acme]
url = "{mcp}"
auth = "oauth"
timeout = "20s"

[oauth.idp]
authorize_url = "{base}/authorize"
token_url = "{base}/token"
client_id = "{STATIC_CLIENT_ID}"
client_secret = "${{IDP_CLIENT_SECRET}}"
scopes = ["read"]

[http_tools.me]
description = "Who the person is at the identity provider"
method = "GET"
url = "{base}/api/me"
auth = {{ oauth = "idp" }}

[connection]
api_may_name_user = true
{connection}

[agents.default]
tools = ["mcp:acme", "me", "current_time"]
"#,
        mcp = server.mcp_url,
        base = server.base,
    )
}

async fn spawn(backend: Backend, server: &OAuthServer, connection: &str) -> TestApp {
    spawn_with(backend, server, connection, false).await
}

/// With Sign in with Slack on the fake Slack when `sign_in`.
async fn spawn_with(
    backend: Backend,
    server: &OAuthServer,
    connection: &str,
    sign_in: bool,
) -> TestApp {
    TestApp::spawn(Options {
        backend,
        extra_env: vec![
            ("BATON_AGENTS_TOML".into(), agents_file(server, connection)),
            ("IDP_CLIENT_SECRET".into(), STATIC_CLIENT_SECRET.into()),
        ],
        sign_in_with_slack: sign_in,
        ..Options::default()
    })
    .await
}

// ---- Slack

fn callback(event_id: &str, event: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": "event_callback", "team_id": TEAM, "api_app_id": "A1",
        "event_id": event_id, "event_time": 1_700_000_000, "event": event
    }))
    .unwrap()
}

/// `user` mentions the bot with `text`, starting the thread `ts`.
async fn mention(app: &TestApp, user: &str, ts: &str, text: &str) {
    let body = callback(
        &format!("Ev{ts}"),
        json!({"type": "app_mention", "user": user, "text": format!("<@UBOT> {text}"),
               "ts": ts, "channel": CHANNEL, "event_ts": ts}),
    );
    let r = app
        .slack_post("/slack/events", &body, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200, "log:\n{}", app.log());
}

/// `user` mentions the bot with `text` in the thread `thread_ts`.
async fn mention_in_thread(app: &TestApp, user: &str, thread_ts: &str, ts: &str, text: &str) {
    let body = callback(
        &format!("Ev{ts}"),
        json!({"type": "app_mention", "user": user, "text": format!("<@UBOT> {text}"),
               "ts": ts, "thread_ts": thread_ts, "channel": CHANNEL, "event_ts": ts}),
    );
    let r = app
        .slack_post("/slack/events", &body, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200, "log:\n{}", app.log());
}

/// `user` starts a thread with `text`: its task's id.
async fn slack_task(app: &TestApp, user: &str, ts: &str, text: &str) -> String {
    let before = app.task_ids().await;
    mention(app, user, ts, text).await;
    let started = std::time::Instant::now();
    loop {
        if let Some(id) = app.task_ids().await.difference(&before).next() {
            return id.clone();
        }
        assert!(started.elapsed() < LONG, "no task for {ts}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The ephemeral notes so far.
fn ephemerals(app: &TestApp) -> Vec<Value> {
    app.slack.calls("chat.postEphemeral")
}

fn connect_link_in(text: &str) -> Option<String> {
    let re = regex::Regex::new(r#"https?://[^\s"<>|\\]+/connect/[A-Za-z0-9_\-]+"#).unwrap();
    re.find(text).map(|m| m.as_str().to_owned())
}

/// Waits for a Connect button sent to `user` after the first `seen`
/// ephemeral notes: the note and its link.
async fn connect_prompt(app: &TestApp, user: &str, seen: usize) -> (Value, String) {
    let started = std::time::Instant::now();
    loop {
        for note in ephemerals(app).into_iter().skip(seen) {
            if let Some(link) = connect_link_in(&note.to_string()) {
                assert_eq!(
                    note["user"], user,
                    "the Connect button goes to {user} alone: {note}"
                );
                return (note, link);
            }
        }
        assert!(
            started.elapsed() < LONG,
            "no Connect button for {user}: {:?}\nlog:\n{}",
            ephemerals(app),
            app.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// No public post ever carried a Connect link.
fn no_public_connect_link(app: &TestApp) {
    for post in app.slack.posted() {
        assert!(
            connect_link_in(&post.text).is_none()
                && connect_link_in(&post.blocks.clone().unwrap_or_default().to_string()).is_none(),
            "a Connect link was posted for everyone: {post:?}"
        );
    }
}

/// `person` (logged in at the provider) follows `link`: the last page,
/// which says it is done.
async fn connect_as(server: &OAuthServer, person: &str, link: &str) -> Browser {
    let mut browser = Browser::new();
    browser.log_in(server, person).await;
    let page = browser.connect(link).await;
    assert_eq!(page.status, 200, "{page:?}");
    assert!(page.url.contains("/oauth/callback"), "{page:?}");
    assert!(page.body.contains("Connected"), "{page:?}");
    browser
}

/// The task waits for a connection to `provider`: its status JSON.
async fn waits_for_connection(app: &TestApp, id: &str, provider: &str) -> Value {
    let task = app.wait_waiting(id).await;
    assert_eq!(task["waiting_for"]["kind"], "connection", "{task}");
    assert_eq!(task["waiting_for"]["provider"], provider, "{task}");
    task
}

async fn succeeded(app: &TestApp, id: &str) -> String {
    let task = app.wait_done(id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    task["result"].as_str().unwrap_or_default().to_owned()
}

/// An HTTP task acting for `user` (`POST /tasks` with `user`).
async fn api_task(app: &TestApp, user: Option<&str>, input: &str) -> String {
    let mut body = json!({"input": input});
    if let Some(user) = user {
        body["user"] = json!(user);
    }
    let (status, v) = app.post_json("/tasks", &body).await;
    assert_eq!(status, 202, "{v}\nlog:\n{}", app.log());
    v["task_id"].as_str().unwrap().to_owned()
}

// ---- what an operator sees

async fn connections_of(app: &TestApp, user: Option<&str>) -> Vec<Value> {
    let path = match user {
        Some(u) => format!("/connections?user={u}"),
        None => "/connections".to_owned(),
    };
    let (status, v) = app.get(&path).await;
    assert_eq!(status, 200, "GET {path}: {v}\nlog:\n{}", app.log());
    v["connections"].as_array().cloned().unwrap_or_default()
}

fn people(connections: &[Value]) -> BTreeSet<String> {
    connections
        .iter()
        .map(|c| {
            let p = &c["person"];
            match (p["workspace"].as_str(), p["user"].as_str(), p.as_str()) {
                (Some(w), Some(u), _) => {
                    format!("{w}:{u}/{}", c["provider"].as_str().unwrap_or(""))
                }
                (_, _, Some(s)) => format!("{s}/{}", c["provider"].as_str().unwrap_or("")),
                _ => format!("{p}/{}", c["provider"]),
            }
        })
        .collect()
}

// ---- secrets nowhere

/// Every byte under `dir`, as text (lossy).
fn all_files(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                out.push((
                    path.display().to_string(),
                    String::from_utf8_lossy(&bytes).into_owned(),
                ));
            }
        }
    }
    out
}

/// Every item of the DynamoDB table on moto, as moto returns it (a raw
/// `Scan`: no Baton code between the store and the test).
async fn raw_table(app: &TestApp) -> Vec<Value> {
    let (moto, env) = app.aws.as_ref().expect("the AWS backend");
    let mut items = Vec::new();
    let mut start: Option<Value> = None;
    loop {
        let mut body = json!({"TableName": env.table});
        if let Some(k) = start.take() {
            body["ExclusiveStartKey"] = k;
        }
        let r = reqwest::Client::new()
            .post(moto.endpoint())
            .header("x-amz-target", "DynamoDB_20120810.Scan")
            .header("content-type", "application/x-amz-json-1.0")
            .header(
                "authorization",
                "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0",
            )
            .body(body.to_string())
            .send()
            .await
            .expect("scan moto");
        let v: Value = r.json().await.expect("scan JSON");
        items.extend(v["Items"].as_array().cloned().unwrap_or_default());
        match v.get("LastEvaluatedKey") {
            Some(k) if !k.is_null() => start = Some(k.clone()),
            _ => return items,
        }
    }
}

/// No token or client secret the provider handed out is anywhere a person
/// or an operator can read: the tasks' events, status and trace, the log,
/// what the model was sent, what Slack was sent, the connections listing;
/// nor in clear in the store (the raw table on AWS, the data directory's
/// files on `baton dev`).
async fn secrets_show_nowhere(app: &TestApp, server: &OAuthServer, tasks: &[String]) {
    let secrets = server.secrets().await;
    assert!(secrets.len() > 1, "the provider issued tokens: {secrets:?}");
    let mut places: Vec<(String, String)> = Vec::new();
    for id in tasks {
        places.push((
            format!("events of {id}"),
            serde_json::to_string(&app.events(id).await).unwrap(),
        ));
        places.push((format!("status of {id}"), app.task(id).await.to_string()));
        let (_, trace) = app.get(&format!("/tasks/{id}/trace")).await;
        places.push((format!("trace of {id}"), trace.to_string()));
    }
    places.push(("the log".into(), app.log()));
    places.push((
        "the model's requests".into(),
        format!("{:?}", app.llm.received()),
    ));
    places.push((
        "Slack".into(),
        format!("{:?} {:?}", app.slack.posted(), ephemerals(app)),
    ));
    places.push((
        "GET /connections".into(),
        format!("{:?}", connections_of(app, None).await),
    ));
    let (ok, out, err) = app.cli(&["connections", "list"]).await;
    assert!(ok, "baton connections list: {err}");
    places.push(("baton connections list".into(), format!("{out}{err}")));
    if app.aws.is_some() {
        let items = raw_table(app).await;
        let text = serde_json::to_string(&items).unwrap();
        assert!(
            text.contains("CONN#"),
            "the connections are in this table: {text}"
        );
        places.push(("the DynamoDB table".into(), text));
    } else {
        let key = app.data_dir().join("connections.key");
        let meta = std::fs::metadata(&key).expect("the connections key file");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            meta.permissions().mode() & 0o777,
            0o600,
            "{}",
            key.display()
        );
        places.extend(all_files(app.data_dir()));
    }
    for (place, text) in &places {
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "a token or secret in {place}"
            );
        }
    }
}

// ---- the scenarios

/// Two people connect from Slack, each through a Connect button only they
/// see, and each call then carries that person's own token.
async fn two_people_connect_and_each_call_carries_their_own_token(backend: Backend) {
    let server = OAuthServer::start(HOUR);
    let app = spawn(backend, &server, "").await;

    let a = slack_task(&app, "U1", "1700000400.000100", CONNECT).await;
    let (note, link_a) = connect_prompt(&app, "U1", 0).await;
    assert!(note.to_string().contains("Connect acme"), "{note}");
    let task = waits_for_connection(&app, &a, "acme").await;
    assert!(
        task["waiting_for"]["url"]
            .as_str()
            .unwrap_or_default()
            .contains("/connect/"),
        "{task}"
    );
    let seen = ephemerals(&app).len();
    let b = slack_task(&app, "U2", "1700000400.000200", CONNECT).await;
    let (_, link_b) = connect_prompt(&app, "U2", seen).await;
    assert_ne!(link_a, link_b);
    waits_for_connection(&app, &b, "acme").await;
    no_public_connect_link(&app);

    // Each logs in at the provider as themselves.
    connect_as(&server, "alice", &link_a).await;
    connect_as(&server, "bob", &link_b).await;
    succeeded(&app, &a).await;
    succeeded(&app, &b).await;

    let c = slack_task(&app, "U1", "1700000400.000300", WHOAMI).await;
    assert!(
        succeeded(&app, &c).await.ends_with("said: you are alice"),
        "{}",
        app.task(&c).await
    );
    let d = slack_task(&app, "U2", "1700000400.000400", WHOAMI).await;
    assert!(
        succeeded(&app, &d).await.ends_with("said: you are bob"),
        "{}",
        app.task(&d).await
    );
    let calls = server.calls().await;
    let whoami: Vec<&Value> = calls.iter().filter(|c| c["tool"] == "whoami").collect();
    assert_eq!(
        whoami
            .iter()
            .map(|c| c["person"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["alice", "bob"],
        "{calls:?}"
    );
    assert_ne!(whoami[0]["token_sha256"], whoami[1]["token_sha256"]);
    // RFC 8707: the token was asked for this MCP server.
    assert_eq!(whoami[0]["resource"], server.mcp_url.as_str(), "{calls:?}");

    let listed = people(&connections_of(&app, None).await);
    assert_eq!(
        listed,
        BTreeSet::from(["T1:U1/acme".to_owned(), "T1:U2/acme".to_owned()]),
        "{listed:?}"
    );
    secrets_show_nowhere(&app, &server, &[a, b, c, d]).await;
}

/// An access token past its expiry is refreshed (the call just works); a
/// token the provider revoked brings a new Connect button to that person,
/// and the call runs once they connected again.
async fn an_expired_token_is_refreshed_and_a_revoked_one_asks_again(backend: Backend) {
    let server = OAuthServer::start(Duration::from_secs(2));
    let app = spawn(backend, &server, "").await;
    let a = slack_task(&app, "U1", "1700000500.000100", CONNECT).await;
    let (_, link) = connect_prompt(&app, "U1", 0).await;
    connect_as(&server, "alice", &link).await;
    succeeded(&app, &a).await;

    // Past the token's two seconds.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let b = slack_task(&app, "U1", "1700000500.000200", WHOAMI).await;
    assert!(
        succeeded(&app, &b).await.ends_with("said: you are alice"),
        "{}",
        app.task(&b).await
    );
    let counts = server.counts().await;
    assert!(counts["refreshes"].as_u64().unwrap() >= 1, "{counts}");
    assert_eq!(
        counts["codes_issued"], 1,
        "refreshed, not connected again: {counts}"
    );

    // alice revokes Baton at the provider: her token is refused, cannot
    // be refreshed, and the model is offered only `acme__connect` again;
    // calling it asks her again, alone.
    server.revoke("alice").await;
    let seen = ephemerals(&app).len();
    let c = slack_task(&app, "U1", "1700000500.000300", CONNECT).await;
    let (_, again) = connect_prompt(&app, "U1", seen).await;
    assert_ne!(again, link, "a new state");
    waits_for_connection(&app, &c, "acme").await;
    connect_as(&server, "alice", &again).await;
    succeeded(&app, &c).await;
    let d = slack_task(&app, "U1", "1700000500.000400", WHOAMI).await;
    assert!(
        succeeded(&app, &d).await.ends_with("said: you are alice"),
        "{}",
        app.task(&d).await
    );
    assert_eq!(
        server.counts().await["codes_issued"],
        2,
        "{}",
        server.counts().await
    );
    secrets_show_nowhere(&app, &server, &[a, b, c, d]).await;
}

/// A Connect link followed to the provider but brought back by another
/// browser (no cookie, or someone else's) is refused; a callback replayed
/// after it worked is refused; the link itself works once. Each refusal is
/// a 400 page and changes nothing.
async fn a_foreign_or_replayed_state_is_refused(backend: Backend) {
    let server = OAuthServer::start(HOUR);
    let app = spawn(backend, &server, "").await;
    let a = api_task(&app, Some("alice"), CONNECT).await;
    let task = waits_for_connection(&app, &a, "acme").await;
    let link_a = task["waiting_for"]["url"].as_str().unwrap().to_owned();
    let b = api_task(&app, Some("mallory"), CONNECT).await;
    let task = waits_for_connection(&app, &b, "acme").await;
    let link_b = task["waiting_for"]["url"].as_str().unwrap().to_owned();

    // alice goes to the provider and consents; the way back is held.
    let mut alice = Browser::new();
    alice.log_in(&server, "alice").await;
    let callback_prefix = format!("{}/oauth/callback", app.url);
    let (_, back) = alice.follow(&link_a, Some(&callback_prefix)).await;
    let back = back.expect("the provider sends the browser back to /oauth/callback");

    // Brought back by a browser without the cookie /connect set...
    let mut stranger = Browser::new();
    let refused = stranger.get(&back).await;
    assert_eq!(refused.status, 400, "{refused:?}");
    // ...or by mallory's, who started a flow of her own.
    let mut mallory = Browser::new();
    mallory.log_in(&server, "mallory").await;
    let (_, _) = mallory.follow(&link_b, Some(&callback_prefix)).await;
    let refused = mallory.get(&back).await;
    assert_eq!(refused.status, 400, "{refused:?}");
    assert!(
        connections_of(&app, None).await.is_empty(),
        "nothing changed"
    );
    assert_eq!(app.task(&a).await["status"], "waiting");

    // alice's own browser completes it.
    let done = alice.get(&back).await;
    assert_eq!(done.status, 200, "{done:?}\nlog:\n{}", app.log());
    succeeded(&app, &a).await;
    let listed = people(&connections_of(&app, None).await);
    assert_eq!(listed, BTreeSet::from(["api:alice/acme".to_owned()]));

    // Replayed: the callback and the link are used up.
    let replayed = alice.get(&back).await;
    assert_eq!(replayed.status, 400, "{replayed:?}");
    let reopened = alice.get(&link_a).await;
    assert_eq!(reopened.status, 400, "{reopened:?}");
    // An unknown state.
    let unknown = alice
        .get(&format!(
            "{}/connect/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            app.url
        ))
        .await;
    assert_eq!(unknown.status, 400, "{unknown:?}");
    let listed_after = people(&connections_of(&app, None).await);
    assert_eq!(listed_after, listed, "nothing changed");
    assert_eq!(
        server.counts().await["codes_issued"],
        2,
        "alice's and mallory's only"
    );
    assert_eq!(
        app.task(&b).await["status"],
        "waiting",
        "mallory's task still waits"
    );
}

/// `[connection] expires_after`: a link not followed in time is refused,
/// and the model is told the person did not connect.
async fn an_expired_state_is_refused_and_the_model_told(backend: Backend) {
    let server = OAuthServer::start(HOUR);
    let app = spawn(backend, &server, r#"expires_after = "2s""#).await;
    let a = slack_task(&app, "U1", "1700000600.000100", CONNECT).await;
    let (_, link) = connect_prompt(&app, "U1", 0).await;
    let result = succeeded(&app, &a).await;
    assert!(result.contains("did not connect"), "{result}");
    let mut browser = Browser::new();
    browser.log_in(&server, "alice").await;
    let page = browser.get(&link).await;
    assert_eq!(page.status, 400, "{page:?}");
    assert!(connections_of(&app, None).await.is_empty());
    assert_eq!(server.counts().await["codes_issued"], 0);
}

/// `[oauth.NAME]` + `[http_tools.X] auth = { oauth = "NAME" }`: the
/// person's bearer token on a plain HTTP API, the static client's
/// credentials at the token endpoint; a task acting for nobody is told so.
async fn an_http_tool_acts_as_the_person(backend: Backend) {
    let server = OAuthServer::start(HOUR);
    let app = spawn(backend, &server, "").await;
    let a = api_task(&app, Some("carol"), ME).await;
    let task = waits_for_connection(&app, &a, "idp").await;
    let link = task["waiting_for"]["url"].as_str().unwrap().to_owned();
    connect_as(&server, "carol", &link).await;
    let result = succeeded(&app, &a).await;
    assert!(
        result.contains(r#""user":"carol""#) || result.contains(r#""user": "carol""#),
        "{result}"
    );
    let calls = server.calls().await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["tool"], "api/me");
    assert_eq!(calls[0]["client_id"], STATIC_CLIENT_ID);

    // Nobody to act for: the tool says so, and nothing is asked.
    let b = api_task(&app, None, ME).await;
    let result = succeeded(&app, &b).await;
    assert!(result.contains("acts for no person"), "{result}");
    assert_eq!(server.calls().await.len(), 1);
    secrets_show_nowhere(&app, &server, &[a, b]).await;
}

/// What an operator sees and revokes: `baton connections list|revoke`,
/// and a person's own `disconnect NAME` in Slack.
async fn connections_are_listed_and_revoked(backend: Backend) {
    let server = OAuthServer::start(HOUR);
    let app = spawn(backend, &server, "").await;
    for (user, person, ts) in [
        ("U1", "alice", "1700000700.000100"),
        ("U2", "bob", "1700000700.000200"),
    ] {
        let seen = ephemerals(&app).len();
        let id = slack_task(&app, user, ts, CONNECT).await;
        let (_, link) = connect_prompt(&app, user, seen).await;
        connect_as(&server, person, &link).await;
        succeeded(&app, &id).await;
    }
    let (ok, out, err) = app.cli(&["connections", "list"]).await;
    assert!(ok, "{err}");
    assert!(
        out.contains("T1:U1") && out.contains("T1:U2") && out.contains("acme"),
        "{out}"
    );
    let (ok, out, err) = app.cli(&["connections", "list", "--user", "T1:U2"]).await;
    assert!(ok, "{err}");
    assert!(out.contains("T1:U2") && !out.contains("T1:U1"), "{out}");

    // U2 disconnects themselves: told alone; U1's connection stays.
    let seen = ephemerals(&app).len();
    mention(&app, "U2", "1700000700.000300", "disconnect acme").await;
    let started = std::time::Instant::now();
    let note = loop {
        if let Some(n) = ephemerals(&app).into_iter().nth(seen) {
            break n;
        }
        assert!(
            started.elapsed() < LONG,
            "no answer to disconnect\nlog:\n{}",
            app.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(note["user"], "U2", "{note}");
    assert!(
        note["text"].as_str().unwrap_or_default().contains("acme"),
        "{note}"
    );
    let listed = people(&connections_of(&app, None).await);
    assert_eq!(
        listed,
        BTreeSet::from(["T1:U1/acme".to_owned()]),
        "{listed:?}"
    );

    // The operator revokes U1's.
    let (ok, out, err) = app.cli(&["connections", "revoke", "T1:U1", "acme"]).await;
    assert!(ok, "{out}{err}");
    assert!(connections_of(&app, None).await.is_empty());
    // An unknown one: a clear failure, nothing changed.
    let (ok, _, err) = app.cli(&["connections", "revoke", "T1:U9", "acme"]).await;
    assert!(!ok, "{err}");
    let r = app
        .http
        .get(format!("{}/connections", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "the listing needs the API token");

    // U1 is offered only `acme__connect` again, and asked to connect.
    let seen = ephemerals(&app).len();
    let id = slack_task(&app, "U1", "1700000700.000400", CONNECT).await;
    connect_prompt(&app, "U1", seen).await;
    waits_for_connection(&app, &id, "acme").await;
}

// ---- who is in the browser (#38)

/// A browser of Slack user `user` (signed in to Slack as them) and of
/// `person` at the provider.
async fn browser_of(app: &TestApp, server: &OAuthServer, user: &str, person: &str) -> Browser {
    let mut b = Browser::new();
    b.sign_in_to_slack(&app.slack, TEAM, user).await;
    b.log_in(server, person).await;
    b
}

/// With Sign in with Slack, a Connect link forwarded to another Slack user
/// is refused with a page saying it is someone else's: nothing is stored,
/// nothing reaches the provider, and the link still works for its person.
async fn a_link_completed_by_another_slack_user_stores_nothing(backend: Backend) {
    let server = OAuthServer::start(HOUR);
    let app = spawn_with(backend, &server, "", true).await;
    let a = slack_task(&app, "U1", "1700000800.000100", CONNECT).await;
    let (_, link) = connect_prompt(&app, "U1", 0).await;
    waits_for_connection(&app, &a, "acme").await;

    // U1 forwarded the link to U2, who opens it signed in as themselves.
    let mut bob = browser_of(&app, &server, "U2", "bob").await;
    let page = bob.connect(&link).await;
    assert_eq!(page.status, 403, "{page:?}");
    assert!(page.body.contains("belongs to someone else"), "{page:?}");
    assert!(connections_of(&app, None).await.is_empty());
    assert_eq!(server.counts().await["codes_issued"], 0, "never sent on");
    assert_eq!(app.task(&a).await["status"], "waiting");
    let exchanges = app.slack.calls("openid.connect.token");
    assert_eq!(exchanges.len(), 1, "{exchanges:?}");
    assert_eq!(exchanges[0]["client_id"], FakeSlack::OPENID_CLIENT_ID);
    let redirect = exchanges[0]["redirect_uri"].as_str().unwrap_or_default();
    assert_eq!(redirect, format!("{}/connect/slack/signed-in", app.url));

    // The link's person completes it.
    let mut alice = browser_of(&app, &server, "U1", "alice").await;
    let page = alice.connect(&link).await;
    assert_eq!(page.status, 200, "{page:?}\nlog:\n{}", app.log());
    assert!(page.body.contains("Connected acme"), "{page:?}");
    succeeded(&app, &a).await;
    let listed = people(&connections_of(&app, None).await);
    assert_eq!(listed, BTreeSet::from(["T1:U1/acme".to_owned()]));
    let b = slack_task(&app, "U1", "1700000800.000200", WHOAMI).await;
    assert!(
        succeeded(&app, &b).await.ends_with("said: you are alice"),
        "{}",
        app.task(&b).await
    );
    secrets_show_nowhere(&app, &server, &[a, b]).await;
    let log = app.log();
    assert!(
        !log.contains(FakeSlack::OPENID_CLIENT_SECRET),
        "the client secret in the log"
    );
}

/// The provider's redirect back with a code it refuses (a failed
/// exchange): nothing is connected and the link works again; and a new
/// message from the person brings them a fresh link.
async fn a_failed_exchange_then_a_retry_connects(backend: Backend) {
    let server = OAuthServer::start(HOUR);
    let app = spawn_with(backend, &server, "", true).await;
    let thread = "1700000900.000100";
    let a = slack_task(&app, "U1", thread, CONNECT).await;
    let (_, link) = connect_prompt(&app, "U1", 0).await;
    let mut alice = browser_of(&app, &server, "U1", "alice").await;
    let callback_prefix = format!("{}/oauth/callback", app.url);

    // The code is spoiled on the way back: the exchange fails.
    let (_, back) = alice.follow(&link, Some(&callback_prefix)).await;
    let back = back.expect("sent back to /oauth/callback");
    let spoiled = regex::Regex::new(r"code=[^&]+")
        .unwrap()
        .replace(&back, "code=spoiled")
        .into_owned();
    let failed = alice.get(&spoiled).await;
    assert_eq!(failed.status, 400, "{failed:?}");
    assert!(failed.body.contains("was not connected"), "{failed:?}");
    assert!(connections_of(&app, None).await.is_empty());
    assert_eq!(app.task(&a).await["status"], "waiting");

    // The same link works again, until it expires.
    let page = alice.connect(&link).await;
    assert_eq!(page.status, 200, "{page:?}\nlog:\n{}", app.log());
    succeeded(&app, &a).await;

    // Another provider, another failure; then the person writes in the
    // thread and is sent a fresh link, which connects.
    let seen = ephemerals(&app).len();
    let b = slack_task(&app, "U1", "1700000900.000300", ME).await;
    let (_, first) = connect_prompt(&app, "U1", seen).await;
    waits_for_connection(&app, &b, "idp").await;
    let (_, back) = alice.follow(&first, Some(&callback_prefix)).await;
    let back = back.expect("sent back to /oauth/callback");
    let spoiled = regex::Regex::new(r"code=[^&]+")
        .unwrap()
        .replace(&back, "code=spoiled")
        .into_owned();
    assert_eq!(alice.get(&spoiled).await.status, 400);
    let seen = ephemerals(&app).len();
    mention_in_thread(
        &app,
        "U1",
        "1700000900.000300",
        "1700000900.000400",
        "the link did not work",
    )
    .await;
    let (_, fresh) = connect_prompt(&app, "U1", seen).await;
    assert_ne!(fresh, first, "a fresh link");
    waits_for_connection(&app, &b, "idp").await;
    let page = alice.connect(&fresh).await;
    assert_eq!(page.status, 200, "{page:?}\nlog:\n{}", app.log());
    succeeded(&app, &b).await;
    let listed = people(&connections_of(&app, None).await);
    assert_eq!(
        listed,
        BTreeSet::from(["T1:U1/acme".to_owned(), "T1:U1/idp".to_owned()])
    );
    secrets_show_nowhere(&app, &server, &[a, b]).await;
}

/// Without Sign in with Slack, the link shows a page naming whose
/// connection it makes; only its own button (its form token and this
/// browser's cookie) goes on to the provider.
async fn the_confirmation_page_without_sign_in_with_slack(backend: Backend) {
    let server = OAuthServer::start(HOUR);
    let app = spawn(backend, &server, "").await;
    let a = slack_task(&app, "U1", "1700001000.000100", CONNECT).await;
    let (_, link) = connect_prompt(&app, "U1", 0).await;
    let mut alice = browser_of(&app, &server, "U1", "alice").await;
    let page = alice.get(&link).await;
    assert_eq!(page.status, 200, "{page:?}");
    assert!(
        page.body.contains("Slack user U1 in workspace T1") && page.body.contains("Connect acme"),
        "{page:?}"
    );
    let token = crate::common::oauth::confirm_token(&page).expect("a confirmation form");
    // Posted by a browser without the cookie, or without the token: refused.
    let mut stranger = Browser::new();
    let refused = stranger.post_form(&link, &format!("confirm={token}")).await;
    assert_eq!(refused.status, 400, "{refused:?}");
    let refused = alice.post_form(&link, "confirm=guess").await;
    assert_eq!(refused.status, 400, "{refused:?}");
    assert_eq!(server.counts().await["codes_issued"], 0);
    let on = alice.post_form(&link, &format!("confirm={token}")).await;
    assert_eq!(on.status, 303, "{on:?}");
    let done = alice
        .connect(on.location.as_deref().unwrap_or_default())
        .await;
    assert_eq!(done.status, 200, "{done:?}\nlog:\n{}", app.log());
    succeeded(&app, &a).await;
}

/// `/oauth/callback` shows nothing of its query unless the state is this
/// browser's flow.
async fn a_callback_with_a_bogus_state_echoes_nothing(backend: Backend) {
    let server = OAuthServer::start(HOUR);
    let app = spawn(backend, &server, "").await;
    let a = api_task(&app, Some("alice"), CONNECT).await;
    let task = waits_for_connection(&app, &a, "acme").await;
    let link = task["waiting_for"]["url"].as_str().unwrap().to_owned();
    let state = link.rsplit('/').next().unwrap_or_default().to_owned();
    let hostile = "error=PWNED_ERROR&error_description=%3Cscript%3Ealert(1)%3C%2Fscript%3E%20call%200800-EVIL";
    let mut browser = Browser::new();
    for state in [
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "%3Cb%3E",
        state.as_str(),
    ] {
        let page = browser
            .get(&format!(
                "{}/oauth/callback?state={state}&{hostile}",
                app.url
            ))
            .await;
        assert_eq!(page.status, 400, "{page:?}");
        for echoed in ["PWNED", "script", "alert", "EVIL", "<b>"] {
            assert!(!page.body.contains(echoed), "{state}: {page:?}");
        }
    }
    assert!(connections_of(&app, None).await.is_empty());
    assert_eq!(app.task(&a).await["status"], "waiting");
}

on_both_backends!(
    a_link_completed_by_another_slack_user_stores_nothing,
    a_failed_exchange_then_a_retry_connects,
    the_confirmation_page_without_sign_in_with_slack,
    a_callback_with_a_bogus_state_echoes_nothing,
    two_people_connect_and_each_call_carries_their_own_token,
    an_expired_token_is_refreshed_and_a_revoked_one_asks_again,
    a_foreign_or_replayed_state_is_refused,
    an_expired_state_is_refused_and_the_model_told,
    an_http_tool_acts_as_the_person,
    connections_are_listed_and_revoked,
);
