//! The burst lane's connections live on the runtime bursts run on.

use std::time::Duration;

use inquest_store::{Store, StoreConfig};
use inquest_tests::fresh_database;

/// A burst-lane connection asked for on another runtime (an RPC handler's
/// claim runs on the serving runtime) is opened on the burst runtime: its
/// replies reach a burst while the runtime that asked is not polling for
/// I/O at all. Opened where it was asked for, its socket would answer to
/// that runtime's reactor, and a busy serving runtime (1,000 watch streams)
/// delayed every turn write's reply by milliseconds; an idle one, as here,
/// never delivers it.
#[test]
fn a_burst_connection_answers_while_the_runtime_that_asked_is_idle() {
    let bursts = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("burst runtime");
    let serving = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("serving runtime");
    let database = serving.block_on(fresh_database());
    let url = database.url.clone();
    let mut config = StoreConfig::new(&url);
    // One connection, so the second ping must reuse the first's.
    config.burst_connections = 1;
    config.burst_runtime = Some(bursts.handle().clone());
    let burst = serving.block_on(async {
        let store = Store::connect(&config).expect("store");
        let burst = store.for_bursts();
        burst
            .ping()
            .await
            .expect("first ping, from the serving runtime");
        burst
    });
    assert_eq!(burst.pool_status()[1].size, 1, "one burst connection open");

    // Nothing drives the serving runtime from here on.
    let (tx, rx) = std::sync::mpsc::channel();
    bursts.spawn(async move {
        let _ = tx.send(burst.ping().await);
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("the burst runtime's ping failed: {e}"),
        Err(_) => panic!(
            "no answer in 30 s: the connection is bound to the idle runtime that asked for it"
        ),
    }
    drop(serving);
}
