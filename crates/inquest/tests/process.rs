//! The real `inquest` binary as a separate OS process: graceful shutdown on
//! SIGTERM, the embedded PostgreSQL default (created on first start, reused
//! after, stopped on shutdown), and bursts left pending picked up at start.

mod support;

use inquest_proto::v1 as pb;
use support::{Server, create_incident, settled, start_session};

#[tokio::test]
async fn sigterm_finishes_and_exits_zero() {
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    let server = Server::start(&["--database-url", &url]).await;
    create_incident(&mut server.client().await, "before shutdown").await;
    server.stop().await;
}

#[tokio::test]
async fn embedded_default_is_created_reused_and_stopped() {
    let dir = tempfile::Builder::new()
        .prefix("inquest-embedded-")
        .tempdir_in("/tmp")
        .unwrap();
    let data_dir = dir.path().to_str().unwrap().to_owned();
    // A provider, so that sessions may be started (a server without one
    // refuses them).
    let config = dir.path().join("inquest.toml");
    std::fs::write(
        dir.path().join("script.json"),
        r#"[{"text": "Nothing is wrong."}]"#,
    )
    .unwrap();
    std::fs::write(
        &config,
        "[[providers]]\nkind = \"script\"\nscript = \"script.json\"\n",
    )
    .unwrap();
    let config = config.to_str().unwrap().to_owned();
    let mut incident_id = String::new();
    for round in 0..2 {
        let server = Server::start(&["--data-dir", &data_dir, "--config", &config]).await;
        let mut c = server.client().await;
        if round == 0 {
            incident_id = create_incident(&mut c, "kept across restarts").await.id;
        }
        // The second start reuses the cluster the first one created.
        let s = start_session(&mut c, &incident_id, &format!("round {round}")).await;
        assert!(s.is_ok(), "round {round}: {s:?}");
        server.stop().await;
        // Stopped with the server: postmaster.pid is gone.
        assert!(
            !dir.path().join("pgdata/postmaster.pid").exists(),
            "embedded PostgreSQL still running after shutdown"
        );
    }
}

/// A message stored while no agent could take it (here: the test
/// harness's in-process server, which stores sessions and runs no burst)
/// is picked up when a server with an agent starts.
#[tokio::test]
async fn a_session_left_pending_starts_when_a_server_with_an_agent_starts() {
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("script.json"),
        r#"[{"text": "Nothing is wrong; the alert was a test."}]"#,
    )
    .unwrap();
    let config = dir.path().join("inquest.toml");
    std::fs::write(
        &config,
        "[[providers]]\nkind = \"script\"\nscript = \"script.json\"\n",
    )
    .unwrap();

    // No agent: the session is stored and stays pending.
    let first = inquest_tests::spawn_app_on(database.name.clone(), url.clone(), |_| {}).await;
    let mut c = first.client().await;
    let incident = create_incident(&mut c, "left pending").await;
    let session = start_session(&mut c, &incident.id, "is anything wrong?")
        .await
        .unwrap();
    assert_eq!(session.status(), pb::SessionStatus::Pending);
    first.stop().await.unwrap();

    // A server with an agent picks it up at start.
    let second =
        Server::start(&["--database-url", &url, "--config", config.to_str().unwrap()]).await;
    let s = settled(&mut second.client().await, &session.id).await;
    assert_eq!(s.status(), pb::SessionStatus::Completed);
    assert_eq!(s.exit_reason, "completed");
    second.stop().await;
}

/// `inquest session list --status running` (the binary as a client) prints
/// the running session and leaves out the pending one.
#[tokio::test]
async fn session_list_status_running_prints_what_runs() {
    let app = inquest_tests::spawn_app().await;
    let mut c = app.client().await;
    let incident = create_incident(&mut c, "listing").await;
    let running = start_session(&mut c, &incident.id, "running")
        .await
        .unwrap();
    let pending = start_session(&mut c, &incident.id, "pending")
        .await
        .unwrap();
    let _burst = inquest_tests::driver::Driver::claim(&app, &running.id).await;

    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_inquest"))
        .args(["session", "list", "--status", "running"])
        .args(["--server", &app.endpoint()])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    assert!(lines[0].starts_with(&running.id), "{stdout}");
    assert!(lines[0].contains(" running "), "{stdout}");
    assert!(lines[0].contains(&incident.id), "{stdout}");
    assert!(!stdout.contains(&pending.id), "{stdout}");
}

/// The CLI over TLS: `--server https://…` with `--ca-cert` reaches a `[tls]`
/// server; without the CA it refuses to guess, with the wrong one it fails.
#[tokio::test]
async fn the_cli_talks_to_a_tls_server_with_its_ca() {
    use inquest_tests::tls::{Ca, Files};
    let files = Files::new();
    let ca = Ca::new("cli CA");
    let (cert, key) = ca.leaf();
    let section = inquest_server::edge::tls::TlsSection {
        cert: files.write("server.crt", &cert),
        key: files.write("server.key", &key),
        client_ca: None,
    };
    let app = inquest_tests::spawn_app_with(|c| c.tls = Some(section.clone())).await;
    let ca_file = files.write("ca.crt", &ca.pem);
    let wrong = files.write("wrong.crt", &Ca::new("wrong").pem);
    let server = format!("https://localhost:{}", app.addr.port());
    let run = |ca: Option<std::path::PathBuf>| {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_inquest"));
        cmd.args(["incident", "new", "over tls", "--server", &server])
            .env_remove("INQUEST_CA_CERT");
        if let Some(ca) = ca {
            cmd.arg("--ca-cert").arg(ca);
        }
        cmd.output()
    };
    let ok = run(Some(ca_file)).await.unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(app.count("incidents").await, 1);
    let no_ca = run(None).await.unwrap();
    assert!(!no_ca.status.success());
    assert!(String::from_utf8_lossy(&no_ca.stderr).contains("--ca-cert"));
    let bad = run(Some(wrong)).await.unwrap();
    assert!(!bad.status.success());
    assert_eq!(app.count("incidents").await, 1);
}

/// `inquest token create|list|revoke` against the database, and the client
/// commands with `--token` against a server with `[auth] mode = "required"`.
#[tokio::test]
async fn token_commands_issue_list_and_revoke_what_the_server_checks() {
    let app = inquest_tests::spawn_app_with(|c| {
        c.auth.mode = inquest_server::edge::auth::AuthMode::Required;
    })
    .await;
    let inquest = || tokio::process::Command::new(env!("CARGO_BIN_EXE_inquest"));
    let created = inquest()
        .args(["token", "create", "--tenant", "default", "--role", "viewer"])
        .args([
            "--name",
            "ci",
            "--expires",
            "1d",
            "--database-url",
            &app.db_url,
        ])
        .output()
        .await
        .unwrap();
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let secret = String::from_utf8_lossy(&created.stdout).trim().to_owned();
    assert!(secret.starts_with("inq_"), "{secret}");
    let list = |token: Option<&str>| {
        let mut cmd = inquest();
        cmd.args(["incident", "list", "--server", &app.endpoint()])
            .env_remove("INQUEST_TOKEN");
        if let Some(t) = token {
            cmd.args(["--token", t]);
        }
        cmd.output()
    };
    let ok = list(Some(&secret)).await.unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let refused = list(None).await.unwrap();
    assert!(!refused.status.success());

    let listed = inquest()
        .args(["token", "list", "--database-url", &app.db_url])
        .output()
        .await
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(
        listed.contains("name=ci") && listed.contains("viewer"),
        "{listed}"
    );
    assert!(
        !listed.contains(&secret[37..]),
        "token list shows no secret"
    );
    let id = listed.split_whitespace().next().unwrap().to_owned();
    let revoked = inquest()
        .args(["token", "revoke", &id, "--database-url", &app.db_url])
        .output()
        .await
        .unwrap();
    assert!(
        revoked.status.success(),
        "{}",
        String::from_utf8_lossy(&revoked.stderr)
    );
    let mut refused_after = false;
    for _ in 0..50 {
        if !list(Some(&secret)).await.unwrap().status.success() {
            refused_after = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(refused_after, "a revoked token still works");
}

/// Each thread of process `pid`: (name, nice value), from `/proc`.
fn threads_of(pid: u32) -> Vec<(String, i32)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = task.unwrap().path();
        // The thread may have ended since the listing.
        let (Ok(comm), Ok(stat)) = (
            std::fs::read_to_string(dir.join("comm")),
            std::fs::read_to_string(dir.join("stat")),
        ) else {
            continue;
        };
        out.push((comm.trim().to_owned(), stat_nice(&stat)));
    }
    out
}

/// Field 19 of a `/proc/…/stat` line (the nice value); the name in
/// parentheses may hold spaces, so fields are counted after its `)`.
fn stat_nice(stat: &str) -> i32 {
    let after = &stat[stat.rfind(')').unwrap() + 1..];
    after.split_whitespace().nth(16).unwrap().parse().unwrap()
}

/// PostgreSQL processes whose command line names `data_dir` (the
/// embedded cluster's postmaster, started by `pg_ctl`, is no child of the
/// server): their nice values.
fn postgres_of(data_dir: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let (Ok(cmdline), Ok(stat)) = (
            std::fs::read(entry.path().join("cmdline")),
            std::fs::read_to_string(entry.path().join("stat")),
        ) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if stat.contains("(postgres)") && cmdline.contains(data_dir) {
            out.push(stat_nice(&stat));
        }
    }
    out
}

/// `[runtime] serving_nice` (default 5): once they have served calls, the
/// serving runtime's worker threads run five nice levels below the
/// process, and the agent runtime's threads (bursts) and the embedded
/// PostgreSQL stay at the process's; with `INQUEST_SERVING_NICE=0` no
/// thread is lowered.
#[tokio::test]
async fn serving_threads_yield_to_bursts_and_the_database_does_not() {
    let dir = tempfile::Builder::new()
        .prefix("inquest-nice-")
        .tempdir_in("/tmp")
        .unwrap();
    let data_dir = dir.path().to_str().unwrap().to_owned();
    let server = Server::start(&["--data-dir", &data_dir]).await;
    let pid = server.pid();
    // The main thread (it only drives startup) keeps the process's value.
    let base = stat_nice(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap());
    let lowered = (base + 5).min(19);
    let c = server.client().await;
    let mut threads = Vec::new();
    for round in 0..300 {
        // Calls at once, so every worker wakes to serve some.
        let mut calls = tokio::task::JoinSet::new();
        for i in 0..8 {
            let mut c = c.clone();
            calls.spawn(async move { create_incident(&mut c, &format!("nice {round}.{i}")).await });
        }
        calls.join_all().await;
        threads = threads_of(pid);
        let workers: Vec<i32> = threads
            .iter()
            .filter(|(name, _)| name == "tokio-rt-worker")
            .map(|(_, nice)| *nice)
            .collect();
        if !workers.is_empty() && workers.iter().all(|n| *n == lowered) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let workers = threads.iter().filter(|(name, _)| name == "tokio-rt-worker");
    assert!(
        workers.clone().count() > 0 && workers.clone().all(|(_, n)| *n == lowered),
        "serving workers not at {lowered}: {threads:?}"
    );
    let agents: Vec<_> = threads
        .iter()
        .filter(|(name, _)| name == "inquest-agent")
        .collect();
    assert!(!agents.is_empty(), "no agent runtime threads: {threads:?}");
    assert!(
        agents.iter().all(|(_, n)| *n == base),
        "agent threads lowered: {threads:?}"
    );
    let postgres = postgres_of(&data_dir);
    assert!(
        !postgres.is_empty(),
        "no embedded PostgreSQL under {data_dir}"
    );
    assert!(
        postgres.iter().all(|n| *n == base),
        "the embedded PostgreSQL was lowered: {postgres:?}"
    );
    server.stop().await;

    let database = inquest_tests::fresh_database().await;

    let url = database.url.clone();
    let level = Server::start_with(
        "level",
        &["--database-url", &url],
        &[("INQUEST_SERVING_NICE", "0")],
    )
    .await;
    let mut c = level.client().await;
    for i in 0..16 {
        create_incident(&mut c, &format!("level {i}")).await;
    }
    let threads = threads_of(level.pid());
    assert!(
        threads.iter().all(|(_, n)| *n == base),
        "INQUEST_SERVING_NICE=0 lowered a thread: {threads:?}"
    );
    level.stop().await;
}
