//! `inquest-bench console`: how long a person waits for a long session's
//! newest turn in the web console, and what the page costs in memory.
//!
//! An in-process server on the scratch database serves the console; three
//! idle sessions are written straight into the tables
//! (`Store::insert_bench_session`, the longer two with a compaction at the
//! head, as a long investigation leaves them): 10, 1,000 and 20,000 turns.
//! Debian's headless Chromium, driven over WebDriver by `chromedriver`,
//! opens each session page from `about:blank`, alternating sizes, `runs`
//! times after one warm-up each. Two clocks per load:
//!
//! - page: from the navigation's start (`performance.timeOrigin`) to the
//!   console's mark `inquest:turns-shown`, set once the newest turns are
//!   in the DOM and scrolled into view;
//! - wall: from the WebDriver navigate request to this process's poll
//!   (every 5 ms) seeing the newest turn's element wholly on screen (within
//!   a pixel: an edge scrolled into view may fall between two); it
//!   includes the WebDriver round trips.
//!
//! The 10-turn session is the baseline of the same run: the ratios say what
//! the session's length adds. Memory: the page's JS heap
//! (`performance.memory.usedJSHeapSize`, precise with
//! `--enable-precise-memory-info`, after a `gc()`) and its DOM element
//! count at 20,000 turns, once opened and again after scrolling back
//! through 30 pages of older turns.

use std::{
    path::PathBuf,
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use inquest_core::{IncidentText, Limits, SessionId, Tenant};
use inquest_server::{Application, Config};
use inquest_store::{Store, StoreConfig};
use serde_json::{Value, json};
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

pub struct ConsoleBench {
    pub url: String,
    pub sizes: Vec<i64>,
    pub runs: usize,
}

/// What a wait may take before the bench gives up (not a goal).
const PATIENCE: Duration = Duration::from_secs(60);

pub async fn run(bench: ConsoleBench) -> anyhow::Result<()> {
    let config = Config {
        listen: "127.0.0.1:0".parse()?,
        database_url: Some(bench.url.clone()),
        ..Config::default()
    };
    let app = Application::build(&config, &bench.url).await?;
    let addr = app.local_addr()?;
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(app.run(shutdown.clone()));
    let result = measure(&bench, &format!("http://{addr}")).await;
    shutdown.cancel();
    server.await.context("server task panicked")??;
    result
}

async fn measure(bench: &ConsoleBench, endpoint: &str) -> anyhow::Result<()> {
    if bench.sizes.is_empty() || bench.runs == 0 {
        bail!("--sizes and --runs must not be empty or 0");
    }
    let store = Store::connect(&StoreConfig::new(&bench.url))?;
    let incident = store
        .create_incident(
            &Tenant::default_tenant(),
            &IncidentText::parse("bench console".into(), String::new(), &Limits::default())?,
        )
        .await?;
    // (turns, session, newest seq)
    let mut sessions = Vec::new();
    for &turns in &bench.sizes {
        let turns = (turns / 2 * 2).max(2);
        let id = SessionId::new();
        if turns >= 100 {
            // A compaction at the head keeping the last 40 turns.
            store
                .insert_bench_compacted_session(incident.id, id, turns, 40)
                .await?;
            sessions.push((turns, id, turns + 1));
        } else {
            store.insert_bench_session(incident.id, id, turns).await?;
            sessions.push((turns, id, turns));
        }
    }
    store.analyze_bench_tables().await?;
    let browser = Browser::start().await?;
    let result = async {
        let mut page_ms: Vec<Vec<f64>> = vec![Vec::new(); sessions.len()];
        let mut wall_ms: Vec<Vec<f64>> = vec![Vec::new(); sessions.len()];
        for run in 0..=bench.runs {
            for (i, (_, id, head)) in sessions.iter().enumerate() {
                let (page, wall) = browser
                    .open_session(&format!("{endpoint}/console/#/session/{id}"), *head)
                    .await?;
                if run > 0 {
                    page_ms[i].push(page);
                    wall_ms[i].push(wall);
                }
            }
        }
        println!(
            "console: navigation -> newest turn on screen, headless Chromium, median of {} (max)",
            bench.runs
        );
        println!(
            "{:>8} | {:>15} | {:>15} | {:>10}",
            "turns", "page ms", "wall ms", "vs 10"
        );
        let base = median(&mut wall_ms[0].clone());
        for (i, (turns, _, _)) in sessions.iter().enumerate() {
            let page = median(&mut page_ms[i]);
            let wall = median(&mut wall_ms[i]);
            println!(
                "{turns:>8} | {page:>7.0} ({:>5.0}) | {wall:>7.0} ({:>5.0}) | {:>9.2}x",
                max(&page_ms[i]),
                max(&wall_ms[i]),
                wall / base
            );
        }
        // Memory at the longest session: opened, then scrolled back.
        if let Some((turns, id, head)) = sessions.last() {
            browser
                .open_session(&format!("{endpoint}/console/#/session/{id}"), *head)
                .await?;
            let opened = browser.memory().await?;
            for _ in 0..30 {
                let lo = browser
                    .js("return Number(document.getElementById('turns').dataset.lo);")
                    .await?
                    .as_i64()
                    .unwrap_or(0);
                browser.js("window.scrollTo(0, 0); return true;").await?;
                let deadline = Instant::now() + PATIENCE;
                loop {
                    let now = browser
                        .js("return Number(document.getElementById('turns').dataset.lo);")
                        .await?
                        .as_i64()
                        .unwrap_or(0);
                    if now < lo {
                        break;
                    }
                    if Instant::now() > deadline {
                        bail!("no older page after turn {lo}");
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            let scrolled = browser.memory().await?;
            for (what, m) in [("opened", &opened), ("after 30 older pages", &scrolled)] {
                println!(
                    "{turns} turns, {what}: JS heap {:.1} MiB, {} DOM elements, {} turns in the DOM",
                    m["heap"].as_f64().unwrap_or(0.0) / (1024.0 * 1024.0),
                    m["elements"],
                    m["turns"]
                );
            }
        }
        Ok(())
    }
    .await;
    browser.close().await;
    result
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::max)
}

/// Headless Chromium through chromedriver, over the W3C WebDriver
/// protocol: only what this bench needs.
struct Browser {
    http: reqwest::Client,
    base: String,
    session: String,
    driver: Child,
    profile: PathBuf,
}

fn find_binary(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
}

impl Browser {
    async fn start() -> anyhow::Result<Browser> {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let chromium = find_binary(&["chromium", "chromium-browser"])
            .context("chromium is not installed (apt-get install -y chromium chromium-driver)")?;
        let chromedriver = find_binary(&["chromedriver"])
            .context("chromedriver is not installed (apt-get install -y chromium-driver)")?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            // Its own process group, so closing ends Chromium too.
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {}", chromedriver.display()))?;
        let http = reqwest::Client::builder().timeout(PATIENCE).build()?;
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + PATIENCE;
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
            if Instant::now() > deadline {
                bail!("chromedriver never became ready");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = std::env::temp_dir().join(format!(
            "inquest-bench-chromium-{}",
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
                    "--enable-precise-memory-info",
                    "--js-flags=--expose-gc",
                    format!("--user-data-dir={}", profile.display()),
                ],
            },
        }}});
        let created: Value = http
            .post(format!("{base}/session"))
            .json(&caps)
            .send()
            .await?
            .json()
            .await?;
        let Some(session) = created["value"]["sessionId"].as_str() else {
            bail!("chromedriver did not start Chromium: {created}");
        };
        Ok(Browser {
            http,
            base,
            session: session.to_owned(),
            driver,
            profile,
        })
    }

    async fn command(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let response = self.http.post(&url).json(&body).send().await?;
        let status = response.status();
        let v: Value = response.json().await?;
        if !status.is_success() {
            bail!("WebDriver {path}: {status} {v}");
        }
        Ok(v["value"].clone())
    }

    async fn js(&self, script: &str) -> anyhow::Result<Value> {
        self.command("/execute/sync", json!({"script": script, "args": []}))
            .await
    }

    /// Opens `url` from a blank page; (page ms, wall ms) until turn `head`
    /// is wholly on screen.
    async fn open_session(&self, url: &str, head: i64) -> anyhow::Result<(f64, f64)> {
        self.command("/url", json!({"url": "about:blank"})).await?;
        let start = Instant::now();
        self.command("/url", json!({"url": url})).await?;
        let probe = format!(
            "const e = document.querySelector('#turns > li[data-seq=\"{head}\"]'); \
             if (!e) return null; const r = e.getBoundingClientRect(); \
             if (!(r.height > 0 && r.top >= -1 && r.bottom <= window.innerHeight + 1)) return null; \
             const m = performance.getEntriesByName('inquest:turns-shown')[0]; \
             return m ? m.startTime : -1;"
        );
        loop {
            let v = self.js(&probe).await?;
            if let Some(page) = v.as_f64() {
                if page < 0.0 {
                    bail!("turn {head} is on screen but the console set no mark");
                }
                return Ok((page, start.elapsed().as_secs_f64() * 1000.0));
            }
            if start.elapsed() > PATIENCE {
                let page = self
                    .js("const l = document.getElementById('turns'); \
                         return { error: document.getElementById('error')?.textContent, \
                                  lo: l?.dataset.lo, hi: l?.dataset.hi, \
                                  text: document.body.innerText.slice(0, 300) };")
                    .await?;
                bail!("turn {head} never showed at {url}: {page}");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn memory(&self) -> anyhow::Result<Value> {
        self.js("if (window.gc) window.gc(); \
             return { heap: performance.memory.usedJSHeapSize, \
                      elements: document.getElementsByTagName('*').length, \
                      turns: document.querySelectorAll('#turns > li.turn').length };")
            .await
    }

    async fn close(mut self) {
        let url = format!("{}/session/{}", self.base, self.session);
        let _ = self.http.delete(&url).send().await;
        if let Some(pid) = self.driver.id() {
            // The whole group: chromedriver and the Chromium it started.
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
