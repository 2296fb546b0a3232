//! `grpc.health.v1.Health`, answered from a cached database probe.
//!
//! One prober task per replica sends `SELECT 1` at most once per
//! [`PROBE_EVERY`] (on the burst lane's pool, so a flood of API reads
//! cannot make a healthy replica look dead) and publishes the answer. The
//! overall service (`""`) and `inquest.v1.Investigations` are SERVING
//! exactly when the latest probe succeeded and is younger than
//! [`STALE_AFTER`]; a probe that hangs therefore turns the answer to
//! NOT_SERVING within that bound. `Check` costs no round trip of its own,
//! however many callers ask, and `Watch` streams follow the same probe,
//! sending a message whenever the answer changes.

use std::{
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use inquest_store::Store;
use tokio::{sync::watch, time::Instant};
use tokio_stream::Stream;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tonic::{Request, Response, Status};
use tonic_health::pb::{
    HealthCheckRequest, HealthCheckResponse, health_check_response::ServingStatus,
    health_server::Health,
};

const SERVICES: [&str; 2] = ["", "inquest.v1.Investigations"];
/// How often the database is probed.
const PROBE_EVERY: Duration = Duration::from_secs(1);
/// A probe that takes longer counts as failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// A latest answer older than this (the prober is stuck) is NOT_SERVING.
const STALE_AFTER: Duration = Duration::from_secs(5);

/// One probe's answer and when it was taken.
#[derive(Debug, Clone, Copy)]
struct Probe {
    status: ServingStatus,
    at: Instant,
}

/// Whether the latest probe is fresh and good, for `/readyz`.
#[derive(Clone)]
pub struct Readiness {
    latest: watch::Receiver<Option<Probe>>,
}

impl Readiness {
    pub fn ready(&self) -> bool {
        matches!(
            *self.latest.borrow(),
            Some(p) if p.status == ServingStatus::Serving && p.at.elapsed() <= STALE_AFTER
        )
    }
}

pub struct DbHealth {
    latest: watch::Receiver<Option<Probe>>,
    /// Server shutdown: checks answer NOT_SERVING and watch streams end.
    shutdown: CancellationToken,
    /// Owner of the prober and of the per-watch tasks, so shutdown waits
    /// for them.
    tasks: TaskTracker,
}

impl DbHealth {
    /// Starts the prober (owned by `tasks`, ended by `shutdown`). `probes`
    /// counts the round trips it makes.
    pub fn new(
        store: Store,
        shutdown: CancellationToken,
        tasks: TaskTracker,
        probes: Arc<AtomicU64>,
    ) -> Self {
        let (tx, latest) = watch::channel(None);
        let store = store.for_bursts();
        let stop = shutdown.clone();
        tasks.spawn(async move {
            loop {
                probes.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("inquest_health_probes_total").increment(1);
                let status = probe(&store).await;
                tx.send_replace(Some(Probe {
                    status,
                    at: Instant::now(),
                }));
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(PROBE_EVERY) => {}
                }
            }
        });
        Self {
            latest,
            shutdown,
            tasks,
        }
    }
}

impl DbHealth {
    /// The same probe's answer, for the admin listener.
    pub fn readiness(&self) -> Readiness {
        Readiness {
            latest: self.latest.clone(),
        }
    }
}

async fn probe(store: &Store) -> ServingStatus {
    match tokio::time::timeout(PROBE_TIMEOUT, store.ping()).await {
        Ok(Ok(())) => ServingStatus::Serving,
        Ok(Err(e)) => {
            tracing::warn!(error = %inquest_core::error_chain(&e), "health check: database unreachable");
            ServingStatus::NotServing
        }
        Err(_) => {
            tracing::warn!(timeout = ?PROBE_TIMEOUT, "health check: database did not answer in time");
            ServingStatus::NotServing
        }
    }
}

/// The answer `latest` gives now. `None` (no probe finished yet) waits
/// for the first one, up to [`STALE_AFTER`].
async fn current(latest: &mut watch::Receiver<Option<Probe>>) -> ServingStatus {
    let first = *latest.borrow_and_update();
    let probe = match first {
        Some(p) => Some(p),
        None => {
            // Copied out at once: the borrow is not held across an await.
            match tokio::time::timeout(STALE_AFTER, latest.wait_for(Option::is_some)).await {
                Ok(Ok(p)) => *p,
                _ => None,
            }
        }
    };
    match probe {
        Some(p) if p.at.elapsed() <= STALE_AFTER => p.status,
        _ => ServingStatus::NotServing,
    }
}

fn known(service: &str) -> Result<(), Status> {
    if SERVICES.contains(&service) {
        Ok(())
    } else {
        Err(crate::reason::status(
            tonic::Code::NotFound,
            crate::reason::Reason::UnknownService,
            format!("unknown service {}", crate::reason::excerpt(service)),
            Vec::new(),
        ))
    }
}

#[tonic::async_trait]
impl Health for DbHealth {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        known(&request.get_ref().service)?;
        let status = if self.shutdown.is_cancelled() {
            ServingStatus::NotServing
        } else {
            current(&mut self.latest.clone()).await
        };
        Ok(Response::new(HealthCheckResponse {
            status: status.into(),
        }))
    }

    type WatchStream = Pin<Box<dyn Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        known(&request.get_ref().service)?;
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let mut latest = self.latest.clone();
        let shutdown = self.shutdown.clone();
        // Owned by the stream: it ends when the client goes away (send
        // fails) or the server shuts down.
        self.tasks.spawn(async move {
            let mut last = None;
            loop {
                let status = current(&mut latest).await;
                if last != Some(status) {
                    let msg = HealthCheckResponse {
                        status: status.into(),
                    };
                    if tx.send(Ok(msg)).await.is_err() {
                        return;
                    }
                    last = Some(status);
                }
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tx.closed() => return,
                    changed = latest.changed() => {
                        if changed.is_err() {
                            // The prober ended: the server is stopping.
                            return;
                        }
                    }
                    // A prober that hangs sends nothing: look at the age.
                    _ = tokio::time::sleep(STALE_AFTER) => {}
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}
