//! The project's two commands.
//!
//! - `cargo xtask demo`: installs PostgreSQL if missing, builds `inquest`,
//!   runs the server on its embedded default, prints the web console's URL,
//!   and shows an incident, a session and its turns through the CLI.
//! - `cargo xtask test`: installs PostgreSQL (and, for the console's
//!   browser tests, Chromium and chromedriver) if missing, checks formatting
//!   and clippy, starts one throwaway cluster for the run, runs the whole
//!   test suite against it with `DATABASE_URL`, and removes the cluster.
//! - `cargo xtask replicas`: three replicas on one throwaway cluster; the
//!   replica running an investigation is killed with `kill -9` mid-burst
//!   and another one recovers it while a watcher on a third follows.
//! - `cargo xtask chaos [--seconds N] [--seed S] [--sessions K] [--failover]`: the chaos
//!   test (`crates/inquest/tests/chaos.rs`) alone, with N seconds of faults
//!   (default 90; a soak is `--seconds 600`). It owns its cluster, so this
//!   only installs what it needs and builds; needs root (it makes a network
//!   namespace).

use std::{
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Child, Command, ExitCode},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use inquest_store::embedded::{EmbeddedOptions, EmbeddedPostgres, find_binaries};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => test(&args[1..]),
        Some("demo") => demo(&args[1..]),
        Some("replicas") => replicas(),
        Some("chaos") => chaos(&args[1..]),
        _ => {
            eprintln!(
                "usage: cargo xtask test [cargo test args...]\n       cargo xtask demo [--keep] [--listen ADDR]\n       cargo xtask replicas\n       cargo xtask chaos [--seconds N] [--seed S] [--sessions K] [--failover]"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

fn step(what: &str) {
    eprintln!("\n==> {what}");
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Installs Debian's `postgresql` package when its server binaries are not
/// on this machine.
fn ensure_postgres() -> anyhow::Result<()> {
    if find_binaries().is_some() {
        return Ok(());
    }
    step("installing PostgreSQL server packages (apt-get install postgresql)");
    let sudo: &[&str] = if is_root() { &[] } else { &["sudo"] };
    for args in [
        &["apt-get", "update", "-q"][..],
        &[
            "apt-get",
            "install",
            "-y",
            "-q",
            "--no-install-recommends",
            "postgresql",
            "postgresql-client",
        ][..],
    ] {
        let all: Vec<&str> = sudo.iter().chain(args).copied().collect();
        let status = Command::new(all[0])
            .args(&all[1..])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .with_context(|| format!("running {}", all.join(" ")))?;
        if !status.success() {
            bail!("`{}` failed ({status})", all.join(" "));
        }
    }
    if find_binaries().is_none() {
        bail!("installed `postgresql` but its server binaries are still not found");
    }
    Ok(())
}

/// Whether `name` is an executable file on PATH.
fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
}

/// Installs Debian's `chromium` and `chromium-driver` when either is
/// missing: the web console's browser tests (`tests/console`) drive
/// headless Chromium over WebDriver and fail without it.
fn ensure_chromium() -> anyhow::Result<()> {
    if on_path("chromium") && on_path("chromedriver") {
        return Ok(());
    }
    step(
        "installing headless Chromium for the console tests (apt-get install chromium chromium-driver)",
    );
    apt_get_install(&["chromium", "chromium-driver"])?;
    if !(on_path("chromium") && on_path("chromedriver")) {
        bail!(
            "installed `chromium` and `chromium-driver` but chromium or chromedriver is still not on PATH"
        );
    }
    Ok(())
}

/// Where the alert tests (`tests/api/alerts.rs`) find Alertmanager.
const ALERTMANAGER: &str = "/usr/bin/prometheus-alertmanager";

/// Installs Debian's `prometheus-alertmanager` when it is missing: the
/// alert tests run it as a real process and fail without it. Only the
/// binary is used; the package's service is not started (the tests start
/// their own, unprivileged, on a loopback port).
fn ensure_alertmanager() -> anyhow::Result<()> {
    if std::path::Path::new(ALERTMANAGER).is_file() {
        return Ok(());
    }
    step("installing Alertmanager for the alert tests (apt-get install prometheus-alertmanager)");
    apt_get_install(&["prometheus-alertmanager"])?;
    if !std::path::Path::new(ALERTMANAGER).is_file() {
        bail!("installed `prometheus-alertmanager` but {ALERTMANAGER} is still missing");
    }
    Ok(())
}

/// `apt-get update` then `apt-get install -y packages` (through sudo
/// unless root).
fn apt_get_install(packages: &[&str]) -> anyhow::Result<()> {
    let sudo: &[&str] = if is_root() { &[] } else { &["sudo"] };
    let install: Vec<&str> = ["apt-get", "install", "-y", "-q"]
        .into_iter()
        .chain(packages.iter().copied())
        .collect();
    for args in [&["apt-get", "update", "-q"][..], &install[..]] {
        let all: Vec<&str> = sudo.iter().chain(args).copied().collect();
        let status = Command::new(all[0])
            .args(&all[1..])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .with_context(|| format!("running {}", all.join(" ")))?;
        if !status.success() {
            bail!("`{}` failed ({status})", all.join(" "));
        }
    }
    Ok(())
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(workspace_root());
    cmd
}

fn run(what: &str, mut cmd: Command) -> anyhow::Result<()> {
    step(what);
    let status = cmd.status().with_context(|| format!("starting: {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// The `mcp` Python SDK the MCP tests run their real server with, pinned.
const MCP_SDK: &str = "mcp==2.3.0";

/// What the Python example client (`examples/python/requirements.txt`,
/// keep the two in step) needs; its test runs it with the same venv.
const GRPC_PACKAGES: [&str; 3] = ["grpcio==1.71.0", "grpcio-tools==1.71.0", "protobuf==5.29.4"];

/// The third-party Standard Webhooks verifier the webhook tests check every
/// delivery's signature with (`tests/api/events.rs`).
const WEBHOOK_PACKAGES: [&str; 2] = ["standardwebhooks==1.1.0", "slack_sdk==3.33.5"];

/// A virtualenv under target/ with the MCP SDK, the Python client's gRPC
/// packages and the webhook verifier, created once and reused (recreated
/// when the pins change).
/// Returns its interpreter.
fn ensure_mcp_python() -> anyhow::Result<PathBuf> {
    let venv = target_dir().join("test-python");
    let python = venv.join("bin/python");
    let ready = venv.join(".mcp-sdk");
    let packages: Vec<&str> = std::iter::once(MCP_SDK)
        .chain(GRPC_PACKAGES)
        .chain(WEBHOOK_PACKAGES)
        .collect();
    let marker = packages.join(" ");
    if python.is_file() && std::fs::read_to_string(&ready).is_ok_and(|v| v == marker) {
        return Ok(python);
    }
    step(&format!(
        "installing the test Python packages ({marker}) into {}",
        venv.display()
    ));
    let host = ["python3", "python"]
        .into_iter()
        .find(|p| {
            Command::new(p)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .context("the MCP tests need Python 3 (python3), which is not on PATH")?;
    let mut venv_cmd = Command::new(host);
    venv_cmd.args(["-m", "venv", "--clear"]).arg(&venv);
    run("python3 -m venv", venv_cmd)?;
    let mut pip = Command::new(&python);
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ])
    .args(&packages);
    run(&format!("pip install {marker}"), pip)?;
    std::fs::write(&ready, &marker).context("marking the test venv ready")?;
    Ok(python)
}

/// What a root `cargo build --release` compiles: the default members'
/// normal and build edges, with the features they turn on. No test code
/// (the testkit, a provider fake) and no benchmark helper may be in it.
fn check_shipped_graph() -> anyhow::Result<()> {
    step("checking that no test or bench code is in the shipped binary's graph");
    let output = cargo()
        .args(["tree", "-e", "normal,build,features", "--prefix", "none"])
        .output()
        .context("running cargo tree")?;
    anyhow::ensure!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8_lossy(&output.stdout);
    anyhow::ensure!(
        tree.lines().any(|l| l.starts_with("inquest v")),
        "cargo tree at the root did not list the `inquest` binary crate; is it still the default member?"
    );
    let forbidden: Vec<&str> = tree
        .lines()
        .filter(|l| {
            l.contains("inquest-testkit")
                || l.contains("inquest-bench")
                || l.contains("inquest-tests")
                || l.contains("feature \"fake\"")
                || l.contains("feature \"bench\"")
        })
        .collect();
    anyhow::ensure!(
        forbidden.is_empty(),
        "test or bench code is in the shipped graph:\n{}",
        forbidden.join("\n")
    );
    Ok(())
}

/// The console's own unit tests (`node --test`, after a type check), run
/// with the machine's Node.js on the locked packages. The browser tests
/// drive the built console; these pin its pure parts.
fn console_unit_tests() -> anyhow::Result<()> {
    let dir = workspace_root().join("web/console");
    let mut install = Command::new("npm");
    install
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&dir);
    run("npm ci (web/console)", install)
        .context("the console's unit tests need Node.js 20 and npm (Debian: nodejs, npm)")?;
    let mut unit = Command::new("npm");
    unit.args(["test", "--silent"]).current_dir(&dir);
    run("npm test (web/console)", unit)
}

fn test(extra: &[String]) -> anyhow::Result<()> {
    let started = Instant::now();
    ensure_postgres()?;
    ensure_chromium()?;
    ensure_alertmanager()?;
    let mcp_python = ensure_mcp_python()?;
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--", "--check"]);
    run("cargo fmt --check", fmt)?;
    let mut clippy = cargo();
    clippy.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]);
    run("cargo clippy -D warnings", clippy)?;
    check_shipped_graph()?;
    console_unit_tests()?;

    // Under the temp dir, not target/: as root the cluster runs as the
    // `postgres` user, who cannot enter a checkout under /root.
    let dir = std::env::temp_dir().join(format!("inquest-test-pg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    step("starting a throwaway PostgreSQL cluster for this run");
    let mut options = EmbeddedOptions::new(&dir);
    options.max_connections = 300;
    options.database = "postgres".into();
    let pg = EmbeddedPostgres::start(&options).context("starting the test cluster")?;
    eprintln!(
        "test cluster on 127.0.0.1:{} in {}",
        pg.port(),
        dir.display()
    );

    let mut tests = cargo();
    tests
        .args(["test", "--workspace"])
        .args(extra)
        .env("DATABASE_URL", pg.url_for("postgres"))
        // The MCP tests run a real Python MCP server; in CI they must not
        // skip for want of the SDK.
        .env("INQUEST_TEST_PYTHON", &mcp_python)
        .env("INQUEST_REQUIRE_MCP", "1");
    let result = run("cargo test --workspace", tests);

    step("stopping the test cluster");
    if let Err(e) = pg.stop() {
        eprintln!("warning: stopping the test cluster: {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    result?;
    eprintln!("\nall checks passed in {:.0?}", started.elapsed());
    Ok(())
}

/// Kills the server child on every exit path of the demo.
struct ServerGuard(Child);

impl Drop for ServerGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.0.id().to_string()])
                .status();
            let _ = self.0.wait();
        }
    }
}

fn demo(args: &[String]) -> anyhow::Result<()> {
    let keep = args.iter().any(|a| a == "--keep");
    let listen = args
        .iter()
        .position(|a| a == "--listen")
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:50051".into());
    ensure_postgres()?;
    let mut build = cargo();
    // Replica 1 hangs at a crash point: a plain build has none.
    build.args(["build", "--package", "inquest", "--features", "failpoints"]);
    run("building inquest", build)?;
    let bin = target_dir().join("debug/inquest");

    let config = workspace_root().join("examples/checkout-latency/inquest.toml");
    // The server's log goes to a file, so the live view below is not
    // interleaved with its lines.
    let log_dir = target_dir().join("demo");
    std::fs::create_dir_all(&log_dir).with_context(|| format!("creating {}", log_dir.display()))?;
    let log_path = log_dir.join("inquest-server.log");
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
    step(&format!(
        "starting `inquest serve --config examples/checkout-latency/inquest.toml --listen {listen}` \
         on its embedded PostgreSQL; its log: {}",
        log_path.display()
    ));
    let child = Command::new(&bin)
        .args(["serve", "--listen", &listen, "--config"])
        .arg(&config)
        .env("NO_COLOR", "1")
        .stdout(log.try_clone().context("sharing the server log file")?)
        .stderr(log)
        .spawn()
        .context("starting inquest serve")?;
    let mut server = ServerGuard(child);
    let deadline = Instant::now() + Duration::from_secs(120);
    while TcpStream::connect(&listen).is_err() {
        if let Ok(Some(status)) = server.0.try_wait() {
            bail!(
                "inquest serve exited early ({status}); see its log: {}",
                log_path.display()
            );
        }
        if Instant::now() > deadline {
            bail!("inquest serve did not start listening on {listen} within 120 s");
        }
        thread::sleep(Duration::from_millis(200));
    }

    let url = format!("http://{listen}");
    let console = format!("{url}/console/");
    step(&format!(
        "the web console: open {console} in a browser (`cargo xtask demo --keep` leaves the \
         server running after the demo)"
    ));
    step(
        "a live investigation: `inquest investigate` creates the incident, starts a session, \
         watches it and prints its report",
    );
    eprintln!("(scripted model, real read-only tools over examples/checkout-latency/evidence)\n");
    let status = Command::new(&bin)
        .args([
            "investigate",
            "checkout-api: p99 latency above 2 s since 14:05",
            "--description",
            "Alert fired at 14:07 UTC; error rate normal; started after a deploy.",
        ])
        .env("INQUEST_SERVER", &url)
        .status()
        .context("running inquest investigate")?;
    if !status.success() {
        bail!("inquest investigate failed ({status})");
    }

    eprintln!("\n(the server's log: {})", log_path.display());
    if keep {
        step(&format!(
            "server still running on {url}; the console is at {console}; Ctrl-C to stop it \
             (follow a session with `inquest watch --follow SESSION`, its log with `tail -f {}`)",
            log_path.display()
        ));
        let _ = server.0.wait();
    } else {
        step("stopping the server (SIGTERM; it stops its embedded PostgreSQL)");
    }
    drop(server);
    Ok(())
}

/// Three replicas on one throwaway cluster; replica 1 runs a session and is
/// armed to hang before its first tool call; it is `kill -9`ed there while
/// `inquest watch` follows the session on replica 2; replica 3's reaper (or
/// replica 2's) claims the orphan after the lease TTL and finishes it.
fn replicas() -> anyhow::Result<()> {
    ensure_postgres()?;
    let mut build = cargo();
    // Replica 1 hangs at a crash point: a plain build has none.
    build.args(["build", "--package", "inquest", "--features", "failpoints"]);
    run("building inquest", build)?;
    let bin = target_dir().join("debug/inquest");

    let dir = std::env::temp_dir().join(format!("inquest-replicas-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    step("starting a throwaway PostgreSQL cluster shared by three replicas");
    let mut options = EmbeddedOptions::new(dir.join("pg"));
    options.database = "inquest".into();
    let pg = EmbeddedPostgres::start(&options).context("starting the cluster")?;
    let url = pg.url();
    let result = replicas_on(&bin, &dir, &url);
    step("stopping the replicas' cluster");
    if let Err(e) = pg.stop() {
        eprintln!("warning: stopping the cluster: {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn replicas_on(bin: &Path, dir: &Path, url: &str) -> anyhow::Result<()> {
    let example = workspace_root().join("examples/checkout-latency");
    let config = dir.join("inquest.toml");
    std::fs::write(
        &config,
        format!(
            "[lease]\nttl = \"3s\"\nreap_interval = \"500ms\"\n\n\
             [[providers]]\nkind = \"script\"\nname = \"demo-script\"\nscript = \"{}\"\n\n\
             [tools]\nfiles_root = \"{}\"\nfiles_server = \"evidence\"\n",
            example.join("script.json").display(),
            example.join("evidence").display()
        ),
    )?;
    let start = |n: u16, failpoints: Option<&str>| -> anyhow::Result<ServerGuard> {
        let listen = format!("127.0.0.1:{}", 50060 + n);
        let mut cmd = Command::new(bin);
        cmd.args([
            "serve",
            "--listen",
            &listen,
            "--database-url",
            url,
            "--config",
        ])
        .arg(&config)
        .env("INQUEST_REPLICA_ID", format!("replica-{n}"))
        .env("RUST_LOG", "warn");
        if let Some(f) = failpoints {
            cmd.env("INQUEST_FAILPOINTS", f);
        }
        let mut server = ServerGuard(cmd.spawn().context("starting a replica")?);
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(&listen).is_err() {
            if let Ok(Some(status)) = server.0.try_wait() {
                bail!("replica {n} exited early ({status})");
            }
            if Instant::now() > deadline {
                bail!("replica {n} did not listen on {listen}");
            }
            thread::sleep(Duration::from_millis(100));
        }
        Ok(server)
    };
    step(
        "starting replica-1 (armed: it hangs before its first tool call), replica-2, replica-3; lease TTL 3 s",
    );
    let mut one = start(1, Some("before-tool-run=1*return(hang)"))?;
    let two = start(2, None)?;
    let three = start(3, None)?;
    let cli = |server: u16, args: &[&str]| -> anyhow::Result<String> {
        let out = Command::new(bin)
            .args(args)
            .env(
                "INQUEST_SERVER",
                format!("http://127.0.0.1:{}", 50060 + server),
            )
            .output()
            .context("running the inquest CLI")?;
        if !out.status.success() {
            bail!(
                "inquest {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let incident = cli(
        1,
        &[
            "incident",
            "new",
            "checkout-api: p99 above 2 s since 14:05",
            "--id-only",
        ],
    )?;
    let session = cli(
        1,
        &[
            "session",
            "start",
            &incident,
            "Why did checkout latency jump?",
            "--id-only",
        ],
    )?;
    step(&format!(
        "session {session} runs on replica-1; `inquest watch` follows it on replica-2"
    ));
    let mut watch = ServerGuard(
        Command::new(bin)
            .args(["watch", &session])
            .env("INQUEST_SERVER", "http://127.0.0.1:50062")
            .spawn()
            .context("starting inquest watch")?,
    );
    thread::sleep(Duration::from_secs(2));
    step("kill -9 replica-1 in the middle of its burst");
    Command::new("kill")
        .args(["-KILL", &one.0.id().to_string()])
        .status()?;
    let _ = one.0.wait();
    eprintln!("{}", cli(3, &["session", "get", &session])?);
    step(
        "waiting for another replica to claim the orphan (lease TTL + reap interval) and finish it",
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let shown = cli(3, &["session", "get", &session])?;
        if !shown.contains("status running") && !shown.contains("status pending") {
            eprintln!("{shown}");
            break;
        }
        if Instant::now() > deadline {
            bail!("the session was not recovered within 60 s:\n{shown}");
        }
        thread::sleep(Duration::from_millis(500));
    }
    let _ = watch.0.wait();
    step("the report, written by the replica that recovered the session");
    eprintln!("{}", cli(3, &["report", &session])?);
    drop(watch);
    drop(two);
    drop(three);
    Ok(())
}

/// `cargo xtask chaos`: runs only the chaos test, with its knobs passed as
/// `INQUEST_CHAOS_*`. The test starts its own PostgreSQL cluster (it
/// restarts it), so none is started here; the server binaries and the MCP
/// Python SDK must be installed.
fn chaos(args: &[String]) -> anyhow::Result<()> {
    let mut env: Vec<(&str, String)> = Vec::new();
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        if flag == "--failover" {
            env.push(("INQUEST_CHAOS_FAILOVER", "1".into()));
            continue;
        }
        let var = match flag.as_str() {
            "--seconds" => "INQUEST_CHAOS_SECONDS",
            "--seed" => "INQUEST_CHAOS_SEED",
            "--sessions" => "INQUEST_CHAOS_SESSIONS",
            other => bail!(
                "unknown argument {other:?}; usage: cargo xtask chaos [--seconds N] [--seed S] \
                 [--sessions K] [--failover]"
            ),
        };
        let value = rest
            .next()
            .with_context(|| format!("{flag} needs a number"))?;
        value
            .parse::<u64>()
            .with_context(|| format!("{flag} {value:?} is not a number"))?;
        env.push((var, value.clone()));
    }
    if !is_root() {
        bail!(
            "the chaos test must run as root: it makes a network namespace to partition a replica \
             and runs PostgreSQL as the `postgres` user"
        );
    }
    let started = Instant::now();
    ensure_postgres()?;
    let mcp_python = ensure_mcp_python()?;
    let mut test = cargo();
    test.args([
        "test",
        "--package",
        "inquest",
        "--test",
        "chaos",
        "--",
        "--nocapture",
    ])
    .env("INQUEST_TEST_PYTHON", &mcp_python)
    .env("INQUEST_REQUIRE_MCP", "1");
    for (var, value) in &env {
        test.env(var, value);
    }
    run("cargo test --package inquest --test chaos", test)?;
    eprintln!("\nchaos test passed in {:.0?}", started.elapsed());
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The test venv installs what the Python client's requirements pin.
    #[test]
    fn grpc_pins_match_the_python_clients_requirements() {
        let file = super::workspace_root().join("examples/python/requirements.txt");
        let text = std::fs::read_to_string(&file).unwrap();
        let pinned: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        assert_eq!(pinned, super::GRPC_PACKAGES);
    }
}
