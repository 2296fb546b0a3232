//! `inquest-bench`: the benchmarks, against a real PostgreSQL; figures go
//! to docs/benchmarks.md. Kept out of the production `inquest` binary
//! (and out of a root `cargo build`). One
//! hidden `serve` runs the same server library as `inquest serve`, for the
//! benches that need a server in its own process (`replicas`, `overload`,
//! the memory part of `watch`). `main` only parses and dispatches.

mod bench;
mod bench_alerts;
mod bench_approval;
mod bench_attack;
mod bench_cache;
mod bench_capacity;
mod bench_console;
mod bench_erase;
mod bench_failover;
mod bench_fork;
mod bench_interrupt;
mod bench_loop;
mod bench_overload;
mod bench_peer;
mod bench_queue;
mod bench_replicas;
mod bench_resume;
mod bench_stream;
mod bench_watch;
mod bench_webhooks;
mod commands;

use std::{net::SocketAddr, path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use inquest_server::ops::telemetry::Telemetry;
use inquest_server::{Config, Overrides};
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(
    name = "inquest-bench",
    version,
    about = "Inquest benchmarks against a real PostgreSQL; figures go to docs/benchmarks.md"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    #[command(flatten)]
    Bench(bench::BenchCommand),
    /// `inquest serve` for the benches' child processes (the same library
    /// call; crash points only with `--features failpoints`).
    #[command(hide = true)]
    Serve {
        /// TOML config file. Layers: defaults, this file, INQUEST_* env, flags.
        #[arg(long, env = "INQUEST_CONFIG")]
        config: Option<PathBuf>,
        /// PostgreSQL URL.
        #[arg(long)]
        database_url: Option<String>,
        /// Address to listen on.
        #[arg(long)]
        listen: Option<SocketAddr>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
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
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Bench(command) => bench::run(command).await,
        Command::Serve {
            config,
            database_url,
            listen,
        } => {
            let config = Config::load(
                config.as_deref(),
                Overrides {
                    listen,
                    database_url,
                    data_dir: None,
                    ..Overrides::default()
                },
            )?;
            let telemetry = Telemetry::init()?;
            inquest_agent::failpoints::arm_from_env().map_err(anyhow::Error::msg)?;
            let shutdown = CancellationToken::new();
            tokio::spawn(inquest_server::cancel_on_signal(shutdown.clone()));
            let result = inquest_server::serve(config, shutdown).await;
            telemetry.shutdown();
            result
        }
    }
}
