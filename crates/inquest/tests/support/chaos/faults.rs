//! The faults, injected one at a time at random moments until the fault
//! window closes. Kinds come in shuffled rounds, so a run of a few rounds
//! has every kind. Each fault restores what it broke before the next one
//! (a killed replica is restarted, a stopped one continued, the link
//! healed), so at most one replica is down at a time. In the failover
//! mode a failover is one more kind: it returns once the old primary is
//! the new one's synchronous standby again.

use std::{path::Path, time::Duration};

use tokio::time::Instant;

use super::{Rng, Settings, cluster::Cluster, executions, netns::Netns, now, replicas::Fleet};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Kill9,
    Sigterm,
    Sigstop,
    ListenKill,
    ConnKill,
    PgRestart,
    Partition,
    Failover,
}

pub const KINDS: [Kind; 8] = [
    Kind::Kill9,
    Kind::Sigterm,
    Kind::Sigstop,
    Kind::ListenKill,
    Kind::ConnKill,
    Kind::PgRestart,
    Kind::Partition,
    Kind::Failover,
];

/// How many faults of each kind were injected, in [`KINDS`] order.
#[derive(Debug, Default, Clone)]
pub struct Counts(pub [u32; 8]);

impl Counts {
    pub fn of(&self, kind: Kind) -> u32 {
        self.0[KINDS.iter().position(|k| *k == kind).unwrap_or(0)]
    }

    fn add(&mut self, kind: Kind) {
        self.0[KINDS.iter().position(|k| *k == kind).unwrap_or(0)] += 1;
    }
}

/// The replicas' pooled connections (not their LISTEN connections).
const POOL_CONNECTIONS: &str =
    "application_name LIKE 'inquest%' AND application_name NOT LIKE 'inquest-listen%'";

/// What the faults act on.
pub struct Targets<'a> {
    pub fleet: &'a mut Fleet,
    pub cluster: &'a Cluster,
    pub netns: &'a Netns,
    /// The fleet index of the replica inside the namespace.
    pub partitioned: usize,
    pub exec_log: &'a Path,
}

/// Injects faults until `until`; returns the counts. A fault that cannot
/// be injected or undone (a replica that will not restart) is an error:
/// the test cannot go on meaningfully.
pub async fn run(
    t: &mut Targets<'_>,
    settings: &Settings,
    until: Instant,
    mut rng: Rng,
) -> Result<Counts, String> {
    let mut counts = Counts::default();
    let mut round: Vec<Kind> = Vec::new();
    loop {
        let gap = rng.pause(1.0, 4.0);
        if Instant::now() + gap >= until {
            return Ok(counts);
        }
        tokio::time::sleep(gap).await;
        if round.is_empty() {
            round = KINDS
                .into_iter()
                .filter(|k| *k != Kind::Failover || t.cluster.replicated())
                .collect();
            rng.shuffle(&mut round);
        }
        let kind = round.pop().unwrap_or(Kind::Kill9);
        let what = inject(t, settings, &mut rng, kind).await?;
        eprintln!("chaos: {:>7.1} fault {kind:?}: {what}", now());
        counts.add(kind);
    }
}

async fn inject(
    t: &mut Targets<'_>,
    s: &Settings,
    rng: &mut Rng,
    kind: Kind,
) -> Result<String, String> {
    let ttl = s.lease_ttl.as_secs_f64();
    match kind {
        Kind::Kill9 => {
            let i = busy_replica(t, rng, Duration::from_secs(2)).await;
            t.fleet.kill9(i).await?;
            tokio::time::sleep(rng.pause(0.3, 2.0)).await;
            t.fleet.restart(i).await?;
            Ok(format!("kill -9 {} and restart", t.fleet.name(i)))
        }
        Kind::Sigterm => {
            let i = busy_replica(t, rng, Duration::from_secs(4)).await;
            t.fleet.sigterm(i, s.shutdown_grace).await?;
            t.fleet.restart(i).await?;
            Ok(format!("SIGTERM {} and restart", t.fleet.name(i)))
        }
        Kind::Sigstop => {
            let i = busy_replica(t, rng, Duration::from_secs(2)).await;
            let pause = rng.pause(ttl + 0.5, ttl + 2.0);
            t.fleet.pause(i, pause).await?;
            Ok(format!("SIGSTOP {} for {pause:.1?}", t.fleet.name(i)))
        }
        Kind::ListenKill => {
            let n = t
                .cluster
                .terminate("application_name LIKE 'inquest-listen%'")
                .await?;
            Ok(format!("terminated {n} LISTEN connection(s)"))
        }
        Kind::ConnKill => conn_kill(t, rng).await,
        Kind::PgRestart => {
            t.cluster.restart().await?;
            Ok("pg_ctl restart -m fast".into())
        }
        Kind::Partition => partition(t, rng, ttl).await,
        // Mid-burst if any runs: the kill lands while a replica writes.
        Kind::Failover => {
            busy_replica(t, rng, Duration::from_secs(2)).await;
            t.cluster.failover(rng.pause(0.2, 2.0)).await
        }
    }
}

/// Every pooled connection of every replica terminated, again and again
/// for a few seconds (the LISTEN connections are left alone). Half the
/// time the database also refuses new connections meanwhile (an outage,
/// as in a failover); otherwise reconnecting works between the cuts (a
/// flapping proxy), so a write can fail and the burst's next write
/// succeed.
async fn conn_kill(t: &mut Targets<'_>, rng: &mut Rng) -> Result<String, String> {
    let cut = rng.pause(2.0, 4.0);
    let outage = rng.chance(0.5);
    let every = Duration::from_millis(if outage { 250 } else { 100 });
    if outage {
        t.cluster.allow_connections(false).await?;
    }
    let until = Instant::now() + cut;
    let mut n = 0;
    let mut failed = None;
    while Instant::now() < until && failed.is_none() {
        match t.cluster.terminate(POOL_CONNECTIONS).await {
            Ok(k) => n += k,
            Err(e) => failed = Some(e),
        }
        tokio::time::sleep(every).await;
    }
    if outage {
        t.cluster.allow_connections(true).await?;
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let how = if outage {
        "refused new connections and terminated"
    } else {
        "terminated"
    };
    Ok(format!(
        "{how} {n} pool connection(s) every {every:?} for {cut:.1?}"
    ))
}

/// Cuts the namespace's link for longer than a TTL while its replica
/// keeps running, then heals it.
async fn partition(t: &mut Targets<'_>, rng: &mut Rng, ttl: f64) -> Result<String, String> {
    let i = t.partitioned;
    let pid = t
        .fleet
        .pid(i)
        .ok_or("the namespace's replica is not running")?;
    let name = t.fleet.name(i).to_owned();
    // Best when it runs a tool: the case SIGSTOP cannot show.
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline && !executions::running_callers(t.exec_log).contains(&pid) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let running = executions::running_callers(t.exec_log)
        .iter()
        .filter(|p| **p == pid)
        .count();
    let hold = rng.pause(ttl + 1.0, ttl + 3.0);
    t.fleet.directory.set_up(&name, false);
    t.netns.cut()?;
    let from = now();
    tokio::time::sleep(hold).await;
    t.netns.heal()?;
    t.fleet
        .history
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .partitions
        .push((pid, from, now()));
    t.fleet.directory.set_up(&name, true);
    Ok(format!(
        "partitioned {name} (pid {pid}, running {running} tool(s)) from PostgreSQL for {hold:.1?}"
    ))
}

/// A replica running a tool (waiting up to `wait` for one), else any.
async fn busy_replica(t: &Targets<'_>, rng: &mut Rng, wait: Duration) -> usize {
    let deadline = Instant::now() + wait;
    loop {
        let busy: Vec<usize> = executions::running_callers(t.exec_log)
            .into_iter()
            .filter_map(|pid| t.fleet.index_of_pid(pid))
            .collect();
        if !busy.is_empty() {
            return busy[rng.below(busy.len())];
        }
        if Instant::now() > deadline {
            return rng.below(t.fleet.len());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
