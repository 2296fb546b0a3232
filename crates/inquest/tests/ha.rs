//! PostgreSQL high availability with a synchronous standby: three `inquest
//! serve` replicas on the multi-host URL
//! (`postgres://…@h1:p1,h2:p2/db?target_session_attrs=read-write`), an
//! investigation started on each, a watcher for every investigation on
//! every replica, and one database fault while they run:
//!
//! - a planned switchover (the primary shut down cleanly, the standby
//!   promoted, the old primary back as its standby);
//! - kill -9 of the primary's postmaster, the standby promoted;
//! - a demotion: the primary fenced first (it refuses writes, SQLSTATE
//!   25006, to the connections replicas hold on it), then stopped, the
//!   standby promoted, and the old primary back as its standby;
//! - a partition: the primary, running in a network namespace, is cut off
//!   (still running, its connections silent), and the standby promoted.
//!
//! Afterwards: every session completed (none failed), its seqs gapless,
//! and every watcher received every turn exactly once, with the content
//! the new primary holds.
//!
//! The cluster is plain streaming replication with promotions the test
//! drives (`inquest_testkit::ha`, where the reason is given), not
//! pg_auto_failover: the test decides when the fault happens and what
//! the standby holds.

mod support;

use std::time::Duration;

use inquest_proto::v1 as pb;
use inquest_testkit::ha::Cluster;
use support::{ReplicaConfig, create_incident, fleet::Fleet, follow::follow};

/// What happens to the database while the investigations run.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    Switchover,
    KillPrimary,
    Demotion,
    Partition,
}

#[tokio::test]
async fn a_planned_switchover_loses_and_repeats_nothing() {
    ha(&[Fault::Switchover], STEPS).await;
}

#[tokio::test]
async fn a_killed_primary_loses_and_repeats_nothing() {
    ha(&[Fault::KillPrimary], STEPS).await;
}

#[tokio::test]
async fn a_demoted_primary_loses_and_repeats_nothing() {
    ha(&[Fault::Demotion], STEPS).await;
}

/// The primary runs in a network namespace whose link is cut: it goes on
/// running, every connection to it goes silent (nothing closes them), and
/// the first host of the multi-host URL answers nothing.
#[tokio::test]
async fn a_primary_cut_off_from_the_network_loses_and_repeats_nothing() {
    ha(&[Fault::Partition], STEPS).await;
}

/// Ten failovers in a row under the same three investigations (kill -9,
/// switchover and demotion in turn), each once the bursts went on after
/// the one before: the soak of the synchronous promise. (The partition is
/// left out: its node is not brought back.)
#[tokio::test]
async fn ten_failovers_in_a_row_lose_and_repeat_nothing() {
    let faults: Vec<Fault> = [Fault::KillPrimary, Fault::Switchover, Fault::Demotion]
        .into_iter()
        .cycle()
        .take(10)
        .collect();
    ha(&faults, 300).await;
}

/// Steps of each investigation's script for one fault: each a short model
/// answer and a file tool call.
const STEPS: usize = 40;

fn config(steps: usize) -> ReplicaConfig {
    let dir = tempfile::Builder::new()
        .prefix("inquest-ha-")
        .tempdir_in("/tmp")
        .unwrap();
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/checkout-latency")
        .canonicalize()
        .unwrap();
    let replies: Vec<serde_json::Value> = (1..=steps)
        .map(|i| {
            serde_json::json!({
                "text": format!("Step {i}: reading the deploy log."),
                "tool_calls": [{"name": "search", "arguments": {"pattern": "checkout-api", "path": "deploys/deploys.log"}}],
                "delay": "100ms",
            })
        })
        .collect();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        serde_json::json!({"replies": replies, "final": "Checkout is fine."}).to_string(),
    )
    .unwrap();
    let config = dir.path().join("inquest.toml");
    std::fs::write(
        &config,
        format!(
            "[admin]\nenabled = false\n\n[approval]\nmode = \"off\"\n\n\
             [lease]\nttl = \"4s\"\nrenew_interval = \"1s\"\nreap_interval = \"500ms\"\n\n\
             [store]\nmax_connections = 4\n\n\
             [agent]\nmax_model_calls_per_burst = {calls}\niteration_budget = {calls}\n\n\
             [[providers]]\nkind = \"script\"\nname = \"script\"\nscript = \"{}\"\n\n\
             [tools]\nfiles_root = \"{}\"\nfiles_server = \"evidence\"\n",
            script.display(),
            example.join("evidence").display(),
            calls = steps + 5,
        ),
    )
    .unwrap();
    let count_file = dir.path().join("executions.txt");
    ReplicaConfig {
        dir,
        config,
        count_file,
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// One fault, the cluster left with a new primary (and, but for the
/// partition, the old one streaming from it again).
fn inject(cluster: &mut Cluster, fault: Fault) {
    let (old, new) = (cluster.primary, cluster.standby());
    match fault {
        Fault::Switchover => cluster.switchover(new).expect("switchover"),
        Fault::KillPrimary => {
            cluster.kill_postmaster(old).expect("kill -9");
            cluster.promote(new).expect("promotion");
            cluster
                .rejoin(old, false)
                .expect("the old primary re-cloned");
        }
        Fault::Demotion => {
            // Fenced: every write on the connections held there is
            // refused from now on, as a demoted node refuses them.
            cluster
                .sql(old, "ALTER SYSTEM SET default_transaction_read_only = on")
                .expect("fence");
            cluster.sql(old, "SELECT pg_reload_conf()").expect("reload");
            std::thread::sleep(Duration::from_secs(2));
            cluster
                .sql(old, "ALTER SYSTEM RESET default_transaction_read_only")
                .expect("unfence for its life as a standby");
            cluster.switchover(new).expect("switchover");
        }
        Fault::Partition => {
            cluster.cut_primary().expect("the partition");
            cluster.promote(new).expect("promotion");
        }
    }
}

/// One case at a time: each runs a two-node cluster and three replicas,
/// and two of them at once on a 2-core machine would time each other out.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn ha(faults: &[Fault], steps: usize) {
    let _turn = ONE_AT_A_TIME.lock().await;
    let bin = inquest_store::embedded::find_binaries()
        .expect("PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup, psql) are needed");
    let partitioned = faults.contains(&Fault::Partition);
    let mut cluster = blocking(move || {
        match partitioned {
            true => Cluster::start_partitionable(&bin, 1, true),
            false => Cluster::start(&bin, 1, true),
        }
        .expect("the HA cluster")
    })
    .await;
    let url = cluster.url();
    let config = config(steps);
    let names = ["ha-a", "ha-b", "ha-c"];
    let mut fleet = Fleet::new();
    fleet.start(&names, &config, &url).await;

    // One investigation started on each replica; each followed on all.
    let mut sessions = Vec::new();
    for name in names {
        let mut c = fleet.client(name).await;
        let incident = create_incident(&mut c, &format!("checkout latency via {name}")).await;
        let id = c
            .start_session(pb::StartSessionRequest {
                incident_id: incident.id,
                message: "Why is checkout slow?".into(),
                idempotency_key: String::new(),
            })
            .await
            .unwrap()
            .into_inner()
            .id;
        sessions.push(id);
    }
    let mut watchers = Vec::new();
    for id in &sessions {
        for name in names {
            let port = fleet.get(name).port;
            watchers.push((id.clone(), name, tokio::spawn(follow(port, id.clone()))));
        }
    }

    // Before each fault: every investigation running and a few steps
    // further than at the fault before (so the bursts went on after it).
    let mut least_before = 0;
    for (n, fault) in faults.iter().copied().enumerate() {
        let db = inquest_tests::connect(&cluster.node_url(cluster.primary)).await;
        let under_way = async || -> (i64, i64) {
            let row = db
                .query_one(
                    "SELECT coalesce(min(head_seq), 0), \
                     count(*) FILTER (WHERE status = 'running') \
                     FROM sessions WHERE id = ANY($1::text[]::uuid[])",
                    &[&sessions],
                )
                .await
                .unwrap();
            (row.get(0), row.get(1))
        };
        for _ in 0..1200 {
            if under_way().await.0 >= least_before + 6 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (least, running) = under_way().await;
        assert!(
            least >= least_before + 6 && running == 3,
            "fault {n} must come mid-burst, after progress: least head {least} \
             (was {least_before}), {running} of 3 running"
        );
        least_before = least;
        drop(db);
        eprintln!("fault {n}: {fault:?}");
        let at = std::time::Instant::now();
        cluster = blocking(move || {
            let mut cluster = cluster;
            inject(&mut cluster, fault);
            cluster
        })
        .await;
        eprintln!("fault {n} done in {:?}", at.elapsed());
    }

    // The new primary itself (the old one may be out of reach).
    let db = inquest_tests::connect(&cluster.node_url(cluster.primary)).await;
    for (id, name, watcher) in watchers {
        let (seen, endings) = tokio::time::timeout(Duration::from_secs(180), watcher)
            .await
            .unwrap_or_else(|_| panic!("the watcher of {id} on {name} did not finish"))
            .unwrap();
        let stored: Vec<(i64, String)> = db
            .query(
                "SELECT seq, content FROM turns WHERE session_id = $1::text::uuid ORDER BY seq",
                &[&id],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let seqs: Vec<i64> = stored.iter().map(|t| t.0).collect();
        assert_eq!(
            seqs,
            (1..=i64::try_from(seqs.len()).unwrap()).collect::<Vec<_>>(),
            "seqs of {id} are not gapless"
        );
        assert!(
            stored
                .iter()
                .all(|t| !t.1.starts_with(inquest_core::LOST_IN_FAILOVER)),
            "a synchronous standby lost turns of {id}: {stored:#?}"
        );
        assert_eq!(
            seen, stored,
            "the watcher of {id} on {name} did not receive every turn once, as stored \
             (endings {endings:?})"
        );
        let status: String = db
            .query_one(
                "SELECT status::text FROM sessions WHERE id = $1::text::uuid",
                &[&id],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(status, "completed", "{id}: {stored:#?}");
    }
    fleet.stop_all().await;
    blocking(move || drop(cluster)).await;
}
