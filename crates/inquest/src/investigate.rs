//! `inquest investigate "title"`: create the incident, start a session,
//! watch it live and print its report, in one command. `inquest report
//! SESSION` prints a session's report.

use clap::Args;
use inquest_proto::{
    reason::{ErrorReason, Reason},
    v1 as pb,
};

use crate::{
    client::{Client, Target, cost_text, duration_text, idempotency_key, status_error},
    retry::{retrying, should_retry_call},
    watch::follow,
};

#[derive(Args)]
pub struct InvestigateArgs {
    /// The incident's title.
    title: String,
    #[arg(long, default_value = "")]
    description: String,
    /// The opening message (default: the title and description).
    #[arg(long)]
    message: Option<String>,
    /// One JSON object per line, for scripts.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    target: Target,
}

#[derive(Args)]
pub struct ReportArgs {
    session_id: String,
    /// Burst number (default: the latest).
    #[arg(long, default_value_t = 0)]
    burst: u32,
    #[command(flatten)]
    target: Target,
}

pub async fn investigate(args: InvestigateArgs) -> anyhow::Result<()> {
    let mut client = args.target.connect_retrying().await?;
    let incident = client
        .create_incident(pb::CreateIncidentRequest {
            title: args.title.clone(),
            description: args.description.clone(),
        })
        .await
        .map_err(status_error)?
        .into_inner();
    let message = args.message.unwrap_or_else(|| {
        if args.description.is_empty() {
            format!("Investigate: {}", args.title)
        } else {
            format!("Investigate: {}\n\n{}", args.title, args.description)
        }
    });
    // Keyed, so a retry through an outage starts one session.
    let request = pb::StartSessionRequest {
        incident_id: incident.id.clone(),
        message,
        idempotency_key: idempotency_key(String::new()),
    };
    let session = retrying(|| {
        let (mut client, request) = (client.clone(), request.clone());
        async move { client.start_session(request).await }
    })
    .await?;
    if !args.json {
        println!("incident {}\nsession  {}\n", incident.id, session.id);
    }
    let settled = follow(&mut client, &args.target, &session.id, 0, args.json).await?;
    match settled_report(&mut client, &settled).await? {
        Some(r) => {
            print_report(&r, args.json);
            Ok(())
        }
        // Cancelled before any burst ended: nothing was reported, and
        // that is the answer, not an error.
        None => {
            eprintln!(
                "(no report: the session is {} and no burst of it ended with one)",
                settled
                    .status()
                    .as_str_name()
                    .trim_start_matches("SESSION_STATUS_")
                    .to_lowercase()
            );
            Ok(())
        }
    }
}

pub async fn report(args: ReportArgs) -> anyhow::Result<()> {
    let mut client = args.target.connect_retrying().await?;
    if let Some(r) = fetch_report(&mut client, &args.session_id, args.burst).await? {
        print_report(&r, false);
        return Ok(());
    }
    // Not found: say what there is.
    let latest = fetch_report(&mut client, &args.session_id, 0).await?;
    match (args.burst, latest) {
        (0, _) | (_, None) => anyhow::bail!(
            "session {} has no report yet: no burst of it has ended (`inquest watch {}` follows it)",
            args.session_id,
            args.session_id
        ),
        (n, Some(latest)) => anyhow::bail!(
            "session {} has no burst {n}: its reports are bursts 1 to {} (--burst 1..{})",
            args.session_id,
            latest.burst,
            latest.burst
        ),
    }
}

/// The latest report of the settled session `s`. A cancel ends the
/// watch at once, while the burst it stopped lands its report a moment
/// later: a cancelled session whose burst was claimed (lease epoch > 0)
/// is waited on for that report, up to [`CANCELLED_REPORT_WAIT`].
async fn settled_report(
    client: &mut Client,
    s: &pb::Session,
) -> anyhow::Result<Option<pb::Report>> {
    let waits = s.status() == pb::SessionStatus::Cancelled && s.lease_epoch > 0;
    let deadline = std::time::Instant::now() + CANCELLED_REPORT_WAIT;
    loop {
        let report = fetch_report(client, &s.id, 0).await?;
        if report.is_some() || !waits || std::time::Instant::now() >= deadline {
            return Ok(report);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// How long `investigate` waits for a cancelled burst's report.
const CANCELLED_REPORT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The report of `burst` (0: the latest), read through an outage; `None`
/// when the session has no such report.
async fn fetch_report(
    client: &mut Client,
    session_id: &str,
    burst: u32,
) -> anyhow::Result<Option<pb::Report>> {
    let request = pb::GetReportRequest {
        session_id: session_id.to_owned(),
        burst,
    };
    let mut retry = crate::retry::Retry::default();
    loop {
        match client.get_report(request.clone()).await {
            Ok(r) => return Ok(Some(r.into_inner())),
            Err(status)
                if ErrorReason::of(&status).is_some_and(|r| r.reason == Reason::ReportNotFound) =>
            {
                return Ok(None);
            }
            Err(status) if should_retry_call(&status) => {
                retry.pause(&crate::client::Failure(&status)).await?
            }
            Err(status) => return Err(status_error(status)),
        }
    }
}

fn print_report(r: &pb::Report, json: bool) {
    if json {
        println!(
            "{}",
            serde_json::json!({
                "type": "report",
                "session_id": r.session_id,
                "burst": r.burst,
                "exit_reason": r.exit_reason,
                "exit_is_terminal": r.exit_is_terminal,
                "summary": r.summary,
                "tool_calls": r.tool_calls,
                "input_tokens": r.input_tokens,
                "output_tokens": r.output_tokens,
                "skills_loaded": r.skills_loaded,
                "skills_used": r.skills_used,
                "servers_used": r.servers_used,
                "active_time_ms": r.active_time_ms,
                "cost_usd": (r.cost_complete && r.burst_model_calls > 0).then_some(r.cost_usd),
                "cost_known_usd": r.cost_usd,
                "cost_complete": r.cost_complete,
                "cost_unknown_calls": r.cost_unknown_calls,
                "burst_model_calls": r.burst_model_calls,
                "burst_tool_calls": r.burst_tool_calls,
                "burst_input_tokens": r.burst_input_tokens,
                "burst_output_tokens": r.burst_output_tokens,
                "burst_cache_read_input_tokens": r.burst_cache_read_input_tokens,
                "burst_cache_creation_input_tokens": r.burst_cache_creation_input_tokens,
                "author_input_tokens": r.author_input_tokens,
                "author_output_tokens": r.author_output_tokens,
            })
        );
        return;
    }
    for line in report_lines(r) {
        println!("{line}");
    }
}

/// The report as text. Its figures are named as everywhere else: the
/// session's (its stored turns, as `session get` shows them) and this
/// burst's (its model calls, the report's writing included).
pub(crate) fn report_lines(r: &pb::Report) -> Vec<String> {
    let author = if r.author_input_tokens > 0 || r.author_output_tokens > 0 {
        format!(
            "; report writing {} in / {} out",
            r.author_input_tokens, r.author_output_tokens
        )
    } else {
        String::new()
    };
    vec![
        format!("\n=== report (burst {}) ===", r.burst),
        format!("exit reason: {}", r.exit_reason),
        format!(
            "session: {} tool call(s), session tokens {} in / {} out, active time {}",
            r.tool_calls,
            r.input_tokens,
            r.output_tokens,
            duration_text(r.active_time_ms)
        ),
        format!(
            "this burst: {} model call(s), {} tool call(s), tokens {} in ({} cache read, {} cache \
             written) / {} out{author}; cost {}",
            r.burst_model_calls,
            r.burst_tool_calls,
            r.burst_input_tokens,
            r.burst_cache_read_input_tokens,
            r.burst_cache_creation_input_tokens,
            r.burst_output_tokens,
            cost_text(
                r.cost_usd,
                r.cost_complete,
                r.cost_unknown_calls,
                r.burst_model_calls > 0
            )
        ),
        format!(
            "skills loaded: [{}]   used: [{}]   servers used: [{}]",
            r.skills_loaded.join(", "),
            r.skills_used.join(", "),
            r.servers_used.join(", ")
        ),
        format!("\n{}", r.summary),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_names_its_figures_and_prints_short_times() {
        let r = pb::Report {
            burst: 2,
            tool_calls: 4,
            input_tokens: 5995,
            output_tokens: 512,
            active_time_ms: 56,
            burst_model_calls: 1,
            burst_input_tokens: 912,
            burst_output_tokens: 213,
            author_input_tokens: 912,
            author_output_tokens: 213,
            cost_complete: true,
            ..pb::Report::default()
        };
        let text = report_lines(&r).join("\n");
        assert!(text.contains("session tokens 5995 in / 512 out"), "{text}");
        assert!(text.contains("active time 56 ms"), "{text}");
        assert!(
            text.contains("this burst: 1 model call(s), 0 tool call(s)"),
            "{text}"
        );
        assert!(text.contains("report writing 912 in / 213 out"), "{text}");
        // A cancelled burst that priced nothing has no cost of $0.
        let cancelled = pb::Report {
            cost_complete: true,
            ..pb::Report::default()
        };
        let text = report_lines(&cancelled).join("\n");
        assert!(!text.contains("$0"), "{text}");
        assert!(text.contains("cost unknown"), "{text}");
    }
}
