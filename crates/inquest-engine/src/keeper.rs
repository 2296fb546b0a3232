//! The lease keeper: renews a running burst's lease on a timer and says
//! when it is lost or its deadline passed, so the burst stops acting for a
//! lease another replica may already hold. The renewal itself is passed in
//! (the store's, in production), so the pacing is tested on paused time.

use std::time::Duration;

use inquest_agent::failpoints;
use inquest_core::{SessionId, SessionStatus, error_chain};
use inquest_store::Renewal;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::burst_log::LeaseClock;

/// How the lease keeper paces itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeeperTiming {
    pub(crate) every: Duration,
    pub(crate) ttl: Duration,
    pub(crate) margin: Duration,
}

/// The lease a keeper renews: whose, which epoch, and when the claim that
/// made it was sent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Held {
    pub(crate) session: SessionId,
    pub(crate) epoch: i64,
    pub(crate) sent_at: Instant,
}

/// Renews the `held` lease with `renew` every `every` for as long as it is
/// polled (the burst's lifetime), moving `clock`'s deadline to each
/// successful renewal's send time + ttl − margin. Never returns: when the
/// lease is lost (another replica claimed the session) or its deadline
/// passes with no renewal having succeeded in time, it fires `lost` — at
/// the deadline itself, not after the next attempt — and waits to be
/// dropped. A renewal that finds the session cancelled (by another
/// replica) fires `cancel`; one that finds an interrupting message queued
/// fires `interrupt` (so a holder that missed the notification learns of
/// it within one renew interval). `renew` is the store's renewal; a
/// function so the pacing is tested on paused time.
pub(crate) async fn keep_lease<R, F>(
    renew: R,
    held: Held,
    clock: LeaseClock,
    timing: KeeperTiming,
    lost: CancellationToken,
    cancel: CancellationToken,
    interrupt: CancellationToken,
) -> std::convert::Infallible
where
    R: Fn() -> F,
    F: std::future::Future<Output = Result<Renewal, inquest_store::StoreError>>,
{
    let session = held.session;
    let mut next = held.sent_at + timing.every;
    let deadline_passed = async |clock: &LeaseClock| loop {
        let deadline = clock.deadline();
        tokio::time::sleep_until(deadline).await;
        if clock.passed() {
            return;
        }
    };
    loop {
        tokio::select! {
            biased;
            () = deadline_passed(&clock) => break,
            () = tokio::time::sleep_until(next) => {}
        }
        let renew = async {
            failpoints::hit(failpoints::LEASE_RENEW).await;
            let sent = Instant::now();
            (sent, tokio::time::timeout(timing.every, renew()).await)
        };
        let (sent, outcome) = tokio::select! {
            biased;
            () = deadline_passed(&clock) => break,
            done = renew => done,
        };
        next = sent + timing.every;
        match outcome {
            Ok(Ok(Renewal::Held {
                status,
                interrupt: asked,
            })) => {
                clock.renewed(sent, timing.ttl, timing.margin);
                if status == SessionStatus::Cancelled {
                    cancel.cancel();
                }
                if asked && !interrupt.is_cancelled() {
                    metrics::counter!("inquest_interrupts_total", "via" => "renewal").increment(1);
                    tracing::info!(%session, epoch = held.epoch, "interrupting the burst: found at the lease renewal");
                    interrupt.cancel();
                }
            }
            Ok(Ok(Renewal::Lost)) => {
                metrics::counter!("inquest_leases_lost_total", "why" => "taken_over").increment(1);
                tracing::warn!(%session, epoch = held.epoch, "lease lost: another replica claimed the session");
                lost.cancel();
                return std::future::pending().await;
            }
            Ok(Err(e)) => {
                metrics::counter!("inquest_lease_renewals_failed_total").increment(1);
                tracing::warn!(%session, error = %error_chain(&e), "lease renewal failed");
            }
            Err(_) => {
                metrics::counter!("inquest_lease_renewals_failed_total").increment(1);
                tracing::warn!(%session, "lease renewal timed out")
            }
        }
    }
    tracing::warn!(%session, epoch = held.epoch, "no lease renewal succeeded in time; stopping the burst before the lease can expire");
    metrics::counter!("inquest_leases_lost_total", "why" => "deadline").increment(1);
    lost.cancel();
    std::future::pending().await
}

#[cfg(test)]
mod tests {
    //! The lease keeper's pacing, on paused time: when it renews, when it
    //! gives up, and that it gives up at the deadline itself.

    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };

    use super::*;

    const TTL: Duration = Duration::from_secs(30);
    const EVERY: Duration = Duration::from_secs(10);
    const MARGIN: Duration = Duration::from_secs(5);

    struct Keeper {
        clock: LeaseClock,
        lost: CancellationToken,
        cancel: CancellationToken,
        interrupt: CancellationToken,
        renewals: Arc<AtomicUsize>,
        task: tokio::task::JoinHandle<()>,
    }

    /// A keeper of a lease claimed now, whose renewals answer `answer`
    /// (or never, for `None`).
    fn keeper(answer: Option<Renewal>) -> Keeper {
        let now = Instant::now();
        let clock = LeaseClock::claimed_at(now, TTL, MARGIN);
        let (lost, cancel) = (CancellationToken::new(), CancellationToken::new());
        let interrupt = CancellationToken::new();
        let renewals = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&renewals);
        let renew = move || {
            counted.fetch_add(1, Ordering::SeqCst);
            async move {
                match answer {
                    Some(renewal) => Ok(renewal),
                    None => std::future::pending().await,
                }
            }
        };
        let held = Held {
            session: SessionId::new(),
            epoch: 1,
            sent_at: now,
        };
        let timing = KeeperTiming {
            every: EVERY,
            ttl: TTL,
            margin: MARGIN,
        };
        let keep = keep_lease(
            renew,
            held,
            clock.clone(),
            timing,
            lost.clone(),
            cancel.clone(),
            interrupt.clone(),
        );
        let task = tokio::spawn(async move {
            keep.await;
        });
        Keeper {
            clock,
            lost,
            cancel,
            interrupt,
            renewals,
            task,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_that_land_keep_the_lease_for_as_long_as_the_burst_runs() {
        let k = keeper(Some(Renewal::Held {
            status: SessionStatus::Running,
            interrupt: false,
        }));
        tokio::time::sleep(TTL * 10).await;
        assert!(!k.lost.is_cancelled());
        assert!(!k.cancel.is_cancelled());
        assert!(!k.interrupt.is_cancelled());
        assert!(!k.clock.passed());
        // One renewal every `EVERY`, give or take the one in flight.
        let n = k.renewals.load(Ordering::SeqCst);
        assert!((29..=31).contains(&n), "{n} renewals in 300 s");
        k.task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_that_never_answer_give_the_lease_up_at_the_deadline_itself() {
        let start = Instant::now();
        let k = keeper(None);
        k.lost.cancelled().await;
        // ttl − margin after the claim was sent: not at the next attempt.
        assert_eq!(start.elapsed(), TTL - MARGIN);
        assert!(k.clock.passed());
        assert!(!k.cancel.is_cancelled());
        k.task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_that_finds_a_newer_epoch_loses_the_lease_at_once() {
        let start = Instant::now();
        let k = keeper(Some(Renewal::Lost));
        k.lost.cancelled().await;
        assert_eq!(start.elapsed(), EVERY, "at the first renewal");
        k.task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_that_finds_the_session_cancelled_cancels_the_burst() {
        let k = keeper(Some(Renewal::Held {
            status: SessionStatus::Cancelled,
            interrupt: false,
        }));
        k.cancel.cancelled().await;
        assert!(!k.lost.is_cancelled());
        assert!(!k.interrupt.is_cancelled());
        k.task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_follows_the_latest_renewal_sent_never_an_older_one() {
        let start = Instant::now();
        let clock = LeaseClock::claimed_at(start, TTL, MARGIN);
        assert_eq!(clock.deadline(), start + (TTL - MARGIN));
        tokio::time::advance(EVERY).await;
        clock.renewed(Instant::now(), TTL, MARGIN);
        assert_eq!(clock.deadline(), start + EVERY + (TTL - MARGIN));
        // A renewal answered late but sent earlier moves nothing back.
        clock.renewed(start, TTL, MARGIN);
        assert_eq!(clock.deadline(), start + EVERY + (TTL - MARGIN));
        tokio::time::advance(TTL - MARGIN - Duration::from_millis(1)).await;
        assert!(!clock.passed());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(clock.passed());
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_that_finds_an_interrupting_message_interrupts_the_burst_within_one_interval()
    {
        let start = Instant::now();
        let k = keeper(Some(Renewal::Held {
            status: SessionStatus::Running,
            interrupt: true,
        }));
        k.interrupt.cancelled().await;
        assert_eq!(start.elapsed(), EVERY, "at the first renewal");
        assert!(!k.lost.is_cancelled() && !k.cancel.is_cancelled());
        k.task.abort();
    }
}
