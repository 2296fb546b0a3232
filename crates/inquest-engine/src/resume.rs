//! Resume wiring: what happens between claiming a burst
//! and running the agent, and the reads behind `ContinueSession` and
//! `GetRecoveryPlan`.
//!
//! Everything comes from the store, so a follow-up behaves the same after
//! a restart and on any replica: load the session row and its turns (from
//! the latest compaction on),
//! validate the [`ResumeRequest`], compute the plan ([`plan_resume`], the
//! one shared function), store it on the session, write a `notice` turn
//! for a plan that is not clean (persist-then-publish, so watchers can
//! settle running tool cards), and either run the burst or hold the
//! session in `awaiting_confirmation`. The agent then restores from the
//! same turns (`SessionState::restore`) and runs from the transcript the
//! plan was computed with (`plan_resume_rebuilt`): one rebuild per resume.

use inquest_core::{
    ExitReason, Message, NewTurn, RecoveryKind, RecoveryPlan, ResumeRequest, Seq, SessionId,
    Tenant, ToolCall, ToolClasses, Turn, approval::ApprovalState, error_chain, is_follow_up,
    notice_plan, plan_resume_rebuilt,
};
use inquest_store::{SessionRow, Store, StoreError};

use crate::{burst_log::BurstLog, turn_log::TurnLogError};

/// Why a claimed burst is about to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A first message or a follow-up (`StartSession`, `SendMessage`).
    Fresh,
    /// `ContinueSession` confirmed the held recovery plan.
    Confirmed,
    /// An orphan: its worker died or stalled mid-burst and this replica
    /// claimed it. Always planned and noticed, whatever the tail (unless
    /// it stopped between an approval and the approved calls' start).
    Recovered,
    /// Every call of an approval hold is decided: the burst runs the
    /// approved ones, then asks the model again.
    Decided,
}

impl Mode {
    /// A bounded label for metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Fresh => "fresh",
            Mode::Confirmed => "confirmed",
            Mode::Recovered => "recovered",
            Mode::Decided => "decided",
        }
    }
}

/// What the runner does after [`prepare`].
pub(crate) enum Prepared {
    /// Run the burst.
    Run(Start),
    /// No burst: the session was left `idle` (refused) or
    /// `awaiting_confirmation`, with a notice saying why.
    Stopped,
    /// A store read or write failed: the runner decides from the error
    /// (an outage hands the session over; a refusal is `store_failed`).
    Failed(TurnLogError),
}

/// What a burst starts from.
pub(crate) struct Start {
    /// The turns to restore from (a notice just written included).
    pub turns: Vec<Turn>,
    /// When a plan was made, the transcript it was computed with (the
    /// rebuild of the same turns; a notice adds nothing to it).
    pub transcript: Option<Vec<Message<'static>>>,
    /// Approved calls that never started, to run first, each with the seq
    /// of the assistant turn that asked for it.
    pub approved: Vec<(Seq, ToolCall)>,
    /// Whose session it is (its approval policy).
    pub tenant: Tenant,
    /// The skills its bursts load (`None`: every configured one).
    pub skills: Option<Vec<String>>,
}

/// The session row and the turns a resume needs: from the latest
/// compaction on when it carries counters (`Store::resume_turns`), else
/// every turn. Plans, restore and rebuild come out the same either way
/// (property test `reading_from_a_carrying_compaction_equals_reading_everything`).
pub async fn load(
    store: &Store,
    session: SessionId,
) -> Result<(SessionRow, Vec<Turn>), StoreError> {
    let row = store.get_session(session).await?;
    let turns = store.resume_turns(session).await?;
    Ok((row, turns))
}

/// The request a resume validates. Calls that resume name only the
/// session, so the incident is the one its row names.
pub fn request(row: &SessionRow, turns: Vec<Turn>) -> ResumeRequest {
    ResumeRequest {
        session_id: Some(row.id),
        incident_id: row.incident_id,
        session_incident_id: row.incident_id,
        turns,
    }
}

/// Validates and plans a claimed (`running`) burst; every write goes
/// through the burst's lease. Notices are cut to `max_notice_bytes`
/// (`limits.max_notice_bytes`, see [`fit_notice`]).
pub(crate) async fn prepare(
    burst: &BurstLog,
    classes: &impl ToolClasses,
    mode: Mode,
    max_notice_bytes: usize,
) -> Prepared {
    let session = burst.session();
    let (row, turns) = match load(burst.store(), session).await {
        Ok(loaded) => loaded,
        Err(e) if e.is_transient() => return Prepared::Failed(TurnLogError::Unavailable(e)),
        Err(e) => {
            tracing::error!(%session, error = %error_chain(&e), "cannot load the transcript");
            return Prepared::Failed(TurnLogError::NotPersisted(e));
        }
    };
    burst.note_head(row.head_seq);
    // Seqs this replica heard announced that the store no longer holds: a
    // failover lost turns watchers were sent, and their writer may be
    // gone. Tombstones take those seqs before anything is planned from
    // what is left, so no new turn is ever published under one.
    if let Some(heard) = burst.live().heard(session) {
        let head = row.head_seq.map_or(0, Seq::as_i64);
        if heard.head > head {
            return Prepared::Failed(burst.lost_before_claim(head, heard).await);
        }
    }
    // A pending session whose last exit was `awaiting_confirmation` can only
    // have been released by `ContinueSession` (SendMessage does not reopen
    // it): run it as confirmed, whoever claimed it (the confirming
    // replica, or a reaper after that replica died) — never hold it again.
    let mode = match row.exit_reason {
        Some(ExitReason::AwaitingConfirmation) if mode == Mode::Fresh => Mode::Confirmed,
        // Likewise a session held for approval is released only by the
        // decision of its last pending call (a follow-up supersedes the
        // hold: its results are written before the message, and the
        // session's exit reason is no longer read as a hold then, see
        // `superseded`).
        Some(ExitReason::AwaitingApproval) if mode == Mode::Fresh => Mode::Decided,
        _ => mode,
    };
    let tenant = row.tenant.clone();
    let skills = row.skills.clone();
    let request = request(&row, turns);
    // A follow-up's tail is the user message that reopened the session; a
    // recovered or confirmed burst's is wherever the last worker stopped.
    // A follow-up that superseded a hold ends with a user turn: it is a
    // fresh burst.
    let mode = if mode == Mode::Decided && superseded(&request.turns) {
        Mode::Fresh
    } else {
        mode
    };
    let valid = match mode {
        Mode::Fresh => request.validate(),
        Mode::Recovered | Mode::Confirmed | Mode::Decided => request.validate_history(),
    };
    if let Err(e) = valid {
        tracing::error!(%session, error = %e, "resume refused: the stored transcript is invalid");
        let text = format!(
            "Resume refused: {e}. No burst ran and nothing stored was changed; the session is \
             idle and a new message starts a new attempt."
        );
        let text = cut_notice(&text, max_notice_bytes).into_owned();
        return stop(burst, text, ExitReason::ResumeRefused).await;
    }
    let mut turns = request.turns;
    let run = |turns, transcript, approved| {
        Prepared::Run(Start {
            turns,
            transcript,
            approved,
            tenant: tenant.clone(),
            skills: skills.clone(),
        })
    };
    if mode == Mode::Fresh && !is_follow_up(session, &turns) {
        // A first message: nothing to recover.
        return run(turns, None, Vec::new());
    }
    if matches!(mode, Mode::Decided | Mode::Recovered) {
        match held(burst, &turns).await {
            Ok(Hold::None) if mode == Mode::Decided => return run(turns, None, Vec::new()),
            Ok(Hold::None) | Ok(Hold::Interrupted) => {}
            Ok(Hold::Pending) => return close(burst, ExitReason::AwaitingApproval).await,
            Ok(Hold::Approved(approved)) => return run(turns, None, approved),
            Err(e) => return Prepared::Failed(e),
        }
    }
    let (plan, transcript) = plan_resume_rebuilt(session, &turns, classes);
    // Owned once, for the burst that keeps it; only when one runs.
    let owned = |transcript: Vec<Message<'_>>| -> Vec<Message<'static>> {
        transcript.into_iter().map(Message::into_owned).collect()
    };
    if mode == Mode::Recovered {
        // Orphan recoveries by what the recovery found (bounded: the plan
        // kinds).
        metrics::counter!("inquest_orphan_recoveries_total", "kind" => plan.kind.as_str())
            .increment(1);
    }
    tracing::info!(
        %session,
        kind = plan.kind.as_str(),
        repairs = plan.repairs.len(),
        requires_confirmation = plan.requires_confirmation,
        ?mode,
        "recovery plan"
    );
    if let Err(e) = save(burst, &plan, mode).await {
        return Prepared::Failed(e);
    }
    if mode == Mode::Confirmed {
        let transcript = owned(transcript);
        return run(turns, Some(transcript), Vec::new());
    }
    let mut written = None;
    if plan.kind != RecoveryKind::Clean {
        let notice = NewTurn::Notice {
            text: fit_notice(&plan, max_notice_bytes),
            plan: Some(Box::new(notice_plan(&plan))),
        };
        match burst.append(notice).await {
            Ok(notice) => written = Some((*notice).clone()),
            Err(e) => return Prepared::Failed(e),
        }
    }
    if plan.requires_confirmation {
        return close(burst, ExitReason::AwaitingConfirmation).await;
    }
    if plan.kind == RecoveryKind::DegradedHistory {
        // Never continued without a human, even when nothing is owed.
        return close(burst, ExitReason::DegradedHistory).await;
    }
    let transcript = owned(transcript);
    turns.extend(written);
    run(turns, Some(transcript), Vec::new())
}

/// Where the session's latest approval hold stands for this burst.
enum Hold {
    /// Nothing of it is left unanswered (or there was none).
    None,
    /// A call still waits for a human: the burst that asked stopped
    /// before it closed into `awaiting_approval`; close it now.
    Pending,
    /// Approved calls with no result, none of them started: run them.
    Approved(Vec<(Seq, ToolCall)>),
    /// An approved call started and has no result: it may have run, and
    /// the recovery plan holds it for a human like any interrupted call.
    Interrupted,
}

/// Reads the latest hold and compares it with the stored results.
async fn held(burst: &BurstLog, turns: &[Turn]) -> Result<Hold, TurnLogError> {
    let approvals = burst
        .store()
        .approvals(burst.session())
        .await
        .map_err(|e| {
            if e.is_transient() {
                TurnLogError::Unavailable(e)
            } else {
                TurnLogError::NotPersisted(e)
            }
        })?;
    let answered = |id: &str| turns.iter().any(|t| t.tool_call_id.as_deref() == Some(id));
    let open: Vec<_> = approvals
        .iter()
        .filter(|a| {
            matches!(a.state, ApprovalState::Pending | ApprovalState::Approved)
                && !answered(&a.call_id)
        })
        .collect();
    if open.is_empty() {
        return Ok(Hold::None);
    }
    if open.iter().any(|a| a.state == ApprovalState::Pending) {
        return Ok(Hold::Pending);
    }
    if open.iter().any(|a| a.started_at.is_some()) {
        return Ok(Hold::Interrupted);
    }
    let mut approved = Vec::with_capacity(open.len());
    for a in open {
        let call = turns
            .iter()
            .find(|t| t.seq == a.assistant_seq)
            .and_then(|t| t.tool_calls().ok())
            .and_then(|calls| calls.into_iter().find(|c| c.id == a.call_id));
        match call {
            Some(call) => approved.push((a.assistant_seq, call)),
            // The asking turn is gone from what the resume read (it
            // cannot be: a hold is the newest assistant turn): leave it
            // to the plan, which holds what it cannot account for.
            None => return Ok(Hold::Interrupted),
        }
    }
    Ok(Hold::Approved(approved))
}

/// The stored tail is a user message after the latest hold: a follow-up
/// superseded it.
fn superseded(turns: &[Turn]) -> bool {
    turns
        .last()
        .is_some_and(|t| t.role == inquest_core::Role::User)
}

/// Stores `plan` (its serde form, transcript left out) as the session's
/// last plan, fenced by the burst's lease, with the `session.recovered`
/// event when `mode` is a recovery.
async fn save(burst: &BurstLog, plan: &RecoveryPlan, mode: Mode) -> Result<(), TurnLogError> {
    let value = serde_json::to_value(plan).map_err(|e| {
        TurnLogError::NotPersisted(StoreError::Internal(format!(
            "recovery plan does not serialize: {e}"
        )))
    })?;
    burst
        .save_recovery_plan(value, mode == Mode::Recovered)
        .await
}

/// Writes a notice, then ends the claimed burst with `reason`.
async fn stop(burst: &BurstLog, notice: String, reason: ExitReason) -> Prepared {
    if let Err(e) = burst.append(NewTurn::notice(notice)).await {
        return Prepared::Failed(e);
    }
    close(burst, reason).await
}

/// Ends the claimed burst with `reason` (no agent ran).
async fn close(burst: &BurstLog, reason: ExitReason) -> Prepared {
    match burst.close(reason).await {
        Ok(_) => Prepared::Stopped,
        Err(e) => Prepared::Failed(e),
    }
}

/// What a cut notice's marker names.
fn notice_what(cap: usize) -> String {
    format!("notice over limits.max_notice_bytes = {cap}")
}

/// `text` cut to at most `cap` bytes at a char boundary, with the marker
/// saying how much of the notice was cut.
fn cut_notice(text: &str, cap: usize) -> std::borrow::Cow<'_, str> {
    inquest_core::cap::cut_text(text, cap, &notice_what(cap))
}

/// A recovery notice's human text (`plan.notice_text`) within `cap` bytes
/// (plus a marker). The plan itself rides beside it, typed
/// (`NewTurn::Notice`'s `plan`), and is not cut here: it is bounded by
/// its structure (the ids and names in it come from stored turns), and
/// `convert::turn_within` keeps a turn with a huge one within
/// `limits.max_response_bytes` when it is shown.
fn fit_notice(plan: &RecoveryPlan, cap: usize) -> String {
    let text = cut_notice(&plan.notice_text, cap);
    if let std::borrow::Cow::Owned(_) = text {
        tracing::warn!(
            notice_bytes = plan.notice_text.len(),
            max_notice_bytes = cap,
            "recovery notice cut"
        );
    }
    text.into_owned()
}

/// The stored last plan, parsed; `None` when absent or unreadable.
pub fn stored_plan(row: &SessionRow) -> Option<RecoveryPlan> {
    row.last_recovery_plan
        .clone()
        .and_then(|v| serde_json::from_value(v).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The marker a cut notice ends with.
    fn notice_marker(cut: usize, cap: usize) -> String {
        inquest_core::cap::marker(cut as u64, &notice_what(cap))
    }

    #[test]
    fn a_short_notice_is_kept_whole() {
        assert_eq!(cut_notice("hello", 5), "hello");
        assert!(matches!(
            cut_notice("hello", 5),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_long_notice_is_cut_at_a_char_boundary_with_its_marker() {
        let text = "ab€€€"; // 2 + 3×3 bytes
        for cap in 0..text.len() {
            let cut = cut_notice(text, cap);
            let (kept, marker) = cut.split_once('…').unwrap();
            assert!(kept.len() <= cap, "cap {cap}");
            assert!(text.starts_with(kept));
            assert_eq!(
                format!("…{marker}"),
                notice_marker(text.len() - kept.len(), cap)
            );
        }
        assert_eq!(
            cut_notice("abcdef", 4),
            "abcd…[cut by inquest: 2 more bytes of notice over limits.max_notice_bytes = 4]"
        );
    }

    fn plan_with_text(notice_text: String) -> RecoveryPlan {
        use inquest_core::{SessionId, plan_recovery};
        let session = SessionId::parse("00000000-0000-4000-8000-000000000001").unwrap();
        let classes = |_: &str| inquest_core::SideEffect::Mutating;
        let mut plan = plan_recovery(session, &[], &classes);
        plan.notice_text = notice_text;
        plan.repaired_call_ids = vec!["call_1".into(), "call_2".into()];
        plan
    }

    #[test]
    fn a_long_recovery_notice_cuts_only_its_text() {
        let cap = 16 * 1024;
        let plan = plan_with_text("é".repeat(20_000));
        let text = fit_notice(&plan, cap);
        let (kept, _) = text.split_once('…').unwrap();
        assert!(kept.len() <= cap);
        assert!(plan.notice_text.starts_with(kept));
        assert!(text.ends_with("more bytes of notice over limits.max_notice_bytes = 16384]"));
        assert!(!text.contains("recovery_plan"), "no JSON in the text");
    }

    #[test]
    fn a_notice_within_the_cap_is_the_plain_notice() {
        let plan = plan_with_text("short\nsecond line".into());
        assert_eq!(fit_notice(&plan, 16 * 1024), "short\nsecond line");
    }
}
