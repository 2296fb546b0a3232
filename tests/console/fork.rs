//! "Fork from here" on a turn: the console calls ForkSession with the
//! turn's seq and the message typed, opens the new session, and shows its
//! lineage (a link to the source at that turn). The source is untouched.

use inquest_proto::v1 as pb;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use serde_json::json;

use crate::{
    support::{dom_seqs, session_url, stored_seqs, wait_for_report, wait_for_turns},
    webdriver::Browser,
};

const ASK: &str = "why is checkout slow?";
const FIRST: &str = "The database is slow.";
const WHAT_IF: &str = "What if we had looked at the cache first?";
const FORKED: &str = "The cache hit rate fell at 14:05.";

#[tokio::test]
async fn fork_from_a_turn_opens_the_fork_with_its_lineage() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text(FIRST))
        .reply(FakeReply::text("S1"))
        .reply(FakeReply::text(FORKED))
        .reply(FakeReply::text("S-fork"));
    let entry = inquest_tests::resume::fake_provider(&fake, "fake");
    let app = inquest_tests::spawn_app_with(|c| c.providers = vec![entry]).await;
    let mut client = app.client().await;
    let incident = client
        .create_incident(pb::CreateIncidentRequest {
            title: "fork".into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let source = client
        .start_session(pb::StartSessionRequest {
            incident_id: incident.id.clone(),
            message: ASK.into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .id;
    let mut browser = Browser::start("fork").await;
    browser.goto(&session_url(&app, &source)).await;
    wait_for_report(&browser).await;
    wait_for_turns(&browser, 2).await;
    let before = stored_seqs(&mut client, &source).await;
    assert_eq!(before, [1, 2]);
    // A session that is no fork shows no lineage.
    assert_eq!(
        browser
            .js(
                "return document.getElementById('lineage').hidden;",
                json!([])
            )
            .await,
        json!(true)
    );

    // Every turn offers the fork; this one is cut after the question.
    assert_eq!(
        browser
            .js(
                "return document.querySelectorAll('#turns > li.turn button[data-action=\"fork\"]').length;",
                json!([])
            )
            .await,
        json!(2)
    );
    browser
        .click("#turns > li.turn[data-seq=\"1\"] button[data-action=\"fork\"]")
        .await;
    assert_eq!(
        browser
            .js(
                "return document.getElementById('fork-form').dataset.atSeq;",
                json!([])
            )
            .await,
        json!("1")
    );
    browser.type_into("#fork-message", WHAT_IF).await;
    browser.step("fork-form").await;
    browser.click("#fork-submit").await;

    // The page moves to the fork, which shows where it came from.
    browser
        .wait_until(
            "the fork opened",
            "return !location.hash.includes(arguments[0]) && \
             !document.getElementById('lineage').hidden;",
            json!([source]),
        )
        .await;
    let hash = browser.js("return location.hash;", json!([])).await;
    let fork = hash
        .as_str()
        .unwrap()
        .strip_prefix("#/session/")
        .unwrap()
        .to_owned();
    let s = client
        .get_session(pb::GetSessionRequest {
            session_id: fork.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.forked_from_session_id, source);
    assert_eq!(s.forked_at_seq, 1);
    assert_eq!(s.incident_id, incident.id);
    let lineage = browser
        .js(
            "const a = document.getElementById('lineage-link'); return [a.getAttribute('href'), a.textContent];",
            json!([]),
        )
        .await;
    assert_eq!(lineage[0], json!(format!("#/session/{source}/turn/1")));
    assert!(lineage[1].as_str().unwrap().contains(&source), "{lineage}");

    // The fork runs its message after the copied question and the fork's
    // notice; the page shows exactly its stored turns.
    let (texts, stored) = loop {
        let stored = client
            .list_turns(pb::ListTurnsRequest {
                session_id: fork.clone(),
                after_seq: 0,
                before_seq: 0,
                limit: 100,
            })
            .await
            .unwrap()
            .into_inner()
            .turns;
        if stored.iter().any(|t| t.content == FORKED) {
            break (
                stored.iter().map(|t| t.content.clone()).collect::<Vec<_>>(),
                stored.iter().map(|t| t.seq).collect::<Vec<_>>(),
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    // The fork's notice says where it was cut, after the copied turn.
    assert_eq!(texts.len(), 4, "{texts:?}");
    assert_eq!(texts[0], ASK);
    assert!(texts[1].contains(&source), "{texts:?}");
    assert_eq!(texts[2..], [WHAT_IF, FORKED]);
    wait_for_turns(&browser, stored.len()).await;
    assert_eq!(dom_seqs(&browser).await, stored);
    // The source is as it was.
    assert_eq!(stored_seqs(&mut client, &source).await, before);
    browser.step("fork").await;

    // The lineage link leads back to the source at the turn.
    browser.click("#lineage-link").await;
    browser
        .wait_until(
            "the source opened at the turn",
            "const e = document.querySelector('#turns > li.turn[data-seq=\"1\"]'); \
             return location.hash.includes(arguments[0]) && !!e && e.getAttribute('aria-current') === 'true';",
            json!([source]),
        )
        .await;
}
