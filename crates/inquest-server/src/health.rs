//! `grpc.health.v1.Health`, answered from a real database round trip.
//!
//! The overall service (`""`) and `inquest.v1.Investigations` are SERVING
//! exactly when a `SELECT 1` succeeds within the store's timeout. `Watch`
//! re-checks every few seconds and sends a message whenever the answer
//! changes.

use std::{pin::Pin, time::Duration};

use inquest_store::Store;
use tokio_stream::Stream;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tonic::{Request, Response, Status};
use tonic_health::pb::{
    HealthCheckRequest, HealthCheckResponse, health_check_response::ServingStatus,
    health_server::Health,
};

const SERVICES: [&str; 2] = ["", "inquest.v1.Investigations"];
const WATCH_INTERVAL: Duration = Duration::from_secs(5);

pub struct DbHealth {
    store: Store,
    /// Server shutdown: checks answer NOT_SERVING and watch streams end.
    shutdown: CancellationToken,
    /// Owner of the per-watch probe tasks, so shutdown waits for them.
    tasks: TaskTracker,
}

impl DbHealth {
    pub fn new(store: Store, shutdown: CancellationToken, tasks: TaskTracker) -> Self {
        Self {
            store,
            shutdown,
            tasks,
        }
    }
}

async fn probe(store: &Store) -> ServingStatus {
    match store.ping().await {
        Ok(()) => ServingStatus::Serving,
        Err(e) => {
            tracing::warn!(error = %crate::status::chain(&e), "health check: database unreachable");
            ServingStatus::NotServing
        }
    }
}

fn known(service: &str) -> Result<(), Status> {
    if SERVICES.contains(&service) {
        Ok(())
    } else {
        Err(Status::not_found(format!("unknown service {service:?}")))
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
            probe(&self.store).await
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
        let store = self.store.clone();
        let shutdown = self.shutdown.clone();
        // Owned by the stream: it ends when the client goes away (send
        // fails) or the server shuts down.
        self.tasks.spawn(async move {
            let mut last = None;
            loop {
                let status = probe(&store).await;
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
                    _ = tokio::time::sleep(WATCH_INTERVAL) => {}
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}
