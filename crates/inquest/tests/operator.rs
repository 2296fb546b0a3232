//! What an operator meets running `inquest serve` as a process: its log
//! read from a file or a pipe (no colour codes, no driver NOTICEs, a first
//! line that means something, one line with the auth mode and the
//! console's URL), colour on a terminal only without `NO_COLOR`, `/metrics` on a fresh server (a `# HELP` for every
//! metric, counters that have not happened yet at 0), and the embedded
//! cluster after a `kill -9` of the server (its postmaster, left running,
//! is stopped and started again; a second server on the same data
//! directory is refused; a start PostgreSQL refuses names its log), and
//! the README's three-replica recipe, run as written.

mod support;

use std::{
    io::{Read, Write},
    net::TcpStream,
    process::{Command, Stdio},
    time::Duration,
};

use support::{Server, create_incident, free_port};

/// A child killed and reaped when dropped, so a failing test leaves no
/// server behind.
struct Guard(std::process::Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `inquest serve ARGS` with its stderr in a file (not a terminal) and
/// no `NO_COLOR`, waits until it listens, stops it with SIGTERM, and
/// returns its log. The server must exit 0.
async fn serve_once(args: &[&str]) -> String {
    let port = free_port();
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut child = Guard(
        Command::new(env!("CARGO_BIN_EXE_inquest"))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .env_remove("NO_COLOR")
            .env_remove("RUST_LOG")
            .env_remove("INQUEST_LOG_FORMAT")
            .env_remove("DATABASE_URL")
            .env_remove("INQUEST_DATABASE_URL")
            .env("INQUEST_ADMIN_LISTEN", "127.0.0.1:0")
            .stdout(Stdio::null())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap(),
    );
    let read = || std::fs::read_to_string(log.path()).unwrap();
    let mut listening = false;
    for _ in 0..600 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            listening = true;
            break;
        }
        if let Some(status) = child.0.try_wait().unwrap() {
            panic!("serve exited before listening ({status}): {}", read());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(listening, "serve never listened on {port}: {}", read());
    let status = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut exit = None;
    for _ in 0..600 {
        exit = child.0.try_wait().unwrap();
        if exit.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let text = read();
    let exit = exit.unwrap_or_else(|| panic!("serve did not exit after SIGTERM: {text}"));
    assert!(exit.success(), "exit status {exit}: {text}");
    text
}

/// A log written to a file is plain text, says nothing of refinery's
/// bookkeeping at a start that finds the schema in place, opens with a
/// line an operator understands, and states the auth mode and where the
/// console is.
#[tokio::test]
async fn a_log_in_a_file_is_plain_and_says_what_serves_where() {
    let database = inquest_tests::fresh_database().await;
    // The first start creates the schema; the second finds it there (the
    // start that used to log refinery's NOTICE).
    serve_once(&["--database-url", &database.url]).await;
    let log = serve_once(&["--database-url", &database.url]).await;
    assert!(!log.contains('\x1b'), "colour codes in a log file:\n{log}");
    assert!(
        !log.contains("NOTICE") && !log.contains("already exists"),
        "a driver NOTICE in the log:\n{log}"
    );
    let first = log.lines().next().unwrap_or_default();
    assert!(
        !first.contains("nice") && !first.contains("yield"),
        "the first line is jargon: {first}"
    );
    let serving = log
        .lines()
        .find(|l| l.contains("serving inquest.v1.Investigations"))
        .unwrap_or_else(|| panic!("no serving line:\n{log}"));
    assert!(
        serving.contains("auth=none (loopback only)"),
        "the serving line does not state the auth mode: {serving}"
    );
    assert!(
        serving.contains("console=http://127.0.0.1:") && serving.contains("/console/"),
        "the serving line does not give the console's URL: {serving}"
    );
}

/// What `inquest serve` writes on a terminal (a pseudo-terminal made by
/// util-linux `script`) in its first seconds: `timeout` stops it with
/// SIGTERM.
fn serve_on_a_terminal(database_url: &str, no_color: Option<&str>) -> String {
    let serve = format!(
        "timeout -s TERM 4 {} serve --listen 127.0.0.1:{} --admin-listen 127.0.0.1:0 \
         --database-url '{database_url}'",
        env!("CARGO_BIN_EXE_inquest"),
        free_port()
    );
    let mut command = Command::new("script");
    command
        .args(["-q", "-e", "-c", &serve, "/dev/null"])
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .env_remove("INQUEST_LOG_FORMAT")
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null());
    if let Some(value) = no_color {
        command.env("NO_COLOR", value);
    }
    let out = command.output().expect("running util-linux script");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("serving inquest.v1.Investigations"),
        "serve did not start on the terminal: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// On a terminal the log is coloured, unless `NO_COLOR` is set
/// (<https://no-color.org>: any non-empty value).
#[tokio::test]
async fn colour_is_for_terminals_without_no_color() {
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    let (coloured, plain) = tokio::task::spawn_blocking(move || {
        (
            serve_on_a_terminal(&url, None),
            serve_on_a_terminal(&url, Some("1")),
        )
    })
    .await
    .unwrap();
    assert!(
        coloured.contains("\x1b["),
        "no colour on a terminal:\n{coloured}"
    );
    assert!(!plain.contains('\x1b'), "colour despite NO_COLOR:\n{plain}");
}

/// GET `path` on `addr` over HTTP/1.0; the body.
fn http_get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or_default();
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    body.to_owned()
}

/// A fresh server's `/metrics`: every metric it shows has a `# HELP`
/// line, and the counters an alert compares are there at 0 before
/// anything happened.
#[tokio::test]
async fn a_fresh_server_describes_every_metric_and_shows_zeros() {
    let database = inquest_tests::fresh_database().await;
    let admin = format!("127.0.0.1:{}", free_port());
    let server = Server::start_with(
        "metrics",
        &["--database-url", &database.url],
        &[("INQUEST_ADMIN_LISTEN", &admin)],
    )
    .await;
    server.wait_for_log("admin listener").await;
    let page = http_get(&admin, "/metrics");
    server.stop().await;

    let typed: Vec<&str> = page
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(typed.len() > 10, "too few metrics:\n{page}");
    for name in &typed {
        let help = format!("# HELP {name} ");
        assert!(
            page.lines().any(|l| l.starts_with(&help)),
            "{name} has no HELP line:\n{page}"
        );
    }
    for series in [
        r#"inquest_bursts_ended_total{exit_reason="completed"} 0"#,
        r#"inquest_bursts_ended_total{exit_reason="provider_failed"} 0"#,
        r#"inquest_bursts_started_total{mode="recovered"} 0"#,
        r#"inquest_leases_lost_total{why="taken_over"} 0"#,
        r#"inquest_orphans_recovered_total{by="reaper"} 0"#,
        "inquest_bursts_deferred_total 0",
        r#"inquest_rpc_requests_total{method="SendMessage",code="OK"} 0"#,
        "inquest_lease_renewals_failed_total 0",
    ] {
        assert!(
            page.lines().any(|l| l == series),
            "{series} is missing:\n{page}"
        );
    }
}

fn postmaster_pid(data_dir: &std::path::Path) -> Option<u32> {
    let text = std::fs::read_to_string(data_dir.join("pgdata/postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// Whether `pid` is a live `postgres` (a zombie waiting for a reaper that
/// may never come, in a container, does not count).
fn is_postgres(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit_once(") ").map(|(_, rest)| rest.chars().next());
    stat.contains("(postgres)") && !matches!(state, Some(Some('Z' | 'X')))
}

/// `kill -9` of a server on the embedded default leaves its postmaster
/// running; the next start stops it (saying so), starts the cluster again
/// and finds its data. A second server on a data directory in use is
/// refused without touching the first's database. A cluster PostgreSQL
/// will not start names the log with the reason, and quotes it.
#[tokio::test]
async fn a_postmaster_left_by_kill_9_is_stopped_and_started_again() {
    let dir = tempfile::Builder::new()
        .prefix("inquest-stale-")
        .tempdir_in("/tmp")
        .unwrap();
    let data_dir = dir.path().to_str().unwrap().to_owned();
    let args = ["--data-dir", data_dir.as_str()];
    let env = [("INQUEST_ADMIN_LISTEN", "127.0.0.1:0")];

    let first = Server::start_with("first", &args, &env).await;
    let incident = create_incident(&mut first.client().await, "kept across kill -9").await;
    let stale = postmaster_pid(dir.path()).expect("a running postmaster");
    first.kill9().await;
    assert!(
        is_postgres(stale),
        "the postmaster died with the server: nothing to test"
    );

    let second = Server::start_with("second", &args, &env).await;
    assert!(
        second.logged("left running by an earlier start"),
        "the restart did not say it stopped the stale postmaster"
    );
    assert!(!is_postgres(stale), "the stale postmaster still runs");
    let mut c = second.client().await;
    let list = c
        .list_incidents(inquest_proto::v1::ListIncidentsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(
        list.incidents.iter().any(|i| i.id == incident.id),
        "the incident made before kill -9 is gone"
    );

    // A second server on the same data directory, while the first runs.
    let refused = Command::new(env!("CARGO_BIN_EXE_inquest"))
        .args(["serve", "--listen", &format!("127.0.0.1:{}", free_port())])
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("INQUEST_DATABASE_URL")
        .env("INQUEST_ADMIN_LISTEN", "127.0.0.1:0")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("another process") && stderr.contains("--data-dir"),
        "{stderr}"
    );
    let running = postmaster_pid(dir.path()).expect("the second server's postmaster");
    assert!(
        is_postgres(running),
        "the refused start stopped the cluster"
    );
    create_incident(&mut c, "still served").await;
    second.stop().await;
    assert!(
        postmaster_pid(dir.path()).is_none(),
        "left running after SIGTERM"
    );

    // A setting PostgreSQL refuses: the error names the log and quotes it.
    let conf = dir.path().join("pgdata/postgresql.conf");
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text.push_str("\nnot_a_setting_at_all = 1\n");
    std::fs::write(&conf, text).unwrap();
    let failed = Command::new(env!("CARGO_BIN_EXE_inquest"))
        .args(["serve", "--listen", &format!("127.0.0.1:{}", free_port())])
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("INQUEST_DATABASE_URL")
        .env("INQUEST_ADMIN_LISTEN", "127.0.0.1:0")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success(), "{stderr}");
    let log = format!("{data_dir}/postgres.log");
    assert!(
        stderr.contains(&log),
        "the error does not name {log}: {stderr}"
    );
    assert!(
        stderr.contains("not_a_setting_at_all"),
        "the error does not quote the log's reason: {stderr}"
    );
}

/// The README's three-replica recipe, run as written with bash (its
/// PostgreSQL URL, ports and example path filled in): replica-1 is killed
/// mid-investigation, another replica takes over and writes the recovery
/// notice, the watch on replica-2 sees the investigation to its end, and
/// the follow-up gets its own answer.
#[tokio::test]
async fn the_readme_replica_recipe_shows_a_takeover() {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
    )
    .unwrap();
    let after = readme
        .split_once("By hand, with your own PostgreSQL")
        .expect("the README's replica recipe")
        .1;
    let recipe = after
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .expect("the recipe's sh block")
        .0;
    let database = inquest_tests::fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    // Three free ports in a row for gRPC and for admin, as the recipe
    // numbers them (its base, then +1, +2, +3).
    let base = |avoid: u16| loop {
        let base = free_port().saturating_sub(4);
        if base > avoid + 4
            && (1..=3).all(|n| std::net::TcpListener::bind(("127.0.0.1", base + n)).is_ok())
        {
            return base;
        }
    };
    let grpc = base(0);
    let admin = base(grpc);
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .canonicalize()
        .unwrap();
    let mut script = recipe
        .replace("postgres://…", &database.url)
        .replace("examples/", &format!("{}/", examples.display()))
        .replace("5006$n", &format!("$(({grpc}+n))"))
        .replace("946$n", &format!("$(({admin}+n))"));
    for n in 1..=3 {
        script = script.replace(&format!("5006{n}"), &(grpc + n).to_string());
    }
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_inquest"))
        .parent()
        .unwrap()
        .to_owned();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = tokio::task::spawn_blocking({
        let dir = dir.path().to_owned();
        move || {
            Command::new("timeout")
                .args(["-s", "KILL", "120", "bash", "-e", "-c", &script])
                .current_dir(dir)
                .env("PATH", path)
                .env("NO_COLOR", "1")
                .env_remove("DATABASE_URL")
                .env_remove("INQUEST_SERVER")
                .env_remove("RUST_LOG")
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    // Whatever happened, no replica outlives the test.
    for n in 1..=3 {
        if let Ok(pid) = std::fs::read_to_string(dir.path().join(format!("replica-{n}.pid"))) {
            let _ = Command::new("kill").args(["-KILL", pid.trim()]).status();
        }
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let logs: String = (1..=3)
        .map(|n| {
            std::fs::read_to_string(dir.path().join(format!("replica-{n}.log"))).unwrap_or_default()
        })
        .collect();
    let all = format!("stdout:\n{stdout}\nstderr:\n{stderr}\nlogs:\n{logs}");
    assert!(
        out.status.success(),
        "the recipe failed ({}):\n{all}",
        out.status
    );
    assert!(
        stdout.contains("notice    Recovery:"),
        "no recovery notice:\n{all}"
    );
    assert!(
        stdout.contains("claimed an orphaned session"),
        "nobody took over:\n{all}"
    );
    assert!(
        stdout.contains("-- session completed, exit reason completed"),
        "the watch did not see the investigation end:\n{all}"
    );
    assert!(
        stdout.contains("pricing-svc appears only through checkout-api"),
        "the follow-up got no answer of its own:\n{all}"
    );
}
