//! `inquest investigate "title"`: create the incident, start a session,
//! watch it live and print its report, in one command. `inquest report
//! SESSION` prints a session's report.

use clap::Args;
use inquest_proto::v1 as pb;

use crate::{
    client::{Target, idempotency_key, status_error},
    retry::retrying,
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
    follow(&mut client, &session.id, 0, args.json).await?;
    print_report(&mut client, &session.id, 0, args.json).await
}

pub async fn report(args: ReportArgs) -> anyhow::Result<()> {
    let mut client = args.target.connect_retrying().await?;
    print_report(&mut client, &args.session_id, args.burst, false).await
}

async fn print_report(
    client: &mut crate::client::Client,
    session_id: &str,
    burst: u32,
    json: bool,
) -> anyhow::Result<()> {
    let request = pb::GetReportRequest {
        session_id: session_id.to_owned(),
        burst,
    };
    let r = retrying(|| {
        let (mut client, request) = (client.clone(), request.clone());
        async move { client.get_report(request).await }
    })
    .await?;
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
                "cost_usd": r.cost_complete.then_some(r.cost_usd),
                "cost_known_usd": r.cost_usd,
                "cost_complete": r.cost_complete,
                "cost_unknown_calls": r.cost_unknown_calls,
                "burst_model_calls": r.burst_model_calls,
                "burst_input_tokens": r.burst_input_tokens,
                "burst_output_tokens": r.burst_output_tokens,
                "burst_cache_read_input_tokens": r.burst_cache_read_input_tokens,
                "burst_cache_creation_input_tokens": r.burst_cache_creation_input_tokens,
            })
        );
        return Ok(());
    }
    println!("\n=== report (burst {}) ===", r.burst);
    println!("exit reason: {}", r.exit_reason);
    println!(
        "tool calls: {}   tokens: {} in / {} out   active time: {:.1} s",
        r.tool_calls,
        r.input_tokens,
        r.output_tokens,
        r.active_time_ms as f64 / 1000.0
    );
    println!(
        "this burst: {} model call(s)   tokens: {} in ({} cache read, {} cache written) / {} out   \
         cost: {}",
        r.burst_model_calls,
        r.burst_input_tokens,
        r.burst_cache_read_input_tokens,
        r.burst_cache_creation_input_tokens,
        r.burst_output_tokens,
        crate::client::cost_text(r.cost_usd, r.cost_complete, r.cost_unknown_calls)
    );
    println!(
        "skills loaded: [{}]   used: [{}]   servers used: [{}]",
        r.skills_loaded.join(", "),
        r.skills_used.join(", "),
        r.servers_used.join(", ")
    );
    println!("\n{}", r.summary);
    Ok(())
}
