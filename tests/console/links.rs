//! Every turn has a stable link: `#/session/<id>/turn/<seq>` opens the
//! session with that turn marked (`aria-current`) and scrolled to, and
//! the page stays there instead of following the tail; each turn's seq
//! is that link. Slack messages and webhooks can point a person at the
//! turn that matters.

use inquest_proto::v1 as pb;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use serde_json::json;

use crate::{
    support::{session_url, wait_for_report, wait_for_turns},
    webdriver::Browser,
};

#[tokio::test]
async fn a_link_to_a_turn_opens_the_session_there() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    // Twelve tool rounds: a page long enough that the marked turn must be
    // scrolled to.
    for i in 0..12 {
        fake.reply(
            FakeReply::text(&format!("Round {i}: listing the evidence again.")).call(
                &format!("c{i}"),
                "list_files",
                "{}",
            ),
        );
    }
    fake.reply(FakeReply::text("Done."))
        .reply(FakeReply::text("S: done"));
    let entry = inquest_tests::resume::fake_provider(&fake, "fake");
    let evidence = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/checkout-latency/evidence");
    let app = inquest_tests::spawn_app_with(|c| {
        c.providers = vec![entry];
        c.tools.files_root = Some(evidence);
        c.tools.files_server = Some("evidence".into());
    })
    .await;
    let mut client = app.client().await;
    let incident = client
        .create_incident(pb::CreateIncidentRequest {
            title: "links".into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let session = client
        .start_session(pb::StartSessionRequest {
            incident_id: incident.id,
            message: "look around".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut browser = Browser::start("links").await;
    // Let the burst finish first: the page is read, not raced.
    browser.goto(&session_url(&app, &session.id)).await;
    wait_for_report(&browser).await;
    wait_for_turns(&browser, 26).await;

    let link = format!("{}/turn/9", session_url(&app, &session.id));
    browser.goto(&link).await;
    wait_for_report(&browser).await;
    browser
        .wait_until(
            "turn 9 marked",
            "return !!document.querySelector('#turns > li[data-seq=\"9\"].focused');",
            json!([]),
        )
        .await;
    browser.step("turn-9").await;
    let seen = browser
        .js(
            "const li = document.querySelector('#turns > li[data-seq=\"9\"]'); \
             const r = li.getBoundingClientRect(); \
             return { \
               current: li.getAttribute('aria-current'), \
               marked: document.querySelectorAll('#turns > li.focused').length, \
               visible: r.top >= 0 && r.bottom <= window.innerHeight, \
               scrolled: window.scrollY > 0, \
               href: document.querySelector('#turns > li[data-seq=\"3\"] a.seq').getAttribute('href') \
             };",
            json!([]),
        )
        .await;
    assert_eq!(seen["current"], "true", "{seen}");
    assert_eq!(seen["marked"], 1, "{seen}");
    assert_eq!(
        seen["visible"], true,
        "the marked turn is on screen: {seen}"
    );
    assert_eq!(seen["scrolled"], true, "{seen}");
    assert_eq!(
        seen["href"],
        format!("#/session/{}/turn/3", session.id),
        "{seen}"
    );

    // A turn's seq is its link.
    browser.click("#turns > li[data-seq=\"3\"] a.seq").await;
    browser
        .wait_until(
            "turn 3 marked",
            "return !!document.querySelector('#turns > li[data-seq=\"3\"].focused') && \
                    location.hash.endsWith('/turn/3');",
            json!([]),
        )
        .await;
    // Not a turn number: no such page.
    browser
        .goto(&format!("{}/turn/0", session_url(&app, &session.id)))
        .await;
    browser
        .wait_until(
            "an error",
            "return (document.getElementById('error')?.textContent || '').includes('No such page');",
            json!([]),
        )
        .await;
    app.stop().await.expect("stop");
}
