//! An asynchronous failover with a real primary/standby pair: PostgreSQL
//! streaming replication (`pg_basebackup -R -X stream`), two `inquest
//! serve` replicas on a multi-host URL (`target_session_attrs=read-write`),
//! a burst running on one and a watcher on the other. The standby is
//! stopped mid-burst, so the next turns exist only on the primary (the loss
//! is certain); the primary is killed (kill -9 of its postmaster); the
//! standby comes back and is promoted. The burst's holder finds the head
//! behind what it published, stores tombstones under the lost seqs, and
//! the session is recovered from what the new primary holds; when the
//! holder died with the primary, the other replica, which heard the lost
//! turns announced, stores them at its claim. The watcher
//! is told (DATA_LOSS, then reads the tombstones); no seq it received holds
//! other content afterwards unless it is a tombstone; nothing ends failed.
//!
//! Streaming replication with a promotion the test drives (rather than
//! pg_auto_failover): the test decides exactly which commits the standby
//! lacks, which is what this promise is about.

mod support;

use std::{path::PathBuf, process::Command, time::Duration};

use inquest_proto::v1 as pb;
use support::{Server, create_incident, fleet::python, follow::follow, free_port};

/// A primary and its asynchronous standby, in a directory of their own,
/// run as `postgres` when root. Both are stopped (immediate) when dropped.
struct Pair {
    root: tempfile::TempDir,
    bin: PathBuf,
    as_postgres: bool,
    primary: u16,
    standby: u16,
}

impl Pair {
    fn start() -> Pair {
        let bin = inquest_store::embedded::find_binaries()
            .expect("PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup) are needed");
        let root = tempfile::Builder::new()
            .prefix("inquest-failover-")
            .tempdir_in("/tmp")
            .unwrap();
        let as_postgres = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        if as_postgres {
            run(Command::new("chown").args(["postgres", root.path().to_str().unwrap()]));
        }
        let pair = Pair {
            root,
            bin,
            as_postgres,
            primary: free_port(),
            standby: free_port(),
        };
        run(pair
            .pg("initdb")
            .args(["--auth=trust", "-U", "postgres", "-D"])
            .arg(pair.data("p")));
        pair.start_node("p", pair.primary);
        run(pair
            .pg("pg_basebackup")
            .args(["-h", "127.0.0.1", "-p", &pair.primary.to_string()])
            .args(["-U", "postgres", "-R", "-X", "stream", "-D"])
            .arg(pair.data("s")));
        pair.start_node("s", pair.standby);
        pair
    }

    fn data(&self, node: &str) -> PathBuf {
        self.root.path().join(node)
    }

    fn pg(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(path);
            cmd
        } else {
            Command::new(path)
        }
    }

    fn start_node(&self, node: &str, port: u16) {
        let options = format!(
            "-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} \
             -c max_connections=100 -c wal_level=replica -c max_wal_senders=5 -c hot_standby=on",
            self.root.path().display()
        );
        run(self
            .pg("pg_ctl")
            .arg("-D")
            .arg(self.data(node))
            .arg("-l")
            .arg(self.root.path().join(format!("{node}.log")))
            .args(["-o", &options, "-w", "-t", "60", "start"]));
    }

    fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
            self.primary, self.standby
        )
    }

    fn primary_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.primary)
    }

    fn stop_standby(&self) {
        run(self
            .pg("pg_ctl")
            .arg("-D")
            .arg(self.data("s"))
            .args(["-m", "fast", "-w", "stop"]));
    }

    fn kill_primary(&self) {
        let pid = std::fs::read_to_string(self.data("p").join("postmaster.pid"))
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .trim()
            .to_owned();
        run(Command::new("kill").args(["-KILL", &pid]));
    }

    fn promote_standby(&self) {
        self.start_node("s", self.standby);
        run(self
            .pg("pg_ctl")
            .arg("-D")
            .arg(self.data("s"))
            .args(["-w", "-t", "60", "promote"]));
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for node in ["p", "s"] {
            let _ = self
                .pg("pg_ctl")
                .arg("-D")
                .arg(self.data(node))
                .args(["-m", "immediate", "stop"])
                .output();
        }
    }
}

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
}

async fn head_on(db: &inquest_tests::tokio_postgres::Client, session: &str) -> i64 {
    db.query_one(
        "SELECT head_seq FROM sessions WHERE id = $1::text::uuid",
        &[&session],
    )
    .await
    .unwrap()
    .get(0)
}

/// The holder's lease outlives the failover: its next write finds the
/// loss, and only tombstones ever stand where the watcher saw other turns.
#[tokio::test]
async fn an_asynchronous_failover_never_rewrites_a_turn_a_watcher_saw() {
    failover("20s", "1s", Duration::ZERO, Writer::Lives).await;
}

/// The failover outlasts the holder's lease (the new primary comes up 4 s
/// after the old one died, the lease is 2 s): the burst ends on its
/// deadline and marks the loss once the store answers, racing the claim
/// of the orphan by either replica. A claim that wins finds the head below
/// the seqs its replica heard announced and marks them itself, so here
/// too only tombstones ever stand where the watcher saw other turns.
#[tokio::test]
async fn a_failover_longer_than_the_lease_never_rewrites_a_turn_a_watcher_saw() {
    failover("2s", "500ms", Duration::from_secs(4), Writer::Lives).await;
}

/// The replica that wrote the lost turns dies with the primary (kill -9 of
/// both): nobody is left who wrote them. The other replica, whose watcher
/// received them, heard them announced; its claim finds the head below
/// them and stores their tombstones before it recovers the session.
#[tokio::test]
async fn a_failover_that_kills_the_writer_too_never_rewrites_a_turn_a_watcher_saw() {
    failover("2s", "500ms", Duration::ZERO, Writer::Dies).await;
}

/// The moments of one run's failover, from `INQUEST_FAILOVER_SEED` or
/// the clock (printed, so a failure can be replayed).
struct Timing {
    /// The head at which the standby stops (what it has is kept).
    standby_at: i64,
    /// How many turns at least exist only on the primary.
    lost: i64,
    /// How long after them the primary is killed.
    then: Duration,
}

impl Timing {
    fn new() -> Timing {
        let seed = std::env::var("INQUEST_FAILOVER_SEED")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        // splitmix64: three draws are all this needs.
        let mut state = seed;
        let mut draw = |n: u64| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) % n
        };
        let timing = Timing {
            standby_at: 2 + draw(5) as i64,
            lost: 1 + draw(4) as i64,
            then: Duration::from_millis(draw(450)),
        };
        eprintln!(
            "failover timing: INQUEST_FAILOVER_SEED={seed}: standby stops at head {}, \
             at least {} turn(s) lost, primary killed {:?} after",
            timing.standby_at, timing.lost, timing.then
        );
        timing
    }
}

/// Whether the replica running the burst outlives the failover.
#[derive(PartialEq)]
enum Writer {
    Lives,
    Dies,
}

/// Every seq the watcher saw now holds what it saw or a tombstone, and the
/// watcher was told of any difference.
async fn failover(ttl: &str, renew: &str, down: Duration, writer: Writer) {
    let pair = Pair::start();
    let python = python();
    let dir = tempfile::tempdir().unwrap();
    let replies: Vec<serde_json::Value> = (1..=14)
        .map(|i| {
            serde_json::json!({
                "text": format!("Reading the status, step {i}."),
                "tool_calls": [{"name": "slow_read", "arguments": {"service": "checkout", "seconds": 0.4}}],
            })
        })
        .collect();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        serde_json::json!({"replies": replies, "final": "Checkout is fine."}).to_string(),
    )
    .unwrap();
    let servers = serde_json::json!({"mcpServers": {"incident": {
        "command": python,
        "args": [inquest_testkit::mcp::incident_tools_script().display().to_string()],
    }}});
    let mcp = dir.path().join("mcp.json");
    std::fs::write(&mcp, servers.to_string()).unwrap();
    let config = dir.path().join("inquest.toml");
    std::fs::write(
        &config,
        format!(
            "[admin]\nenabled = false\n\n[approval]\nmode = \"off\"\n\n\
             [lease]\nttl = \"{ttl}\"\nrenew_interval = \"{renew}\"\nreap_interval = \"500ms\"\n\n\
             [[providers]]\nkind = \"script\"\nname = \"script\"\nscript = \"{}\"\n\n\
             [mcp]\nconfig = \"{}\"\n",
            script.display(),
            mcp.display()
        ),
    )
    .unwrap();
    let url = pair.url();
    let args = ["--database-url", &url, "--config", config.to_str().unwrap()];
    let holder = Server::start_with("failover-a", &args, &[]).await;
    let watcher = Server::start_with("failover-b", &args, &[]).await;
    let mut c = holder.client().await;
    let incident = create_incident(&mut c, "checkout latency").await;
    let session = c
        .start_session(pb::StartSessionRequest {
            incident_id: incident.id,
            message: "Why is checkout slow?".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .id;
    let followed = tokio::spawn(follow(watcher.port, session.clone()));
    let db = inquest_tests::connect(&pair.primary_url()).await;
    // When the standby stops, how many turns are lost and when the primary
    // dies after them (mid tool call or right after a commit) vary by run.
    let timing = Timing::new();
    // Replicated up to here; then the standby goes, and the next turns
    // exist only on the primary.
    for _ in 0..300 {
        if head_on(&db, &session).await >= timing.standby_at {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    pair.stop_standby();
    let stopped_at = head_on(&db, &session).await;
    for _ in 0..300 {
        if head_on(&db, &session).await >= stopped_at + timing.lost {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(timing.then).await;
    let lost_up_to = head_on(&db, &session).await;
    assert!(
        lost_up_to >= stopped_at + timing.lost,
        "the burst went on on the primary"
    );
    drop(db);
    let holder = match writer {
        Writer::Lives => Some(holder),
        Writer::Dies => {
            holder.kill9().await;
            None
        }
    };
    pair.kill_primary();
    tokio::time::sleep(down).await;
    pair.promote_standby();
    eprintln!("standby stopped at head {stopped_at}; primary killed at head {lost_up_to}");

    let (seen, endings) = tokio::time::timeout(Duration::from_secs(120), followed)
        .await
        .expect("the watcher did not finish in 120 s")
        .unwrap();
    let db = inquest_tests::connect(&pair.url()).await;
    let stored: Vec<(i64, String)> = db
        .query(
            "SELECT seq, content FROM turns WHERE session_id = $1::text::uuid ORDER BY seq",
            &[&session],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let status: String = db
        .query_one(
            "SELECT status::text FROM sessions WHERE id = $1::text::uuid",
            &[&session],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(status, "completed", "{stored:#?}");
    let seqs: Vec<i64> = stored.iter().map(|t| t.0).collect();
    assert_eq!(
        seqs,
        (1..=i64::try_from(seqs.len()).unwrap()).collect::<Vec<_>>()
    );
    // The lost seqs hold tombstones; everything the watcher received under
    // a seq is what is stored there, or was replaced by its tombstone.
    let tombstones: Vec<i64> = stored
        .iter()
        .filter(|t| t.1.starts_with(inquest_core::LOST_IN_FAILOVER))
        .map(|t| t.0)
        .collect();
    assert!(!tombstones.is_empty(), "no tombstone: {stored:#?}");
    // Only turns the standby never received are lost: none it had.
    assert!(
        tombstones.iter().all(|s| *s > 1),
        "tombstones {tombstones:?} where the standby had the turn"
    );
    let mut rewritten = Vec::new();
    for (seq, content) in &seen {
        let now = stored
            .iter()
            .find(|t| t.0 == *seq)
            .map(|t| t.1.as_str())
            .unwrap_or_default();
        if now != content && !now.starts_with(inquest_core::LOST_IN_FAILOVER) {
            rewritten.push(*seq);
        }
    }
    assert!(
        rewritten.is_empty(),
        "seqs {rewritten:?} hold other content than the watcher saw: {seen:#?}\n{stored:#?}"
    );
    // The watcher was told, if it had received a lost turn.
    let changed = seen.iter().any(|(seq, content)| {
        stored
            .iter()
            .find(|t| t.0 == *seq)
            .is_some_and(|t| &t.1 != content)
    });
    let told = endings
        .iter()
        .any(|s| matches!(s.code(), tonic::Code::DataLoss | tonic::Code::OutOfRange));
    assert!(
        !changed || told,
        "received lost turns without being told: {endings:?}"
    );
    if let Some(holder) = holder {
        holder.stop().await;
    }
    watcher.stop().await;
}
