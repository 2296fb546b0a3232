//! The project's two commands.
//!
//! - `cargo xtask demo`: installs PostgreSQL if missing, builds `inquest`,
//!   runs the server on its embedded default, and shows an incident, a
//!   session and its turns through the CLI.
//! - `cargo xtask test`: installs PostgreSQL if missing, checks formatting
//!   and clippy, starts one throwaway cluster for the run, runs the whole
//!   test suite against it with `DATABASE_URL`, and removes the cluster.

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
        _ => {
            eprintln!(
                "usage: cargo xtask test [cargo test args...]\n       cargo xtask demo [--keep] [--listen ADDR]"
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

/// A virtualenv under target/ with the MCP SDK, created once and reused.
/// Returns its interpreter.
fn ensure_mcp_python() -> anyhow::Result<PathBuf> {
    let venv = target_dir().join("test-python");
    let python = venv.join("bin/python");
    let ready = venv.join(".mcp-sdk");
    if python.is_file() && std::fs::read_to_string(&ready).is_ok_and(|v| v == MCP_SDK) {
        return Ok(python);
    }
    step(&format!(
        "installing the MCP Python SDK ({MCP_SDK}) into {}",
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
        MCP_SDK,
    ]);
    run(&format!("pip install {MCP_SDK}"), pip)?;
    std::fs::write(&ready, MCP_SDK).context("marking the MCP venv ready")?;
    Ok(python)
}

fn test(extra: &[String]) -> anyhow::Result<()> {
    let started = Instant::now();
    ensure_postgres()?;
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
    build.args(["build", "--package", "inquest"]);
    run("building inquest", build)?;
    let bin = target_dir().join("debug/inquest");

    let config = workspace_root().join("examples/checkout-latency/inquest.toml");
    step(&format!(
        "starting `inquest serve --config examples/checkout-latency/inquest.toml --listen {listen}` \
         on its embedded PostgreSQL"
    ));
    let child = Command::new(&bin)
        .args(["serve", "--listen", &listen, "--config"])
        .arg(&config)
        .spawn()
        .context("starting inquest serve")?;
    let mut server = ServerGuard(child);
    let deadline = Instant::now() + Duration::from_secs(120);
    while TcpStream::connect(&listen).is_err() {
        if let Ok(Some(status)) = server.0.try_wait() {
            bail!("inquest serve exited early ({status}); see its log above");
        }
        if Instant::now() > deadline {
            bail!("inquest serve did not start listening on {listen} within 120 s");
        }
        thread::sleep(Duration::from_millis(200));
    }

    let url = format!("http://{listen}");
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

    if keep {
        step(&format!("server still running on {url}; Ctrl-C to stop it"));
        let _ = server.0.wait();
    } else {
        step("stopping the server (SIGTERM; it stops its embedded PostgreSQL)");
    }
    drop(server);
    Ok(())
}
