//! `inquest schedule list`: the caller's tenant's scheduled investigations
//! (`[[schedules]]` in the server's config), with their next and last runs.

use clap::Subcommand;
use inquest_proto::v1 as pb;

use crate::client::{Target, created};
use crate::failure::status_error;

#[derive(Subcommand)]
pub enum ScheduleCommand {
    /// One line per schedule: name, cron and time zone, next run, last
    /// run with the session it started (or why none), title.
    List,
}

fn schedule_line(s: &pb::Schedule) -> String {
    let last = match &s.last_run {
        None => "last -".to_owned(),
        Some(r) if !r.skipped.is_empty() => {
            format!("last {} skipped: {}", created(r.tick.as_ref()), r.skipped)
        }
        Some(r) => format!("last {} session {}", created(r.tick.as_ref()), r.session_id),
    };
    format!(
        "{}  \"{}\" {}  catch_up {}  next {}  {last}  {}",
        s.name,
        s.cron,
        s.timezone,
        s.catch_up,
        created(s.next_run.as_ref()),
        s.title
    )
}

pub async fn run(target: Target, command: ScheduleCommand) -> anyhow::Result<()> {
    let mut client = target.connect().await?;
    match command {
        ScheduleCommand::List => {
            let list = client
                .list_schedules(pb::ListSchedulesRequest {})
                .await
                .map_err(status_error)?
                .into_inner();
            if list.schedules.is_empty() {
                eprintln!(
                    "(no schedules for this tenant: see [[schedules]] in the server's config)"
                );
            }
            for s in &list.schedules {
                println!("{}", schedule_line(s));
            }
        }
    }
    Ok(())
}
