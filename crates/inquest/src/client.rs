//! Client commands: talk gRPC to a running `inquest serve`.

use anyhow::Context;
use clap::{Args, Subcommand};
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use tonic::transport::Channel;

#[derive(Args, Clone)]
pub struct Target {
    /// Server address.
    #[arg(
        long,
        env = "INQUEST_SERVER",
        default_value = "http://127.0.0.1:50051",
        global = true
    )]
    server: String,
}

impl Target {
    pub async fn connect(&self) -> anyhow::Result<InvestigationsClient<Channel>> {
        InvestigationsClient::connect(self.server.clone())
            .await
            .with_context(|| format!("cannot reach the inquest server at {}", self.server))
    }
}

#[derive(Subcommand)]
pub enum IncidentCommand {
    /// Create an incident.
    New {
        title: String,
        #[arg(long, default_value = "")]
        description: String,
        /// Print only the new incident's id.
        #[arg(long)]
        id_only: bool,
    },
    /// List incidents, newest first, one line each: id, created, title.
    List(PageArgs),
}

/// How much of a listing to print.
#[derive(Args, Clone, Copy)]
pub struct PageArgs {
    /// Items per page (the server caps it at 500).
    #[arg(long, default_value_t = 50)]
    limit: u32,
    /// Follow the page tokens to the end instead of printing one page.
    #[arg(long)]
    all: bool,
}

#[derive(Subcommand)]
pub enum SessionCommand {
    /// Start a session on an incident with its opening message.
    Start {
        incident_id: String,
        message: String,
        /// Makes the call safe to retry: the same key returns the same session.
        #[arg(long, default_value = "")]
        idempotency_key: String,
        /// Print only the session's id.
        #[arg(long)]
        id_only: bool,
    },
    /// Show one session.
    Get { session_id: String },
    /// List sessions, newest first, one line each: id, status, created,
    /// incident, exit reason. E.g. what runs now: `--status running`.
    List {
        /// Only this incident's sessions (default: every incident's).
        #[arg(long = "incident", value_name = "ID")]
        incident_id: Option<String>,
        /// Only sessions in this status (repeat for several): pending,
        /// running, idle, completed, failed, cancelled, awaiting_confirmation.
        #[arg(long = "status", value_name = "STATUS", value_parser = parse_status)]
        statuses: Vec<pb::SessionStatus>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Stop a pending or running session (exit reason "cancelled").
    Cancel { session_id: String },
    /// Confirm the recovery plan of a session awaiting confirmation (its
    /// interrupted tool calls may have run): the burst continues.
    Continue { session_id: String },
}

#[derive(Args)]
pub struct TurnsArgs {
    session_id: String,
    /// Show turns after this seq.
    #[arg(long, default_value_t = 0)]
    after_seq: i64,
    #[command(flatten)]
    target: Target,
}

/// A status as the CLI spells it: the proto name's lowercase tail.
fn parse_status(text: &str) -> Result<pb::SessionStatus, String> {
    pb::SessionStatus::from_str_name(&format!("SESSION_STATUS_{}", text.to_uppercase()))
        .filter(|s| *s != pb::SessionStatus::Unspecified)
        .ok_or_else(|| {
            format!(
                "unknown status {text:?} (pending, running, idle, completed, failed, \
                 cancelled, awaiting_confirmation)"
            )
        })
}

fn status_name(status: i32) -> String {
    pb::SessionStatus::try_from(status)
        .map(|s| {
            s.as_str_name()
                .trim_start_matches("SESSION_STATUS_")
                .to_lowercase()
        })
        .unwrap_or_else(|_| "unknown".into())
}

fn created(t: Option<&prost_types::Timestamp>) -> String {
    t.map(|t| t.to_string()).unwrap_or_else(|| "-".into())
}

/// One line per incident: id, created, title.
pub fn incident_line(i: &pb::Incident) -> String {
    format!("{}  {}  {}", i.id, created(i.created_at.as_ref()), i.title)
}

/// One line per session: id, status, created, incident, exit reason.
pub fn session_line(s: &pb::Session) -> String {
    let mut line = format!(
        "{}  {:<21}  {}  incident {}",
        s.id,
        status_name(s.status),
        created(s.created_at.as_ref()),
        s.incident_id
    );
    if !s.exit_reason.is_empty() {
        line.push_str(&format!("  ({})", s.exit_reason));
    }
    line
}

/// Prints one page, or every page with `--all`; says on stderr when more
/// pages are left.
async fn print_pages<F, Fut>(page: PageArgs, what: &str, mut fetch: F) -> anyhow::Result<()>
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<(Vec<String>, String)>>,
{
    let mut token = String::new();
    loop {
        let (lines, next) = fetch(token).await?;
        for line in lines {
            println!("{line}");
        }
        if next.is_empty() {
            return Ok(());
        }
        if !page.all {
            eprintln!("(more {what}: --all lists every page)");
            return Ok(());
        }
        token = next;
    }
}

pub fn status_error(e: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{:?}: {}", e.code(), e.message())
}

pub async fn incident(target: Target, command: IncidentCommand) -> anyhow::Result<()> {
    let mut client = target.connect().await?;
    match command {
        IncidentCommand::New {
            title,
            description,
            id_only,
        } => {
            let incident = client
                .create_incident(pb::CreateIncidentRequest { title, description })
                .await
                .map_err(status_error)?
                .into_inner();
            if id_only {
                println!("{}", incident.id);
            } else {
                println!("incident {}  {}", incident.id, incident.title);
            }
        }
        IncidentCommand::List(page) => {
            print_pages(page, "incidents", |page_token| {
                let mut client = client.clone();
                async move {
                    let page = client
                        .list_incidents(pb::ListIncidentsRequest {
                            page_size: page.limit,
                            page_token,
                        })
                        .await
                        .map_err(status_error)?
                        .into_inner();
                    let lines = page.incidents.iter().map(incident_line).collect();
                    Ok((lines, page.next_page_token))
                }
            })
            .await?;
        }
    }
    Ok(())
}

fn print_session(s: &pb::Session) {
    let status = status_name(s.status);
    println!(
        "session {}  incident {}  status {}{}  turns {}  head_seq {}  tokens {}/{}",
        s.id,
        s.incident_id,
        status,
        if s.exit_reason.is_empty() {
            String::new()
        } else {
            format!(" ({})", s.exit_reason)
        },
        s.turn_count,
        s.head_seq,
        s.input_tokens,
        s.output_tokens,
    );
    if !s.lease_owner.is_empty() || s.lease_epoch > 0 {
        println!(
            "  lease: owner {}  epoch {}",
            if s.lease_owner.is_empty() {
                "none"
            } else {
                &s.lease_owner
            },
            s.lease_epoch
        );
    }
    if let Some(plan) = &s.last_recovery_plan {
        println!(
            "  last recovery plan: {}{}",
            plan.kind,
            if s.status == pb::SessionStatus::AwaitingConfirmation as i32 {
                "  (confirm with ContinueSession, or cancel)"
            } else {
                ""
            }
        );
    }
}

pub async fn session(target: Target, command: SessionCommand) -> anyhow::Result<()> {
    let mut client = target.connect().await?;
    match command {
        SessionCommand::Start {
            incident_id,
            message,
            idempotency_key,
            id_only,
        } => {
            let s = client
                .start_session(pb::StartSessionRequest {
                    incident_id,
                    message,
                    idempotency_key,
                })
                .await
                .map_err(status_error)?
                .into_inner();
            if id_only {
                println!("{}", s.id);
            } else {
                print_session(&s);
            }
        }
        SessionCommand::Get { session_id } => {
            let s = client
                .get_session(pb::GetSessionRequest { session_id })
                .await
                .map_err(status_error)?
                .into_inner();
            print_session(&s);
        }
        SessionCommand::Continue { session_id } => {
            let s = client
                .continue_session(pb::ContinueSessionRequest { session_id })
                .await
                .map_err(status_error)?
                .into_inner();
            print_session(&s);
        }
        SessionCommand::Cancel { session_id } => {
            let s = client
                .cancel_session(pb::CancelSessionRequest { session_id })
                .await
                .map_err(status_error)?
                .into_inner();
            print_session(&s);
        }
        SessionCommand::List {
            incident_id,
            statuses,
            page,
        } => {
            let incident_id = incident_id.unwrap_or_default();
            let statuses: Vec<i32> = statuses.into_iter().map(i32::from).collect();
            print_pages(page, "sessions", |page_token| {
                let mut client = client.clone();
                let (incident_id, statuses) = (incident_id.clone(), statuses.clone());
                async move {
                    let page = client
                        .list_sessions(pb::ListSessionsRequest {
                            incident_id,
                            page_size: page.limit,
                            page_token,
                            statuses,
                        })
                        .await
                        .map_err(status_error)?
                        .into_inner();
                    let lines = page.sessions.iter().map(session_line).collect();
                    Ok((lines, page.next_page_token))
                }
            })
            .await?;
        }
    }
    Ok(())
}

/// One line per turn: seq, role, then content and tool calls.
pub fn render_turn(t: &pb::SessionTurn) -> String {
    let role = pb::TurnRole::try_from(t.role)
        .map(|r| {
            r.as_str_name()
                .trim_start_matches("TURN_ROLE_")
                .to_lowercase()
        })
        .unwrap_or_else(|_| "unknown".into());
    let mut line = format!("#{:<4} {:<9} {}", t.seq, role, t.content);
    for call in &t.tool_calls {
        line.push_str(&format!(
            "\n      -> {}({}) [{}]",
            call.name, call.arguments_json, call.id
        ));
    }
    if !t.tool_call_id.is_empty() {
        line = format!(
            "#{:<4} {:<9} {}{} [{}]: {}",
            t.seq,
            role,
            t.tool_name,
            if t.is_error { " (error)" } else { "" },
            t.tool_call_id,
            t.content
        );
    }
    if t.input_tokens > 0 || t.output_tokens > 0 {
        line.push_str(&format!(
            "  ({} in / {} out tokens)",
            t.input_tokens, t.output_tokens
        ));
    }
    line
}

pub async fn turns(args: TurnsArgs) -> anyhow::Result<()> {
    let mut client = args.target.connect().await?;
    let mut after_seq = args.after_seq;
    loop {
        let page = client
            .list_turns(pb::ListTurnsRequest {
                session_id: args.session_id.clone(),
                after_seq,
                limit: 500,
            })
            .await
            .map_err(status_error)?
            .into_inner();
        for t in &page.turns {
            println!("{}", render_turn(t));
        }
        if page.next_after_seq == 0 {
            break;
        }
        after_seq = page.next_after_seq;
    }
    Ok(())
}
