//! `inquest-bench queue`: from the end of a burst that has a message
//! queued behind it (`SendMessage.if_running = ENQUEUE`) to that message's
//! burst sending its first model request.
//!
//! One replica (this binary's `serve`) with the testkit's fake OpenAI
//! provider as its model. Each sample starts a session whose first model
//! call the fake holds, queues a message behind it, then lets the fake
//! answer: the burst ends (its report is stored: `reports.created_at`, the
//! database's clock), its close turns the queue into the next burst, and
//! that burst's first request reaches the fake (the bench polls the fake's
//! request count every 100 µs; this host's wall clock).

use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};

use crate::bench_replicas::{Replica, ms, new_session, pick};

pub struct QueueBench {
    pub url: String,
    pub samples: usize,
}

pub async fn run(bench: QueueBench) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("inquest-bench-queue-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let fake = FakeProvider::start(Flavor::OpenAi).await?;
    let config = dir.join("inquest.toml");
    std::fs::write(
        &config,
        format!(
            "[admin]\nenabled = false\n\n[approval]\nmode = \"off\"\n\n\
             [[providers]]\nkind = \"openai\"\nname = \"fake\"\nmodel = \"fake-model\"\n\
             base_url = \"{}\"\n",
            fake.base_url()
        ),
    )?;
    let replica = Replica::start(&bench.url, &config, "bench-queue", None).await?;
    let result = measure(&bench, &replica, &fake).await;
    replica.stop()?;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn wait_count(fake: &FakeProvider, n: usize, what: &str) -> anyhow::Result<SystemTime> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while fake.request_count() < n {
        anyhow::ensure!(Instant::now() < deadline, "{what}: no request in 10 s");
        tokio::time::sleep(Duration::from_micros(100)).await;
    }
    Ok(SystemTime::now())
}

async fn measure(bench: &QueueBench, replica: &Replica, fake: &FakeProvider) -> anyhow::Result<()> {
    let mut client = InvestigationsClient::connect(replica.endpoint.clone()).await?;
    let (db, connection) = tokio_postgres::connect(&bench.url, tokio_postgres::NoTls).await?;
    let connection = tokio::spawn(connection);
    let mut samples = Vec::with_capacity(bench.samples);
    for i in 0..=bench.samples {
        let base = fake.request_count();
        fake.hold_answers();
        // The first burst: its answer, its report; the queued message's
        // burst: the same.
        for text in [
            "Reading the logs.",
            "Report.",
            "Looking at pricing-svc.",
            "Report.",
        ] {
            fake.reply(FakeReply::text(text));
        }
        let session = new_session(&mut client).await?;
        wait_count(fake, base + 1, "the first model call").await?;
        let sent = client
            .send_message(pb::SendMessageRequest {
                session_id: session.clone(),
                message: "It's not the DB, look at pricing-svc.".into(),
                idempotency_key: String::new(),
                if_running: pb::IfRunning::Enqueue.into(),
            })
            .await?
            .into_inner();
        anyhow::ensure!(sent.queued, "the message was not queued: {sent:?}");
        fake.release_answers();
        let first = wait_count(fake, base + 3, "the queued message's burst").await?;
        let ended: time::OffsetDateTime = db
            .query_one(
                "SELECT created_at FROM reports WHERE session_id = $1::text::uuid AND burst = 1",
                &[&session],
            )
            .await
            .context("the first burst's report")?
            .get(0);
        let first = time::OffsetDateTime::from(first);
        wait_count(fake, base + 4, "the second report").await?;
        // The first sample warms the pools up.
        if i > 0 {
            samples.push(Duration::try_from(first - ended).unwrap_or(Duration::ZERO));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    samples.sort();
    println!(
        "burst end (its report stored) → the queued message's first model request, {} sessions: \
         p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms",
        bench.samples,
        ms(pick(&samples, 0.5)),
        ms(pick(&samples, 0.9)),
        ms(*samples.last().unwrap_or(&Duration::ZERO)),
    );
    drop(db);
    connection.abort();
    Ok(())
}
