//! How a server stops: the signal that starts it, the grace in-flight
//! calls get, and the running tools and bursts it waits for before the
//! process exits.

use std::time::Duration;

use anyhow::Context;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

/// How long shutdown waits, after the grace, for tasks to notice that
/// their running tools were abandoned.
const ABANDON_WAIT: Duration = Duration::from_secs(5);

/// The gRPC server, running until it stops accepting.
pub(crate) type ServerFuture = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<(), tonic::transport::Error>> + Send>,
>;

/// Serves until `shutdown` fires, then gives in-flight calls `grace` to
/// finish. Returns when the grace ends (or ended) for what is still
/// running.
pub(crate) async fn serve_until_shutdown(
    server: ServerFuture,
    shutdown: &CancellationToken,
    grace: Duration,
) -> anyhow::Result<tokio::time::Instant> {
    tokio::pin!(server);
    // Biased, shutdown first: the server stops with the same token, and
    // with no call in flight it may already be done when this select
    // is polled; an unbiased pick of the server branch then skipped
    // the shutdown's log line (which operators and tests wait for).
    Ok(tokio::select! {
        biased;
        () = shutdown.cancelled() => {
            let grace_ends = tokio::time::Instant::now() + grace;
            tracing::info!(grace = ?grace, "shutting down: no new connections, no new model calls or tools; finishing in-flight calls and running tools");
            match tokio::time::timeout_at(grace_ends, &mut server).await {
                Ok(result) => result.context("gRPC server failed")?,
                Err(_) => tracing::warn!("in-flight calls did not finish within the grace period"),
            }
            grace_ends
        }
        result = &mut server => {
            result.context("gRPC server failed")?;
            tokio::time::Instant::now() + grace
        }
    })
}

/// Bursts saw the shutdown token: they start nothing new, running tools
/// finish and their results land, then each burst is handed over. A tool
/// still running when the grace ends is dropped and its call left without
/// a result (never a made-up one), so the next replica's plan holds a
/// mutating call for confirmation.
pub(crate) async fn finish_in_flight_work(
    tasks: TaskTracker,
    abandon: CancellationToken,
    grace_ends: tokio::time::Instant,
) {
    tasks.close();
    tokio::select! {
        () = tasks.wait() => {}
        () = tokio::time::sleep_until(grace_ends) => {
            tracing::warn!("tools still running at the end of the grace; leaving them to recovery");
            abandon.cancel();
            // Dropped tools let their bursts hand over at once; a task
            // that still does not end (stuck outside any await the
            // shutdown reaches) is left behind: exiting is what kill -9
            // would do, and its session's lease expires for recovery.
            if tokio::time::timeout(ABANDON_WAIT, tasks.wait()).await.is_err() {
                tracing::error!(wait = ?ABANDON_WAIT, "tasks still running after the grace and the abandon; exiting without them (their sessions are recovered when their leases expire)");
            }
        }
    }
}

/// Resolves when SIGTERM or Ctrl-C arrives; cancels `token` then.
pub async fn cancel_on_signal(token: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => tracing::info!("Ctrl-C received"),
        () = term => tracing::info!("SIGTERM received"),
    }
    token.cancel();
}
