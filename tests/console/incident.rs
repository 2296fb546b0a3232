//! The incident page (`#/incident/<id>`): the alert group behind an
//! incident (its receiver and sender link, each alert's labels, firing and
//! resolved, the group's `resolved_at`) and its sessions with each fork
//! nested under its source. The alerts are posted to the real
//! Alertmanager endpoint; a label value holding HTML is shown as text.

use inquest_proto::v1 as pb;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use serde_json::{Value, json};

use crate::{support::Client, webdriver::Browser};

const HOSTILE: &str = "<img src=x onerror=\"window.__pwned=1\">";

fn notification(status: &str, alert_status: &str, ends_at: &str) -> String {
    json!({
        "version": "4", "groupKey": "{}:{alertname=\"CheckoutLatency\"}", "status": status,
        "receiver": "inquest", "externalURL": "http://alertmanager.test:9093",
        "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
        "alerts": [{
            "status": alert_status, "fingerprint": "f-checkout",
            "labels": {"alertname": "CheckoutLatency", "service": "checkout", "note": HOSTILE},
            "annotations": {}, "startsAt": "2026-12-05T10:00:00Z", "endsAt": ends_at,
            "generatorURL": "http://prometheus.test/graph",
        }],
    })
    .to_string()
}

async fn post(addr: std::net::SocketAddr, body: String) -> Value {
    let response = reqwest::Client::new()
        .post(format!("http://{addr}/v1/alerts/alertmanager"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    response.json().await.unwrap()
}

async fn start(client: &mut Client, incident: &str, message: &str) -> String {
    client
        .start_session(pb::StartSessionRequest {
            incident_id: incident.into(),
            message: message.into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .id
}

async fn fork(client: &mut Client, source: &str) -> String {
    client
        .fork_session(pb::ForkSessionRequest {
            session_id: source.into(),
            at_seq: 1,
            message: None,
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .id
}

#[tokio::test]
async fn an_incident_page_shows_its_alerts_and_its_sessions_as_a_tree_of_forks() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    for i in 0..4 {
        fake.reply(FakeReply::text(&format!("answer {i}")));
    }
    let entry = inquest_tests::resume::fake_provider(&fake, "fake");
    let app = inquest_tests::spawn_app_with(|c| c.providers = vec![entry]).await;
    let mut client = app.client().await;
    let answer = post(
        app.addr,
        notification("firing", "firing", "0001-01-01T00:00:00Z"),
    )
    .await;
    let incident = answer["incident_id"].as_str().unwrap().to_owned();
    post(
        app.addr,
        notification("resolved", "resolved", "2026-12-05T10:30:00Z"),
    )
    .await;
    let read = client
        .get_incident(pb::GetIncidentRequest {
            incident_id: incident.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    let origin = read.alert_origin.expect("an alert origin");
    assert_eq!(origin.events.len(), 2, "{origin:?}");
    assert!(origin.resolved_at.is_some());

    // Two sessions; the first forked twice, one fork forked again.
    let a = start(&mut client, &incident, "why is checkout slow?").await;
    let b = start(&mut client, &incident, "and the error rate?").await;
    let a1 = fork(&mut client, &a).await;
    let a2 = fork(&mut client, &a).await;
    let a1x = fork(&mut client, &a1).await;

    let mut browser = Browser::start("incident").await;
    browser
        .goto(&format!("{}/console/#/incidents", app.endpoint()))
        .await;
    // The list links each incident to its page.
    browser
        .click(&format!(
            "li.incident[data-incident-id=\"{incident}\"] h3 a"
        ))
        .await;
    browser
        .wait_until(
            "the incident page with its five sessions and its alerts",
            "const l = document.getElementById('incident-sessions'); \
             return location.hash === '#/incident/' + arguments[0] && l.dataset.state === 'loaded' \
             && l.dataset.count === '5' && !document.getElementById('alerts').hidden;",
            json!([incident]),
        )
        .await;

    // The tree: each session's parent in the DOM is the session it was
    // forked from (none for the two started ones).
    let parents = browser
        .js(
            "return Object.fromEntries([...document.querySelectorAll('#incident-sessions li.session-node')]\
             .map(e => [e.dataset.sessionId, e.parentElement.closest('li.session-node')?.dataset.sessionId ?? null]));",
            json!([]),
        )
        .await;
    assert_eq!(
        parents,
        json!({ &a: null, &b: null, &a1: &a, &a2: &a, &a1x: &a1 })
    );

    // The alerts: newest first, resolved then firing, with their labels
    // as text; the group resolved; the sender linked.
    let events = browser
        .js(
            "return [...document.querySelectorAll('#alert-event-rows tr.alert-event')]\
             .map(r => [r.dataset.state, r.dataset.fingerprint, r.cells[1].textContent]);",
            json!([]),
        )
        .await;
    let events = events.as_array().unwrap();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0][0], "resolved");
    assert_eq!(events[1][0], "firing");
    for e in events {
        assert_eq!(e[1], "f-checkout");
        let labels = e[2].as_str().unwrap();
        assert!(labels.contains("alertname=CheckoutLatency"), "{labels}");
        assert!(labels.contains(&format!("note={HOSTILE}")), "{labels}");
    }
    let facts = browser
        .js(
            "return [document.querySelector('#alert-origin .alert-group-status').textContent, \
             document.querySelector('#alert-origin .alert-external-url a').getAttribute('href'), \
             document.querySelector('#alert-origin .alert-receiver').textContent, \
             document.getElementById('alerts').dataset.resolved, \
             document.querySelectorAll('#alerts img').length, window.__pwned ?? null];",
            json!([]),
        )
        .await;
    assert!(
        facts[0].as_str().unwrap().starts_with("resolved "),
        "{facts}"
    );
    assert_eq!(facts[1], "http://alertmanager.test:9093/");
    assert_eq!(facts[2], "inquest");
    assert_eq!(facts[3], "true");
    assert_eq!(facts[4], 0, "a label's HTML is text, not an element");
    assert_eq!(facts[5], Value::Null, "no script ran from a label");
    browser.step("incident").await;

    // A fork's node links to its source at the cut.
    browser
        .click(&format!(
            "li.session-node[data-session-id=\"{a1x}\"] > a[href^=\"#/session/{a1x}\"]"
        ))
        .await;
    browser
        .wait_until(
            "the fork's page, with its lineage and its incident by title",
            "return !document.getElementById('lineage').hidden && \
             document.getElementById('lineage').dataset.parent === arguments[0] && \
             document.getElementById('session-incident-link').getAttribute('href') === '#/incident/' + arguments[1] && \
             document.getElementById('session-incident-link').textContent === arguments[2];",
            json!([a1, incident, read.title]),
        )
        .await;
}

/// The incident list filtered by where each incident came from: by hand
/// (CreateIncident), an alert (the Alertmanager endpoint) or a schedule's
/// tick (the store's tick path); the filter is in the URL and in a select,
/// and each incident says its source in words.
#[tokio::test]
async fn the_incident_list_filters_by_source() {
    use inquest_core::{IncidentText, Limits, Tenant, TenantQuota, UserMessage};

    let app = inquest_tests::spawn_app().await;
    let mut client = app.client().await;
    let manual = client
        .create_incident(pb::CreateIncidentRequest {
            title: "opened by hand".into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .id;
    let alert = post(
        app.addr,
        notification("firing", "firing", "0001-01-01T00:00:00Z"),
    )
    .await["incident_id"]
        .as_str()
        .expect("the alert's incident")
        .to_owned();
    let limits = Limits::default();
    app.store
        .register_schedules(&["budget".to_owned()])
        .await
        .unwrap();
    let tick = app
        .store
        .fire_schedule_tick(inquest_store::FireTick {
            schedule: "budget",
            tick: time::OffsetDateTime::now_utc() + time::Duration::hours(1),
            tenant: &Tenant::default_tenant(),
            quota: TenantQuota::UNLIMITED,
            incident: &IncidentText::parse("budget review".into(), String::new(), &limits).unwrap(),
            message: &UserMessage::parse("review it".into(), &limits).unwrap(),
            skills: None,
        })
        .await
        .unwrap();
    assert!(
        matches!(tick, inquest_store::TickOutcome::Fired(_)),
        "{tick:?}"
    );

    let mut browser = Browser::start("incident-sources").await;
    let listed = "const l = document.getElementById('incident-list'); \
                  return l.dataset.state === 'loaded' && l.dataset.source === arguments[0] && \
                    JSON.stringify([...l.querySelectorAll(':scope > li.incident')] \
                      .map(e => [e.dataset.incidentId, e.dataset.source, e.querySelector('.source').textContent])) \
                    === JSON.stringify(arguments[1]);";
    browser
        .goto(&format!(
            "{}/console/#/incidents?source=alert",
            app.endpoint()
        ))
        .await;
    browser
        .wait_until(
            "only the alert's incident",
            listed,
            json!(["alert", [[alert, "alert", "From an alert"]]]),
        )
        .await;
    browser.step("from-alerts").await;
    // The select (as a person changes it) moves the URL, and the list follows.
    browser
        .js(
            "const s = document.getElementById('source-filter'); s.value = arguments[0]; \
             s.dispatchEvent(new Event('change')); return true;",
            json!(["schedule"]),
        )
        .await;
    browser
        .wait_until(
            "the URL says the source",
            "return location.hash === '#/incidents?source=schedule';",
            json!([]),
        )
        .await;
    browser
        .wait_until(
            "only the schedule's incident",
            "const l = document.getElementById('incident-list'); \
             const items = [...l.querySelectorAll(':scope > li.incident')]; \
             return l.dataset.state === 'loaded' && l.dataset.source === 'schedule' && items.length === 1 && \
               items[0].dataset.source === 'schedule' && \
               items[0].querySelector('.source').textContent === 'From a schedule';",
            json!([]),
        )
        .await;
    browser
        .js(
            "const s = document.getElementById('source-filter'); s.value = arguments[0]; \
             s.dispatchEvent(new Event('change')); return true;",
            json!(["manual"]),
        )
        .await;
    browser
        .wait_until(
            "only the one opened by hand",
            listed,
            json!(["manual", [[manual, "manual", "Opened by hand"]]]),
        )
        .await;
    // Any source: all three, newest first.
    browser
        .js(
            "const s = document.getElementById('source-filter'); s.value = arguments[0]; \
             s.dispatchEvent(new Event('change')); return true;",
            json!([""]),
        )
        .await;
    browser
        .wait_until(
            "all three",
            "const l = document.getElementById('incident-list'); \
             return location.hash === '#/incidents' && l.dataset.state === 'loaded' && \
               JSON.stringify([...l.querySelectorAll(':scope > li.incident')].map(e => e.dataset.source)) \
               === '[\"schedule\",\"alert\",\"manual\"]';",
            json!([]),
        )
        .await;
    browser.step("any-source").await;
    app.stop().await.expect("stop");
}
