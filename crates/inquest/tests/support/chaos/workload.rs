//! The workload: each session starts with a tagged message, settles, and
//! gets its follow-ups one by one, each after the previous burst settled.
//! About a third of the follow-ups do not wait: they are sent while the
//! previous message's burst may still run, queued (IF_RUNNING_ENQUEUE) or
//! interrupting it (IF_RUNNING_INTERRUPT), as a person typing ahead
//! would. Every acknowledged message is recorded in order, so the checker
//! can tell that each was stored once, in order, and answered.
//! A session held in AWAITING_CONFIRMATION is confirmed (ContinueSession)
//! after a short pause, as a human would; every such confirmation is
//! counted, because it allows one re-run of a cut-off mutating call.
//! A session held in AWAITING_APPROVAL (every mutating call waits for a
//! human) gets a random decision per pending call after a short pause:
//! mostly approve, sometimes deny; each decision is recorded, so the
//! checker can tell which executions a human allowed.
//!
//! Every call goes to a random replica believed up and is retried on
//! another after a transient error, with the same idempotency key where
//! the call has one. What the workload saw that the contract forbids (a
//! FAILED session, a SendMessage refused right after GetSession showed
//! the session settled) is recorded as a problem for the checker.

use std::{
    future::Future,
    sync::{
        Arc, Mutex, OnceLock, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use inquest_proto::v1 as pb;
use tokio::time::Instant;
use tonic::{Code, Status};

use super::{
    Rng,
    directory::{Client, Directory},
    now, script,
};

/// A call that moved a settled session on: a follow-up or a confirmation.
#[derive(Debug, Clone)]
pub struct Reopen {
    pub kind: &'static str,
    /// The head the workload saw when the session had settled; for an
    /// "overlap" (a typed-ahead message stored at once), the seq before
    /// the message, which superseded results may separate from the head
    /// the session had settled at.
    pub head_before: i64,
    pub sent: f64,
    pub returned: f64,
}

#[derive(Debug, Default)]
pub struct Log {
    pub reopens: Vec<Reopen>,
    /// The messages the server acknowledged (0 is the opening one), in
    /// the order the workload sent them.
    pub acknowledged: Vec<usize>,
    /// How many follow-ups were sent queued or interrupting.
    pub queued: u32,
    pub interrupting: u32,
    pub confirmations: u32,
    /// Every tool call a human decided: call id → approved.
    pub decisions: std::collections::HashMap<String, bool>,
    /// Every settled state seen: status and exit reason.
    pub settles: Vec<(pb::SessionStatus, String)>,
    pub problems: Vec<String>,
    /// Transient errors the calls met, by code.
    pub transient: Vec<Code>,
}

/// One session of the workload, shared with its watchers.
#[derive(Debug)]
pub struct Tracked {
    pub index: usize,
    pub id: OnceLock<String>,
    /// Set when the workload is finished with it (settled for good, or
    /// given up on).
    pub done: AtomicBool,
    pub log: Mutex<Log>,
}

impl Tracked {
    pub fn new(index: usize) -> Tracked {
        Tracked {
            index,
            id: OnceLock::new(),
            done: AtomicBool::new(false),
            log: Mutex::new(Log::default()),
        }
    }

    pub fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::SeqCst)
    }

    fn problem(&self, what: String) {
        self.log().problems.push(what);
    }
}

/// Errors after which the same call is tried again (on another replica):
/// the replica went away, the connection broke, the outcome is unknown.
pub fn transient(s: &Status) -> bool {
    matches!(
        s.code(),
        Code::Unavailable
            | Code::DeadlineExceeded
            | Code::Aborted
            | Code::Unknown
            | Code::Internal
            | Code::Cancelled
            | Code::ResourceExhausted
    )
}

/// Calls `call` on random replicas until it answers, fails for good, or
/// `deadline` passes. Transient errors are noted in `log`.
pub async fn retrying<T, F, Fut>(
    dir: &Directory,
    rng: &mut Rng,
    deadline: Instant,
    log: &Tracked,
    mut call: F,
) -> Result<T, Status>
where
    F: FnMut(Client) -> Fut,
    Fut: Future<Output = Result<tonic::Response<T>, Status>>,
{
    loop {
        let (_, client) = dir.unary(rng);
        match call(client).await {
            Ok(r) => return Ok(r.into_inner()),
            Err(s) if transient(&s) && Instant::now() < deadline => {
                log.log().transient.push(s.code());
                tokio::time::sleep(rng.pause(0.1, 0.5)).await;
            }
            Err(s) => return Err(s),
        }
    }
}

/// What one session does; see the module docs.
pub struct Plan {
    pub seed: u64,
    pub incident: String,
    pub follow_ups: usize,
    pub delay: Duration,
    pub deadline: Instant,
}

pub async fn run(t: Arc<Tracked>, dir: Arc<Directory>, plan: Plan, mut rng: Rng) {
    tokio::time::sleep(plan.delay).await;
    if let Err(e) = drive(&t, &dir, &plan, &mut rng).await {
        t.problem(e);
    }
    t.done.store(true, Ordering::SeqCst);
}

async fn drive(t: &Tracked, dir: &Directory, plan: &Plan, rng: &mut Rng) -> Result<(), String> {
    let i = t.index;
    let key = |m: usize| format!("chaos-{:x}-s{i}-m{m}", plan.seed);
    let request = pb::StartSessionRequest {
        incident_id: plan.incident.clone(),
        message: script::user_message(i, 0),
        idempotency_key: key(0),
    };
    let session = retrying(dir, rng, plan.deadline, t, |mut c| {
        let r = request.clone();
        async move { c.start_session(r).await }
    })
    .await
    .map_err(|s| format!("s{i}: StartSession failed: {s:?}"))?;
    let id = session.id.clone();
    let _ = t.id.set(id.clone());
    t.log().acknowledged.push(0);
    settle(t, dir, plan, rng, &id).await?;
    for m in 1..=plan.follow_ups {
        if rng.chance(1.0 / 3.0) {
            // Typed ahead: the burst of the message before may still run.
            tokio::time::sleep(rng.pause(0.05, 1.0)).await;
            let interrupt = rng.chance(0.5);
            if overlap(t, dir, plan, rng, &id, m, &key(m), interrupt).await? {
                continue;
            }
            // Held for a human meanwhile: the human acts first, then the
            // message goes as a plain follow-up (same key) below.
        }
        let head = settle(t, dir, plan, rng, &id).await?;
        tokio::time::sleep(rng.pause(0.1, 1.5)).await;
        let request = pb::SendMessageRequest {
            session_id: id.clone(),
            message: script::user_message(i, m),
            idempotency_key: key(m),
            if_running: 0,
        };
        let sent = now();
        let mut refused = 0;
        loop {
            let answer = retrying(dir, rng, plan.deadline, t, |mut c| {
                let r = request.clone();
                async move { c.send_message(r).await }
            })
            .await;
            match answer {
                Ok(_) => break,
                Err(s) if s.code() == Code::FailedPrecondition && refused < 20 => {
                    if refused == 0 {
                        t.problem(format!(
                            "s{i} {id}: SendMessage {m} refused right after GetSession showed \
                             the session settled: {}",
                            s.message()
                        ));
                    }
                    refused += 1;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(s) => return Err(format!("s{i} {id}: SendMessage {m} failed: {s:?}")),
            }
        }
        let mut log = t.log();
        log.acknowledged.push(m);
        log.reopens.push(Reopen {
            kind: "send",
            head_before: head,
            sent,
            returned: now(),
        });
    }
    settle(t, dir, plan, rng, &id).await?;
    Ok(())
}

/// Sends follow-up `m` queued or interrupting, whatever the session is
/// doing. True once acknowledged; false when the session was held for a
/// human (refused FAILED_PRECONDITION, nothing stored), so the caller
/// settles it and sends the message plainly.
#[allow(clippy::too_many_arguments)]
async fn overlap(
    t: &Tracked,
    dir: &Directory,
    plan: &Plan,
    rng: &mut Rng,
    id: &str,
    m: usize,
    key: &str,
    interrupt: bool,
) -> Result<bool, String> {
    let i = t.index;
    let mode = if interrupt {
        pb::IfRunning::Interrupt
    } else {
        pb::IfRunning::Enqueue
    };
    let request = pb::SendMessageRequest {
        session_id: id.to_owned(),
        message: script::user_message(i, m),
        idempotency_key: key.to_owned(),
        if_running: mode.into(),
    };
    let sent = now();
    let answer = retrying(dir, rng, plan.deadline, t, |mut c| {
        let r = request.clone();
        async move { c.send_message(r).await }
    })
    .await;
    let answer = match answer {
        Ok(answer) => answer,
        Err(s) if s.code() == Code::FailedPrecondition => return Ok(false),
        Err(s) => {
            return Err(format!(
                "s{i} {id}: SendMessage {m} ({mode:?}) failed: {s:?}"
            ));
        }
    };
    let mut log = t.log();
    log.acknowledged.push(m);
    if interrupt {
        log.interrupting += 1;
    } else {
        log.queued += 1;
    }
    // Stored at once: the session had settled, and this reopened it. Its
    // head then is not known here: a message to a session held for
    // approval first stores a result for each superseded call.
    if !answer.queued {
        log.reopens.push(Reopen {
            kind: "overlap",
            head_before: answer.seq - 1,
            sent,
            returned: now(),
        });
    }
    Ok(true)
}

/// Polls until the session is settled (confirming holds on the way);
/// returns its head.
async fn settle(
    t: &Tracked,
    dir: &Directory,
    plan: &Plan,
    rng: &mut Rng,
    id: &str,
) -> Result<i64, String> {
    let i = t.index;
    loop {
        let s = poll_settled(t, dir, plan, rng, id).await?;
        let status = s.status();
        t.log().settles.push((status, s.exit_reason.clone()));
        match status {
            pb::SessionStatus::AwaitingConfirmation => {
                if t.log().confirmations >= 8 {
                    return Err(format!("s{i} {id}: held for confirmation a ninth time"));
                }
                tokio::time::sleep(rng.pause(0.2, 1.0)).await;
                confirm(t, dir, plan, rng, id, s.head_seq).await?;
            }
            pb::SessionStatus::AwaitingApproval => {
                if t.log().decisions.len() >= 64 {
                    return Err(format!("s{i} {id}: more than 64 calls held for approval"));
                }
                tokio::time::sleep(rng.pause(0.1, 0.6)).await;
                decide(t, dir, plan, rng, &s).await?;
            }
            pb::SessionStatus::Failed => {
                t.problem(format!(
                    "s{i} {id}: ended FAILED (exit reason {:?})",
                    s.exit_reason
                ));
                return Ok(s.head_seq);
            }
            pb::SessionStatus::Cancelled => {
                return Err(format!("s{i} {id}: CANCELLED, though nobody cancelled it"));
            }
            _ => return Ok(s.head_seq),
        }
    }
}

async fn poll_settled(
    t: &Tracked,
    dir: &Directory,
    plan: &Plan,
    rng: &mut Rng,
    id: &str,
) -> Result<pb::Session, String> {
    let request = pb::GetSessionRequest {
        session_id: id.to_owned(),
    };
    loop {
        let s = retrying(dir, rng, plan.deadline, t, |mut c| {
            let r = request.clone();
            async move { c.get_session(r).await }
        })
        .await
        .map_err(|s| format!("s{} {id}: GetSession failed: {s:?}", t.index))?;
        if !matches!(
            s.status(),
            pb::SessionStatus::Pending | pb::SessionStatus::Running
        ) {
            return Ok(s);
        }
        if Instant::now() > plan.deadline {
            return Err(format!(
                "s{} {id}: still {:?} at the workload's deadline (lease owner {:?}, epoch {})",
                t.index,
                s.status(),
                s.lease_owner,
                s.lease_epoch
            ));
        }
        tokio::time::sleep(rng.pause(0.15, 0.35)).await;
    }
}

/// Decides every pending call of the hold at random (approve 3 in 4),
/// retried under one idempotency key; a retry refused because the calls
/// are no longer pending means an earlier attempt went through.
async fn decide(
    t: &Tracked,
    dir: &Directory,
    plan: &Plan,
    rng: &mut Rng,
    s: &pb::Session,
) -> Result<(), String> {
    let id = s.id.as_str();
    let pending: Vec<(String, bool)> = s
        .approvals
        .iter()
        .filter(|a| a.state() == pb::ApprovalState::Pending)
        .map(|a| (a.call_id.clone(), rng.below(4) != 0))
        .collect();
    if pending.is_empty() {
        return Err(format!(
            "s{} {id}: held for approval with nothing pending",
            t.index
        ));
    }
    let request = pb::DecideToolCallsRequest {
        session_id: id.to_owned(),
        decisions: pending
            .iter()
            .map(|(call_id, approve)| pb::ToolCallDecision {
                call_id: call_id.clone(),
                verdict: if *approve {
                    pb::ToolCallVerdict::Approve
                } else {
                    pb::ToolCallVerdict::Deny
                }
                .into(),
                comment: "chaos".into(),
            })
            .collect(),
        idempotency_key: format!("chaos-{}-{}", id, s.head_seq),
    };
    // Recorded before the call: a decision whose answer is lost may have
    // committed, and an execution it allowed is no violation.
    t.log().decisions.extend(pending.iter().cloned());
    let sent = now();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let (_, mut c) = dir.unary(rng);
        match c.decide_tool_calls(request.clone()).await {
            Ok(_) => break,
            Err(e) if e.code() == Code::FailedPrecondition && attempts > 1 => break,
            Err(e) if transient(&e) && Instant::now() < plan.deadline => {
                t.log().transient.push(e.code());
                tokio::time::sleep(rng.pause(0.1, 0.5)).await;
            }
            Err(e) => return Err(format!("s{} {id}: DecideToolCalls failed: {e:?}", t.index)),
        }
    }
    t.log().reopens.push(Reopen {
        kind: "decide",
        head_before: s.head_seq,
        sent,
        returned: now(),
    });
    Ok(())
}

/// ContinueSession, retried; a retry refused because the session is no
/// longer held means an earlier attempt went through.
async fn confirm(
    t: &Tracked,
    dir: &Directory,
    plan: &Plan,
    rng: &mut Rng,
    id: &str,
    head: i64,
) -> Result<(), String> {
    let request = pb::ContinueSessionRequest {
        session_id: id.to_owned(),
    };
    let sent = now();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let (_, mut c) = dir.unary(rng);
        match c.continue_session(request.clone()).await {
            Ok(_) => break,
            Err(s) if s.code() == Code::FailedPrecondition && attempts > 1 => break,
            Err(s) if transient(&s) && Instant::now() < plan.deadline => {
                t.log().transient.push(s.code());
                tokio::time::sleep(rng.pause(0.1, 0.5)).await;
            }
            Err(s) => return Err(format!("s{} {id}: ContinueSession failed: {s:?}", t.index)),
        }
    }
    let mut log = t.log();
    log.confirmations += 1;
    log.reopens.push(Reopen {
        kind: "continue",
        head_before: head,
        sent,
        returned: now(),
    });
    Ok(())
}
