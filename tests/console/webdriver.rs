//! A small W3C WebDriver client over reqwest, driving Debian's headless
//! Chromium through `chromedriver`: just what the console tests use
//! (navigate, find, click, type, run a script, screenshot).
//!
//! Chromium missing fails the test (with how to install it): a browser
//! test that skips would pass in a CI that never ran it.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::Once,
    time::Duration,
};

use serde_json::{Value, json};
use tokio::process::{Child, Command};

/// Hang guard of every wait: turns a hang into a failure, asserts no speed.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// The W3C element reference key.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Only one browser at a time: Chromium is heavy on a shared 2-core box.
static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn find_binary(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in names {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}

/// A headless Chromium session, ended (and chromedriver killed) on drop.
pub struct Browser {
    http: reqwest::Client,
    base: String,
    session: String,
    driver: Child,
    profile: PathBuf,
    /// The test's name, for screenshot file names.
    test: String,
    step: usize,
    _one: tokio::sync::MutexGuard<'static, ()>,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session. Panics when
    /// either is missing.
    pub async fn start(test: &str) -> Browser {
        let one = ONE_BROWSER.lock().await;
        let chromium = find_binary(&["chromium", "chromium-browser"]).unwrap_or_else(|| {
            panic!(
                "chromium is not installed: the console's browser tests need Debian's `chromium` and \
                 `chromium-driver` (`apt-get install -y chromium chromium-driver`, which `cargo xtask \
                 test` does when they are missing)"
            )
        });
        let chromedriver = find_binary(&["chromedriver"]).unwrap_or_else(|| {
            panic!(
                "chromedriver is not installed: `apt-get install -y chromium-driver` (`cargo xtask \
                 test` does it when missing)"
            )
        });
        install_crypto_provider();
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            l.local_addr().expect("bound").port()
        };
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            // Its own process group, so the drop can end Chromium too
            // (chromedriver killed alone leaves its browser running).
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", chromedriver.display()));
        let http = reqwest::Client::builder()
            .timeout(HANG_GUARD)
            .build()
            .expect("an HTTP client");
        let base = format!("http://127.0.0.1:{port}");
        let deadline = tokio::time::Instant::now() + HANG_GUARD;
        loop {
            let ready = async {
                let v: Value = http
                    .get(format!("{base}/status"))
                    .send()
                    .await
                    .ok()?
                    .json()
                    .await
                    .ok()?;
                v["value"]["ready"].as_bool()
            }
            .await;
            if ready == Some(true) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "chromedriver never became ready"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = std::env::temp_dir().join(format!(
            "inquest-chromium-{}",
            uuid::Uuid::new_v4().simple()
        ));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium.display().to_string(),
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    "--window-size=1100,1000",
                    format!("--user-data-dir={}", profile.display()),
                ],
            },
        }}});
        let created: Value = http
            .post(format!("{base}/session"))
            .json(&caps)
            .send()
            .await
            .expect("creating a WebDriver session")
            .json()
            .await
            .expect("WebDriver session JSON");
        let session = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("chromedriver did not start Chromium: {created}"))
            .to_owned();
        Browser {
            http,
            base,
            session,
            driver,
            profile,
            test: test.to_owned(),
            step: 0,
            _one: one,
        }
    }

    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let mut request = self.http.request(method, &url);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .unwrap_or_else(|e| panic!("WebDriver {path}: {e}"));
        let status = response.status();
        let v: Value = response.json().await.expect("WebDriver JSON");
        assert!(status.is_success(), "WebDriver {path}: {status} {v}");
        v["value"].clone()
    }

    pub async fn goto(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    /// Presses and releases one key (a WebDriver key code: "\u{E004}" is
    /// Tab) where the focus is.
    pub async fn key(&self, key: &str) {
        self.command(
            reqwest::Method::POST,
            "/actions",
            Some(
                json!({"actions": [{"type": "key", "id": "keyboard", "actions": [
                    {"type": "keyDown", "value": key}, {"type": "keyUp", "value": key}
                ]}]}),
            ),
        )
        .await;
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page.
    pub async fn js(&self, script: &str, args: Value) -> Value {
        self.command(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
    }

    async fn element(&self, css: &str) -> String {
        let v = self
            .command(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_owned()
    }

    /// Clicks the element `css` selects (waiting until it is shown).
    pub async fn click(&self, css: &str) {
        self.wait_until(
            &format!("{css} is shown"),
            "const e = document.querySelector(arguments[0]); return !!e && !e.hidden && e.offsetParent !== null;",
            json!([css]),
        )
        .await;
        let id = self.element(css).await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{id}/click"),
            Some(json!({})),
        )
        .await;
    }

    /// Types `text` into the element `css` selects.
    pub async fn type_into(&self, css: &str, text: &str) {
        let id = self.element(css).await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{id}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    /// Polls `script` (returning a boolean) until it is true.
    pub async fn wait_until(&self, what: &str, script: &str, args: Value) {
        let deadline = tokio::time::Instant::now() + HANG_GUARD;
        loop {
            if self.js(script, args.clone()).await == Value::Bool(true) {
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                let shot = self.screenshot("timeout").await;
                let body = self.js("return document.body.innerText;", json!([])).await;
                panic!(
                    "never: {what} (screenshot {}); page text:\n{}",
                    shot.display(),
                    body.as_str().unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Saves a PNG of the page as `target/console-screenshots/<test>-<n>-<step>.png`.
    pub async fn screenshot(&self, step: &str) -> PathBuf {
        let v = self
            .command(reqwest::Method::GET, "/screenshot", None)
            .await;
        let png = base64_decode(v.as_str().expect("screenshot is base64 text"));
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).expect("creating the screenshot directory");
        let path = dir.join(format!("{}-{step}.png", self.test));
        std::fs::write(&path, png).expect("writing a screenshot");
        path
    }

    /// Saves a numbered screenshot for the next step of the test.
    pub async fn step(&mut self, step: &str) -> PathBuf {
        self.step += 1;
        let name = format!("{:02}-{step}", self.step);
        self.screenshot(&name).await
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ask chromedriver to quit the browser (a client of its own: the
        // test's is bound to the test's runtime, which this thread is not
        // in), then kill chromedriver's whole process group, Chromium
        // included, whatever the answer was.
        let url = format!("{}/session/{}", self.base, self.session);
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                rt.block_on(async {
                    if let Ok(http) = reqwest::Client::builder().build() {
                        let _ =
                            tokio::time::timeout(Duration::from_secs(10), http.delete(url).send())
                                .await;
                    }
                });
            }
        })
        .join();
        if let Some(pid) = self.driver.id() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.driver.start_kill();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// `target/console-screenshots` of this workspace.
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("console-screenshots")
}

/// Standard base64 (what WebDriver screenshots are), padding optional.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let clean: Vec<u8> = text
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= value(*c) << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

#[test]
fn base64_decodes_with_and_without_padding() {
    assert_eq!(base64_decode("aGVsbG8="), b"hello");
    assert_eq!(base64_decode("aGVsbG8"), b"hello");
    assert_eq!(base64_decode("aGk="), b"hi");
    assert_eq!(base64_decode("YWJj"), b"abc");
}
