//! The checker: after the faults stopped and the sessions settled, what
//! must hold for every session, every watch stream and every tool
//! execution. Each broken rule is one violation line naming the session
//! (workload index and id), the seq or the stream, and what was seen.

use std::collections::{HashMap, HashSet};

use inquest_proto::v1 as pb;

use super::{
    executions::{self, Execution},
    replicas::History,
    script,
    watchers::{End, Stream},
    workload::Tracked,
};

/// A session as stored once everything settled.
pub struct Final {
    pub index: usize,
    pub id: String,
    pub session: pb::Session,
    pub turns: Vec<pb::SessionTurn>,
}

pub struct Evidence<'a> {
    pub finals: &'a [Final],
    pub tracked: &'a [std::sync::Arc<Tracked>],
    pub streams: &'a [Stream],
    pub executions: &'a [Execution],
    pub history: &'a History,
    /// Requests the strict fake provider rejected.
    pub rejections: &'a [String],
    pub ttl: f64,
    pub now: f64,
}

/// Every violation found.
pub fn check(e: &Evidence<'_>) -> Vec<String> {
    let mut v = Vec::new();
    for t in e.tracked {
        v.extend(t.log().problems.iter().cloned());
        if t.id.get().is_none() {
            v.push(format!("s{}: the session was never started", t.index));
        }
    }
    for f in e.finals {
        check_seqs(f, &mut v);
        check_transcript(f, &mut v);
        check_final_status(f, e.now, &mut v);
        if let Some(t) = e.tracked.get(f.index) {
            let acknowledged = t.log().acknowledged.clone();
            check_messages(f, &acknowledged, &mut v);
        }
    }
    let by_index: HashMap<usize, &Final> = e.finals.iter().map(|f| (f.index, f)).collect();
    for s in e.streams {
        match by_index.get(&s.session) {
            Some(f) => check_stream(s, f, &e.tracked[s.session], &mut v),
            None => v.push(format!("s{}: watched, but never stored", s.session)),
        }
    }
    let confirmations: HashMap<&str, u32> = e
        .finals
        .iter()
        .map(|f| (f.id.as_str(), e.tracked[f.index].log().confirmations))
        .collect();
    let decisions: HashMap<&str, HashMap<String, bool>> = e
        .finals
        .iter()
        .map(|f| (f.id.as_str(), e.tracked[f.index].log().decisions.clone()))
        .collect();
    executions::check(e, &confirmations, &decisions, &mut v);
    for r in e.rejections {
        v.push(format!("the strict fake provider rejected a request: {r}"));
    }
    v.extend(e.history.problems.iter().cloned());
    v
}

fn who(f: &Final) -> String {
    format!("s{} {}", f.index, f.id)
}

/// Seqs are exactly 1..=N and N is the session's head.
fn check_seqs(f: &Final, v: &mut Vec<String>) {
    for (i, t) in f.turns.iter().enumerate() {
        let expected = i64::try_from(i).unwrap_or(i64::MAX) + 1;
        if t.seq != expected {
            v.push(format!(
                "{}: stored seq {} where {expected} belongs (gap or duplicate)",
                who(f),
                t.seq
            ));
            return;
        }
    }
    let n = i64::try_from(f.turns.len()).unwrap_or(i64::MAX);
    if n != f.session.head_seq {
        v.push(format!(
            "{}: {n} stored turns but head_seq {}",
            who(f),
            f.session.head_seq
        ));
    }
}

/// The workload's messages against the store (for a session the workload
/// drove, `acknowledged` not empty): each acknowledged message stored
/// once, as a user turn, in the order sent, whether it was sent plainly,
/// queued or interrupting; each run of user turns opened a burst that
/// worked on its newest message (a burst interrupted before any answer
/// stored nothing, so its message runs on with the next); and every
/// answer is a whole reply of the model, never the part of an abandoned
/// call.
fn check_messages(f: &Final, acknowledged: &[usize], v: &mut Vec<String>) {
    if acknowledged.is_empty() {
        return;
    }
    let mut stored = Vec::new();
    // The newest message of the current run of user turns, and whether an
    // answer to it came.
    let mut newest: Option<(i64, usize)> = None;
    let mut answered = true;
    for t in &f.turns {
        match t.role() {
            pb::TurnRole::User => {
                let Some((session, m)) = script::parse_tag(&t.content) else {
                    v.push(format!(
                        "{}: seq {}: a user turn no message of the workload sent: {:?}",
                        who(f),
                        t.seq,
                        t.content
                    ));
                    continue;
                };
                if session != f.index {
                    v.push(format!(
                        "{}: seq {}: a message of session s{session} stored here",
                        who(f),
                        t.seq
                    ));
                }
                stored.push(m);
                newest = Some((t.seq, m));
                answered = false;
            }
            pb::TurnRole::Assistant => {
                if !script::is_whole_reply(&t.content) {
                    v.push(format!(
                        "{}: seq {}: an answer that is no whole reply of the model \
                         (part of an abandoned call?): {:?}",
                        who(f),
                        t.seq,
                        t.content
                    ));
                }
                if let (Some(m), Some((seq, want))) = (script::answered_message(&t.content), newest)
                    && !answered
                {
                    if m != want {
                        v.push(format!(
                            "{}: seq {}: answers message {m}, but the newest message (seq \
                             {seq}) is {want}",
                            who(f),
                            t.seq
                        ));
                    }
                    answered = true;
                }
            }
            _ => {}
        }
    }
    if stored != acknowledged {
        v.push(format!(
            "{}: stored messages {stored:?}, but the workload had acknowledged \
             {acknowledged:?} (each once, in order)",
            who(f)
        ));
    }
    if let (false, Some((seq, m))) = (answered, newest) {
        v.push(format!(
            "{}: message {m} (seq {seq}) opened no burst that answered it",
            who(f)
        ));
    }
}

/// The stored transcript as a provider sees it once rebuilt: every call of
/// an assistant turn answered exactly once before the next assistant
/// turn, or cut off and then named in a recovery notice's repaired calls
/// (the rebuild answers those); no result without an open call; call ids
/// unique in the session.
fn check_transcript(f: &Final, v: &mut Vec<String>) {
    let mut open: Vec<String> = Vec::new();
    // Calls still open when a user turn came: a follow-up's notice must
    // repair them before the next assistant turn.
    let mut owed: Vec<String> = Vec::new();
    let mut calls = HashSet::new();
    let mut answered = HashSet::new();
    for t in &f.turns {
        match t.role() {
            pb::TurnRole::Assistant => {
                if !open.is_empty() || !owed.is_empty() {
                    v.push(format!(
                        "{}: seq {}: an assistant turn while calls {:?} have neither a result \
                         nor a repair",
                        who(f),
                        t.seq,
                        [open.as_slice(), owed.as_slice()].concat()
                    ));
                    open.clear();
                    owed.clear();
                }
                for c in &t.tool_calls {
                    if !calls.insert(c.id.clone()) {
                        v.push(format!(
                            "{}: seq {}: call id {} used twice",
                            who(f),
                            t.seq,
                            c.id
                        ));
                    }
                    open.push(c.id.clone());
                }
            }
            pb::TurnRole::Tool => {
                if !answered.insert(t.tool_call_id.clone()) {
                    v.push(format!(
                        "{}: seq {}: a second result for {}",
                        who(f),
                        t.seq,
                        t.tool_call_id
                    ));
                }
                match open.iter().position(|c| *c == t.tool_call_id) {
                    Some(at) => {
                        open.remove(at);
                    }
                    None => v.push(format!(
                        "{}: seq {}: a result for {} answers no open call",
                        who(f),
                        t.seq,
                        t.tool_call_id
                    )),
                }
            }
            pb::TurnRole::User => owed.append(&mut open),
            pb::TurnRole::Notice => {
                if let Some(plan) = &t.recovery_plan {
                    open.retain(|c| !plan.repaired_call_ids.contains(c));
                    owed.retain(|c| !plan.repaired_call_ids.contains(c));
                }
            }
            pb::TurnRole::Compaction => {
                // Only made before a model call, so no call is open.
                if !open.is_empty() {
                    v.push(format!(
                        "{}: seq {}: a compaction while calls {:?} are open",
                        who(f),
                        t.seq,
                        open
                    ));
                }
            }
            pb::TurnRole::Unspecified => {
                v.push(format!("{}: seq {}: a turn without a role", who(f), t.seq));
            }
        }
        check_self_written_result(f, t, v);
    }
}

/// A result the dying or fenced-out worker wrote for its own cut-off
/// mutating call hides the cut-off from the recovery plan: the call must
/// be left dangling so the plan holds it for a human.
fn check_self_written_result(f: &Final, t: &pb::SessionTurn, v: &mut Vec<String>) {
    let cut_off = t.role() == pb::TurnRole::Tool
        && t.tool_name == super::script::MUTATING_TOOL
        && t.content
            .contains("while this tool was running; it may have partly run")
        && !t.content.starts_with("the session was cancelled");
    if cut_off {
        v.push(format!(
            "{}: seq {}: the worker wrote its own result for cut-off mutating call {} \
             ({:?}) instead of leaving it to the recovery plan",
            who(f),
            t.seq,
            t.tool_call_id,
            t.content
        ));
    }
}

/// No session FAILED, none left pending or running (with its lease).
fn check_final_status(f: &Final, now: f64, v: &mut Vec<String>) {
    let s = &f.session;
    match s.status() {
        pb::SessionStatus::Failed => v.push(format!(
            "{}: FAILED at the end (exit reason {:?})",
            who(f),
            s.exit_reason
        )),
        pb::SessionStatus::Running | pb::SessionStatus::Pending => {
            let expires = s
                .lease_expires_at
                .as_ref()
                .map(|t| t.seconds as f64 + f64::from(t.nanos) / 1e9);
            let lease = match expires {
                Some(at) if at < now => format!("lease expired {:.1} s ago", now - at),
                Some(at) => format!("lease valid for {:.1} s more", at - now),
                None => "no lease".into(),
            };
            v.push(format!(
                "{}: still {:?} after the faults stopped and TTL + reap passed ({lease}, \
                 owner {:?}, epoch {})",
                who(f),
                s.status(),
                s.lease_owner,
                s.lease_epoch
            ));
        }
        _ => {}
    }
}

/// The parts of a turn a watcher must receive exactly as stored.
fn same(a: &pb::SessionTurn, b: &pb::SessionTurn) -> bool {
    let calls = |t: &pb::SessionTurn| -> Vec<(String, String, String)> {
        t.tool_calls
            .iter()
            .map(|c| (c.id.clone(), c.name.clone(), c.arguments_json.clone()))
            .collect()
    };
    a.seq == b.seq
        && a.role == b.role
        && a.content == b.content
        && a.tool_call_id == b.tool_call_id
        && a.is_error == b.is_error
        && calls(a) == calls(b)
}

/// A stream received the stored turns of its range, in order, with no gap
/// or duplicate; an OK end came only once its burst had ended.
fn check_stream(s: &Stream, f: &Final, t: &Tracked, v: &mut Vec<String>) {
    let what = || {
        format!(
            "{}: stream on {} after_seq {} (started {:.1})",
            who(f),
            s.replica,
            s.after_seq,
            s.started
        )
    };
    let mut expected = s.after_seq + 1;
    for turn in &s.turns {
        if turn.seq != expected {
            v.push(format!(
                "{}: received seq {} where {expected} was next (gap, duplicate or reorder)",
                what(),
                turn.seq
            ));
            return;
        }
        let stored = usize::try_from(turn.seq - 1)
            .ok()
            .and_then(|i| f.turns.get(i));
        match stored {
            Some(stored) if same(stored, turn) => {}
            Some(stored) => v.push(format!(
                "{}: seq {} differs from the stored turn: got {turn:?}, stored {stored:?}",
                what(),
                turn.seq
            )),
            None => v.push(format!(
                "{}: received seq {}, which is not stored",
                what(),
                turn.seq
            )),
        }
        expected += 1;
    }
    if s.end != End::Ok {
        return;
    }
    let last = expected - 1;
    let settled_here = matches!(
        &s.status_after,
        Some((_, status, head)) if *head == last && !matches!(
            status,
            pb::SessionStatus::Pending | pb::SessionStatus::Running
        )
    );
    // A follow-up or confirmation the workload sent at that very head,
    // committed after this stream began: the burst had ended and a new one
    // began before GetSession looked.
    let superseded_only = |from: i64, to: i64| {
        f.turns
            .iter()
            .filter(|t| t.seq > from && t.seq <= to)
            .all(|t| t.role() == pb::TurnRole::Tool)
    };
    let reopened_after = t.log().reopens.iter().any(|r| {
        r.returned >= s.started
            && (r.head_before == last
                || (r.kind == "overlap"
                    && r.head_before > last
                    && superseded_only(last, r.head_before)))
    });
    if !settled_here && !reopened_after && s.status_after.is_some() {
        let (on, status, head) = s.status_after.clone().unwrap_or_default();
        v.push(format!(
            "{}: ended OK at seq {last}, but GetSession on {on} right after said {status:?} \
             with head {head}",
            what()
        ));
    }
}
