//! A small W3C WebDriver client: Debian's `chromedriver` driving headless
//! `chromium`, over plain HTTP with reqwest (no WebDriver crate: the
//! console test needs a dozen commands). `./scripts/test.sh` installs both
//! packages; without them the test fails and says so.

use base64::Engine;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The key under which WebDriver names an element.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// An element reference of the current page.
#[derive(Clone, Debug)]
pub(crate) struct Element(String);

/// A chromedriver process with one headless Chromium session; both end
/// when it is dropped (even when the test panics).
pub(crate) struct Browser {
    driver: Child,
    port: u16,
    session: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

fn find_program(env: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
}

fn missing(what: &str) -> ! {
    panic!(
        "{what} not found: the console test drives a real headless browser. \
         Run ./scripts/test.sh (it installs Debian's chromium and chromium-driver), \
         or set BATON_CHROMIUM / BATON_CHROMEDRIVER"
    )
}

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a session.
    pub(crate) async fn start() -> Browser {
        let driver_bin = find_program("BATON_CHROMEDRIVER", &["chromedriver"])
            .unwrap_or_else(|| missing("chromedriver"));
        let chromium = find_program("BATON_CHROMIUM", &["chromium", "chromium-browser"])
            .unwrap_or_else(|| missing("chromium"));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = Command::new(&driver_bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", driver_bin.display()));
        let profile = tempfile::tempdir().expect("profile dir");
        let mut browser = Browser {
            driver,
            port,
            session: String::new(),
            http: reqwest::Client::new(),
            _profile: profile,
        };
        let started = Instant::now();
        loop {
            let ready = browser
                .http
                .get(browser.url("/status"))
                .send()
                .await
                .ok()
                .map(|r| r.status().is_success())
                .unwrap_or(false);
            if ready {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "chromedriver did not start on port {port}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new",
                    // Tests run as root in a container: Chromium's sandbox
                    // needs user namespaces it may not have.
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    "--disable-extensions",
                    "--window-size=1280,1000",
                    format!("--user-data-dir={}", browser._profile.path().display()),
                ],
            },
        }}});
        let v = browser.command("POST", "/session", Some(caps)).await;
        browser.session = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_owned();
        browser
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// One command; its `value`, or a panic with WebDriver's error.
    async fn command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.try_command(method, path, body)
            .await
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"))
    }

    async fn try_command(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Value> {
        let url = self.url(path);
        let req = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body.unwrap_or_else(|| json!({}))),
        };
        let r = req
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .map_err(|e| json!(e.to_string()))?;
        let ok = r.status().is_success();
        let v: Value = r.json().await.map_err(|e| json!(e.to_string()))?;
        if ok {
            Ok(v["value"].clone())
        } else {
            Err(v["value"].clone())
        }
    }

    fn session_path(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    pub(crate) async fn goto(&self, url: &str) {
        self.command(
            "POST",
            &self.session_path("/url"),
            Some(json!({"url": url})),
        )
        .await;
    }

    pub(crate) async fn current_url(&self) -> String {
        let v = self.command("GET", &self.session_path("/url"), None).await;
        v.as_str().unwrap_or_default().to_owned()
    }

    /// The first element matching `css`, if any.
    pub(crate) async fn find(&self, css: &str) -> Option<Element> {
        let body = json!({"using": "css selector", "value": css});
        match self
            .try_command("POST", &self.session_path("/element"), Some(body))
            .await
        {
            Ok(v) => v[ELEMENT].as_str().map(|id| Element(id.to_owned())),
            Err(e) if e["error"] == "no such element" => None,
            Err(e) => panic!("find {css}: {e}"),
        }
    }

    /// Waits (up to `within`) for an element matching `css`.
    pub(crate) async fn wait_for(&self, css: &str, within: Duration) -> Element {
        let started = Instant::now();
        loop {
            if let Some(e) = self.find(css).await {
                return e;
            }
            if started.elapsed() > within {
                let text = self.page_text().await;
                panic!("no {css} after {within:?}; the page says:\n{text}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) async fn click(&self, e: &Element) {
        self.command(
            "POST",
            &self.session_path(&format!("/element/{}/click", e.0)),
            None,
        )
        .await;
    }

    pub(crate) async fn clear(&self, e: &Element) {
        self.command(
            "POST",
            &self.session_path(&format!("/element/{}/clear", e.0)),
            None,
        )
        .await;
    }

    pub(crate) async fn type_text(&self, e: &Element, text: &str) {
        self.command(
            "POST",
            &self.session_path(&format!("/element/{}/value", e.0)),
            Some(json!({"text": text})),
        )
        .await;
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page.
    pub(crate) async fn exec(&self, script: &str, args: Value) -> Value {
        self.command(
            "POST",
            &self.session_path("/execute/sync"),
            Some(json!({"script": script, "args": args})),
        )
        .await
    }

    /// Waits (up to `within`) until `script` returns something truthy; that.
    pub(crate) async fn wait_until(
        &self,
        what: &str,
        script: &str,
        args: Value,
        within: Duration,
    ) -> Value {
        let started = Instant::now();
        loop {
            let v = self.exec(script, args.clone()).await;
            let truthy = match &v {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return v;
            }
            if started.elapsed() > within {
                let text = self.page_text().await;
                panic!("{what}: not after {within:?}; the page says:\n{text}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) async fn page_text(&self) -> String {
        self.try_command(
            "POST",
            &self.session_path("/execute/sync"),
            Some(json!({"script": "return document.body.innerText", "args": []})),
        )
        .await
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
    }

    /// Saves a PNG of the viewport to `dir/name.png`.
    pub(crate) async fn screenshot(&self, dir: &Path, name: &str) -> PathBuf {
        self.save_png("/screenshot", dir, name).await
    }

    /// Saves a PNG of one element (scrolled into view) to `dir/name.png`.
    pub(crate) async fn screenshot_of(&self, e: &Element, dir: &Path, name: &str) -> PathBuf {
        self.save_png(&format!("/element/{}/screenshot", e.0), dir, name)
            .await
    }

    async fn save_png(&self, command: &str, dir: &Path, name: &str) -> PathBuf {
        let v = self.command("GET", &self.session_path(command), None).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or_default())
            .expect("screenshot is base64");
        assert!(png.starts_with(b"\x89PNG"), "screenshot is a PNG");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("write screenshot");
        path
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Synchronously (Drop cannot await, and may run while panicking):
        // end the session so chromedriver closes Chromium, then end it.
        if !self.session.is_empty() {
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                let req = format!(
                    "DELETE /session/{} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    self.session, self.port
                );
                if s.write_all(req.as_bytes()).is_ok() {
                    let mut sink = Vec::new();
                    let _ = s.read_to_end(&mut sink);
                }
            }
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
