//! Every command the README shows, run as the real `inquest` binary
//! against a real `inquest serve`, the way a newcomer types it: each exits
//! with the documented code, writes its answer to stdout and its notices
//! and errors to stderr, and writes no terminal escape codes into a pipe.
//! Also: tokens on the embedded default (with and without a server on the
//! data directory), a server with no model provider refusing at once, a
//! cancel ending a follow of an idle session, and empty answers said.

mod support;

use std::{path::PathBuf, process::Stdio, time::Duration};

use support::{Server, cli::inquest};

fn example_config() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/checkout-latency/inquest.toml")
        .canonicalize()
        .unwrap()
        .display()
        .to_string()
}

/// The word after `prefix` in `text`'s first line starting with it.
fn field(text: &str, prefix: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no {prefix:?} in {text}"))
        .to_owned()
}

/// `session tokens X in / Y out`, as every command names the session's
/// figures.
fn session_tokens(text: &str) -> String {
    let at = text
        .find("session tokens ")
        .unwrap_or_else(|| panic!("no session tokens in {text}"));
    text[at..].split(" out").next().unwrap().to_owned()
}

#[tokio::test]
async fn every_readme_command_runs_as_documented() {
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    // `inquest migrate --database-url postgres://…` (its log lines are the
    // server's telemetry, checked with `serve`'s).
    let migrate = inquest(&["migrate", "--database-url", &url], &[]).await;
    assert_eq!(migrate.code, Some(0), "{}", migrate.stderr);
    assert!(migrate.stdout.starts_with("applied "), "{}", migrate.stdout);

    let config = example_config();
    let server = Server::start(&["--database-url", &url, "--config", &config]).await;
    let at = format!("http://127.0.0.1:{}", server.port);
    let env = [("INQUEST_SERVER", at.as_str())];
    let mut all_stdout = String::new();

    // investigate: create, start, watch, report.
    let run = inquest(
        &[
            "investigate",
            "checkout p99 > 2s",
            "--description",
            "since the 14:05 deploy",
        ],
        &env,
    )
    .await
    .ok("investigate");
    assert!(
        run.stdout.contains("=== report (burst 1) ==="),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("-- session completed"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains(".. running"),
        "piped: no progress lines"
    );
    assert!(
        !run.stdout.contains("…     assistant"),
        "piped: no streamed text"
    );
    assert_eq!(run.stderr, "", "nothing went wrong: nothing on stderr");
    let investigated = field(&run.stdout, "session  ");
    all_stdout.push_str(&run.stdout);

    // incident new / session start, keyed: the same key, the same session.
    let run = inquest(
        &[
            "incident",
            "new",
            "checkout p99 > 2s",
            "--description",
            "since the 14:05 deploy",
        ],
        &env,
    )
    .await
    .ok("incident new");
    let incident = field(&run.stdout, "incident ");
    let start = [
        "session",
        "start",
        incident.as_str(),
        "Why did latency jump?",
        "--idempotency-key",
        "K-1",
        "--id-only",
    ];
    let session = inquest(&start, &env).await.ok("session start").stdout;
    let session = session.trim().to_owned();
    let again = inquest(&start, &env).await.ok("session start again").stdout;
    assert_eq!(again.trim(), session, "one key, one session");

    // watch: to the burst's end; from a seq; as JSON; a negative cursor is
    // parsed (no `=` needed) and refused by the server.
    let run = inquest(&["watch", &session], &env).await.ok("watch");
    assert!(run.stdout.contains("#1    user"), "{}", run.stdout);
    assert!(
        run.stdout.contains("-- session completed"),
        "{}",
        run.stdout
    );
    all_stdout.push_str(&run.stdout);
    let run = inquest(&["watch", &session, "--after-seq", "1"], &env)
        .await
        .ok("watch --after-seq");
    assert!(!run.stdout.contains("#1    user"), "{}", run.stdout);
    let run = inquest(&["watch", &session, "--json"], &env)
        .await
        .ok("watch --json");
    let objects: Vec<serde_json::Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect();
    assert_eq!(objects.last().unwrap()["type"], "end", "{}", run.stdout);
    let run = inquest(&["watch", &session, "--after-seq", "-1"], &env)
        .await
        .failed("watch --after-seq -1");
    assert!(run.stderr.contains("INVALID"), "{}", run.stderr);

    // send: a follow-up, then its burst.
    let run = inquest(&["send", &session, "And pricing-svc?"], &env)
        .await
        .ok("send");
    assert!(
        run.stdout.contains("user      And pricing-svc?"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("-- session "), "{}", run.stdout);
    all_stdout.push_str(&run.stdout);

    // session get: the session's figures, named as the report names them.
    let get = inquest(&["session", "get", &session], &env)
        .await
        .ok("session get");
    let report = inquest(&["report", &session], &env).await.ok("report");
    assert!(
        report.stdout.contains("=== report (burst 2) ==="),
        "{}",
        report.stdout
    );
    assert_eq!(session_tokens(&get.stdout), session_tokens(&report.stdout));
    assert_eq!(
        session_tokens(&run.stdout),
        session_tokens(&get.stdout),
        "watch's end line and session get"
    );
    all_stdout.push_str(&get.stdout);
    all_stdout.push_str(&report.stdout);
    let run = inquest(&["report", &session, "--burst", "1"], &env)
        .await
        .ok("report --burst 1");
    assert!(
        run.stdout.contains("=== report (burst 1) ==="),
        "{}",
        run.stdout
    );
    let run = inquest(&["report", &session, "--burst", "5"], &env)
        .await
        .failed("report --burst 5");
    assert!(run.stderr.contains("bursts 1 to 2"), "{}", run.stderr);

    // session continue: nothing held, refused with its reason.
    let run = inquest(&["session", "continue", &session], &env)
        .await
        .failed("session continue");
    assert!(run.stderr.contains("NOTHING_TO_CONFIRM"), "{}", run.stderr);

    // Listings: a page, every page, filters; an empty answer said on
    // stderr only.
    let run = inquest(&["incident", "list"], &env)
        .await
        .ok("incident list");
    assert_eq!(run.stdout.lines().count(), 2, "{}", run.stdout);
    let run = inquest(&["incident", "list", "--limit", "1"], &env)
        .await
        .ok("incident list --limit 1");
    assert_eq!(run.stdout.lines().count(), 1, "{}", run.stdout);
    assert!(run.stderr.contains("--all"), "{}", run.stderr);
    let run = inquest(&["incident", "list", "--limit", "1", "--all"], &env)
        .await
        .ok("incident list --all");
    assert_eq!(run.stdout.lines().count(), 2, "{}", run.stdout);
    let run = inquest(
        &[
            "session",
            "list",
            "--incident",
            &incident,
            "--status",
            "idle",
            "--status",
            "completed",
            "--limit",
            "5",
            "--all",
        ],
        &env,
    )
    .await
    .ok("session list --incident --status");
    assert_eq!(run.stdout.lines().count(), 1, "{}", run.stdout);
    assert!(run.stdout.starts_with(&session), "{}", run.stdout);
    let run = inquest(&["session", "list", "--status", "running"], &env)
        .await
        .ok("session list --status running");
    assert_eq!(run.stdout, "", "nothing runs");
    assert!(run.stderr.contains("no sessions match"), "{}", run.stderr);

    // turns: all, and past the head (said on stderr, stdout empty).
    let run = inquest(&["turns", &session], &env).await.ok("turns");
    assert!(run.stdout.starts_with("#1 "), "{}", run.stdout);
    let run = inquest(&["turns", &session, "--after-seq", "99"], &env)
        .await
        .ok("turns --after-seq 99");
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains("no turns after seq 99"),
        "{}",
        run.stderr
    );

    // fork: a new session from the first turns; with a message it runs
    // and is followed; the same key, the same fork.
    let f = inquest(
        &["fork", &session, "--at", "2", "--idempotency-key", "F-1"],
        &env,
    )
    .await
    .ok("fork");
    let forked = f
        .stdout
        .trim()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(
        f.stdout
            .starts_with(&format!("forked session {session} at seq 2 into session ")),
        "{}",
        f.stdout
    );
    let again = inquest(
        &["fork", &session, "--at", "2", "--idempotency-key", "F-1"],
        &env,
    )
    .await
    .ok("fork again");
    assert!(again.stdout.trim().ends_with(&forked), "{}", again.stdout);
    let f = inquest(
        &["fork", &session, "--at", "1", "What about the cache?"],
        &env,
    )
    .await
    .ok("fork with a message");
    assert!(f.stdout.contains("notice"), "{}", f.stdout);
    assert!(
        f.stdout.contains("user      What about the cache?"),
        "{}",
        f.stdout
    );
    assert!(f.stdout.contains("-- session "), "{}", f.stdout);
    let f = inquest(&["fork", &session, "--at", "999"], &env)
        .await
        .failed("fork beyond the head");
    assert!(
        f.stderr.contains("beyond the session's head"),
        "{}",
        f.stderr
    );
    assert!(
        f.stderr.contains("fork with --at 13 or lower"),
        "{}",
        f.stderr
    );
    let get = inquest(&["session", "get", &forked], &env)
        .await
        .ok("session get of a fork");
    assert!(get.stdout.contains(&session), "{}", get.stdout);

    // watch --follow of the idle session ends when it is cancelled.
    let follower = tokio::process::Command::new(env!("CARGO_BIN_EXE_inquest"))
        .args(["watch", "--follow", &session])
        .env("INQUEST_SERVER", &at)
        .env_remove("NO_COLOR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Let it reach the wait between bursts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let run = inquest(&["session", "cancel", &session], &env)
        .await
        .ok("session cancel (idle)");
    assert!(run.stdout.contains("status cancelled"), "{}", run.stdout);
    let out = tokio::time::timeout(Duration::from_secs(30), follower.wait_with_output())
        .await
        .expect("watch --follow did not end with the cancel")
        .unwrap();
    let followed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{followed}");
    assert!(followed.contains("-- session cancelled"), "{followed}");
    assert!(!followed.contains('\x1b'), "{followed:?}");
    // A completed session keeps its outcome: refused, saying why.
    let run = inquest(&["session", "cancel", &investigated], &env)
        .await
        .failed("session cancel (completed)");
    assert!(run.stderr.contains("NOT_CANCELLABLE"), "{}", run.stderr);

    // session delete: the fork goes, a repeat says so, its id is unknown;
    // incident delete takes the incident with its last session.
    let run = inquest(&["session", "delete", &forked], &env)
        .await
        .ok("session delete");
    assert!(run.stdout.contains("deleted (1 session)"), "{}", run.stdout);
    let run = inquest(&["session", "delete", &forked], &env)
        .await
        .ok("session delete again");
    assert!(run.stdout.contains("already deleted"), "{}", run.stdout);
    let run = inquest(&["session", "get", &forked], &env)
        .await
        .failed("session get of a deleted session");
    assert!(run.stderr.contains("SESSION_NOT_FOUND"), "{}", run.stderr);
    let run = inquest(&["incident", "delete", &incident], &env)
        .await
        .ok("incident delete");
    assert!(run.stdout.contains(" sessions)"), "{}", run.stdout);

    // No figure anywhere was a made-up $0.
    assert!(!all_stdout.contains("$0.000000"), "{all_stdout}");
    server.stop().await;
}

/// A server with no `[[providers]]` refuses to start an investigation at
/// once, saying how to configure a provider, instead of storing a session
/// nobody will answer.
#[tokio::test]
async fn without_a_provider_investigate_fails_at_once_and_says_why() {
    let database = inquest_tests::fresh_database().await;
    let server = Server::start(&["--database-url", &database.url]).await;
    let at = format!("http://127.0.0.1:{}", server.port);
    let started = std::time::Instant::now();
    let run = inquest(
        &["investigate", "checkout p99 > 2s"],
        &[("INQUEST_SERVER", &at)],
    )
    .await
    .failed("investigate without a provider");
    assert!(started.elapsed() < Duration::from_secs(20), "it waited");
    assert!(run.stderr.contains("NO_MODEL_PROVIDER"), "{}", run.stderr);
    assert!(run.stderr.contains("[[providers]]"), "{}", run.stderr);
    server.stop().await;
}

/// A server's unreachable address, then the errors of a refused call: each
/// cause said once; a missing token names `--token` and `INQUEST_TOKEN`.
#[tokio::test]
async fn errors_say_each_cause_once() {
    let port = support::free_port();
    let at = format!("http://127.0.0.1:{port}");
    let run = inquest(&["session", "list"], &[("INQUEST_SERVER", &at)])
        .await
        .failed("session list with no server");
    let line = run.stderr.lines().next().unwrap();
    assert!(line.contains("Connection refused"), "{line}");
    let pieces: Vec<&str> = line.trim_start_matches("error: ").split(": ").collect();
    let mut seen = std::collections::HashSet::new();
    for piece in &pieces {
        assert!(seen.insert(*piece), "{piece:?} said twice in {line}");
    }
}

/// `inquest token` on the embedded default: with no server it starts the
/// cluster in --data-dir, makes the token and stops it again; with a
/// server running on that directory it uses that server's cluster. The
/// token then works against an `[auth] mode = "required"` server, and a
/// call without one says how to pass it.
#[tokio::test]
async fn tokens_work_on_the_embedded_default_with_and_without_a_server() {
    let dir = tempfile::Builder::new()
        .prefix("inquest-tokens-")
        .tempdir_in("/tmp")
        .unwrap();
    let data_dir = dir.path().join("data");
    let data_dir = data_dir.to_str().unwrap();
    let pid_file = dir.path().join("data/pgdata/postmaster.pid");

    // No server: started for the command and stopped after it.
    let run = inquest(
        &[
            "token",
            "create",
            "--tenant",
            "default",
            "--role",
            "admin",
            "--data-dir",
            data_dir,
        ],
        &[],
    )
    .await
    .ok("token create without a server");
    let secret = run.stdout.trim().to_owned();
    assert!(
        secret.starts_with("inq_"),
        "the secret on stdout: {}",
        run.stdout
    );
    assert!(run.stderr.contains("shown once"), "{}", run.stderr);
    assert!(
        !pid_file.exists(),
        "the cluster the command started is stopped"
    );

    // A server on that data directory, auth required.
    let config = dir.path().join("auth.toml");
    std::fs::write(&config, "[auth]\nmode = \"required\"\n").unwrap();
    let server =
        Server::start(&["--data-dir", data_dir, "--config", config.to_str().unwrap()]).await;
    let at = format!("http://127.0.0.1:{}", server.port);

    let run = inquest(
        &[
            "token",
            "create",
            "--tenant",
            "default",
            "--role",
            "viewer",
            "--expires",
            "30d",
            "--data-dir",
            data_dir,
        ],
        &[],
    )
    .await
    .ok("token create beside a running server");
    let expiry = run
        .stderr
        .split("expires ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no expiry in {}", run.stderr));
    assert!(
        time::OffsetDateTime::parse(expiry, &time::format_description::well_known::Rfc3339).is_ok()
            && expiry.ends_with('Z')
            && !expiry.contains('.'),
        "RFC 3339 to the second: {expiry}"
    );
    let list = inquest(&["token", "list", "--data-dir", data_dir], &[])
        .await
        .ok("token list");
    assert_eq!(list.stdout.lines().count(), 2, "{}", list.stdout);
    assert!(list.stdout.contains("viewer"), "{}", list.stdout);

    // The admin token works; no token says how to give one.
    let run = inquest(
        &["session", "list", "--status", "running"],
        &[("INQUEST_SERVER", &at), ("INQUEST_TOKEN", &secret)],
    )
    .await
    .ok("session list with INQUEST_TOKEN");
    assert_eq!(run.stdout, "");
    let run = inquest(&["session", "list"], &[("INQUEST_SERVER", &at)])
        .await
        .failed("session list without a token");
    assert!(
        run.stderr.contains("--token") && run.stderr.contains("INQUEST_TOKEN"),
        "{}",
        run.stderr
    );

    let viewer = list
        .stdout
        .lines()
        .find(|l| l.contains("viewer"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_owned();
    let run = inquest(&["token", "revoke", &viewer, "--data-dir", data_dir], &[])
        .await
        .ok("token revoke");
    assert!(run.stdout.contains("revoked"), "{}", run.stdout);
    server.stop().await;
    assert!(!pid_file.exists(), "serve stopped its cluster");
}

/// A model that takes its time (here: its answers held for 6 s): a piped
/// `investigate` says once what it waits for, instead of nothing, and
/// goes on when the answers come.
#[tokio::test]
async fn a_slow_model_is_said_once_in_a_pipe() {
    use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("The pool is exhausted."))
        .reply(FakeReply::text("REPORT: the pool."))
        .hold_answers();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("inquest.toml");
    std::fs::write(&config, support::fake_provider_toml(&fake.base_url())).unwrap();
    let database = inquest_tests::fresh_database().await;
    let server = Server::start(&[
        "--database-url",
        &database.url,
        "--config",
        config.to_str().unwrap(),
    ])
    .await;
    let at = format!("http://127.0.0.1:{}", server.port);
    let run = async { inquest(&["investigate", "slow model"], &[("INQUEST_SERVER", &at)]).await };
    let release = async {
        tokio::time::sleep(Duration::from_secs(6)).await;
        fake.release_answers();
    };
    let (run, ()) = tokio::join!(run, release);
    let run = run.ok("investigate with a slow model");
    assert_eq!(
        run.stdout.matches("(waiting for the model…)").count(),
        1,
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("=== report (burst 1) ==="),
        "{}",
        run.stdout
    );
    server.stop().await;
}

/// `investigate` whose session is cancelled while the model thinks: it
/// ends 0 with the cancelled burst's report, whose cost is unknown (no
/// call was priced, not $0) and whose active time counts the cut call.
#[tokio::test]
async fn a_cancelled_investigation_reports_unknown_cost_and_the_time_it_worked() {
    use inquest_proto::v1 as pb;
    use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("never answered")).hold_answers();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("inquest.toml");
    std::fs::write(
        &config,
        support::fake_provider_toml(&fake.base_url())
            + "price = { input_per_mtok = 3.0, output_per_mtok = 15.0 }\n",
    )
    .unwrap();
    let database = inquest_tests::fresh_database().await;
    let server = Server::start(&[
        "--database-url",
        &database.url,
        "--config",
        config.to_str().unwrap(),
    ])
    .await;
    let at = format!("http://127.0.0.1:{}", server.port);
    let mut c = server.client().await;
    let cancel = async {
        // Once the model call is in flight for a while, cancel.
        while fake.request_count() == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let sessions = c
            .list_sessions(pb::ListSessionsRequest::default())
            .await
            .unwrap()
            .into_inner()
            .sessions;
        c.cancel_session(pb::CancelSessionRequest {
            session_id: sessions[0].id.clone(),
        })
        .await
        .unwrap();
    };
    let env = [("INQUEST_SERVER", at.as_str())];
    let (run, ()) = tokio::join!(inquest(&["investigate", "cancelled"], &env), cancel);
    let run = run.ok("investigate, cancelled");
    assert!(
        run.stdout.contains("-- session cancelled"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("exit reason: cancelled"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("cost unknown"), "{}", run.stdout);
    assert!(!run.stdout.contains("$0.000000"), "{}", run.stdout);
    let active = run
        .stdout
        .split("active time ")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .unwrap_or_default()
        .to_owned();
    assert!(
        active.ends_with(" s") && active != "0.0 s",
        "active time {active:?}"
    );
    fake.release_answers();
    server.stop().await;
}

/// `inquest webhook create|list|deliveries|delete` with an admin token: the
/// secret is printed by `create` only (never by `list`, never in the
/// server's log), a viewer is refused, a delete twice is fine and the list
/// is empty after it.
#[tokio::test]
async fn webhooks_are_made_listed_and_deleted_from_the_cli() {
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    let dir = tempfile::Builder::new()
        .prefix("inquest-webhooks-")
        .tempdir_in("/tmp")
        .unwrap();
    let config = dir.path().join("webhooks.toml");
    // A receiver address on loopback (nothing listens on port 9; nothing
    // is delivered in this test), allowed for it.
    std::fs::write(
        &config,
        "[auth]\nmode = \"required\"\n\n[webhooks]\nallow_private_targets = true\nallow_http = true\n",
    )
    .unwrap();
    let server =
        Server::start(&["--database-url", &url, "--config", config.to_str().unwrap()]).await;
    let at = format!("http://127.0.0.1:{}", server.port);
    let token = |role: &'static str| {
        let url = url.clone();
        async move {
            inquest(
                &[
                    "token",
                    "create",
                    "--tenant",
                    "default",
                    "--role",
                    role,
                    "--database-url",
                    &url,
                ],
                &[],
            )
            .await
            .ok("token create")
            .stdout
            .trim()
            .to_owned()
        }
    };
    let admin = token("admin").await;
    let viewer = token("viewer").await;
    let as_admin = [
        ("INQUEST_SERVER", at.as_str()),
        ("INQUEST_TOKEN", admin.as_str()),
    ];

    let run = inquest(
        &[
            "webhook",
            "create",
            "https://127.0.0.1:9/hook",
            "--event-type",
            "report.ready",
            "--description",
            "on call",
        ],
        &as_admin,
    )
    .await
    .ok("webhook create");
    let id = field(&run.stdout, "webhook ");
    let secret = field(&run.stdout, "secret ");
    assert!(secret.starts_with("whsec_"), "{}", run.stdout);
    assert!(run.stderr.contains("shown this once"), "{}", run.stderr);

    let run = inquest(&["webhook", "list"], &as_admin)
        .await
        .ok("webhook list");
    assert!(run.stdout.starts_with(&id), "{}", run.stdout);
    assert!(
        run.stdout.contains("https://127.0.0.1:9/hook"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("report.ready"), "{}", run.stdout);
    assert!(!run.stdout.contains(&secret), "list never shows the secret");

    let run = inquest(&["webhook", "deliveries", &id], &as_admin)
        .await
        .ok("webhook deliveries");
    assert_eq!(run.stdout, "");
    assert!(run.stderr.contains("no deliveries"), "{}", run.stderr);

    let refused = inquest(
        &["webhook", "create", "https://127.0.0.1:9/other"],
        &[
            ("INQUEST_SERVER", at.as_str()),
            ("INQUEST_TOKEN", viewer.as_str()),
        ],
    )
    .await
    .failed("webhook create as a viewer");
    assert!(
        refused.stderr.to_lowercase().contains("permission"),
        "{}",
        refused.stderr
    );

    let run = inquest(&["webhook", "delete", &id], &as_admin)
        .await
        .ok("webhook delete");
    assert!(run.stdout.contains("deleted"), "{}", run.stdout);
    let run = inquest(&["webhook", "delete", &id], &as_admin)
        .await
        .ok("webhook delete again");
    assert!(run.stdout.contains("deleted already"), "{}", run.stdout);
    let run = inquest(&["webhook", "list"], &as_admin)
        .await
        .ok("webhook list after the delete");
    assert_eq!(run.stdout, "");
    assert!(
        server.lines().iter().all(|l| !l.contains(&secret)),
        "the secret reached the server's log"
    );
    drop(server);
}
