//! Alerts in: Debian's `prometheus-alertmanager` (a real process) sends its
//! webhook to the real server; the alerts are posted to Alertmanager's own
//! API, never to Inquest by hand. Then the hostile payloads, sent directly:
//! each gets its status and writes nothing.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use inquest_auth::Role;
use inquest_core::Tenant;
use inquest_proto::v1 as pb;
use inquest_server::{alerts::config::Trigger, edge::auth::AuthMode};
use inquest_tests::{TestApp, spawn_app_with};
use serde_json::{Value, json};
use tonic::{Request, metadata::MetadataValue};

const ALERTMANAGER: &str = "/usr/bin/prometheus-alertmanager";
const WAIT: Duration = Duration::from_secs(40);

fn trigger() -> Trigger {
    Trigger {
        matches: [("severity".to_owned(), "critical".to_owned())].into(),
        match_re: Default::default(),
        prompt: "Investigate {{label.alertname}}: {{annotation.summary}}\n{{alerts}}".into(),
        on_resolved: Default::default(),
        skills: None,
    }
}

async fn spawn_with_auth(tweak: impl FnOnce(&mut inquest_server::config::Config)) -> TestApp {
    spawn_app_with(|c| {
        c.auth.mode = AuthMode::Required;
        c.alerts.triggers = vec![trigger()];
        tweak(c);
    })
    .await
}

async fn token(app: &TestApp, tenant: &str, role: Role) -> String {
    app.store
        .create_token(
            &format!("{tenant}-{role}"),
            &Tenant::parse(tenant).unwrap(),
            role,
            None,
        )
        .await
        .unwrap()
        .secret
}

fn with<T>(message: T, token: &str) -> Request<T> {
    let mut request = Request::new(message);
    let value: MetadataValue<_> = format!("Bearer {token}").parse().unwrap();
    request.metadata_mut().insert("authorization", value);
    request
}

/// A plain-HTTP client (loopback only; rustls needs a provider chosen).
fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// A free loopback port (bound and released; Alertmanager takes it next).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Alertmanager as a child process, killed when dropped.
struct Alertmanager {
    url: String,
    _child: tokio::process::Child,
    dir: PathBuf,
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Alertmanager {
    /// Starts it with one webhook receiver pointed at `app` with `token`;
    /// groups by `alertname`, waits 1 s, repeats an unchanged group every
    /// 2 s. Fails (does not skip) when the binary is missing.
    async fn start(app: &TestApp, token: &str) -> Self {
        assert!(
            Path::new(ALERTMANAGER).exists(),
            "{ALERTMANAGER} is missing: apt-get install -y prometheus-alertmanager (cargo xtask test installs it)"
        );
        let dir = std::env::temp_dir().join(format!(
            "inquest-alertmanager-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let config = format!(
            "route:\n  receiver: inquest\n  group_by: [alertname]\n  group_wait: 1s\n  \
             group_interval: 1s\n  repeat_interval: 2s\nreceivers:\n- name: inquest\n  \
             webhook_configs:\n  - url: http://{}/v1/alerts/alertmanager\n    send_resolved: true\n    \
             http_config:\n      authorization:\n        type: Bearer\n        credentials: {token}\n",
            app.addr
        );
        std::fs::write(dir.join("alertmanager.yml"), config).unwrap();
        let port = free_port();
        let child = tokio::process::Command::new(ALERTMANAGER)
            .arg(format!(
                "--config.file={}",
                dir.join("alertmanager.yml").display()
            ))
            .arg(format!("--storage.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("starting prometheus-alertmanager");
        let am = Self {
            url: format!("http://127.0.0.1:{port}"),
            _child: child,
            dir,
        };
        let http = http();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let ready = http.get(format!("{}/-/ready", am.url)).send().await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                return am;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "alertmanager did not get ready"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `POST /api/v2/alerts`.
    async fn post(&self, alerts: Value) {
        let status = http()
            .post(format!("{}/api/v2/alerts", self.url))
            .json(&alerts)
            .send()
            .await
            .unwrap()
            .status();
        assert!(
            status.is_success(),
            "alertmanager refused the alerts: {status}"
        );
    }

    /// Webhook notifications it has tried to send (its own metric).
    async fn notifications(&self) -> (u64, u64) {
        let text = http()
            .get(format!("{}/metrics", self.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let read = |name: &str| {
            text.lines()
                .filter(|l| l.starts_with(name) && l.contains("integration=\"webhook\""))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>() as u64
        };
        (
            read("alertmanager_notifications_total"),
            read("alertmanager_notifications_failed_total"),
        )
    }
}

fn alert(name: &str, instance: &str, severity: &str, resolved: bool) -> Value {
    let now = time::OffsetDateTime::now_utc();
    let fmt = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    let mut a = json!({
        "labels": {"alertname": name, "instance": instance, "severity": severity},
        "annotations": {"summary": format!("{name} is bad")},
        "generatorURL": "http://prometheus.test/graph",
        "startsAt": fmt(now - Duration::from_secs(60)),
    });
    if resolved {
        a["endsAt"] = fmt(now - Duration::from_secs(1)).into();
    }
    a
}

/// Polls `check` until it holds, for at most [`WAIT`].
async fn until<F: AsyncFnMut() -> bool>(what: &str, mut check: F) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn incidents(app: &TestApp, token: &str) -> Vec<pb::Incident> {
    app.client()
        .await
        .list_incidents(with(pb::ListIncidentsRequest::default(), token))
        .await
        .unwrap()
        .into_inner()
        .incidents
}

async fn sessions_of(app: &TestApp, token: &str, incident: &str) -> Vec<pb::Session> {
    app.client()
        .await
        .list_sessions(with(
            pb::ListSessionsRequest {
                incident_id: incident.to_owned(),
                ..Default::default()
            },
            token,
        ))
        .await
        .unwrap()
        .into_inner()
        .sessions
}

async fn origin(app: &TestApp, token: &str, incident: &str) -> pb::AlertOrigin {
    app.client()
        .await
        .get_incident(with(
            pb::GetIncidentRequest {
                incident_id: incident.to_owned(),
            },
            token,
        ))
        .await
        .unwrap()
        .into_inner()
        .alert_origin
        .expect("an incident an alert group made has its origin")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alertmanager_groups_become_incidents_and_a_trigger_starts_one_session() {
    let app = spawn_with_auth(|_| {}).await;
    let operator = token(&app, "acme", Role::Operator).await;
    let am = Alertmanager::start(&app, &operator).await;
    am.post(json!([
        alert("HighLatency", "a:1", "critical", false),
        alert("HighLatency", "b:1", "critical", false),
        alert("DiskFull", "c:1", "warning", false),
    ]))
    .await;

    // One incident per group.
    until("two incidents", async || app.count("incidents").await == 2).await;
    let all = incidents(&app, &operator).await;
    let latency = all
        .iter()
        .find(|i| i.title == "HighLatency is bad")
        .expect("the group's common summary is its title");
    let disk = all
        .iter()
        .find(|i| i.title == "DiskFull is bad")
        .expect("the other group");
    assert!(
        latency.description.contains("<alerts>"),
        "{}",
        latency.description
    );
    until("both latency alerts recorded", async || {
        origin(&app, &operator, &latency.id).await.events.len() == 2
    })
    .await;
    let o = origin(&app, &operator, &latency.id).await;
    assert_eq!(o.source, "alertmanager");
    assert_eq!(o.receiver, "inquest");
    assert!(o.external_url.starts_with("http"), "{}", o.external_url);
    assert!(
        o.events
            .iter()
            .all(|e| e.firing && e.labels["alertname"] == "HighLatency")
    );

    // The critical group matched the trigger: one session, opened with the
    // prompt; the warning group matched none.
    let sessions = sessions_of(&app, &operator, &latency.id).await;
    assert_eq!(sessions.len(), 1);
    let turns = app
        .client()
        .await
        .list_turns(with(
            pb::ListTurnsRequest {
                session_id: sessions[0].id.clone(),
                ..Default::default()
            },
            &operator,
        ))
        .await
        .unwrap()
        .into_inner()
        .turns;
    assert!(
        turns[0]
            .content
            .starts_with("Investigate HighLatency: HighLatency is bad\n<alerts>"),
        "{}",
        turns[0].content
    );
    assert!(sessions_of(&app, &operator, &disk.id).await.is_empty());

    // Alertmanager repeats the unchanged groups (repeat_interval 2 s):
    // delivered, and nothing new written.
    let written = (
        app.count("incidents").await,
        app.count("alert_events").await,
        app.count("sessions").await,
        app.count("turns").await,
    );
    let (sent, _) = am.notifications().await;
    until("two repeats per group delivered", async || {
        am.notifications().await.0 >= sent + 4
    })
    .await;
    assert_eq!(am.notifications().await.1, 0, "no notification failed");
    assert_eq!(
        written,
        (
            app.count("incidents").await,
            app.count("alert_events").await,
            app.count("sessions").await,
            app.count("turns").await,
        ),
        "a repeat writes nothing"
    );

    // A change is recorded: one alert resolves, another fires; still one
    // incident and one session.
    am.post(json!([
        alert("HighLatency", "b:1", "critical", true),
        alert("HighLatency", "d:1", "critical", false),
    ]))
    .await;
    until("the resolution and the new alert recorded", async || {
        origin(&app, &operator, &latency.id).await.events_total == 4
    })
    .await;
    let o = origin(&app, &operator, &latency.id).await;
    let instance = |e: &pb::AlertEvent| e.labels["instance"].clone();
    let resolved: Vec<_> = o
        .events
        .iter()
        .filter(|e| !e.firing)
        .map(instance)
        .collect();
    assert_eq!(resolved, ["b:1"]);
    assert!(o.events.iter().any(|e| e.firing && instance(e) == "d:1"));
    assert!(o.events.iter().all(|e| e.received_at.is_some()));
    assert!(
        o.events
            .iter()
            .filter(|e| !e.firing)
            .all(|e| e.ends_at.is_some())
    );
    assert_eq!(app.count("incidents").await, 2);
    assert_eq!(sessions_of(&app, &operator, &latency.id).await.len(), 1);
    drop(am);
    app.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alertmanager_retries_while_inquest_is_down_make_one_incident() {
    let mut app = spawn_with_auth(|_| {}).await;
    let operator = token(&app, "acme", Role::Operator).await;
    let am = Alertmanager::start(&app, &operator).await;
    let (addr, db) = (
        app.addr,
        app.take_database().expect("the app's own database"),
    );
    app.stop().await.unwrap();

    // Inquest is down: Alertmanager's webhook fails, and it keeps trying.
    am.post(json!([alert("Outage", "a:1", "critical", false)]))
        .await;
    until("a failed delivery", async || {
        am.notifications().await.1 >= 1
    })
    .await;

    // Back on the same address and database: the retries land once.
    let app = inquest_tests::spawn_app_on(db.name.clone(), db.url.clone(), |c| {
        c.listen = addr;
        c.auth.mode = AuthMode::Required;
        c.alerts.triggers = vec![trigger()];
    })
    .await;
    until("the incident", async || app.count("incidents").await == 1).await;
    let (sent, _) = am.notifications().await;
    until("more deliveries", async || {
        am.notifications().await.0 >= sent + 2
    })
    .await;
    assert_eq!(app.count("incidents").await, 1, "no duplicate incident");
    assert_eq!(app.count("sessions").await, 1, "one trigger session");
    assert_eq!(app.count("alert_events").await, 1);
    drop(am);
    app.stop().await.unwrap();
    drop(db);
}

/// A notification sent directly, as a hostile sender would.
async fn send(app: &TestApp, token: Option<&str>, body: impl Into<reqwest::Body>) -> (u16, Value) {
    send_to(app.addr, token, body).await
}

async fn send_to(
    addr: std::net::SocketAddr,
    token: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> (u16, Value) {
    let mut request = http()
        .post(format!("http://{addr}/v1/alerts/alertmanager"))
        .header("content-type", "application/json")
        .body(body);
    if let Some(t) = token {
        request = request.header("authorization", format!("Bearer {t}"));
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// Announces a body of `length` bytes, sends 1 KiB of it, and returns
/// what the server answered.
async fn announce_oversized(app: &TestApp, token: &str, length: usize) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let head = format!(
        "POST /v1/alerts/alertmanager HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&[b' '; 1024]).await.unwrap();
    let mut answer = vec![0; 4096];
    let n = tokio::time::timeout(WAIT, stream.read(&mut answer))
        .await
        .expect("an answer before the body")
        .unwrap();
    String::from_utf8_lossy(&answer[..n]).into_owned()
}

fn payload(group_key: &str, alerts: Vec<Value>) -> String {
    json!({
        "version": "4", "groupKey": group_key, "status": "firing", "receiver": "inquest",
        "externalURL": "http://am.test", "groupLabels": {}, "commonLabels": {},
        "commonAnnotations": {}, "alerts": alerts,
    })
    .to_string()
}

fn raw_alert(fingerprint: &str, severity: &str) -> Value {
    json!({
        "status": "firing", "fingerprint": fingerprint,
        "labels": {"alertname": "Raw", "severity": severity},
        "annotations": {}, "startsAt": "2026-01-01T00:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
    })
}

async fn written(app: &TestApp) -> [i64; 5] {
    [
        app.count("incidents").await,
        app.count("alert_groups").await,
        app.count("alert_states").await,
        app.count("alert_events").await,
        app.count("sessions").await,
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_notifications_get_their_status_and_write_nothing() {
    let app = spawn_with_auth(|c| {
        c.alerts.max_body_bytes = 4 * 1024 * 1024;
        c.alerts.max_alerts = 100;
    })
    .await;
    let acme = token(&app, "acme", Role::Operator).await;
    let viewer = token(&app, "acme", Role::Viewer).await;
    let ok = payload("{}:{alertname=\"Raw\"}", vec![raw_alert("f1", "warning")]);
    let many: Vec<Value> = (0..10_000)
        .map(|i| raw_alert(&format!("f{i}"), "x"))
        .collect();
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    // (what, token, body, status, the field the error names)
    type Case<'a> = (&'a str, Option<&'a str>, Vec<u8>, u16, Option<&'a str>);
    let cases: Vec<Case> = vec![
        ("no token", None, ok.clone().into(), 401, None),
        (
            "a bogus token",
            Some("inq_nope"),
            ok.clone().into(),
            401,
            None,
        ),
        ("a viewer", Some(&viewer), ok.clone().into(), 403, None),
        (
            "10,000 alerts",
            Some(&acme),
            payload("k", many).into(),
            413,
            Some("alerts"),
        ),
        (
            "malformed JSON",
            Some(&acme),
            b"{\"groupKey\": ".to_vec(),
            400,
            None,
        ),
        ("deep JSON", Some(&acme), deep.into(), 400, None),
        (
            "invalid UTF-8",
            Some(&acme),
            b"{\"groupKey\":\"\xff\"}".to_vec(),
            400,
            None,
        ),
        (
            "NUL in the groupKey",
            Some(&acme),
            payload("a\u{0}b", vec![raw_alert("f1", "x")]).into(),
            400,
            Some("groupKey"),
        ),
        (
            "a bad time",
            Some(&acme),
            payload(
                "k",
                vec![json!({"status": "firing", "fingerprint": "f", "startsAt": "soon"})],
            )
            .into(),
            400,
            Some("alerts[0].startsAt"),
        ),
    ];
    for (what, token, body, want, field) in cases {
        let (status, answer) = send(&app, token, body).await;
        assert_eq!(status, want, "{what}: {answer}");
        assert!(
            answer["error"].is_string(),
            "{what}: a JSON error: {answer}"
        );
        if let Some(field) = field {
            assert_eq!(answer["field"], field, "{what}: {answer}");
        }
        assert_eq!(written(&app).await, [0; 5], "{what}: nothing written");
    }

    // Oversized: refused on its declared length, before the body is read
    // (a client that insists on writing it all finds the connection shut).
    let head = announce_oversized(&app, &acme, 4 * 1024 * 1024 + 1).await;
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    assert!(head.contains("max_body_bytes"), "{head}");
    assert_eq!(written(&app).await, [0; 5], "oversized: nothing written");

    // NUL inside label and annotation values is text like any other:
    // stored and given back exactly.
    let mut nul = raw_alert("f1", "critical");
    nul["annotations"]["summary"] = "disk\u{0}full".into();
    let body = json!({
        "groupKey": "g-nul", "status": "firing", "commonAnnotations": {"summary": "disk\u{0}full"},
        "alerts": [nul],
    })
    .to_string();
    let (status, answer) = send(&app, Some(&acme), body).await;
    assert_eq!(status, 200, "{answer}");
    let id = answer["incident_id"].as_str().unwrap().to_owned();
    let got = app
        .client()
        .await
        .get_incident(with(
            pb::GetIncidentRequest {
                incident_id: id.clone(),
            },
            &acme,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.title, "disk\u{0}full");

    // A foreign tenant's notification with the same groupKey makes its
    // own incident; acme's is untouched, and hidden from globex.
    let globex = token(&app, "globex", Role::Operator).await;
    let before = origin(&app, &acme, &id).await;
    let foreign = json!({
        "groupKey": "g-nul", "status": "firing",
        "alerts": [raw_alert("f1", "warning"), raw_alert("f2", "warning")],
    })
    .to_string();
    let (status, answer) = send(&app, Some(&globex), foreign).await;
    assert_eq!(status, 200, "{answer}");
    assert_ne!(answer["incident_id"].as_str(), Some(id.as_str()));
    assert_eq!(answer["created"], true);
    assert_eq!(
        origin(&app, &acme, &id).await,
        before,
        "acme's incident untouched"
    );
    let hidden = app
        .client()
        .await
        .get_incident(with(
            pb::GetIncidentRequest {
                incident_id: id.clone(),
            },
            &globex,
        ))
        .await
        .unwrap_err();
    assert_eq!(hidden.code(), tonic::Code::NotFound);
    app.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_retries_make_one_incident_and_one_session() {
    let app = spawn_with_auth(|_| {}).await;
    let acme = token(&app, "acme", Role::Operator).await;
    let body = payload(
        "k-race",
        vec![raw_alert("f1", "critical"), raw_alert("f2", "critical")],
    );
    let mut sends = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (addr, token, body) = (app.addr, acme.clone(), body.clone());
        sends.spawn(async move { send_to(addr, Some(&token), body).await });
    }
    let answers = sends.join_all().await;
    for (status, answer) in &answers {
        assert_eq!(*status, 200, "{answer}");
    }
    let ids: std::collections::BTreeSet<_> = answers
        .iter()
        .map(|(_, a)| a["incident_id"].to_string())
        .collect();
    let sessions: std::collections::BTreeSet<_> = answers
        .iter()
        .map(|(_, a)| a["session_id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(ids.len(), 1, "{answers:?}");
    assert_eq!(sessions.len(), 1, "{answers:?}");
    assert!(
        sessions.iter().all(Option::is_some),
        "a session started: {answers:?}"
    );
    assert_eq!(
        answers.iter().filter(|(_, a)| a["created"] == true).count(),
        1
    );
    assert_eq!(written(&app).await, [1, 1, 2, 2, 1]);
    // The audit trail has what the token made, once each.
    let client = inquest_tests::connect(&app.db_url).await;
    let methods: Vec<String> = client
        .query("SELECT method FROM audit_events ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        methods,
        ["Alertmanager/CreateIncident", "Alertmanager/StartSession"]
    );
    app.stop().await.unwrap();
}

/// A storm: 12 distinct groups at once, from two tenants, past a cap of 3
/// per hour for acme and 1 for globex (its override). Every group is an
/// incident; only the cap's worth start sessions; the others say why,
/// and a later notification of a capped group does not pass the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_groups_starts_at_most_the_cap_and_the_rest_say_why() {
    let app = spawn_with_auth(|c| {
        c.alerts.max_started_per_hour = 3;
        c.tenants.overrides.insert(
            "globex".into(),
            inquest_server::config::tenants::LimitsEntry {
                alerts_max_started_per_hour: Some(1),
                ..Default::default()
            },
        );
    })
    .await;
    let acme = token(&app, "acme", Role::Operator).await;
    let globex = token(&app, "globex", Role::Operator).await;
    let mut sends = tokio::task::JoinSet::new();
    for i in 0..12 {
        let token = if i % 3 == 2 {
            globex.clone()
        } else {
            acme.clone()
        };
        let (addr, body) = (
            app.addr,
            payload(
                &format!("storm-{i}"),
                vec![raw_alert(&format!("f{i}"), "critical")],
            ),
        );
        sends.spawn(async move { send_to(addr, Some(&token), body).await });
    }
    for (status, answer) in sends.join_all().await {
        assert_eq!(status, 200, "{answer}");
    }
    for (token, cap, groups) in [(&acme, 3, 8), (&globex, 1, 4)] {
        let listed = incidents(&app, token).await;
        assert_eq!(listed.len(), groups, "every group is an incident");
        let (mut started, mut skipped) = (0, 0);
        for incident in &listed {
            let sessions = sessions_of(&app, token, &incident.id).await;
            let why = origin(&app, token, &incident.id).await.session_skipped;
            match sessions.len() {
                1 => {
                    started += 1;
                    assert!(why.is_empty(), "{why}");
                }
                0 => {
                    skipped += 1;
                    assert!(why.contains("alerts.max_started_per_hour"), "{why:?}");
                    assert!(why.contains(&format!("is {cap}")), "{why}");
                }
                n => panic!("{n} sessions for one group"),
            }
        }
        assert_eq!((started, skipped), (cap, groups - cap));
    }
    // A capped group's next notification (a new alert) still finds the
    // hour full: nothing more starts.
    let (status, answer) = send(
        &app,
        Some(&globex),
        payload(
            "storm-2",
            vec![raw_alert("f2", "critical"), raw_alert("f2b", "critical")],
        ),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(app.count("sessions").await, 4);
    app.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_answers_503_and_the_retry_stores_it() {
    let app = spawn_with_auth(|c| c.store.op_timeout = Duration::from_secs(2)).await;
    let acme = token(&app, "acme", Role::Operator).await;
    let body = payload("k-down", vec![raw_alert("f1", "warning")]);
    // The token is verified once while the database is up (then cached).
    assert_eq!(
        send(
            &app,
            Some(&acme),
            payload("warm", vec![raw_alert("w", "x")])
        )
        .await
        .0,
        200
    );
    app.take_database_down().await;
    let (status, answer) = send(&app, Some(&acme), body.clone()).await;
    assert_eq!(status, 503, "{answer}");
    app.bring_database_up().await;
    let mut stored = None;
    for _ in 0..100 {
        let (status, answer) = send(&app, Some(&acme), body.clone()).await;
        if status == 200 {
            stored = Some(answer);
            break;
        }
        assert_eq!(status, 503, "{answer}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stored = stored.expect("stored once the database is back");
    assert_eq!(stored["created"], true);
    assert_eq!(app.count("incidents").await, 2);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn without_authentication_loopback_senders_are_the_default_tenant() {
    let app = spawn_app_with(|_| {}).await;
    let (status, answer) = send(&app, None, payload("k", vec![raw_alert("f1", "x")])).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["session_id"], Value::Null, "no trigger configured");
    let (status, _) = send(&app, None, payload("k", vec![raw_alert("f1", "x")])).await;
    assert_eq!(status, 200);
    assert_eq!(
        written(&app).await,
        [1, 1, 1, 1, 0],
        "the repeat wrote nothing"
    );
    app.stop().await.unwrap();
}

async fn turns_of(app: &TestApp, token: &str, session: &str) -> Vec<pb::SessionTurn> {
    app.client()
        .await
        .list_turns(with(
            pb::ListTurnsRequest {
                session_id: session.to_owned(),
                after_seq: 0,
                before_seq: 0,
                limit: 1000,
            },
            token,
        ))
        .await
        .unwrap()
        .into_inner()
        .turns
}

async fn status_of(app: &TestApp, token: &str, session: &str) -> pb::SessionStatus {
    app.client()
        .await
        .get_session(with(
            pb::GetSessionRequest {
                session_id: session.to_owned(),
            },
            token,
        ))
        .await
        .unwrap()
        .into_inner()
        .status()
}

fn of_role(turns: &[pb::SessionTurn], role: pb::TurnRole) -> Vec<String> {
    turns
        .iter()
        .filter(|t| t.role() == role)
        .map(|t| t.content.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_alert_follows_up_once_and_resolution_leaves_a_notice() {
    use crate::agent_support::provider;
    use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    for i in 0..8 {
        fake.reply(FakeReply::text(&format!("S{i}")));
    }
    let entry = provider(&fake, Flavor::OpenAi, "fake");
    let app = spawn_with_auth(|c| c.providers = vec![entry]).await;
    let operator = token(&app, "acme", Role::Operator).await;
    let am = Alertmanager::start(&app, &operator).await;
    let settled = [pb::SessionStatus::Idle, pb::SessionStatus::Completed];

    am.post(json!([alert("HighLatency", "a:1", "critical", false)]))
        .await;
    until("the trigger's session", async || {
        app.count("sessions").await == 1
    })
    .await;
    let incident = incidents(&app, &operator).await.remove(0).id;
    let session = sessions_of(&app, &operator, &incident).await.remove(0).id;
    until("the first burst ends", async || {
        settled.contains(&status_of(&app, &operator, &session).await)
    })
    .await;
    assert_eq!(
        of_role(
            &turns_of(&app, &operator, &session).await,
            pb::TurnRole::User
        )
        .len(),
        1
    );

    // A second alert of the group: one follow-up saying what changed, and
    // its burst runs.
    am.post(json!([alert("HighLatency", "b:1", "critical", false)]))
        .await;
    until("the follow-up", async || {
        of_role(
            &turns_of(&app, &operator, &session).await,
            pb::TurnRole::User,
        )
        .len()
            == 2
    })
    .await;
    let users = of_role(
        &turns_of(&app, &operator, &session).await,
        pb::TurnRole::User,
    );
    assert!(
        users[1].starts_with("The alert group changed: 1 alert(s) firing anew, 0 resolved."),
        "{}",
        users[1]
    );
    assert!(users[1].contains("instance=b:1"), "{}", users[1]);
    assert!(!users[1].contains("instance=a:1"), "{}", users[1]);
    until("the follow-up's burst ends", async || {
        settled.contains(&status_of(&app, &operator, &session).await)
    })
    .await;

    // Alertmanager sends the unchanged group again and again
    // (repeat_interval 2 s): still one follow-up.
    let (sent, _) = am.notifications().await;
    until("repeats delivered", async || {
        am.notifications().await.0 >= sent + 2
    })
    .await;
    assert_eq!(am.notifications().await.1, 0, "no notification failed");
    let turns = turns_of(&app, &operator, &session).await;
    assert_eq!(
        of_role(&turns, pb::TurnRole::User).len(),
        2,
        "one follow-up"
    );
    assert!(
        origin(&app, &operator, &incident)
            .await
            .resolved_at
            .is_none()
    );

    // Every alert resolves: a notice, resolved_at, and no new burst.
    let requests = fake.request_count();
    am.post(json!([
        alert("HighLatency", "a:1", "critical", true),
        alert("HighLatency", "b:1", "critical", true),
    ]))
    .await;
    until("resolved_at", async || {
        origin(&app, &operator, &incident)
            .await
            .resolved_at
            .is_some()
    })
    .await;
    let turns = turns_of(&app, &operator, &session).await;
    let notices = of_role(&turns, pb::TurnRole::Notice);
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(
        notices[0].starts_with("Every alert of the group has resolved (2 resolved"),
        "{}",
        notices[0]
    );
    assert_eq!(
        of_role(&turns, pb::TurnRole::User).len(),
        2,
        "no new message"
    );
    assert!(settled.contains(&status_of(&app, &operator, &session).await));
    // Alertmanager flushes a resolved group rather than repeating it:
    // wait past a repeat interval and check that nothing more is written.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(am.notifications().await.1, 0, "no notification failed");
    let again = turns_of(&app, &operator, &session).await;
    assert_eq!(again.len(), turns.len(), "a repeat writes no turn");
    assert_eq!(fake.request_count(), requests, "no burst");
    assert_eq!(app.count("sessions").await, 1);
    drop(am);
    app.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_during_a_burst_wait_and_are_sent_together_when_it_ends() {
    use crate::agent_support::provider;
    use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    for i in 0..8 {
        fake.reply(FakeReply::text(&format!("S{i}")));
    }
    fake.hold_answers();
    let entry = provider(&fake, Flavor::OpenAi, "fake");
    let app = spawn_with_auth(|c| c.providers = vec![entry]).await;
    let operator = token(&app, "acme", Role::Operator).await;
    let am = Alertmanager::start(&app, &operator).await;

    am.post(json!([alert("HighLatency", "a:1", "critical", false)]))
        .await;
    until("the first burst asks the model", async || {
        fake.request_count() >= 1
    })
    .await;
    let incident = incidents(&app, &operator).await.remove(0).id;
    let session = sessions_of(&app, &operator, &incident).await.remove(0).id;
    assert_eq!(
        status_of(&app, &operator, &session).await,
        pb::SessionStatus::Running
    );

    // Two changes while the burst runs: recorded, and no message yet.
    am.post(json!([alert("HighLatency", "b:1", "critical", false)]))
        .await;
    until("b recorded", async || {
        origin(&app, &operator, &incident).await.events_total == 2
    })
    .await;
    am.post(json!([alert("HighLatency", "c:1", "critical", false)]))
        .await;
    until("c recorded", async || {
        origin(&app, &operator, &incident).await.events_total == 3
    })
    .await;
    // A sweep or two pass while the burst still runs.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        status_of(&app, &operator, &session).await,
        pb::SessionStatus::Running
    );
    let users = of_role(
        &turns_of(&app, &operator, &session).await,
        pb::TurnRole::User,
    );
    assert_eq!(users.len(), 1, "nothing sent during the burst: {users:?}");

    // The burst ends: both changes arrive, in one follow-up, once.
    fake.release_answers();
    until("the waiting follow-up", async || {
        of_role(
            &turns_of(&app, &operator, &session).await,
            pb::TurnRole::User,
        )
        .len()
            >= 2
    })
    .await;
    let settled = [pb::SessionStatus::Idle, pb::SessionStatus::Completed];
    until("the follow-up's burst ends", async || {
        settled.contains(&status_of(&app, &operator, &session).await)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let users = of_role(
        &turns_of(&app, &operator, &session).await,
        pb::TurnRole::User,
    );
    assert_eq!(users.len(), 2, "one follow-up: {users:?}");
    assert!(users[1].contains("instance=b:1"), "{}", users[1]);
    assert!(users[1].contains("instance=c:1"), "{}", users[1]);
    assert!(!users[1].contains("instance=a:1"), "{}", users[1]);
    assert_eq!(am.notifications().await.1, 0, "no notification failed");
    drop(am);
    app.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_change_survives_a_restart_and_is_sent_after_the_recovered_burst() {
    use crate::agent_support::provider;
    use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    for i in 0..8 {
        fake.reply(FakeReply::text(&format!("S{i}")));
    }
    fake.hold_answers();
    let entry = provider(&fake, Flavor::OpenAi, "fake");
    let configure = move |c: &mut inquest_server::config::Config| {
        c.auth.mode = AuthMode::Required;
        c.alerts.triggers = vec![trigger()];
        c.providers = vec![entry];
        c.shutdown.grace = Duration::from_millis(500);
        c.lease.ttl = Duration::from_secs(3);
        c.lease.reap_interval = Duration::from_millis(200);
    };
    let mut app = spawn_app_with(configure.clone()).await;
    let operator = token(&app, "acme", Role::Operator).await;
    let am = Alertmanager::start(&app, &operator).await;
    am.post(json!([alert("HighLatency", "a:1", "critical", false)]))
        .await;
    until("the first burst asks the model", async || {
        fake.request_count() >= 1
    })
    .await;
    let incident = incidents(&app, &operator).await.remove(0).id;
    let session = sessions_of(&app, &operator, &incident).await.remove(0).id;
    am.post(json!([alert("HighLatency", "b:1", "critical", false)]))
        .await;
    until("b recorded", async || {
        origin(&app, &operator, &incident).await.events_total == 2
    })
    .await;

    let users = of_role(
        &turns_of(&app, &operator, &session).await,
        pb::TurnRole::User,
    );
    assert_eq!(users.len(), 1, "nothing sent during the burst: {users:?}");

    // The server stops mid-burst with the change waiting; Alertmanager
    // is stopped too, so no repeat can bring the change back.
    drop(am);
    let (addr, db) = (
        app.addr,
        app.take_database().expect("the app's own database"),
    );
    app.stop().await.unwrap();
    fake.release_answers();
    let app = inquest_tests::spawn_app_on(db.name.clone(), db.url.clone(), |c| {
        configure(c);
        c.listen = addr;
    })
    .await;
    let settled = [pb::SessionStatus::Idle, pb::SessionStatus::Completed];
    until("the waiting follow-up after the restart", async || {
        let users = of_role(
            &turns_of(&app, &operator, &session).await,
            pb::TurnRole::User,
        );
        users.len() == 2 && settled.contains(&status_of(&app, &operator, &session).await)
    })
    .await;
    let users = of_role(
        &turns_of(&app, &operator, &session).await,
        pb::TurnRole::User,
    );
    assert!(users[1].contains("instance=b:1"), "{}", users[1]);
    app.stop().await.unwrap();
    drop(db);
}

/// A trigger with `on_resolved = "follow_up"`: when every alert of the
/// group resolves, its session gets the notice and a follow-up message
/// saying so, which opens a burst (the default only leaves the notice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_that_asks_for_it_follows_up_on_resolution() {
    use crate::agent_support::provider;
    use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    for i in 0..6 {
        fake.reply(FakeReply::text(&format!("S{i}")));
    }
    let entry = provider(&fake, Flavor::OpenAi, "fake");
    let app = spawn_with_auth(|c| {
        c.providers = vec![entry];
        c.alerts.triggers = vec![Trigger {
            on_resolved: inquest_server::alerts::config::OnResolved::FollowUp,
            ..trigger()
        }];
    })
    .await;
    let operator = token(&app, "acme", Role::Operator).await;
    let am = Alertmanager::start(&app, &operator).await;
    let settled = [pb::SessionStatus::Idle, pb::SessionStatus::Completed];
    am.post(json!([alert("HighLatency", "a:1", "critical", false)]))
        .await;
    until("the trigger's session", async || {
        app.count("sessions").await == 1
    })
    .await;
    let incident = incidents(&app, &operator).await.remove(0).id;
    let session = sessions_of(&app, &operator, &incident).await.remove(0).id;
    until("the first burst ends", async || {
        settled.contains(&status_of(&app, &operator, &session).await)
    })
    .await;
    let requests = fake.request_count();
    am.post(json!([alert("HighLatency", "a:1", "critical", true)]))
        .await;
    until("the resolution's follow-up", async || {
        of_role(
            &turns_of(&app, &operator, &session).await,
            pb::TurnRole::User,
        )
        .len()
            == 2
    })
    .await;
    let turns = turns_of(&app, &operator, &session).await;
    let notices = of_role(&turns, pb::TurnRole::Notice);
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(
        notices[0].contains("the trigger asks for a follow-up"),
        "{}",
        notices[0]
    );
    let users = of_role(&turns, pb::TurnRole::User);
    assert!(
        users[1].starts_with("The alert group changed: 0 alert(s) firing anew, 1 resolved."),
        "{}",
        users[1]
    );
    until("the follow-up's burst ran", async || {
        fake.request_count() > requests
            && settled.contains(&status_of(&app, &operator, &session).await)
    })
    .await;
    assert!(
        origin(&app, &operator, &incident)
            .await
            .resolved_at
            .is_some()
    );
    drop(am);
    app.stop().await.unwrap();
}

/// A trigger's `skills` are the session's own: its first burst, a
/// follow-up's and a fork's load those and no other, while a session a
/// person starts on the same server loads every configured skill.
#[tokio::test]
async fn a_triggers_skills_are_what_its_session_loads_in_every_burst_and_fork() {
    use crate::agent_support::{app_with_fake, finished, send as follow_up, start};
    use inquest_agent::Skill;
    use inquest_testkit::fake::{FakeProvider, FakeReply};
    let fake = FakeProvider::start(inquest_testkit::fake::Flavor::OpenAi)
        .await
        .unwrap();
    for i in 0..12 {
        fake.reply(FakeReply::text(&format!("S{i}")));
    }
    let app = app_with_fake(&fake, |c| {
        c.skills = vec![
            Skill {
                name: "deploys".into(),
                server: "evidence".into(),
                prompt: "SKILL-DEPLOYS: start from the deploy log.".into(),
            },
            Skill {
                name: "pods".into(),
                server: "evidence".into(),
                prompt: "SKILL-PODS: look at the pods.".into(),
            },
        ];
        c.alerts.triggers = vec![Trigger {
            skills: Some(vec!["deploys".into()]),
            ..trigger()
        }];
    })
    .await;
    let mut client = app.client().await;
    let (status, answer) = send(&app, None, payload("g", vec![raw_alert("f1", "critical")])).await;
    assert_eq!(status, 200, "{answer}");
    let session = answer["session_id"]
        .as_str()
        .expect("the trigger started a session")
        .to_owned();
    let system_of = |i: usize| fake.requests()[i].body["messages"][0].to_string();

    let (first, _) = finished(&mut client, &session, 1).await;
    assert_eq!(first.skills_loaded, ["deploys"]);
    let system = system_of(0);
    assert!(system.contains("SKILL-DEPLOYS"), "{system}");
    assert!(!system.contains("SKILL-PODS"), "{system}");

    let before = fake.request_count();
    follow_up(&mut client, &session, "and now?").await;
    let (second, _) = finished(&mut client, &session, 2).await;
    assert_eq!(second.skills_loaded, ["deploys"]);
    assert!(!system_of(before).contains("SKILL-PODS"));

    let fork_id = client
        .fork_session(pb::ForkSessionRequest {
            session_id: session.clone(),
            at_seq: 1,
            message: Some("what if it was the cache?".into()),
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .id;
    // 0: the latest report (a fork numbers its bursts after the copied ones).
    let (forked, _) = finished(&mut client, &fork_id, 0).await;
    assert_eq!(forked.skills_loaded, ["deploys"]);

    let manual = start(&mut client, "why is checkout slow?").await;
    let (by_hand, _) = finished(&mut client, &manual, 1).await;
    assert_eq!(by_hand.skills_loaded, ["deploys", "pods"]);
    app.stop().await.unwrap();
}
