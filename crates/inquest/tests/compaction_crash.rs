//! A kill -9 during compaction: the `inquest` binary is stopped
//! dead at "compaction summary received, not yet stored" (failpoint
//! `compaction-summary-received`); another process recovers the orphaned
//! session, compacts again and finishes. Nothing is lost (every tool
//! result stored, every call run once) and no summary is stored twice.

mod support;

use inquest_proto::v1 as pb;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use support::{Server, all_turns, create_incident, settled, start_session};

#[tokio::test]
async fn a_kill_during_compaction_recovers_with_nothing_lost_and_no_duplicate_summary() {
    const WINDOW: u64 = 16_384;
    let fake = FakeProvider::start(Flavor::OpenAi)
        .await
        .unwrap()
        .with_context_window(WINDOW);
    for i in 0..8 {
        let args = format!("{{\"path\": \"file_{i}.log\"}}");
        fake.reply(FakeReply::default().call(&format!("c{i}"), "read_file", &args));
    }
    fake.reply(FakeReply::text("Every log says the pool was exhausted."));
    let dir = tempfile::Builder::new()
        .prefix("inquest-compaction-crash-")
        .tempdir_in("/tmp")
        .unwrap();
    let evidence = dir.path().join("evidence");
    std::fs::create_dir(&evidence).unwrap();
    for i in 0..8 {
        let line = format!("file {i}: 10:00 checkout p99=2500ms pool=exhausted\n");
        std::fs::write(
            evidence.join(format!("file_{i}.log")),
            line.repeat(8192 / line.len()),
        )
        .unwrap();
    }
    let config = dir.path().join("inquest.toml");
    std::fs::write(
        &config,
        format!(
            "[lease]\nttl = \"2000ms\"\nrenew_interval = \"500ms\"\nreap_interval = \"200ms\"\n\n\
             [agent]\nmax_model_calls_per_burst = 100\n\n\
             [tools]\nfiles_root = \"{}\"\nfiles_server = \"evidence\"\n\n\
             [[providers]]\nkind = \"openai\"\nname = \"fake\"\nmodel = \"fake-model\"\n\
             base_url = \"{}\"\nmax_retries = 0\ntimeout = \"60s\"\ncontext_window = {WINDOW}\n",
            evidence.display(),
            fake.base_url()
        ),
    )
    .unwrap();
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    let config = config.to_str().unwrap();

    let first = Server::start_with(
        "first",
        &["--config", config, "--database-url", &url],
        &[(
            "INQUEST_FAILPOINTS",
            "compaction-summary-received=1*return(hang)",
        )],
    )
    .await;
    let mut c = first.client().await;
    let incident = create_incident(&mut c, "checkout latency").await;
    let session = start_session(&mut c, &incident.id, "read every log")
        .await
        .unwrap();
    first
        .wait_for_log("failpoint compaction-summary-received reached")
        .await;
    let summaries_before_crash = fake.summary_count();
    assert_eq!(summaries_before_crash, 1);
    let stored = all_turns(&mut c, &session.id).await;
    assert!(
        !stored.iter().any(|t| t.role() == pb::TurnRole::Compaction),
        "the summary is not stored before the failpoint"
    );
    first.kill9().await;

    let second =
        Server::start_with("second", &["--config", config, "--database-url", &url], &[]).await;
    let mut c = second.client().await;
    let s = settled(&mut c, &session.id).await;
    assert_eq!(s.exit_reason, "completed", "{s:?}");
    let stored = all_turns(&mut c, &session.id).await;

    // Nothing lost, nothing run twice: 8 results, one per call and file.
    let results: Vec<&pb::SessionTurn> = stored
        .iter()
        .filter(|t| t.role() == pb::TurnRole::Tool)
        .collect();
    assert_eq!(results.len(), 8);
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r.tool_call_id, format!("c{i}"));
        assert!(r.content.contains(&format!("file {i}:")));
    }
    // The lost summary was made again, and no summary is stored twice:
    // every stored compaction keeps a later tail than the one before.
    let compactions: Vec<&pb::SessionTurn> = stored
        .iter()
        .filter(|t| t.role() == pb::TurnRole::Compaction)
        .collect();
    assert!(!compactions.is_empty());
    assert_eq!(fake.summary_count(), compactions.len() + 1);
    let kept: Vec<i64> = compactions
        .iter()
        .map(|t| t.compaction.as_ref().unwrap().first_retained_seq)
        .collect();
    assert!(kept.windows(2).all(|w| w[0] < w[1]), "{kept:?}");
    second.stop().await;
}
