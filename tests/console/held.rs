//! A session held for confirmation is confirmed from the page: the
//! follow-up box sends the message, the page shows the recovery notice
//! distinctly, settles the cut-off call as failed, and offers Confirm;
//! clicking it continues the session (ContinueSession) and the model's
//! answer and the report arrive. Set up as `tests/api/resume.rs` does: a
//! stored transcript whose last assistant turn called a mutating tool that
//! never answered.

use std::collections::BTreeMap;

use inquest_core::{IncidentId, Role, Seq, SessionId, SideEffect, TokenUsage, Turn};
use inquest_proto::v1 as pb;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use inquest_tests::resume::{fake_provider, insert_session, insert_turn, tool_classes};
use serde_json::json;

use crate::{
    support::{
        dom_roles, dom_seqs, one_to, session_url, stored_seqs, text_of, wait_for_call,
        wait_for_report, wait_for_status, wait_for_turns,
    },
    webdriver::Browser,
};

/// An idle session: the user's question, then an assistant turn calling
/// `restart_service` (c1) with no result.
pub(crate) async fn cut_off_session(
    app: &inquest_tests::TestApp,
    client: &mut crate::support::Client,
) -> SessionId {
    let incident = client
        .create_incident(pb::CreateIncidentRequest {
            title: "held".into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let incident = IncidentId::parse(&incident.id).unwrap();
    let db = inquest_tests::connect(&app.db_url).await;
    let session = SessionId::new();
    let now = time::OffsetDateTime::now_utc();
    let user = Turn {
        session_id: session,
        seq: Seq::FIRST,
        role: Role::User,
        content: "why is checkout slow?".into(),
        tool_calls_raw: json!([]),
        recovery_plan_raw: None,
        tool_call_id: None,
        tool_name: None,
        is_error: false,
        usage: TokenUsage::default(),
        created_at: now - time::Duration::seconds(60),
    };
    let mut assistant = user.clone();
    assistant.seq = Seq::from_stored(2).unwrap();
    assistant.role = Role::Assistant;
    assistant.content = String::new();
    assistant.tool_calls_raw =
        json!([{"id": "c1", "name": "restart_service", "arguments": {"target": "checkout"}}]);
    assistant.created_at = now - time::Duration::seconds(59);
    let turns = [user, assistant];
    insert_session(&db, incident, session, "idle", &turns).await;
    for t in &turns {
        insert_turn(&db, t).await.unwrap();
    }
    session
}

#[tokio::test]
async fn a_held_session_is_confirmed_from_the_page() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(
        FakeReply::text("The restart did not finish; checkout is still slow.").usage(80, 12),
    )
    .reply(FakeReply::text(
        "Restart state unknown; checkout still slow.",
    ));
    let classes = BTreeMap::from([("restart_service".to_owned(), SideEffect::Mutating)]);
    let app = inquest_tests::spawn_app_with(|c| {
        c.providers = vec![fake_provider(&fake, "fake")];
        tool_classes(c, &classes);
    })
    .await;
    let mut client = app.client().await;
    let session = cut_off_session(&app, &mut client).await.to_string();
    let mut browser = Browser::start("held").await;
    browser.goto(&session_url(&app, &session)).await;
    wait_for_turns(&browser, 2).await;
    wait_for_status(&browser, "idle").await;
    wait_for_call(&browser, "c1", "requested").await;
    browser.step("cut-off").await;

    browser
        .type_into("#follow-up-text", "did the restart happen?")
        .await;
    browser.click("#follow-up-send").await;
    wait_for_status(&browser, "awaiting_confirmation").await;
    // The user's follow-up and the recovery notice, shown as a notice.
    wait_for_turns(&browser, 4).await;
    assert_eq!(
        dom_roles(&browser).await,
        ["user", "assistant", "user", "notice"]
    );
    let kind = browser
        .js(
            "const n = document.querySelector('#turns > li[data-role=\"notice\"]'); \
             return [n.dataset.kind, n.querySelector(':scope > [role=note]')?.getAttribute('role'), n.className];",
            json!([]),
        )
        .await;
    assert_eq!(kind[0], "interrupted_turn");
    assert_eq!(kind[1], "note");
    assert!(kind[2].as_str().unwrap().contains("turn-notice"));
    wait_for_call(&browser, "c1", "failed").await;
    assert!(
        text_of(&browser, "confirm-why")
            .await
            .contains("restart_service (c1, mutating)")
    );
    assert_eq!(fake.request_count(), 0, "nothing runs before confirmation");
    browser.step("held").await;

    browser.click("#confirm-button").await;
    wait_for_report(&browser).await;
    let settled = client
        .get_session(pb::GetSessionRequest {
            session_id: session.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        !matches!(
            settled.status(),
            pb::SessionStatus::Pending
                | pb::SessionStatus::Running
                | pb::SessionStatus::AwaitingConfirmation
        ),
        "{settled:?}"
    );
    let stored = stored_seqs(&mut client, &session).await;
    assert_eq!(stored, one_to(stored.len() as i64));
    wait_for_turns(&browser, stored.len()).await;
    assert_eq!(dom_seqs(&browser).await, stored);
    assert!(
        browser
            .js(
                "return [...document.querySelectorAll('#turns > li[data-role=\"assistant\"] .content')].some(p => p.textContent.includes('The restart did not finish'));",
                json!([]),
            )
            .await
            .as_bool()
            .unwrap(),
        "the model's answer after the confirmation is shown"
    );
    assert!(fake.request_count() >= 1);
    // Confirm is gone once the session is not held.
    assert_eq!(
        browser
            .js(
                "return document.getElementById('confirm-button').hidden;",
                json!([])
            )
            .await,
        json!(true)
    );
    browser.step("confirmed").await;
}
