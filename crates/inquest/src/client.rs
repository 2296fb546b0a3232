//! Client commands: talk gRPC to a running `inquest serve`.

use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use tonic::transport::Channel;

pub use crate::failure::{Failure, reconnect_after, should_reconnect, status_error};
use crate::retry::Retry;

#[derive(Args, Clone)]
pub struct Target {
    /// Server address; several, comma-separated (replicas of one
    /// deployment), are tried in turn when one cannot be reached.
    #[arg(
        long,
        env = "INQUEST_SERVER",
        default_value = "http://127.0.0.1:50051",
        global = true
    )]
    server: String,
    /// For an `https://` server: the PEM CA certificate that signed its
    /// certificate (e.g. the one in `docs/security.md`'s self-signed setup).
    #[arg(long, env = "INQUEST_CA_CERT", global = true)]
    ca_cert: Option<std::path::PathBuf>,
    /// For a server with `[tls] client_ca`: this client's PEM certificate
    /// and key.
    #[arg(
        long,
        env = "INQUEST_CLIENT_CERT",
        global = true,
        requires = "client_key"
    )]
    client_cert: Option<std::path::PathBuf>,
    #[arg(
        long,
        env = "INQUEST_CLIENT_KEY",
        global = true,
        requires = "client_cert"
    )]
    client_key: Option<std::path::PathBuf>,
    /// API token for a server with `[auth] mode = "required"` (from
    /// `inquest token create`), sent as `authorization: Bearer …`.
    #[arg(long, env = "INQUEST_TOKEN", global = true, hide_env_values = true)]
    token: Option<String>,
}

/// Adds `authorization: Bearer <token>` to every call, when a token is set.
#[derive(Clone)]
pub struct Bearer(Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>);

impl tonic::service::Interceptor for Bearer {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// The client every command uses.
pub type Client =
    InvestigationsClient<tonic::service::interceptor::InterceptedService<Channel, Bearer>>;

impl Target {
    /// The addresses `--server` names, in order.
    fn servers(&self) -> Vec<&str> {
        let servers: Vec<&str> = self
            .server
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if servers.is_empty() {
            vec![self.server.as_str()]
        } else {
            servers
        }
    }

    /// Connects to the first server that answers, in `--server` order.
    pub async fn connect(&self) -> anyhow::Result<Client> {
        let servers = self.servers();
        let mut last = None;
        for server in &servers {
            match self.endpoint(server)?.connect().await {
                Ok(channel) => return self.client(channel),
                Err(e) => last = Some((server, e)),
            }
        }
        match last {
            Some((server, e)) => Err(anyhow::anyhow!(
                "cannot reach the inquest server at {server}: {}",
                inquest_core::error_chain(&e)
            )),
            None => anyhow::bail!("no server address given (--server)"),
        }
    }

    /// [`Target::connect`] for the commands that ride out an outage
    /// (watch, send, investigate): a server that cannot be reached (it is
    /// restarting) is retried like any other unavailable call, each of
    /// `--server`'s addresses in turn.
    pub async fn connect_retrying(&self) -> anyhow::Result<Client> {
        let mut retry = Retry::default();
        self.connect_through(&mut retry).await
    }

    /// [`Target::connect_retrying`] pacing its attempts with `retry`.
    pub async fn connect_through(&self, retry: &mut Retry) -> anyhow::Result<Client> {
        let servers = self.servers();
        let mut next = 0usize;
        loop {
            let server = servers[next % servers.len()];
            next = next.wrapping_add(1);
            match self.endpoint(server)?.connect().await {
                Ok(channel) => return self.client(channel),
                Err(e) => {
                    let last = format!(
                        "cannot reach the inquest server at {server}: {}",
                        inquest_core::error_chain(&e)
                    );
                    // Another address to try: no pause before it.
                    if !next.is_multiple_of(servers.len()) {
                        continue;
                    }
                    retry.pause(&last).await?;
                }
            }
        }
    }

    /// Whether `--server` names more than one address.
    pub fn has_alternatives(&self) -> bool {
        self.servers().len() > 1
    }

    /// The server's address and TLS settings: what a retry cannot mend.
    /// A server that stops answering (a stopped process, a partition) is
    /// noticed instead of waited on forever: connecting gives up after
    /// 5 s, a call's answer after 30 s, and an open connection whose
    /// HTTP/2 pings go unanswered for 10 s is closed, which ends its
    /// streams with UNAVAILABLE (a watch then reconnects).
    fn endpoint(&self, server: &str) -> anyhow::Result<tonic::transport::Endpoint> {
        let mut endpoint = Channel::from_shared(server.to_owned())
            .with_context(|| format!("{server:?} is not a server address"))?
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(30))
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(10))
            .keep_alive_while_idle(true);
        if server.starts_with("https://") {
            let mut tls = tonic::transport::ClientTlsConfig::new();
            let Some(ca) = &self.ca_cert else {
                anyhow::bail!(
                    "{server} is https: give the CA certificate that signed it with --ca-cert (or INQUEST_CA_CERT)"
                );
            };
            let pem =
                std::fs::read(ca).with_context(|| format!("reading --ca-cert {}", ca.display()))?;
            tls = tls.ca_certificate(tonic::transport::Certificate::from_pem(pem));
            if let (Some(cert), Some(key)) = (&self.client_cert, &self.client_key) {
                let cert = std::fs::read(cert)
                    .with_context(|| format!("reading --client-cert {}", cert.display()))?;
                let key = std::fs::read(key)
                    .with_context(|| format!("reading --client-key {}", key.display()))?;
                tls = tls.identity(tonic::transport::Identity::from_pem(cert, key));
            }
            endpoint = endpoint
                .tls_config(tls)
                .context("configuring TLS to the server")?;
        }
        Ok(endpoint)
    }

    fn client(&self, channel: Channel) -> anyhow::Result<Client> {
        let bearer = match &self.token {
            Some(t) => Some(
                format!("Bearer {}", t.trim())
                    .parse()
                    .context("--token is not a valid header value")?,
            ),
            None => None,
        };
        Ok(InvestigationsClient::with_interceptor(
            channel,
            Bearer(bearer),
        ))
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
    /// Erase an incident and all its sessions with everything they hold
    /// (admin token). The audit trail keeps that it happened. Refused while
    /// a session runs, unless --force (which stops it).
    Delete {
        incident_id: String,
        /// Stop running sessions' bursts and erase them anyway.
        #[arg(long)]
        force: bool,
    },
}

/// How much of a listing to print.
#[derive(Args, Clone, Copy)]
pub struct PageArgs {
    /// Items per page (the server caps it at 500).
    #[arg(long, default_value_t = 50)]
    pub(crate) limit: u32,
    /// Follow the page tokens to the end instead of printing one page.
    #[arg(long)]
    pub(crate) all: bool,
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
        /// Only sessions in this status (repeat for several), spelled as in
        /// `inquest sessions get`: e.g. running, awaiting_confirmation.
        #[arg(long = "status", value_name = "STATUS", value_parser = parse_status)]
        statuses: Vec<pb::SessionStatus>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// End a pending, running, idle or awaiting-confirmation session for
    /// good (status and exit reason "cancelled"; a `watch --follow` of it
    /// ends). Completed and failed sessions keep their outcome.
    Cancel { session_id: String },
    /// Confirm the recovery plan of a session awaiting confirmation (its
    /// interrupted tool calls may have run): the burst continues.
    Continue { session_id: String },
    /// Erase a session with its turns, reports, events and everything it
    /// holds (admin token). Forks of it stay. The audit trail keeps that it
    /// happened. Refused while it runs, unless --force (which stops it).
    Delete {
        session_id: String,
        /// Stop its running burst and erase it anyway.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Args)]
pub struct TurnsArgs {
    session_id: String,
    /// Show turns after this seq.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    after_seq: i64,
    #[command(flatten)]
    target: Target,
}

/// A status as the CLI spells it: the proto name's lowercase tail.
fn parse_status(text: &str) -> Result<pb::SessionStatus, String> {
    pb::SessionStatus::from_str_name(&format!("SESSION_STATUS_{}", text.to_uppercase()))
        .filter(|s| *s != pb::SessionStatus::Unspecified)
        .ok_or_else(|| {
            let known: Vec<String> = (1..)
                .map_while(|n| pb::SessionStatus::try_from(n).ok())
                .map(|s| status_name(s as i32))
                .collect();
            format!("unknown status {text:?} ({})", known.join(", "))
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

pub(crate) fn created(t: Option<&prost_types::Timestamp>) -> String {
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
pub(crate) async fn print_pages<F, Fut>(
    page: PageArgs,
    what: &str,
    mut fetch: F,
) -> anyhow::Result<()>
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<(Vec<String>, String)>>,
{
    let mut token = String::new();
    let mut printed = 0usize;
    loop {
        let (lines, next) = fetch(token).await?;
        printed += lines.len();
        for line in lines {
            println!("{line}");
        }
        if next.is_empty() {
            if printed == 0 {
                // Said on stderr: a script reading stdout sees no lines.
                eprintln!("(no {what} match)");
            }
            return Ok(());
        }
        if !page.all {
            eprintln!("(more {what}: --all lists every page)");
            return Ok(());
        }
        token = next;
    }
}

/// A key for a write the user gave none for, so that the command itself
/// can retry it safely.
pub fn idempotency_key(given: String) -> String {
    if given.is_empty() {
        format!("cli-{}", uuid::Uuid::new_v4())
    } else {
        given
    }
}

/// One line saying what a delete did.
fn print_deleted(what: &str, id: &str, done: &pb::DeleteResponse) {
    if done.deleted {
        println!(
            "{what} {id} deleted ({} session{})",
            done.sessions_deleted,
            if done.sessions_deleted == 1 { "" } else { "s" }
        );
    } else {
        println!("{what} {id} was already deleted");
    }
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
        IncidentCommand::Delete { incident_id, force } => {
            let done = client
                .delete_incident(pb::DeleteIncidentRequest {
                    incident_id: incident_id.clone(),
                    force,
                })
                .await
                .map_err(status_error)?
                .into_inner();
            print_deleted("incident", &incident_id, &done);
        }
        IncidentCommand::List(page) => {
            print_pages(page, "incidents", |page_token| {
                let mut client = client.clone();
                async move {
                    let page = client
                        .list_incidents(pb::ListIncidentsRequest {
                            page_size: page.limit,
                            page_token,
                            source: 0,
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

/// A cost as the CLI shows it: `$0.012345`, `at least $0.01 (N call(s)
/// unpriced)`, or `unknown`; never a made-up `$0`. `priced_any`: some
/// model call was counted (without one, a complete $0 only means nothing
/// was priced yet).
pub(crate) fn cost_text(usd: f64, complete: bool, unknown_calls: i64, priced_any: bool) -> String {
    match (complete, usd > 0.0) {
        (true, _) if priced_any => format!("${usd:.6}"),
        (true, _) => "unknown (no model call priced yet)".to_owned(),
        (false, true) => format!("at least ${usd:.6} ({unknown_calls} call(s) unpriced)"),
        (false, false) => "unknown (no price configured)".to_owned(),
    }
}

/// A duration as a person reads it: `56 ms`, `3.2 s`, `4 min 05 s`.
pub(crate) fn duration_text(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} min {:02} s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

/// The session's token figure as every command names it: the tokens of
/// the model turns stored in the session, every burst's (a report's
/// writing call is counted in its burst's figures only).
pub(crate) fn session_tokens_text(s: &pb::Session) -> String {
    format!(
        "session tokens {} in / {} out",
        s.input_tokens, s.output_tokens
    )
}

fn print_session(s: &pb::Session) {
    let status = status_name(s.status);
    println!(
        "session {}  incident {}  status {}{}  turns {}  head_seq {}  tool calls {}  {} \
         (cached {} read / {} written)  cost {}",
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
        s.tool_calls,
        session_tokens_text(s),
        s.cache_read_input_tokens,
        s.cache_creation_input_tokens,
        cost_text(
            s.cost_usd,
            s.cost_complete,
            s.cost_unknown_turns,
            s.input_tokens > 0 || s.output_tokens > 0
        ),
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
    if !s.trace_id.is_empty() {
        println!("  trace: {}", s.trace_id);
    }
    if !s.forked_from_session_id.is_empty() {
        println!(
            "  forked from: session {} at seq {}",
            s.forked_from_session_id, s.forked_at_seq
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
        SessionCommand::Delete { session_id, force } => {
            let done = client
                .delete_session(pb::DeleteSessionRequest {
                    session_id: session_id.clone(),
                    force,
                })
                .await
                .map_err(status_error)?
                .into_inner();
            print_deleted("session", &session_id, &done);
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
                            queued_only: false,
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
            "  ({} in / {} out tokens",
            t.input_tokens, t.output_tokens
        ));
        if t.cache_read_input_tokens > 0 || t.cache_creation_input_tokens > 0 {
            line.push_str(&format!(
                "; cached {} read / {} written",
                t.cache_read_input_tokens, t.cache_creation_input_tokens
            ));
        }
        line.push(')');
    }
    if let Some(usd) = t.cost_usd {
        line.push_str(&format!("  ${usd:.6}"));
    }
    line
}

pub async fn turns(args: TurnsArgs) -> anyhow::Result<()> {
    let mut client = args.target.connect().await?;
    let mut after_seq = args.after_seq;
    let mut printed = 0usize;
    loop {
        let page = client
            .list_turns(pb::ListTurnsRequest {
                session_id: args.session_id.clone(),
                after_seq,
                before_seq: 0,
                limit: 500,
            })
            .await
            .map_err(status_error)?
            .into_inner();
        printed += page.turns.len();
        for t in &page.turns {
            println!("{}", render_turn(t));
        }
        if page.next_after_seq == 0 {
            break;
        }
        after_seq = page.next_after_seq;
    }
    if printed == 0 {
        // On stderr: stdout stays empty for scripts.
        let head = client
            .get_session(pb::GetSessionRequest {
                session_id: args.session_id.clone(),
            })
            .await
            .map(|s| format!(" (its newest is seq {})", s.into_inner().head_seq))
            .unwrap_or_default();
        eprintln!("(no turns after seq {}{head})", args.after_seq);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CLI spells every status as the domain does, reads each back,
    /// and names them all when refusing an unknown one.
    #[test]
    fn the_cli_spells_every_status_as_the_domain_does() {
        let refusal = parse_status("nope").unwrap_err();
        for status in inquest_core::SessionStatus::ALL {
            let parsed = parse_status(status.as_str()).unwrap();
            assert_eq!(status_name(parsed as i32), status.as_str());
            assert!(refusal.contains(status.as_str()), "{refusal}");
        }
    }

    #[test]
    fn a_cost_is_shown_known_partly_known_or_unknown_never_as_zero() {
        assert_eq!(cost_text(0.0123, true, 0, true), "$0.012300");
        // Priced at a price of 0 (a local model): a real $0.
        assert_eq!(cost_text(0.0, true, 0, true), "$0.000000");
        // Nothing priced yet (pending, a cancel before any call): unknown.
        assert_eq!(
            cost_text(0.0, true, 0, false),
            "unknown (no model call priced yet)"
        );
        assert_eq!(
            cost_text(0.5, false, 2, true),
            "at least $0.500000 (2 call(s) unpriced)"
        );
        assert_eq!(
            cost_text(0.0, false, 3, true),
            "unknown (no price configured)"
        );
    }

    #[test]
    fn durations_under_a_second_are_shown_in_ms() {
        assert_eq!(duration_text(56), "56 ms");
        assert_eq!(duration_text(0), "0 ms");
        assert_eq!(duration_text(6_040), "6.0 s");
        assert_eq!(duration_text(125_000), "2 min 05 s");
    }
}
