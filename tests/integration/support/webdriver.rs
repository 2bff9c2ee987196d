//! A real browser for the dashboard tests: Debian's headless Chromium driven by its
//! `chromedriver` over the W3C WebDriver protocol (JSON over HTTP on loopback), with the few
//! commands the tests use. `.ci/run` installs both packages; `STORCH_CHROMEDRIVER` and
//! `STORCH_CHROMIUM` name other binaries.
//!
//! chromedriver runs in its own process group with a temporary profile; dropping the
//! [`Browser`] ends the session and kills the group, so neither chromedriver nor any Chromium
//! process outlives the test.

use std::io::{BufRead, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

/// The key W3C WebDriver puts an element reference under.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// chromedriver and one browser session.
pub struct Browser {
    driver: Child,
    /// `http://127.0.0.1:PORT/session/ID`
    session: String,
    port: u16,
    session_id: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

fn binary(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_string())
}

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a headless Chromium of
    /// `width`×`height`.
    pub async fn start(width: u32, height: u32) -> Browser {
        let chromedriver = binary("STORCH_CHROMEDRIVER", "chromedriver");
        let chromium = binary("STORCH_CHROMIUM", "/usr/bin/chromium");
        let mut driver = Command::new(&chromedriver)
            .arg("--port=0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {chromedriver} ({e}): install Debian's chromium and \
                     chromium-driver (.ci/run does), or set STORCH_CHROMEDRIVER"
                )
            });
        let mut reader = std::io::BufReader::new(driver.stdout.take().unwrap());
        let mut port = None;
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 {
            if let Some(rest) = line
                .trim()
                .strip_prefix("ChromeDriver was started successfully on port ")
            {
                port = rest.trim_end_matches('.').parse::<u16>().ok();
                break;
            }
            line.clear();
        }
        let Some(port) = port else {
            let _ = driver.kill();
            let _ = driver.wait();
            panic!("chromedriver did not say which port it listens on");
        };
        // Keep reading its stdout so it never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = reader.read_to_end(&mut sink);
        });
        let profile = tempfile::tempdir().unwrap();
        let http = storch::net::client();
        let base = format!("http://127.0.0.1:{port}");
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--no-first-run", "--disable-extensions", "--disable-background-networking",
                    "--hide-scrollbars", "--force-device-scale-factor=1",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let mut browser = Browser {
            driver,
            session: String::new(),
            port,
            session_id: String::new(),
            http,
            _profile: profile,
        };
        let created = browser
            .call(
                reqwest::Method::POST,
                &format!("{base}/session"),
                Some(caps),
            )
            .await;
        let id = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_string();
        browser.session = format!("{base}/session/{id}");
        browser.session_id = id;
        browser.set_size(width, height).await;
        browser
    }

    async fn call(&self, method: reqwest::Method, url: &str, body: Option<Value>) -> Value {
        let mut req = self.http.request(method.clone(), url);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("webdriver {method} {url}: {e}"));
        let status = resp.status();
        let value: Value = resp.json().await.unwrap_or(Value::Null);
        assert!(
            status.is_success(),
            "webdriver {method} {url}: {status} {value}"
        );
        value
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        self.call(
            reqwest::Method::POST,
            &format!("{}{path}", self.session),
            Some(body),
        )
        .await["value"]
            .take()
    }

    async fn get(&self, path: &str) -> Value {
        self.call(
            reqwest::Method::GET,
            &format!("{}{path}", self.session),
            None,
        )
        .await["value"]
            .take()
    }

    pub async fn set_size(&self, width: u32, height: u32) {
        self.post("/window/rect", json!({"width": width, "height": height}))
            .await;
    }

    pub async fn goto(&self, url: &str) {
        self.post("/url", json!({"url": url})).await;
    }

    /// Runs `script` (a function body; `arguments` holds `args`) and returns its value.
    pub async fn eval(&self, script: &str, args: Value) -> Value {
        self.post("/execute/sync", json!({"script": script, "args": args}))
            .await
    }

    /// The first element matching `css`, if any.
    pub async fn find(&self, css: &str) -> Option<String> {
        let found = self
            .post("/elements", json!({"using": "css selector", "value": css}))
            .await;
        found.as_array()?.first()?[ELEMENT]
            .as_str()
            .map(String::from)
    }

    /// Clicks the first element matching `css` (it must exist).
    pub async fn click(&self, css: &str) {
        let el = self
            .find(css)
            .await
            .unwrap_or_else(|| panic!("no element {css}"));
        self.post(&format!("/element/{el}/click"), json!({})).await;
    }

    /// Types `text` into the first element matching `css` (it must exist), as keystrokes.
    pub async fn type_into(&self, css: &str, text: &str) {
        let el = self
            .find(css)
            .await
            .unwrap_or_else(|| panic!("no element {css}"));
        self.post(&format!("/element/{el}/value"), json!({"text": text}))
            .await;
    }

    /// The text of the first element matching `css`, or `None` when there is none.
    pub async fn text(&self, css: &str) -> Option<String> {
        self.eval(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
            json!([css]),
        )
        .await
        .as_str()
        .map(String::from)
    }

    /// The browser console's entries since the last call (chromedriver's log endpoint).
    pub async fn console(&self) -> Vec<Value> {
        self.post("/se/log", json!({"type": "browser"}))
            .await
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Console entries of level SEVERE (errors) since the last read.
    pub async fn console_errors(&self) -> Vec<String> {
        self.console()
            .await
            .into_iter()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// A PNG screenshot of the viewport, written to `path`.
    pub async fn screenshot(&self, path: &Path) {
        use base64::Engine as _;
        let b64 = self.get("/screenshot").await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().expect("screenshot data"))
            .expect("base64 screenshot");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }
}

/// Where the test run writes screenshots: `target/ui-screenshots/` (not committed).
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("ui-screenshots")
}

impl Drop for Browser {
    /// Ends the session (Chromium quits and its profile is removed), then kills
    /// chromedriver's process group, whatever is left of it.
    fn drop(&mut self) {
        if !self.session_id.is_empty()
            && let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port))
        {
            let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(10)));
            let _ = write!(
                s,
                "DELETE /session/{} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                self.session_id, self.port
            );
            let mut answer = Vec::new();
            let _ = s.read_to_end(&mut answer);
        }
        let group = format!("-{}", self.driver.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
