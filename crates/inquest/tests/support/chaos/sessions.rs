//! The workload's sessions and watchers as a whole: starting them over
//! the fault window, reading every session back at the end, and the
//! figures of a run beyond the one line.

use std::{sync::Arc, time::Duration};

use inquest_proto::v1 as pb;
use tokio::time::Instant;

use super::{
    Rng, Settings,
    checker::Final,
    directory::Directory,
    executions,
    model::Model,
    watchers::{self, End, Streams},
    workload::{self, Plan, Tracked},
};

pub async fn create_incident(dir: &Directory) -> String {
    let mut rng = Rng::new(0);
    for _ in 0..50 {
        let (_, mut c) = dir.unary(&mut rng);
        let request = pb::CreateIncidentRequest {
            title: "checkout failing under chaos".into(),
            description: String::new(),
        };
        if let Ok(i) = c.create_incident(request).await {
            return i.into_inner().id;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no replica created the incident");
}

pub type Handles = Vec<tokio::task::JoinHandle<()>>;

/// One task per session, started over the first three quarters of the
/// fault window, and one or two watchers each.
pub fn spawn_workload(
    s: &Settings,
    rng: &Rng,
    tracked: &[Arc<Tracked>],
    dir: &Arc<Directory>,
    streams: &Streams,
    incident: &str,
    deadline: Instant,
) -> (Handles, Handles) {
    let spread = s.fault_seconds as f64 * 0.75 / tracked.len() as f64;
    let (mut sessions, mut watchers) = (Vec::new(), Vec::new());
    for t in tracked {
        let i = u64::try_from(t.index).unwrap_or(0);
        let mut r = rng.fork(i);
        let start = spread * t.index as f64 + r.between(0.0, spread);
        let plan = Plan {
            seed: s.seed,
            incident: incident.to_owned(),
            follow_ups: 1 + r.below(2),
            delay: Duration::from_secs_f64(start),
            deadline,
        };
        sessions.push(tokio::spawn(workload::run(
            Arc::clone(t),
            Arc::clone(dir),
            plan,
            r.fork(1),
        )));
        for w in 0..1 + r.below(2) {
            let late = if w == 0 {
                r.between(0.0, 2.0)
            } else {
                r.between(2.0, 20.0)
            };
            watchers.push(tokio::spawn(watchers::follow(
                Arc::clone(t),
                Arc::clone(dir),
                Arc::clone(streams),
                Duration::from_secs_f64(start + late),
                deadline + Duration::from_secs(15),
                r.fork(10 + w as u64),
            )));
        }
    }
    (sessions, watchers)
}

/// Every session's row and stored turns, read once everything settled.
pub async fn collect_finals(dir: &Directory, tracked: &[Arc<Tracked>], rng: &Rng) -> Vec<Final> {
    let mut rng = rng.fork(u64::MAX - 1);
    let mut finals = Vec::new();
    for t in tracked {
        let Some(id) = t.id.get() else { continue };
        let session = workload::retrying(
            dir,
            &mut rng,
            Instant::now() + Duration::from_secs(30),
            t,
            |mut c| {
                let r = pb::GetSessionRequest {
                    session_id: id.clone(),
                };
                async move { c.get_session(r).await }
            },
        )
        .await
        .unwrap_or_else(|e| panic!("s{} {id}: GetSession after the run: {e:?}", t.index));
        let mut turns = Vec::new();
        let mut after_seq = 0;
        loop {
            let page = workload::retrying(
                dir,
                &mut rng,
                Instant::now() + Duration::from_secs(30),
                t,
                |mut c| {
                    let r = pb::ListTurnsRequest {
                        session_id: id.clone(),
                        after_seq,
                        before_seq: 0,
                        limit: 0,
                    };
                    async move { c.list_turns(r).await }
                },
            )
            .await
            .unwrap_or_else(|e| panic!("s{} {id}: ListTurns after the run: {e:?}", t.index));
            turns.extend(page.turns);
            if page.next_after_seq == 0 {
                break;
            }
            after_seq = page.next_after_seq;
        }
        finals.push(Final {
            index: t.index,
            id: id.clone(),
            session,
            turns,
        });
    }
    finals
}

/// More figures, for reading a run (shown with --nocapture or on failure).
pub fn details(
    finals: &[Final],
    tracked: &[Arc<Tracked>],
    streams: &[watchers::Stream],
    execs: &[executions::Execution],
    model: &Model,
) {
    let mut reasons = std::collections::BTreeMap::<String, u32>::new();
    let (mut confirmations, mut transient, mut approved, mut denied) = (0, 0, 0, 0);
    let (mut queued, mut interrupting) = (0, 0);
    for t in tracked {
        let log = t.log();
        confirmations += log.confirmations;
        queued += log.queued;
        interrupting += log.interrupting;
        approved += log.decisions.values().filter(|a| **a).count();
        denied += log.decisions.values().filter(|a| !**a).count();
        transient += log.transient.len();
        for (status, reason) in &log.settles {
            *reasons.entry(format!("{status:?}/{reason}")).or_default() += 1;
        }
    }
    let mut ends = std::collections::BTreeMap::<String, u32>::new();
    for st in streams {
        let key = match &st.end {
            End::Ok => "OK".to_owned(),
            End::Idle => "idle".to_owned(),
            End::Status(code, _) => format!("{code:?}"),
        };
        *ends.entry(key).or_default() += 1;
    }
    let mutating = execs.iter().filter(|e| e.mutating).count();
    let notices = finals
        .iter()
        .flat_map(|f| &f.turns)
        .filter(|t| t.role() == pb::TurnRole::Notice)
        .count();
    // More claims than bursts: a session some replica took over.
    let taken_over = finals
        .iter()
        .filter(|f| {
            let bursts = f
                .turns
                .iter()
                .filter(|t| t.role() == pb::TurnRole::User)
                .count();
            // One lock of the log: two in one expression would deadlock.
            let log = tracked[f.index].log();
            let decided = log.reopens.iter().filter(|r| r.kind == "decide").count();
            f.session.lease_epoch
                > i64::try_from(bursts).unwrap_or(0)
                    + i64::from(log.confirmations)
                    + i64::try_from(decided).unwrap_or(0)
        })
        .count();
    eprintln!(
        "chaos details: taken_over={taken_over} notices={notices} confirmations={confirmations} approved={approved} denied={denied} queued={queued} interrupting={interrupting} transient_errors={transient} settles={reasons:?} \
         stream_ends={ends:?} executions={} (mutating {mutating}) model_answered={} model_rejected={}",
        execs.len(),
        model.answered(),
        model.rejections().len()
    );
}
