//! Per-person OAuth connections (#24) under test: an authorization server
//! and an OAuth-protected MCP server nobody on the project wrote
//! (`tests/fixtures/oauth/server.py`, on the Python MCP SDK's auth
//! support), and a browser that follows a Connect link to the end.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const START_TIMEOUT: Duration = Duration::from_secs(30);
const INSTALL_HINT: &str = "run ./scripts/test.sh once to install the `mcp` package in .venv";

/// The pre-registered confidential client of the `[oauth.NAME]` case.
pub(crate) const STATIC_CLIENT_ID: &str = "baton-static-client";
pub(crate) const STATIC_CLIENT_SECRET: &str = "static-secret-Zq81vX3-never-shown";

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The fixture process, killed on drop.
pub(crate) struct OAuthServer {
    /// `http://127.0.0.1:PORT`: the issuer, and where `/api/me` is.
    pub base: String,
    /// The MCP endpoint, `{base}/mcp`.
    pub mcp_url: String,
    child: Child,
    output_path: PathBuf,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl OAuthServer {
    /// Starts the fixture; access tokens live `token_ttl`.
    pub(crate) fn start(token_ttl: Duration) -> OAuthServer {
        let python = repo_root().join(".venv/bin/python");
        assert!(
            python.exists(),
            "{} is missing: {INSTALL_HINT}",
            python.display()
        );
        let dir = tempfile::tempdir().expect("tempdir for the OAuth fixture");
        let output_path = dir.path().join("output.log");
        let out = std::fs::File::create(&output_path).expect("fixture output file");
        let err = out.try_clone().expect("fixture output file");
        let child = Command::new(&python)
            .arg(repo_root().join("tests/fixtures/oauth/server.py"))
            .args(["--port", "0", "--token-ttl"])
            .arg(token_ttl.as_secs().max(1).to_string())
            .arg("--static-client")
            .arg(format!("{STATIC_CLIENT_ID}:{STATIC_CLIENT_SECRET}"))
            .env("PYTHONUNBUFFERED", "1")
            .current_dir(repo_root())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("starting the OAuth fixture: {e} ({INSTALL_HINT})"));
        let mut server = OAuthServer {
            base: String::new(),
            mcp_url: String::new(),
            child,
            output_path,
            http: reqwest::Client::new(),
            _dir: dir,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        let port: u16 = loop {
            let output = server.output();
            if let Some(port) = output
                .lines()
                .find_map(|l| l.strip_prefix("READY ")?.trim().parse().ok())
            {
                break port;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("the OAuth fixture exited ({status}) ({INSTALL_HINT}):\n{output}");
            }
            assert!(
                Instant::now() < deadline,
                "the OAuth fixture did not start:\n{output}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        server.base = format!("http://127.0.0.1:{port}");
        server.mcp_url = format!("{}/mcp", server.base);
        server
    }

    /// What the fixture printed (stdout and stderr).
    pub(crate) fn output(&self) -> String {
        std::fs::read_to_string(&self.output_path).unwrap_or_default()
    }

    async fn get_json(&self, path: &str) -> Value {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("GET the OAuth fixture");
        assert!(r.status().is_success(), "{path}: {}", r.status());
        r.json().await.expect("fixture JSON")
    }

    /// Every `whoami` / `api/me` call so far: `{"tool", "person",
    /// "token_sha256", "resource", "client_id"}`.
    pub(crate) async fn calls(&self) -> Vec<Value> {
        self.get_json("/control/calls")
            .await
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// `{"access", "refresh", "refreshes", "codes_issued"}` counts.
    pub(crate) async fn counts(&self) -> Value {
        self.get_json("/control/tokens").await
    }

    /// Every access and refresh token and client secret the fixture handed
    /// out so far (with the static client's secret).
    pub(crate) async fn secrets(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .get_json("/control/issued")
            .await
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        all.push(STATIC_CLIENT_SECRET.to_owned());
        all
    }

    /// Forgets every token of `person` at the provider (the person revoked
    /// Baton's access there).
    pub(crate) async fn revoke(&self, person: &str) {
        let r = self
            .http
            .post(format!("{}/control/revoke?user={person}", self.base))
            .send()
            .await
            .expect("revoke");
        assert!(r.status().is_success());
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One hop the browser made.
#[derive(Clone, Debug)]
pub(crate) struct Hop {
    pub url: String,
    pub status: u16,
    pub location: Option<String>,
    pub body: String,
}

/// A browser: a cookie jar (one host, 127.0.0.1, where every server of
/// the test is; browsers do not tell ports apart for cookies) and manual
/// redirects, so a test can stop before a hop, replay one, or hand it to
/// another browser.
#[derive(Clone, Default)]
pub(crate) struct Browser {
    pub cookies: BTreeMap<String, String>,
}

impl Browser {
    pub(crate) fn new() -> Browser {
        Browser::default()
    }

    /// Logs `person` in at the authorization server: whoever follows a
    /// Connect link in this browser consents as them.
    pub(crate) async fn log_in(&mut self, server: &OAuthServer, person: &str) {
        let hop = self
            .get(&format!("{}/login?user={person}", server.base))
            .await;
        assert_eq!(hop.status, 200, "{hop:?}");
    }

    /// Signs `user` of `team` in to the fake Slack: Sign in with Slack
    /// in this browser signs in as them.
    pub(crate) async fn sign_in_to_slack(
        &mut self,
        slack: &baton_slack::testing::FakeSlack,
        team: &str,
        user: &str,
    ) {
        let hop = self.get(&slack.openid_sign_in_url(team, user)).await;
        assert_eq!(hop.status, 200, "{hop:?}");
    }

    /// One GET with this browser's cookies; keeps the cookies it sets.
    pub(crate) async fn get(&mut self, url: &str) -> Hop {
        self.send(url, None).await
    }

    /// One form POST (`body`, urlencoded) with this browser's cookies.
    pub(crate) async fn post_form(&mut self, url: &str, body: &str) -> Hop {
        self.send(url, Some(body)).await
    }

    async fn send(&mut self, url: &str, form: Option<&str>) -> Hop {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("browser client");
        let mut req = match form {
            None => client.get(url),
            Some(body) => client
                .post(url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body.to_owned()),
        };
        if !self.cookies.is_empty() {
            let jar: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            req = req.header("cookie", jar.join("; "));
        }
        let r = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        for set in r.headers().get_all("set-cookie") {
            let Ok(set) = set.to_str() else { continue };
            let pair = set.split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                let expired = set.to_ascii_lowercase().contains("max-age=0");
                if expired || value.is_empty() {
                    self.cookies.remove(name.trim());
                } else {
                    self.cookies
                        .insert(name.trim().to_owned(), value.trim().to_owned());
                }
            }
        }
        let status = r.status().as_u16();
        let location = r
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(|l| {
                reqwest::Url::parse(url)
                    .and_then(|base| base.join(l))
                    .map(|u| u.to_string())
                    .unwrap_or_else(|_| l.to_owned())
            });
        let body = r.text().await.unwrap_or_default();
        Hop {
            url: url.to_owned(),
            status,
            location,
            body,
        }
    }

    /// Follows redirects from `url` until a page (at most 10 hops), or
    /// until the next hop would go to a URL starting with `stop_before`:
    /// every hop made, and the URL not followed (if stopped). Baton's
    /// confirmation page (a Connect link without Sign in with Slack) is
    /// confirmed, as its person would.
    pub(crate) async fn follow(
        &mut self,
        url: &str,
        stop_before: Option<&str>,
    ) -> (Vec<Hop>, Option<String>) {
        let mut hops = Vec::new();
        let mut next = url.to_owned();
        for _ in 0..10 {
            let mut hop = self.get(&next).await;
            if let Some(token) = confirm_token(&hop) {
                let page = hop.clone();
                hop = self.post_form(&page.url, &format!("confirm={token}")).await;
                hops.push(page);
            }
            let location = hop.location.clone();
            hops.push(hop);
            match location {
                Some(l) if stop_before.is_some_and(|s| l.starts_with(s)) => return (hops, Some(l)),
                Some(l) => next = l,
                None => return (hops, None),
            }
        }
        panic!("more than 10 redirects from {url}: {hops:?}");
    }

    /// Follows a Connect link to the end: the last page.
    pub(crate) async fn connect(&mut self, link: &str) -> Hop {
        let (hops, _) = self.follow(link, None).await;
        hops.last().cloned().expect("a hop")
    }
}

/// The form token of Baton's confirmation page, if `hop` is one.
pub(crate) fn confirm_token(hop: &Hop) -> Option<String> {
    if hop.status != 200 {
        return None;
    }
    let at = hop.body.find("name=\"confirm\" value=\"")? + 22;
    hop.body[at..].split('"').next().map(str::to_owned)
}
