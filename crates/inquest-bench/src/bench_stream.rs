//! `inquest bench stream`: streamed model text, from the provider writing
//! a chunk to a watcher receiving it, over real gRPC.
//!
//! An in-process server (the same `Application` as `serve`) whose only
//! provider is the OpenAI-flavoured fake (`inquest_testkit::fake`, a real
//! HTTP server on loopback) streaming one long answer: `chunks` pieces of
//! one 8-byte word each (so every piece ends at a word boundary and is
//! released at once), `delay` apart. For each watcher count, a fresh
//! session is started, its watchers attach (`WatchSession`, 100 streams
//! per HTTP/2 connection) while the fake holds the answer, which it then
//! streams; every chunk the fake writes is timed: from the instant the fake handed the chunk
//! to hyper (`FakeProvider::chunks`) to the instant a watcher's stream had
//! received the text up to that chunk's end. The real adapter reads the
//! SSE, the loop hands the text to `BurstLog`, the broadcaster fans it
//! out, the watch task sends it. Client, server and fake share the
//! process and its cores.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use anyhow::Context;
use inquest_agent::{ProviderConfig, ProviderKind};
use inquest_proto::v1::{
    self as pb, investigations_client::InvestigationsClient, watch_event::Event,
};
use inquest_server::{Application, Config};
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

const STREAMS_PER_CONNECTION: usize = 100;
/// Each streamed piece: one word of this many bytes, space included.
const WORD: usize = 8;

pub struct StreamBench {
    pub url: String,
    pub watchers: Vec<usize>,
    pub chunks: usize,
    pub delay: Duration,
}

pub async fn run(bench: StreamBench) -> anyhow::Result<()> {
    let fake = FakeProvider::start(Flavor::OpenAi).await?;
    fake.set_streaming(bench.delay, WORD);
    let files = std::env::temp_dir().join(format!("inquest-bench-stream-{}", std::process::id()));
    std::fs::create_dir_all(&files)?;
    let mut provider = ProviderConfig::new(ProviderKind::OpenAi);
    provider.name = Some("fake".into());
    provider.model = Some("bench-model".into());
    provider.base_url = Some(fake.base_url());
    provider.max_retries = Some(0);
    let mut config = Config {
        listen: "127.0.0.1:0".parse()?,
        database_url: Some(bench.url.clone()),
        providers: vec![provider],
        ..Config::default()
    };
    config.tools.files_root = Some(files.clone());
    config.store.max_connections = 8;
    let app = Application::build(&config, &bench.url).await?;
    let addr = app.local_addr()?;
    let log = app.turn_log().clone();
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(app.run(shutdown.clone()));
    let result = phases(&bench, &fake, &log, &format!("http://{addr}")).await;
    shutdown.cancel();
    server.await.context("server task panicked")??;
    let _ = std::fs::remove_dir_all(&files);
    result
}

/// What one watcher saw: (text length received, when) per delta.
type Seen = Vec<(usize, Instant)>;

async fn phases(
    bench: &StreamBench,
    fake: &FakeProvider,
    log: &inquest_server::TurnLog,
    endpoint: &str,
) -> anyhow::Result<()> {
    println!(
        "streamed text: chunk written by the provider -> delta received by a watcher \
         ({} chunks of {WORD} bytes, {:?} apart, OpenAI-flavoured fake, real gRPC)",
        bench.chunks, bench.delay
    );
    println!(
        "{:>8} | {:>8} | {:>9} {:>9} {:>9} | {:>13}",
        "watchers", "samples", "p50 ms", "p99 ms", "max ms", "dropped/gaps"
    );
    let text: String = (0..bench.chunks)
        .map(|i| format!("w{:0>width$} ", i % 1_000_000, width = WORD - 2))
        .collect();
    let mut client =
        InvestigationsClient::new(Channel::from_shared(endpoint.to_owned())?.connect().await?);
    let incident = client
        .create_incident(pb::CreateIncidentRequest {
            title: "bench stream".into(),
            description: String::new(),
        })
        .await?
        .into_inner()
        .id;
    for &n in &bench.watchers {
        // The answer is held until every watcher is subscribed.
        fake.hold_answers()
            .reply(FakeReply::text(&text))
            .reply(FakeReply::text("report"));
        let session = client
            .start_session(pb::StartSessionRequest {
                incident_id: incident.clone(),
                message: "stream a long answer".into(),
                idempotency_key: String::new(),
            })
            .await?
            .into_inner()
            .id;
        let session_id = inquest_core::SessionId::parse(&session)?;
        let mut channels = Vec::new();
        for _ in 0..n.div_ceil(STREAMS_PER_CONNECTION).max(1) {
            channels.push(Channel::from_shared(endpoint.to_owned())?.connect().await?);
        }
        let mut watchers: JoinSet<anyhow::Result<(Seen, bool)>> = JoinSet::new();
        for w in 0..n {
            let mut watcher =
                InvestigationsClient::new(channels[w / STREAMS_PER_CONNECTION].clone());
            let mut stream = watcher
                .watch_session(pb::WatchSessionRequest {
                    session_id: session.clone(),
                    after_seq: 0,
                    after_committed_at: None,
                })
                .await?
                .into_inner();
            watchers.spawn(async move {
                let mut seen = Vec::new();
                let mut gap = false;
                let mut shown = 0usize;
                loop {
                    match stream.message().await {
                        Ok(Some(pb::WatchEvent {
                            event: Some(Event::TextDelta(d)),
                        })) => {
                            let at = Instant::now();
                            let offset = usize::try_from(d.offset).unwrap_or(usize::MAX);
                            if offset == shown {
                                shown += d.text.len();
                                seen.push((shown, at));
                            } else {
                                gap = true;
                            }
                        }
                        Ok(Some(pb::WatchEvent {
                            event: Some(Event::Turn(t)),
                        })) if t.role() == pb::TurnRole::Assistant => return Ok((seen, gap)),
                        Ok(Some(_)) => {}
                        Ok(None) => return Ok((seen, gap)),
                        Err(s) => anyhow::bail!("watch failed: {s}"),
                    }
                }
            });
        }
        let waited = Instant::now();
        while log.live().broadcaster().subscriber_count(session_id) < n {
            anyhow::ensure!(
                waited.elapsed() < Duration::from_secs(60),
                "the watchers did not all subscribe"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let attached = Instant::now();
        fake.release_answers();
        let mut all: Vec<Seen> = Vec::new();
        let mut gaps = 0usize;
        while let Some(done) = tokio::time::timeout(Duration::from_secs(600), watchers.join_next())
            .await
            .context("watchers did not finish")?
        {
            let (seen, gap) = done.context("watcher panicked")??;
            gaps += usize::from(gap);
            all.push(seen);
        }
        // Chunks of this phase's long answer (the latest one that reached
        // the whole text's length; the report's answers are short).
        let chunks = fake.chunks();
        let answer = chunks
            .iter()
            .filter(|c| c.text_end == text.len())
            .map(|c| c.answer)
            .max()
            .context("the long answer was not streamed")?;
        let written: HashMap<usize, Instant> = chunks
            .into_iter()
            .filter(|c| c.answer == answer && c.at > attached)
            .map(|c| (c.text_end, c.at))
            .collect();
        let mut latencies = Vec::new();
        for seen in &all {
            for (end, at) in &written {
                // The first delta that brought the text up to this chunk's end.
                let i = seen.partition_point(|(len, _)| len < end);
                if let Some((_, received)) = seen.get(i) {
                    latencies.push(received.saturating_duration_since(*at));
                }
            }
        }
        latencies.sort();
        anyhow::ensure!(!latencies.is_empty(), "no chunk was timed at {n} watchers");
        println!(
            "{:>8} | {:>8} | {:>9.2} {:>9.2} {:>9.2} | {:>13}",
            n,
            latencies.len(),
            ms(pick(&latencies, 0.5)),
            ms(pick(&latencies, 0.99)),
            ms(latencies.last().copied().unwrap_or_default()),
            gaps
        );
        drop(channels);
        while log.live().broadcaster().subscriber_count(session_id) > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    Ok(())
}

fn pick(sorted: &[Duration], q: f64) -> Duration {
    sorted
        .get(((sorted.len() as f64 * q) as usize).min(sorted.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
