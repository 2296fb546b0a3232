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
