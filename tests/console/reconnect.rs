//! A dropped stream mid-burst: the page reconnects from the last seq it
//! showed and catches up with no gap and no duplicate (the DOM's list of
//! seqs is exactly 1..=head). Two kinds of drop: the page's own connection
//! cut (and held down while turns are written), and the server ending the
//! stream (a lagged watcher is told to reconnect). The turns come from the
//! test driver, at exactly the pace the test needs.

use inquest_tests::driver::{Driver, new_session};
use serde_json::json;

use crate::{
    support::{
        dom_seqs, one_to, session_url, spinner_visible, stored_seqs, text_of, wait_for_call,
        wait_for_status, wait_for_turns,
    },
    webdriver::Browser,
};

#[tokio::test]
async fn a_dropped_stream_catches_up_with_no_gap_or_duplicate() {
    // No providers: a started session stays pending for the driver.
    let app = inquest_tests::spawn_app().await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    let mut browser = Browser::start("reconnect").await;
    browser.goto(&session_url(&app, &session)).await;
    wait_for_turns(&browser, 1).await;
    wait_for_status(&browser, "pending").await;

    let driver = Driver::claim(&app, &session).await;
    driver.say("Looking at the checkout service.").await;
    let call = driver.call("t1", "read_log").await;
    driver.start(call.seq, "t1", "read_log");
    wait_for_turns(&browser, 3).await;
    wait_for_call(&browser, "t1", "running").await;
    assert!(spinner_visible(&browser, "t1").await);
    browser.step("live").await;

    // The page's connection is cut and kept down while the burst goes on.
    browser
        .js(
            "window.inquestConsole.holdReconnect(true); return window.inquestConsole.dropWatch();",
            json!([]),
        )
        .await;
    browser
        .wait_until(
            "the page sees its stream dropped",
            "return document.getElementById('watch-state').dataset.state === 'reconnecting';",
            json!([]),
        )
        .await;
    driver
        .result("t1", "read_log", "12:00:01 ERROR refused")
        .await;
    for i in 0..5 {
        driver.say(&format!("finding {i}")).await;
    }
    let call = driver.call("t2", "read_log").await;
    driver.start(call.seq, "t2", "read_log");
    // Nothing of that reached the page.
    assert_eq!(dom_seqs(&browser).await, one_to(3));
    browser.step("dropped").await;

    // Back up: it resumes after seq 3 and catches up, each turn once.
    browser
        .js("window.inquestConsole.holdReconnect(false);", json!([]))
        .await;
    wait_for_turns(&browser, 10).await;
    assert_eq!(dom_seqs(&browser).await, one_to(10));
    wait_for_call(&browser, "t1", "done").await;
    // The call started while the page was away is announced again on
    // reconnect (the server's running-call snapshot).
    wait_for_call(&browser, "t2", "running").await;
    browser.step("caught-up").await;

    // The server ends every stream (a lagged watcher): the page reconnects
    // again, mid-burst, and the live turns after it arrive once each.
    let lagged = app.turn_log.live().lag_all_watchers();
    assert!(lagged >= 1, "the page's stream was lagged");
    driver.result("t2", "read_log", "ok").await;
    driver
        .say("Checkout refuses connections since 12:00.")
        .await;
    wait_for_turns(&browser, 12).await;
    wait_for_call(&browser, "t2", "done").await;
    driver.finish().await;
    wait_for_status(&browser, "idle").await;

    let stored = stored_seqs(&mut client, &session).await;
    assert_eq!(stored, one_to(12));
    assert_eq!(dom_seqs(&browser).await, stored, "no gap, no duplicate");
    let reconnects: i64 = browser
        .js("return window.inquestConsole.reconnects();", json!([]))
        .await
        .as_i64()
        .unwrap();
    assert!(reconnects >= 2, "reconnected after each drop: {reconnects}");
    assert_eq!(text_of(&browser, "watch-state").await, "not running");
    browser.step("settled").await;
}
