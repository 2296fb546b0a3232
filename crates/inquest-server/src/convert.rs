//! Domain → wire conversions. Only this crate sees both sides.

use inquest_core::approval::ApprovalState;
use inquest_core::{RecoveryPlan, Repair, Role, SessionStatus, Turn};
use inquest_proto::v1 as pb;
use inquest_store::{Incident, SessionRow};
use time::OffsetDateTime;

pub fn timestamp(t: OffsetDateTime) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.unix_timestamp(),
        nanos: i32::try_from(t.nanosecond()).unwrap_or(0),
    }
}

fn count(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

pub fn incident(i: Incident) -> pb::Incident {
    pb::Incident {
        id: i.id.to_string(),
        title: i.title,
        description: i.description,
        created_at: Some(timestamp(i.created_at)),
        alert_origin: None,
        source: incident_source(i.source) as i32,
    }
}

pub fn incident_source(s: inquest_store::IncidentSource) -> pb::IncidentSource {
    match s {
        inquest_store::IncidentSource::Manual => pb::IncidentSource::Manual,
        inquest_store::IncidentSource::Alert => pb::IncidentSource::Alert,
        inquest_store::IncidentSource::Schedule => pb::IncidentSource::Schedule,
    }
}

/// What a queued message shows in GetSession and ListSessions: a list of
/// sessions each with up to `limits.max_queued_messages` messages must stay
/// within a response, so each is cut (its user turn will hold it whole).
pub const QUEUED_TEXT_SHOWN: usize = 2_000;

pub fn queued_message(q: inquest_store::QueuedMessage) -> pb::QueuedMessage {
    pb::QueuedMessage {
        text: inquest_core::cap::cut_text(
            &q.text,
            QUEUED_TEXT_SHOWN,
            "queued message shown in a session",
        )
        .into_owned(),
        position: q.position,
        interrupt: q.interrupt,
        queued_at: Some(timestamp(q.queued_at)),
    }
}

/// The alert group behind an incident, for GetIncident.
pub fn alert_origin(o: inquest_store::AlertOrigin) -> pb::AlertOrigin {
    pb::AlertOrigin {
        source: o.source,
        receiver: o.receiver,
        external_url: o.external_url,
        group_key: o.group_key,
        events_total: o.events_total,
        resolved_at: o.resolved_at.map(timestamp),
        session_skipped: o.session_skipped.unwrap_or_default(),
        events: o
            .events
            .into_iter()
            .map(|e| pb::AlertEvent {
                fingerprint: e.fingerprint,
                firing: e.firing,
                starts_at: Some(timestamp(e.starts_at)),
                ends_at: e.ends_at.map(timestamp),
                // Written by the server from a map of strings; anything
                // else would be a corrupt row, shown as no labels.
                labels: serde_json::from_str(&e.labels_json).unwrap_or_default(),
                received_at: Some(timestamp(e.received_at)),
            })
            .collect(),
    }
}

pub fn status(s: SessionStatus) -> pb::SessionStatus {
    match s {
        SessionStatus::Pending => pb::SessionStatus::Pending,
        SessionStatus::Running => pb::SessionStatus::Running,
        SessionStatus::Idle => pb::SessionStatus::Idle,
        SessionStatus::Completed => pb::SessionStatus::Completed,
        SessionStatus::Failed => pb::SessionStatus::Failed,
        SessionStatus::Cancelled => pb::SessionStatus::Cancelled,
        SessionStatus::AwaitingConfirmation => pb::SessionStatus::AwaitingConfirmation,
        SessionStatus::AwaitingApproval => pb::SessionStatus::AwaitingApproval,
    }
}

/// A status a request names: `None` for UNSPECIFIED or a value this
/// server does not know.
pub fn status_from_wire(value: i32) -> Option<SessionStatus> {
    match pb::SessionStatus::try_from(value).ok()? {
        pb::SessionStatus::Unspecified => None,
        pb::SessionStatus::Pending => Some(SessionStatus::Pending),
        pb::SessionStatus::Running => Some(SessionStatus::Running),
        pb::SessionStatus::Idle => Some(SessionStatus::Idle),
        pb::SessionStatus::Completed => Some(SessionStatus::Completed),
        pb::SessionStatus::Failed => Some(SessionStatus::Failed),
        pb::SessionStatus::Cancelled => Some(SessionStatus::Cancelled),
        pb::SessionStatus::AwaitingConfirmation => Some(SessionStatus::AwaitingConfirmation),
        pb::SessionStatus::AwaitingApproval => Some(SessionStatus::AwaitingApproval),
    }
}

pub fn session(s: SessionRow) -> pb::Session {
    pb::Session {
        id: s.id.to_string(),
        incident_id: s.incident_id.to_string(),
        status: status(s.status).into(),
        exit_reason: s
            .exit_reason
            .map(|r| r.as_str().to_owned())
            .unwrap_or_default(),
        head_seq: s.head_seq.map(|h| h.as_i64()).unwrap_or(0),
        turn_count: count(s.turn_count),
        tool_calls: count(s.tool_calls),
        input_tokens: count(s.input_tokens),
        output_tokens: count(s.output_tokens),
        created_at: Some(timestamp(s.created_at)),
        updated_at: Some(timestamp(s.updated_at)),
        last_recovery_plan: s.last_recovery_plan.and_then(stored_plan),
        lease_owner: s.lease_owner.unwrap_or_default(),
        lease_expires_at: s.lease_expires_at.map(timestamp),
        lease_epoch: s.lease_epoch,
        trace_id: s.trace_id.unwrap_or_default(),
        cache_read_input_tokens: count(s.cache_read_input_tokens),
        cache_creation_input_tokens: count(s.cache_creation_input_tokens),
        cost_usd: s.cost.known.usd(),
        cost_complete: s.cost.complete(),
        cost_unknown_turns: count(s.cost.unknown_calls),
        // Filled by the calls that show them (GetSession, DecideToolCalls).
        approvals: Vec::new(),
        forked_from_session_id: s
            .forked_from
            .map(|(parent, _)| parent.to_string())
            .unwrap_or_default(),
        forked_at_seq: s.forked_from.map_or(0, |(_, at)| at.as_i64()),
        queued_messages: Vec::new(),
    }
}

pub fn approval_state(state: ApprovalState) -> pb::ApprovalState {
    match state {
        ApprovalState::Pending => pb::ApprovalState::Pending,
        ApprovalState::Approved => pb::ApprovalState::Approved,
        ApprovalState::Denied => pb::ApprovalState::Denied,
        ApprovalState::Expired => pb::ApprovalState::Expired,
        ApprovalState::Superseded => pb::ApprovalState::Superseded,
        ApprovalState::Cancelled => pb::ApprovalState::Cancelled,
    }
}

pub fn approval(a: inquest_store::ApprovalRow) -> pb::Approval {
    pb::Approval {
        call_id: a.call_id,
        assistant_seq: a.assistant_seq.as_i64(),
        tool: a.tool,
        server: a.server,
        arguments_json: a.arguments,
        side_effect: a.side_effect,
        rule: a.rule,
        state: approval_state(a.state).into(),
        requested_at: Some(timestamp(a.requested_at)),
        expires_at: Some(timestamp(a.expires_at)),
        decided_by: a.decided_by.unwrap_or_default(),
        comment: a.comment.unwrap_or_default(),
        decided_at: a.decided_at.map(timestamp),
    }
}

/// A stored plan (its serde form); one that no longer parses is left out
/// with a warning rather than failing the whole session read.
fn stored_plan(value: serde_json::Value) -> Option<pb::RecoveryPlan> {
    match serde_json::from_value::<RecoveryPlan>(value) {
        Ok(plan) => Some(recovery_plan(&plan)),
        Err(e) => {
            tracing::warn!(error = %e, "stored recovery plan does not parse; not shown");
            None
        }
    }
}

pub fn recovery_plan(p: &RecoveryPlan) -> pb::RecoveryPlan {
    pb::RecoveryPlan {
        kind: p.kind.as_str().to_owned(),
        repairs: p.repairs.iter().map(repair).collect(),
        repaired_call_ids: p.repaired_call_ids.clone(),
        can_continue: p.can_continue,
        can_auto_continue: p.can_auto_continue,
        requires_confirmation: p.requires_confirmation,
        notice_text: p.notice_text.clone(),
        interrupted_calls: p
            .interrupted_calls
            .iter()
            .map(|c| pb::InterruptedCall {
                call_id: c.call_id.clone(),
                name: c.name.clone(),
                assistant_seq: count(c.assistant_seq),
                side_effect: c.side_effect.as_str().to_owned(),
            })
            .collect(),
    }
}

/// Read through the repair's serde form, so every variant maps without a
/// hand-kept list of fields.
fn repair(r: &Repair) -> pb::RecoveryRepair {
    let v = serde_json::to_value(r).unwrap_or_default();
    let text = |k: &str| {
        v.get(k)
            .and_then(|x| x.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let first = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| v.get(*k).and_then(serde_json::Value::as_i64))
            .unwrap_or(0)
    };
    pb::RecoveryRepair {
        r#type: text("type"),
        call_id: text("call_id"),
        name: text("name"),
        seq: first(&["seq", "assistant_seq", "from_seq", "after_seq"]),
        other_seq: first(&["next_seq", "previous_seq"]),
        new_id: text("new_id"),
        description: r.describe(),
    }
}

pub fn role(r: Role) -> pb::TurnRole {
    match r {
        Role::User => pb::TurnRole::User,
        Role::Assistant => pb::TurnRole::Assistant,
        Role::Tool => pb::TurnRole::Tool,
        Role::Notice => pb::TurnRole::Notice,
        Role::Compaction => pb::TurnRole::Compaction,
    }
}

pub fn turn(t: &Turn) -> pb::SessionTurn {
    // A row whose stored calls do not decode is still shown: its text goes
    // out, its calls as the raw stored JSON under one placeholder call so
    // nothing is hidden from a human reader.
    let tool_calls = match t.tool_calls() {
        Ok(calls) => calls
            .into_iter()
            .map(|c| pb::ToolCall {
                arguments_json: c.arguments.as_sent(),
                id: c.id,
                name: c.name,
            })
            .collect(),
        Err(_) => vec![pb::ToolCall {
            id: String::new(),
            name: String::new(),
            arguments_json: t.tool_calls_raw.to_string(),
        }],
    };
    pb::SessionTurn {
        session_id: t.session_id.to_string(),
        seq: t.seq.as_i64(),
        role: role(t.role).into(),
        content: t.content.clone(),
        tool_calls,
        tool_call_id: t.tool_call_id.clone().unwrap_or_default(),
        tool_name: t.tool_name.clone().unwrap_or_default(),
        is_error: t.is_error,
        created_at: Some(timestamp(t.created_at)),
        input_tokens: count(t.usage.input_tokens),
        output_tokens: count(t.usage.output_tokens),
        recovery_plan: notice_plan(t),
        compaction: t.compaction().map(|c| pb::Compaction {
            first_retained_seq: count(c.first_retained_seq),
            tokens_before: count(c.tokens_before),
            tokens_after: count(c.tokens_after),
        }),
        cache_read_input_tokens: count(t.usage.cache_read_input_tokens),
        cache_creation_input_tokens: count(t.usage.cache_creation_input_tokens),
        cost_usd: t.usage.cost.map(inquest_core::Cost::usd),
    }
}

/// A recovery notice's plan; `None` for every other turn, and (with a
/// warning) for a stored plan that does not decode, so the turn is still
/// shown.
fn notice_plan(t: &Turn) -> Option<pb::RecoveryPlan> {
    if t.role != Role::Notice || t.recovery_plan_raw.is_none() {
        return None;
    }
    let plan = t.recovery_plan();
    if plan.is_none() {
        tracing::warn!(
            seq = t.seq.get(),
            "stored notice plan does not decode; not shown"
        );
    }
    plan.as_ref().map(recovery_plan)
}

/// A turn as shown in one response message that may be at most
/// `max_response_bytes` (`limits.max_response_bytes`): the turn, encoded,
/// leaves room for its field tag and length and for the response's other
/// fields ([`RESPONSE_FRAMING_BYTES`]). A turn that would not fit has its
/// largest text fields (content, tool-call arguments) cut at a char
/// boundary, each with a marker saying how much was cut; the stored turn
/// stays whole. The caps on what is stored keep this from happening
/// (`api_limits::validate`); it is the safety net for turns stored before
/// them, so that no ListTurns page and no WatchSession message exceeds
/// what a default client accepts.
pub fn turn_within(t: &Turn, max_response_bytes: usize) -> pb::SessionTurn {
    let mut wire = turn(t);
    let budget = max_response_bytes.saturating_sub(RESPONSE_FRAMING_BYTES);
    fit_turn(&mut wire, budget, max_response_bytes);
    wire
}

/// What a response message holds besides one turn: the turn's tag and
/// length (≤ 6 bytes), ListTurns' `next_after_seq` and `head_seq` (≤ 11
/// bytes each), WatchEvent's oneof framing. Rounded up.
pub const RESPONSE_FRAMING_BYTES: usize = 64;

/// Room a cut marker takes (its text and the numbers in it).
const MARKER_ROOM: usize = 200;

fn cut_marker(cut: usize, what: &str, limit: usize) -> String {
    format!(
        "…[cut by inquest in this response: {cut} more bytes of {what} over \
         limits.max_response_bytes = {limit}; the stored turn is whole]"
    )
}

/// Largest index ≤ `at` that is a char boundary of `s`.
fn floor_boundary(s: &str, at: usize) -> usize {
    inquest_core::cap::floor_char_boundary(s, at)
}

/// Cuts `wire`'s largest text fields until it encodes in `budget` bytes.
fn fit_turn(wire: &mut pb::SessionTurn, budget: usize, limit: usize) {
    use prost::Message;
    let len = wire.encoded_len();
    if len <= budget {
        return;
    }
    let seq = wire.seq;
    let mut excess = len - budget;
    // The text fields, largest first; each cut gives back what it removes
    // minus its marker (field lengths only shrink, so their length
    // prefixes do too: the arithmetic is conservative).
    let mut fields: Vec<(&mut String, &str)> = vec![(&mut wire.content, "content")];
    for call in &mut wire.tool_calls {
        fields.push((&mut call.arguments_json, "tool-call arguments"));
    }
    fields.sort_by_key(|(f, _)| std::cmp::Reverse(f.len()));
    for (field, what) in fields {
        if excess == 0 || field.len() <= MARKER_ROOM {
            break;
        }
        let keep = floor_boundary(field, field.len().saturating_sub(excess + MARKER_ROOM));
        let cut = field.len() - keep;
        field.truncate(keep);
        let marker = cut_marker(cut, what, limit);
        field.push_str(&marker);
        excess = excess.saturating_sub(cut - marker.len().min(cut));
    }
    let over = wire.encoded_len() > budget;
    if let Some(plan) = &mut wire.recovery_plan
        && over
    {
        // A recovery notice whose plan lists tens of thousands of repairs:
        // the repaired call ids (what watchers settle cards by) stay.
        let repairs = plan.repairs.len();
        let calls = plan.interrupted_calls.len();
        plan.repairs.clear();
        plan.interrupted_calls.clear();
        wire.content.push_str(&format!(
            "…[cut by inquest in this response: the recovery plan's {repairs} repairs and \
             {calls} interrupted calls, over limits.max_response_bytes = {limit}; GetSession's \
             last_recovery_plan holds them]"
        ));
    }
    if wire.encoded_len() > budget {
        // Only a turn whose other fields are huge (thousands of calls, or
        // names of megabytes) gets here: show that it exists, and no more.
        let len = wire.encoded_len();
        wire.tool_calls.clear();
        wire.recovery_plan = None;
        for field in [&mut wire.tool_call_id, &mut wire.tool_name] {
            let keep = floor_boundary(field, 256);
            field.truncate(keep);
        }
        wire.content = format!(
            "…[turn {seq} is {len} bytes encoded, over limits.max_response_bytes = {limit}; \
             not shown in this response; the stored turn is whole]"
        );
    }
    tracing::warn!(
        seq,
        encoded_len = len,
        limit,
        "a turn was cut to fit a response"
    );
}

pub fn tool_call_start(s: &inquest_broadcast::ToolCallStart) -> pb::ToolCallStart {
    pb::ToolCallStart {
        session_id: s.session_id.to_string(),
        assistant_seq: s.assistant_seq.as_i64(),
        call_id: s.call_id.clone(),
        tool_name: s.tool_name.clone(),
        started_at: Some(timestamp(s.started_at)),
    }
}

/// A streamed piece of text; `text` is the part of the delta to send,
/// starting at byte `offset` of the attempt's text.
pub fn text_delta(d: &inquest_broadcast::TextDelta, offset: u64, text: &str) -> pb::TextDelta {
    pb::TextDelta {
        session_id: d.session_id.to_string(),
        turn_seq: d.turn_seq.as_i64(),
        offset,
        text: text.to_owned(),
        attempt: d.attempt,
    }
}

/// Wraps one payload as a watch event.
pub fn watch_event(event: pb::watch_event::Event) -> pb::WatchEvent {
    pb::WatchEvent { event: Some(event) }
}

pub fn report(r: inquest_store::ReportRow) -> pb::Report {
    let number = |key: &str| {
        r.counters
            .get(key)
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(0)
    };
    let burst = |key: &str| {
        r.counters["burst"]
            .get(key)
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(0)
    };
    let names = |key: &str| -> Vec<String> {
        r.counters
            .get(key)
            .and_then(serde_json::Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    pb::Report {
        session_id: r.session_id.to_string(),
        burst: r.burst,
        exit_reason: r.exit_reason.as_str().to_owned(),
        exit_is_terminal: r.exit_reason.is_terminal(),
        summary: r.summary.clone(),
        tool_calls: number("tool_calls"),
        input_tokens: number("input_tokens"),
        output_tokens: number("output_tokens"),
        skills_loaded: names("skills_loaded"),
        skills_used: names("skills_used"),
        servers_used: names("servers_used"),
        active_time_ms: count(r.active_ms),
        created_at: Some(timestamp(r.created_at)),
        // Reports saved before the burst figures existed have none: their
        // cost is unknown (0 known, not complete).
        cost_usd: burst("cost_nano_usd") as f64 / 1e9,
        cost_complete: r.counters.get("burst").is_some() && burst("cost_unknown_calls") == 0,
        burst_model_calls: burst("calls"),
        burst_input_tokens: burst("input_tokens"),
        burst_output_tokens: burst("output_tokens"),
        burst_cache_read_input_tokens: burst("cache_read_input_tokens"),
        burst_cache_creation_input_tokens: burst("cache_creation_input_tokens"),
        cost_unknown_calls: burst("cost_unknown_calls"),
        burst_tool_calls: burst("tool_calls"),
        author_input_tokens: burst("author_input_tokens"),
        author_output_tokens: burst("author_output_tokens"),
    }
}

pub fn api_token(t: &inquest_store::ApiToken) -> pb::ApiToken {
    pb::ApiToken {
        id: t.id.to_string(),
        name: t.name.clone(),
        tenant: t.tenant.clone(),
        role: t.role.to_string(),
        created_at: Some(timestamp(t.created_at)),
        expires_at: t.expires_at.map(timestamp),
        revoked_at: t.revoked_at.map(timestamp),
    }
}

pub fn event(e: &inquest_store::EventRow) -> pb::Event {
    pb::Event {
        id: e.id,
        r#type: e.kind.clone(),
        tenant: e.tenant.clone(),
        incident_id: e.incident_id.to_string(),
        session_id: e.session_id.map(|s| s.to_string()).unwrap_or_default(),
        data_json: e.payload.to_string(),
        created_at: Some(timestamp(e.created_at)),
    }
}

/// A webhook as the API shows it: never its secret.
pub fn webhook(w: &inquest_store::WebhookRow) -> pb::Webhook {
    pb::Webhook {
        id: w.id.to_string(),
        url: w.url.clone(),
        event_types: w.event_types.clone(),
        description: w.description.clone(),
        format: w.format.clone(),
        created_at: Some(timestamp(w.created_at)),
        disabled_at: w.disabled_at.map(timestamp),
        disabled_reason: w.disabled_reason.clone().unwrap_or_default(),
        delivered_event_id: w.delivered_id,
        failed_attempts: u32::try_from(w.failed_attempts).unwrap_or(0),
        last_error: w.last_error.clone().unwrap_or_default(),
    }
}

pub fn webhook_delivery(a: &inquest_store::AttemptRow) -> pb::WebhookDelivery {
    pb::WebhookDelivery {
        id: a.id,
        event_id: a.event_id,
        attempted_at: Some(timestamp(a.attempted_at)),
        status_code: a
            .status_code
            .and_then(|c| u32::try_from(c).ok())
            .unwrap_or(0),
        error: a.error.clone().unwrap_or_default(),
        duration_ms: u64::try_from(a.duration_ms).unwrap_or(0),
        redelivery: a.redelivery,
    }
}

pub fn audit_event(e: &inquest_store::AuditEvent) -> pb::AuditEvent {
    let id = |v: Option<String>| v.unwrap_or_default();
    pb::AuditEvent {
        id: e.id,
        at: Some(timestamp(e.at)),
        tenant: e.entry.tenant.to_string(),
        subject: e.entry.subject.clone(),
        actor_name: e.entry.actor_name.clone(),
        role: e.entry.role.clone(),
        method: e.entry.method.clone(),
        incident_id: id(e.entry.incident_id.map(|i| i.to_string())),
        session_id: id(e.entry.session_id.map(|s| s.to_string())),
        token_id: id(e.entry.token_id.map(|t| t.to_string())),
        code: e.entry.code.clone(),
        message: e.entry.message.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn every_status_filters_by_itself_and_unspecified_or_unknown_none() {
        for s in SessionStatus::ALL {
            assert_eq!(status_from_wire(status(s) as i32), Some(s), "{s}");
        }
        assert_eq!(
            status_from_wire(pb::SessionStatus::Unspecified as i32),
            None
        );
        assert_eq!(status_from_wire(99), None);
        assert_eq!(status_from_wire(-1), None);
    }

    fn wire(content: &str, args: &[&str]) -> pb::SessionTurn {
        pb::SessionTurn {
            session_id: "00000000-0000-0000-0000-000000000000".into(),
            seq: 7,
            content: content.into(),
            tool_calls: args
                .iter()
                .enumerate()
                .map(|(i, a)| pb::ToolCall {
                    id: format!("call_{i}"),
                    name: "grep".into(),
                    arguments_json: (*a).into(),
                })
                .collect(),
            ..pb::SessionTurn::default()
        }
    }

    #[test]
    fn a_turn_that_fits_is_untouched() {
        let mut w = wire("hello", &["{}"]);
        let before = w.clone();
        fit_turn(&mut w, 10_000, 10_000);
        assert_eq!(w, before);
    }

    #[test]
    fn large_fields_are_cut_at_char_boundaries_with_markers() {
        let content = "é".repeat(50_000);
        let args = "x".repeat(80_000);
        for budget in [1_000, 20_000, 90_000, 150_000] {
            let mut w = wire(&content, &[&args, "{}"]);
            fit_turn(&mut w, budget, budget);
            assert!(
                w.encoded_len() <= budget,
                "budget {budget}: {}",
                w.encoded_len()
            );
            assert!(w.tool_calls.iter().all(|c| !c.id.is_empty()) || budget < 2_000);
            for text in
                std::iter::once(&w.content).chain(w.tool_calls.iter().map(|c| &c.arguments_json))
            {
                if let Some(i) = text.find("…[cut by inquest") {
                    assert!(content.starts_with(&text[..i]) || args.starts_with(&text[..i]));
                    assert!(text.contains("more bytes of"));
                }
            }
        }
    }

    fn huge_plan(n: usize) -> pb::RecoveryPlan {
        pb::RecoveryPlan {
            kind: "degraded_history".into(),
            repairs: (0..n)
                .map(|i| pb::RecoveryRepair {
                    r#type: "synthesized_tool_result".into(),
                    call_id: format!("call_{i}"),
                    description: format!("tool call call_{i} had no recorded result"),
                    ..pb::RecoveryRepair::default()
                })
                .collect(),
            repaired_call_ids: (0..n).map(|i| format!("call_{i}")).collect(),
            ..pb::RecoveryPlan::default()
        }
    }

    #[test]
    fn a_notice_with_a_huge_plan_keeps_its_repaired_ids_within_the_budget() {
        let budget = 1024 * 1024;
        let mut w = wire("Recovery: degraded_history.", &[]);
        w.recovery_plan = Some(huge_plan(20_000));
        assert!(w.encoded_len() > budget);
        fit_turn(&mut w, budget, budget);
        assert!(w.encoded_len() <= budget, "{}", w.encoded_len());
        let plan = w.recovery_plan.as_ref().expect("the plan is still shown");
        assert!(plan.repairs.is_empty());
        assert_eq!(plan.repaired_call_ids.len(), 20_000);
        assert!(
            w.content
                .starts_with("Recovery: degraded_history.…[cut by inquest")
        );
        assert!(w.content.contains("20000 repairs"), "{}", w.content);

        // Even the ids do not fit: the turn is a note, without the plan.
        let mut w = wire("Recovery: degraded_history.", &[]);
        w.recovery_plan = Some(huge_plan(200_000));
        fit_turn(&mut w, budget, budget);
        assert!(w.encoded_len() <= budget);
        assert!(w.recovery_plan.is_none());
        assert!(w.content.contains("not shown in this response"));
    }

    #[test]
    fn a_turn_of_huge_metadata_is_replaced_by_a_note() {
        let many: Vec<String> = (0..5_000).map(|i| format!("{{\"i\":{i}}}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let mut w = wire("short", &refs);
        fit_turn(&mut w, 4_096, 4_096);
        assert!(w.encoded_len() <= 4_096);
        assert!(w.content.contains("not shown in this response"));
    }
}
