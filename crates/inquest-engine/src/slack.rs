//! The Slack format of a webhook: one Block Kit message per event, POSTed
//! to a Slack incoming-webhook URL. Pure: the event, what the store says
//! about it now ([`EventContext`]) and the console's address in, the JSON
//! body out.
//!
//! Everything shown comes from a model, a tool, an alert or a person, so
//! it is escaped as Slack asks (`&`, `<`, `>`): a summary cannot mention
//! `<!channel>` or hide a link. Each text is cut under Block Kit's limits
//! (a header's 150 characters, a section's 3000), with a marker.

use inquest_store::{EventContext, EventRow};
use serde_json::{Value, json};

/// Block Kit's limit on a header's text.
const HEADER_CHARS: usize = 150;
/// Far under a section's 3000: a message is read on a phone.
const SUMMARY_CHARS: usize = 1500;
const ARGUMENTS_CHARS: usize = 800;
const LINE_CHARS: usize = 300;

/// The body for `event`: `text` (the notification's fallback) and
/// `blocks`. `console` is `[console] public_url` (the console's own
/// address), when set.
pub fn message(event: &EventRow, context: &EventContext, console: Option<&str>) -> Value {
    let title = context
        .incident_title
        .as_deref()
        .filter(|t| !t.trim().is_empty())
        .unwrap_or("(untitled incident)");
    let headline = headline(event, context);
    // A header is plain_text, which Slack shows as it is (no mentions, no
    // links): not escaped.
    let mut blocks = vec![json!({
        "type": "header",
        "text": {"type": "plain_text", "text": cut(title, HEADER_CHARS), "emoji": false},
    })];
    blocks.push(section(&headline));
    blocks.extend(details(event, context));
    blocks.push(json!({
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": footer(event, console)}],
    }));
    json!({
        // The notification's text: Slack parses it as mrkdwn too, so the
        // title is escaped like the rest; the markup is dropped.
        "text": cut(&format!("{}: {}", escape(title), unmarked(&headline)), LINE_CHARS),
        "blocks": blocks,
    })
}

fn section(text: &str) -> Value {
    json!({"type": "section", "text": {"type": "mrkdwn", "text": text}})
}

fn payload<'a>(event: &'a EventRow, key: &str) -> Option<&'a Value> {
    event.payload.get(key).filter(|v| !v.is_null())
}

fn payload_str<'a>(event: &'a EventRow, key: &str) -> Option<&'a str> {
    payload(event, key).and_then(Value::as_str)
}

/// What happened, in one line of mrkdwn.
fn headline(event: &EventRow, context: &EventContext) -> String {
    let status = |status: &str, reason: Option<&str>| match reason {
        Some(reason) => format!("*{}* (exit reason `{}`)", escape(status), escape(reason)),
        None => format!("*{}*", escape(status)),
    };
    match event.kind.as_str() {
        "incident.created" => "New incident".to_owned(),
        "report.ready" => {
            let now = context.session_status.as_deref().unwrap_or("unknown");
            format!(
                "Report ready. The session is {}",
                status(now, payload_str(event, "exit_reason"))
            )
        }
        "approval.requested" => "A tool call waits for approval".to_owned(),
        "approval.decided" => format!(
            "A tool call was {}",
            escape(payload_str(event, "state").unwrap_or("decided"))
        ),
        "session.recovered" => "The session was recovered after its replica stopped".to_owned(),
        kind => {
            let new = kind.strip_prefix("session.").unwrap_or(kind);
            format!(
                "The session is {}",
                status(new, payload_str(event, "exit_reason"))
            )
        }
    }
}

/// The blocks between the headline and the footer.
fn details(event: &EventRow, context: &EventContext) -> Vec<Value> {
    match event.kind.as_str() {
        "report.ready" => {
            let mut blocks = Vec::new();
            if let Some(summary) = payload_str(event, "summary").filter(|s| !s.trim().is_empty()) {
                blocks.push(section(&escape(&cut(summary, SUMMARY_CHARS))));
            }
            let cost = match payload(event, "cost_nano_usd").and_then(Value::as_i64) {
                Some(nano) => dollars(nano),
                None => "unknown".to_owned(),
            };
            let active = payload(event, "active_ms")
                .and_then(Value::as_i64)
                .map_or_else(|| "unknown".to_owned(), active_time);
            let tokens = |key| payload(event, key).and_then(Value::as_i64).unwrap_or(0);
            blocks.push(json!({
                "type": "section",
                "fields": [
                    {"type": "mrkdwn", "text": format!("*Cost*\n{cost}")},
                    {"type": "mrkdwn", "text": format!("*Active time*\n{active}")},
                    {"type": "mrkdwn", "text": format!(
                        "*Tokens*\n{} in, {} out", tokens("input_tokens"), tokens("output_tokens"))},
                ],
            }));
            blocks
        }
        "approval.requested" | "approval.decided" => approval(event, context),
        "session.recovered" => payload_str(event, "plan_kind")
            .map(|plan| vec![section(&format!("Recovery plan: `{}`", escape(plan)))])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn approval(event: &EventRow, context: &EventContext) -> Vec<Value> {
    let tool = payload_str(event, "tool").unwrap_or("?");
    let server = payload_str(event, "server").unwrap_or("?");
    let mut text = format!("*Tool* `{}` on `{}`", escape(tool), escape(server));
    if let Some(effect) = payload_str(event, "side_effect") {
        text.push_str(&format!(" ({})", escape(effect)));
    }
    if let Some(rule) = payload_str(event, "rule") {
        text.push_str(&format!("\n*Rule* {}", escape(&cut(rule, LINE_CHARS))));
    }
    if let Some(arguments) = &context.approval_arguments {
        // A code block cannot hold three backticks: they would end it.
        let arguments = cut(arguments, ARGUMENTS_CHARS).replace("```", "'''");
        text.push_str(&format!("\n*Arguments*\n```{}```", escape(&arguments)));
    }
    let mut blocks = vec![section(&text)];
    if event.kind == "approval.requested" {
        if let (Some(session), Some(call)) = (event.session_id, payload_str(event, "call_id")) {
            let call = escape(call);
            let mut ask = format!(
                "Approve with `inquest approve {session} {call}` or deny with `inquest deny {session} {call} --comment \"why\"`"
            );
            if let Some(expires) = payload_str(event, "expires_at") {
                ask.push_str(&format!(". It expires at {}.", escape(expires)));
            }
            blocks.push(section(&ask));
        }
    } else {
        let by = payload_str(event, "decided_by").unwrap_or("?");
        let mut decided = format!("Decided by {}", escape(by));
        if let Some(comment) = payload_str(event, "comment").filter(|c| !c.is_empty()) {
            decided.push_str(&format!(": {}", escape(&cut(comment, LINE_CHARS))));
        }
        blocks.push(section(&decided));
    }
    blocks
}

/// The ids, and the console link when there is a console to link to.
fn footer(event: &EventRow, console: Option<&str>) -> String {
    let mut ids = match event.session_id {
        Some(s) => format!("session `{s}`"),
        None => format!("incident `{}`", event.incident_id),
    };
    ids.push_str(&format!(
        " · event {} · tenant {}",
        event.id,
        escape(&event.tenant)
    ));
    let Some(console) = console else {
        return ids;
    };
    let target = match event.session_id {
        Some(s) => format!("#/session/{s}"),
        None => "#/incidents".to_owned(),
    };
    format!(
        "<{}{target}|Open in the Inquest console> · {ids}",
        console.trim_end_matches('/').to_owned() + "/"
    )
}

/// Slack's three escapes for text it parses.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// mrkdwn without its bold and code marks, for the notification's text
/// (the escapes stay: Slack parses that text too).
fn unmarked(mrkdwn: &str) -> String {
    mrkdwn.replace(['*', '`'], "")
}

/// At most `max` characters, a cut one ending with a marker.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let marker = "… [cut]";
    let keep = max.saturating_sub(marker.chars().count());
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(marker);
    out
}

fn dollars(nano: i64) -> String {
    #[allow(clippy::cast_precision_loss)]
    let usd = nano as f64 / 1e9;
    format!("${usd:.4}")
}

fn active_time(ms: i64) -> String {
    let secs = ms.max(0) / 1000;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m {:02}s", secs / 60, secs % 60),
        _ => format!("{}h {:02}m", secs / 3600, (secs % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, payload: Value) -> EventRow {
        EventRow {
            id: 42,
            kind: kind.into(),
            tenant: "acme".into(),
            session_id: Some(uuid::Uuid::nil()),
            incident_id: uuid::Uuid::nil(),
            payload,
            created_at: time::OffsetDateTime::UNIX_EPOCH,
        }
    }

    fn context(title: &str) -> EventContext {
        EventContext {
            incident_title: Some(title.into()),
            session_status: Some("completed".into()),
            exit_reason: Some("finished".into()),
            approval_arguments: Some(r#"{"service":"checkout-api"}"#.into()),
        }
    }

    fn all_text(v: &Value) -> String {
        v.to_string()
    }

    #[test]
    fn a_report_carries_title_status_summary_cost_time_and_link() {
        let e = event(
            "report.ready",
            json!({"exit_reason": "finished", "summary": "DB pool exhausted", "cost_nano_usd": 12_345_000,
                   "active_ms": 125_000, "input_tokens": 10, "output_tokens": 5}),
        );
        let m = message(
            &e,
            &context("checkout 5xx"),
            Some("https://inq.example.com/console"),
        );
        let text = all_text(&m);
        for want in [
            "checkout 5xx",
            "*completed* (exit reason `finished`)",
            "DB pool exhausted",
            "$0.0123",
            "2m 05s",
            "<https://inq.example.com/console/#/session/00000000-0000-0000-0000-000000000000|",
        ] {
            assert!(text.contains(want), "{want:?} missing from {text}");
        }
        assert_eq!(m["blocks"][0]["type"], "header");
    }

    #[test]
    fn an_approval_request_says_what_is_asked_and_how_to_approve() {
        let e = event(
            "approval.requested",
            json!({"call_id": "call_7", "tool": "restart", "server": "k8s", "side_effect": "mutating",
                   "rule": "require (mode \"mutating\")", "state": "pending"}),
        );
        let text = all_text(&message(&e, &context("t"), None));
        assert!(text.contains("`restart` on `k8s`"), "{text}");
        assert!(text.contains("checkout-api"), "{text}");
        assert!(
            text.contains("inquest approve 00000000-0000-0000-0000-000000000000 call_7"),
            "{text}"
        );
        assert!(!text.contains("Open in the Inquest console"), "{text}");
    }

    #[test]
    fn untrusted_text_cannot_mention_or_link_and_is_cut() {
        let summary = format!(
            "<!channel> see <https://evil.example|here> {}",
            "x".repeat(5000)
        );
        let e = event("report.ready", json!({"summary": summary}));
        let m = message(&e, &context(&"T".repeat(400)), None);
        let text = all_text(&m);
        assert!(!text.contains("<!channel>"), "{text}");
        assert!(!text.contains("<https://evil"), "{text}");
        let header = m["blocks"][0]["text"]["text"].as_str().unwrap();
        assert!(header.chars().count() <= HEADER_CHARS);
        for block in m["blocks"].as_array().unwrap() {
            if let Some(t) = block["text"]["text"].as_str() {
                assert!(t.chars().count() <= 3000, "{t}");
            }
        }
    }

    #[test]
    fn a_status_change_names_the_status_and_its_reason() {
        let e = event(
            "session.failed",
            json!({"status": "failed", "exit_reason": "provider_error"}),
        );
        let m = message(&e, &context("db down"), None);
        assert!(
            m["text"]
                .as_str()
                .unwrap()
                .contains("failed (exit reason provider_error)")
        );
    }
}
