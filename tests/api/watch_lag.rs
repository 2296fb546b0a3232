//! Slow watchers and disconnects: the writer never waits for a watcher, a
//! watcher that fell behind is told where to resume, and every way a
//! stream can end frees its subscriber.

use std::sync::atomic::Ordering;

use inquest_core::SessionId;
use inquest_proto::v1::{investigations_client::InvestigationsClient, watch_event::Event};
use inquest_tests::{
    driver::{Driver, new_session},
    spawn_app_with,
    watching::{HANG_GUARD, collect, eventually, next, turn_seqs, watch},
};
use tonic::Code;

/// Turns of 2 KiB, enough of them to overflow every buffer between the
/// broadcaster and a client that stops reading (4 events in the
/// broadcaster, 16 in the stream's outbox, a 64 KiB HTTP/2 window and the
/// server's ~400 KiB send buffer).
const TURNS: i64 = 800;

#[tokio::test]
async fn slow_watcher_is_lagged_and_the_writer_never_stalls() {
    let app = spawn_app_with(|c| c.watch.channel_capacity = 4).await;
    // HTTP/2's smallest windows, so a client that stops reading pushes back
    // on the server after ~64 KiB instead of megabytes.
    let channel = tonic::transport::Channel::from_shared(app.endpoint())
        .unwrap()
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(65_535)
        .connect()
        .await
        .unwrap();
    let mut client = InvestigationsClient::new(channel);
    let session = new_session(&mut client).await;
    let id = SessionId::parse(&session).unwrap();
    let driver = Driver::claim(&app, &session).await;
    // Opened, then not read while the writer runs.
    let mut stream = watch(&mut client, &session, 0).await.unwrap();

    let text = "x".repeat(2048);
    let writer = async {
        for _ in 0..TURNS {
            driver.say(&text).await;
        }
    };
    // The writer completes while the watcher reads nothing (the guard only
    // turns a stall into a failure; no timing is asserted).
    tokio::time::timeout(HANG_GUARD, writer)
        .await
        .expect("the writer stalled behind a slow watcher");
    driver.finish().await;

    let mut received = Vec::new();
    let lagged = loop {
        match next(&mut stream).await {
            Ok(Some(Event::Turn(t))) => received.push(t.seq),
            Ok(Some(Event::Lagged(l))) => break l,
            other => panic!("expected turns then Lagged, got {other:?}"),
        }
    };
    let ending = next(&mut stream).await.unwrap_err();
    assert_eq!(ending.code(), Code::Aborted, "{ending:?}");
    let last = *received.last().unwrap();
    assert_eq!(received, (1..=last).collect::<Vec<_>>());
    assert_eq!(lagged.last_delivered_seq, last);
    // The head is read when the stream meets the lag, which may be while
    // the writer still writes (the stream is polled whenever the client's
    // window has room): past what was delivered, at most the final head.
    assert!(
        lagged.head_seq > last && lagged.head_seq <= TURNS + 1,
        "{lagged:?}"
    );
    assert!(ending.message().contains(&format!("after_seq={last}")));
    crate::error_details::assert_reason(
        &ending,
        Code::Aborted,
        inquest_server::reason::Reason::WatcherLagged,
        &[
            ("after_seq", &last.to_string()),
            ("head_seq", &lagged.head_seq.to_string()),
        ],
    );
    assert!(last < TURNS + 1, "the watcher was not behind");
    assert!(app.watch_metrics.streams_lagged.load(Ordering::Relaxed) >= 1);
    assert!(app.watch_metrics.dropped_events.load(Ordering::Relaxed) >= 1);
    drop(stream);
    eventually("lagged subscriber freed", || {
        app.broadcaster().subscriber_count(id) == 0
    })
    .await;

    let (events, ending) = collect(watch(&mut client, &session, last).await.unwrap()).await;
    ending.unwrap();
    assert_eq!(
        turn_seqs(&events),
        ((last + 1)..=(TURNS + 1)).collect::<Vec<_>>()
    );
    app.stop().await.unwrap();
}

#[tokio::test]
async fn every_disconnect_frees_its_subscriber() {
    let app = spawn_app_with(|_| {}).await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    let id = SessionId::parse(&session).unwrap();
    let driver = Driver::claim(&app, &session).await;
    let count = || app.broadcaster().subscriber_count(id);

    // Client drops the stream mid-watch.
    let mut stream = watch(&mut client, &session, 0).await.unwrap();
    next(&mut stream).await.unwrap();
    assert_eq!(count(), 1);
    drop(stream);
    eventually("dropped stream freed", || count() == 0).await;

    // Client cancels a call whose stream was never read.
    let pending = {
        let mut client = client.clone();
        let session = session.clone();
        tokio::spawn(async move {
            let stream = watch(&mut client, &session, 0).await.unwrap();
            std::future::pending::<()>().await;
            drop(stream);
        })
    };
    eventually("second watcher subscribed", || count() == 1).await;
    pending.abort();
    eventually("aborted call freed", || count() == 0).await;

    // The whole connection goes away.
    {
        let mut other = app.client().await;
        let _stream = watch(&mut other, &session, 0).await.unwrap();
        eventually("third watcher subscribed", || count() == 1).await;
    }
    eventually("closed connection freed", || count() == 0).await;

    // The stream ends because the burst ends.
    let stream = watch(&mut client, &session, 0).await.unwrap();
    eventually("fourth watcher subscribed", || count() == 1).await;
    driver.finish().await;
    let (_, ending) = collect(stream).await;
    ending.unwrap();
    assert_eq!(count(), 0);

    // Server shutdown ends running watches with UNAVAILABLE.
    let session = new_session(&mut client).await;
    let id = SessionId::parse(&session).unwrap();
    let _driver = Driver::claim(&app, &session).await;
    let mut stream = watch(&mut client, &session, 0).await.unwrap();
    assert!(matches!(
        next(&mut stream).await.unwrap(),
        Some(Event::Turn(_))
    ));
    let reader = tokio::spawn(collect(stream));
    assert_eq!(app.broadcaster().subscriber_count(id), 1);
    let broadcaster = app.broadcaster().clone();
    app.stop().await.unwrap();
    assert_eq!(broadcaster.subscriber_count(id), 0);
    let (events, ending) = reader.await.unwrap();
    assert!(events.is_empty(), "{events:?}");
    let status = ending.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(status.message().contains("after_seq=1"));
    crate::error_details::assert_reason(
        &status,
        Code::Unavailable,
        inquest_server::reason::Reason::ShuttingDown,
        &[("after_seq", "1")],
    );
}
