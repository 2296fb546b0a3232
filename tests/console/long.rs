//! A long session stays usable: a session of 20,000 turns (written
//! straight into the tables, as a long compacted investigation leaves
//! them) opens at its newest turns, shows its compaction as a summary,
//! loads older turns as the reader scrolls up while the DOM never holds
//! more than a window of them, jumps back to the newest, and a deep link
//! into the middle opens there. How fast, and in how much memory, is
//! `inquest-bench console` (docs/benchmarks.md).

use inquest_proto::v1 as pb;
use inquest_tests::TestApp;
use serde_json::{Value, json};

use crate::{support::session_url, webdriver::Browser};

/// The most turns the page keeps in the DOM (`WINDOW` in main.ts).
const WINDOW: usize = 300;

/// Writes an idle session of `turns` turns (even, > 4) into the tables:
/// a user question, then assistant turns each calling `read_file` and the
/// tool's result, with a compaction at `compaction_at` (even). One
/// statement, so 20,000 turns take well under a second.
pub async fn seed_long_session(app: &TestApp, turns: i64, compaction_at: i64) -> String {
    let mut client = app.client().await;
    let incident = client
        .create_incident(pb::CreateIncidentRequest {
            title: "a long investigation".into(),
            description: String::new(),
        })
        .await
        .expect("CreateIncident")
        .into_inner();
    let incident = uuid::Uuid::parse_str(&incident.id).expect("an incident id");
    let session = uuid::Uuid::now_v7();
    let db = inquest_tests::connect(&app.db_url).await;
    db.execute(
        "INSERT INTO sessions (id, incident_id, status, head_seq, turn_count, tenant) \
         SELECT $1, $2, 'idle', $3::bigint, $3, tenant FROM incidents WHERE id = $2",
        &[&session, &incident, &turns],
    )
    .await
    .expect("the session row");
    db.execute(
        "INSERT INTO turns (session_id, seq, role, content, tool_calls, tool_call_id, \
                            tool_name, created_at) \
         SELECT $1, g, \
           CASE WHEN g = 1 THEN 'user' WHEN g = $3 THEN 'compaction' \
                WHEN g % 2 = 0 THEN 'assistant' ELSE 'tool' END, \
           CASE WHEN g = 1 THEN 'why is checkout slow?' \
                WHEN g = $3 THEN 'The investigation so far: the **checkout pool** was exhausted.' \
                WHEN g % 2 = 0 THEN 'Reading the log again, part ' || g || ' of it.' \
                ELSE 'line ' || g || ': pool exhausted' END, \
           CASE WHEN g = $3 THEN jsonb_build_object('first_retained_seq', g - 40, \
                  'tokens_before', 90000, 'tokens_after', 9000) \
                WHEN g % 2 = 0 AND g < $2::bigint THEN jsonb_build_array(jsonb_build_object( \
                  'id', 'c' || g, 'name', 'read_file', \
                  'arguments', jsonb_build_object('path', 'app.log'))) \
                ELSE '[]'::jsonb END, \
           CASE WHEN g % 2 = 1 AND g > 1 THEN 'c' || (g - 1) END, \
           CASE WHEN g % 2 = 1 AND g > 1 THEN 'read_file' END, \
           now() - interval '1 hour' + g * interval '10 ms' \
         FROM generate_series(1::bigint, $2::bigint) AS g",
        &[&session, &turns, &compaction_at],
    )
    .await
    .expect("the turns");
    session.to_string()
}

/// What the page holds: the DOM's turn seqs and the window's bounds.
async fn window(browser: &Browser) -> Value {
    browser
        .js(
            "const list = document.getElementById('turns'); \
             const seqs = [...list.querySelectorAll(':scope > li.turn')].map(e => Number(e.dataset.seq)); \
             return { seqs, lo: Number(list.dataset.lo), hi: Number(list.dataset.hi), \
                      older: !document.getElementById('turns-older').hidden, \
                      newer: !document.getElementById('turns-newer').hidden };",
            json!([]),
        )
        .await
}

fn seqs(w: &Value) -> Vec<i64> {
    w["seqs"]
        .as_array()
        .expect("seqs")
        .iter()
        .map(|s| s.as_i64().expect("a seq"))
        .collect()
}

fn contiguous(s: &[i64]) -> bool {
    s.windows(2).all(|w| w[1] == w[0] + 1)
}

/// Waits until turn `seq` is in the DOM and wholly on screen (within a
/// pixel: scrolled into view, its edge may fall between two).
async fn wait_visible(browser: &Browser, seq: i64) {
    browser
        .wait_until(
            &format!("turn {seq} on screen"),
            "const e = document.querySelector(`#turns > li[data-seq=\"${arguments[0]}\"]`); \
             if (!e) return false; const r = e.getBoundingClientRect(); \
             return r.height > 0 && r.top >= -1 && r.bottom <= window.innerHeight + 1;",
            json!([seq]),
        )
        .await;
}

#[tokio::test]
async fn a_20000_turn_session_opens_at_its_newest_turn_and_keeps_the_dom_bounded() {
    let app = inquest_tests::spawn_app().await;
    let head = 20_000;
    let session = seed_long_session(&app, head, head - 50).await;
    let mut browser = Browser::start("long").await;
    browser.goto(&session_url(&app, &session)).await;
    wait_visible(&browser, head).await;
    browser.step("opened-at-the-newest-turn").await;
    let w = window(&browser).await;
    let shown = seqs(&w);
    assert_eq!(shown.last(), Some(&head), "{w}");
    assert!(shown.len() <= WINDOW, "{} turns in the DOM", shown.len());
    assert!(contiguous(&shown), "{w}");
    assert_eq!(w["older"], true, "older turns are there to load: {w}");
    assert_eq!(w["newer"], false, "{w}");

    // The compaction is shown as a summary, not as a turn of the work.
    let compaction = browser
        .js(
            "const e = document.querySelector(`#turns > li[data-seq=\"${arguments[0]}\"]`); \
             return { role: e.dataset.role, aria: e.querySelector(':scope > [role=note]')?.getAttribute('role'), \
                      head: e.querySelector('.turn-head').textContent, \
                      note: e.querySelector('.compaction-note').textContent, \
                      bold: e.querySelector('.markdown strong')?.textContent };",
            json!([head - 50]),
        )
        .await;
    assert_eq!(compaction["role"], "compaction", "{compaction}");
    assert_eq!(compaction["aria"], "note", "{compaction}");
    assert!(
        compaction["head"]
            .as_str()
            .unwrap_or_default()
            .contains("summary of earlier turns"),
        "{compaction}"
    );
    assert!(
        compaction["note"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("before #{}", head - 90)),
        "{compaction}"
    );
    assert_eq!(compaction["bold"], "checkout pool", "{compaction}");
    // Older calls are settled by their results, like live ones.
    let state = browser
        .js(
            "return document.querySelector('.tool-call[data-call-id=\"c19990\"]').dataset.state;",
            json!([]),
        )
        .await;
    assert_eq!(state, "done");

    // Scrolling up reads older pages; the window slides, never grows past
    // its bound, and what is on screen stays in place.
    let mut lo = w["lo"].as_i64().expect("lo");
    for page in 0..6 {
        browser
            .js("window.scrollTo(0, 0); return true;", json!([]))
            .await;
        browser
            .wait_until(
                "an older page",
                "return Number(document.getElementById('turns').dataset.lo) < arguments[0];",
                json!([lo]),
            )
            .await;
        let w = window(&browser).await;
        let shown = seqs(&w);
        assert!(shown.len() <= WINDOW, "page {page}: {} turns", shown.len());
        assert!(contiguous(&shown), "page {page}: {w}");
        assert!(w["lo"].as_i64().expect("lo") < lo, "{w}");
        lo = w["lo"].as_i64().expect("lo");
    }
    let w = window(&browser).await;
    assert_eq!(seqs(&w).len(), WINDOW, "{w}");
    assert_eq!(w["newer"], true, "the newest turns left the DOM: {w}");
    browser.step("scrolled-back").await;

    // Back to the newest turns in one step. Clicked from script: a
    // WebDriver click scrolls the button into view first, which may read a
    // page of newer turns and move the button before the click lands.
    browser
        .js(
            "document.getElementById('turns-latest').click(); return true;",
            json!([]),
        )
        .await;
    wait_visible(&browser, head).await;
    let w = window(&browser).await;
    assert!(seqs(&w).len() <= WINDOW, "{w}");
    assert_eq!(w["newer"], false, "{w}");

    // A deep link into the middle opens there, marked.
    browser
        .goto(&format!("{}/turn/10000", session_url(&app, &session)))
        .await;
    wait_visible(&browser, 10_000).await;
    let w = window(&browser).await;
    let shown = seqs(&w);
    assert!(shown.contains(&10_000) && shown.len() <= WINDOW, "{w}");
    let marked = browser
        .js(
            "return document.querySelector('#turns > li[data-seq=\"10000\"]').getAttribute('aria-current');",
            json!([]),
        )
        .await;
    assert_eq!(marked, "true");
    assert_eq!(w["newer"], true, "{w}");
    browser.step("deep-link-into-the-middle").await;
    app.stop().await.expect("stop");
}

#[tokio::test]
async fn a_short_session_opens_with_its_newest_turn_on_screen() {
    let app = inquest_tests::spawn_app().await;
    let session = seed_long_session(&app, 10, 0).await;
    let mut browser = Browser::start("short").await;
    browser.goto(&session_url(&app, &session)).await;
    wait_visible(&browser, 10).await;
    browser.step("short").await;
    let w = window(&browser).await;
    assert_eq!(seqs(&w), (1..=10).collect::<Vec<_>>(), "{w}");
    assert_eq!(w["older"], false, "{w}");
    app.stop().await.expect("stop");
}
