//! `inquest`: the server (`serve`, `migrate`) and the client commands that
//! talk gRPC to a running server (the benchmarks are `inquest-bench`).
//! `main` only parses arguments, starts telemetry and dispatches. The only
//! crate that links both the engine and the gRPC edge (through `serve`);
//! the client modules (`client.rs`, `watch.rs`, `view.rs`, `investigate.rs`) use
//! the wire contract (`inquest-proto`) and no server code (`webhooks.rs`
//! too).

mod approve;
mod client;
mod failure;
mod fork;
mod investigate;
mod retry;
mod schedules;
mod tokens;
mod view;
mod watch;
mod webhooks;

use std::{net::SocketAddr, path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use inquest_proto::v1 as pb;
use inquest_server::ops::telemetry::Telemetry;
use inquest_server::{Config, Overrides};
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(
    name = "inquest",
    version,
    about = "Durable LLM incident investigations on PostgreSQL"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Flags shared by the commands that open the database.
#[derive(clap::Args, Clone)]
struct ServerArgs {
    /// TOML config file. Layers: defaults, this file, INQUEST_* env, flags.
    #[arg(long, env = "INQUEST_CONFIG", global = true)]
    config: Option<PathBuf>,
    /// PostgreSQL URL; without one, the embedded cluster in --data-dir
    /// (for `token`: the one a running `serve` keeps up there, else one
    /// started for the command).
    #[arg(long, global = true)]
    database_url: Option<String>,
    /// Where the embedded PostgreSQL cluster lives.
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
}

impl ServerArgs {
    /// The config, with these flags and `flags` (the command's own) on top.
    fn load(&self, flags: Overrides) -> anyhow::Result<Config> {
        Ok(Config::load(
            self.config.as_deref(),
            Overrides {
                database_url: self.database_url.clone(),
                data_dir: self.data_dir.clone(),
                ..flags
            },
        )?)
    }
}

/// A duration flag, written as in the config file ("3s", "500ms").
fn duration_flag(text: &str) -> Result<std::time::Duration, String> {
    inquest_core::duration_text::parse(text)
}

#[derive(Subcommand)]
enum Command {
    /// Run the gRPC server until SIGTERM or Ctrl-C.
    Serve {
        #[command(flatten)]
        server: ServerArgs,
        /// Address to listen on (default 127.0.0.1:50051).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// The admin listener's address: /metrics, /healthz, /readyz
        /// (default 127.0.0.1:9464; env INQUEST_ADMIN_LISTEN). Each replica
        /// on one host needs its own.
        #[arg(long)]
        admin_listen: Option<SocketAddr>,
        /// How long a running session's lease holds without renewal, so how
        /// soon another replica takes over from one that died ("3s";
        /// default 30s; env INQUEST_LEASE_TTL; `[lease] ttl`).
        #[arg(long, value_parser = duration_flag)]
        lease_ttl: Option<std::time::Duration>,
        /// Serve a non-loopback address with `[auth] mode = "none"`
        /// (anyone who reaches the port is admin); warned at every start.
        #[arg(long, env = "INQUEST_INSECURE_NO_AUTH")]
        insecure_no_auth: bool,
    },
    /// API tokens: create (prints the secret once), list, revoke.
    Token {
        #[command(subcommand)]
        command: tokens::TokenCommand,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Apply database migrations and exit.
    Migrate {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Incidents.
    Incident {
        #[command(subcommand)]
        command: client::IncidentCommand,
        #[command(flatten)]
        target: client::Target,
    },
    /// Sessions.
    Session {
        #[command(subcommand)]
        command: client::SessionCommand,
        #[command(flatten)]
        target: client::Target,
    },
    /// Print a session's turns.
    Turns(client::TurnsArgs),
    /// Create an incident, start a session on it, watch it live, and print
    /// its report.
    Investigate(investigate::InvestigateArgs),
    /// Print a session's report.
    Report(investigate::ReportArgs),
    /// Follow a session live: stored turns, then new ones as they happen.
    /// Reconnects with the last seq when the stream drops.
    Watch(watch::WatchArgs),
    /// Send a follow-up message to a session, then watch its new burst.
    Send(watch::SendArgs),
    /// Fork a session at a turn: a new session of the same incident whose
    /// history is the source's turns up to `--at`, then run the message
    /// (if any) in it and watch that burst. Prints the new session's id.
    Fork(fork::ForkArgs),
    /// Approve tool calls held for approval (all pending ones when no call
    /// is named): each runs once, then the model goes on.
    Approve(approve::DecideArgs),
    /// Deny tool calls held for approval (all pending ones when no call is
    /// named): the model is told "denied by <you>: <comment>".
    Deny(approve::DecideArgs),
    /// Webhooks of your tenant (admin token): create (prints the signing
    /// secret once), list, delete, rotate, deliveries, redeliver.
    Webhook {
        #[command(subcommand)]
        command: webhooks::WebhookCommand,
        #[command(flatten)]
        target: client::Target,
    },
    /// Scheduled investigations of your tenant (`[[schedules]]` in the
    /// server's config): list, with the next and last runs.
    Schedule {
        #[command(subcommand)]
        command: schedules::ScheduleCommand,
        #[command(flatten)]
        target: client::Target,
    },
}

/// A CLI piped into `head` should stop quietly when the pipe closes, not
/// panic in `println!`: restore the default SIGPIPE action Rust ignores.
/// Only for the client commands: a server must never die of SIGPIPE (a
/// vectored write to a socket whose peer is gone raises it).
#[cfg(unix)]
fn default_sigpipe() {
    unsafe extern "C" {
        fn signal(signum: i32, handler: usize) -> usize;
    }
    const SIGPIPE: i32 = 13;
    const SIG_DFL: usize = 0;
    // SAFETY: called first thing in main, before any thread exists; it only
    // resets one signal's disposition.
    unsafe {
        signal(SIGPIPE, SIG_DFL);
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    #[cfg(unix)]
    if !matches!(cli.command, Command::Serve { .. } | Command::Migrate { .. }) {
        default_sigpipe();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // `[runtime] serving_nice`, once `serve` has read it.
        .on_thread_unpark(inquest_engine::priority::on_serving_worker_unpark)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line, each cause once: a cause whose
/// text the line already holds (an error that prints its source, a
/// context that repeats it) is left out.
fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let cause = cause.to_string();
        if cause.is_empty() || text.contains(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve {
            server,
            listen,
            admin_listen,
            lease_ttl,
            insecure_no_auth,
        } => {
            let mut config = server.load(Overrides {
                listen,
                admin_listen,
                lease_ttl,
                ..Overrides::default()
            })?;
            config.auth.insecure_no_auth = insecure_no_auth;
            config.require_agent = true;
            let telemetry = Telemetry::init()?;
            // Crash points `INQUEST_FAILPOINTS` names (tests only; refused
            // by a build without the `failpoints` feature).
            inquest_agent::failpoints::arm_from_env().map_err(anyhow::Error::msg)?;
            let shutdown = CancellationToken::new();
            tokio::spawn(inquest_server::cancel_on_signal(shutdown.clone()));
            let result = inquest_server::serve(config, shutdown).await;
            telemetry.shutdown();
            result
        }
        Command::Migrate { server } => {
            let config = server.load(Overrides::default())?;
            let telemetry = Telemetry::init()?;
            let result = migrate(config).await;
            telemetry.shutdown();
            result
        }
        Command::Token { command, server } => {
            let config = server.load(Overrides::default())?;
            let store_config = |url: &str| config.store_config(url);
            match config.database_url.as_deref() {
                Some(url) => tokens::run(tokens::store(&store_config(url)).await?, command).await,
                None => tokens::on_embedded(&config.data_dir, &store_config, command).await,
            }
        }
        Command::Incident { command, target } => client::incident(target, command).await,
        Command::Session { command, target } => client::session(target, command).await,
        Command::Turns(args) => client::turns(args).await,
        Command::Investigate(args) => investigate::investigate(args).await,
        Command::Report(args) => investigate::report(args).await,
        Command::Watch(args) => watch::watch(args).await,
        Command::Send(args) => watch::send(args).await,
        Command::Fork(args) => fork::fork(args).await,
        Command::Approve(args) => approve::decide(args, pb::ToolCallVerdict::Approve).await,
        Command::Deny(args) => approve::decide(args, pb::ToolCallVerdict::Deny).await,
        Command::Webhook { command, target } => webhooks::run(target, command).await,
        Command::Schedule { command, target } => schedules::run(target, command).await,
    }
}

async fn migrate(config: Config) -> anyhow::Result<()> {
    let Some(url) = config.database_url.clone() else {
        anyhow::bail!(
            "migrate needs --database-url (or DATABASE_URL); `serve` migrates its embedded database itself"
        );
    };
    let store = inquest_store::Store::connect(&config.store_config(&url))?;
    let applied = store.migrate().await?;
    println!("applied {applied} migration(s)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_names_each_cause_once() {
        let io = std::io::Error::other("tcp connect error");
        let e = anyhow::Error::new(io)
            .context("tcp connect error")
            .context("cannot reach the inquest server at http://127.0.0.1:1");
        assert_eq!(
            error_text(&e),
            "cannot reach the inquest server at http://127.0.0.1:1: tcp connect error"
        );
        let script = anyhow::anyhow!("script.json: No such file or directory (os error 2)")
            .context("reading the script script.json: No such file or directory (os error 2)")
            .context("building the provider chain");
        assert_eq!(
            error_text(&script),
            "building the provider chain: reading the script script.json: No such file or directory (os error 2)"
        );
    }
}
