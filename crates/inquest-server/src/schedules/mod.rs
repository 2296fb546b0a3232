//! Scheduled investigations: every replica looks at each `[[schedules]]`
//! entry every second and fires the tick that is due (`config::Schedule::due`)
//! through `Store::fire_schedule_tick`, whose row per (schedule, tick)
//! makes exactly one replica fire it. The fired session starts as
//! `StartSession`'s does (commit, publish, start as one unit); a replica
//! that dies right after the commit leaves it `pending`, for any replica's
//! reaper. `ListSchedules` shows each schedule's next and last run.

pub mod config;

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use inquest_core::{IncidentText, Limits, UserMessage, error_chain};
use inquest_engine::{runner::Runner, turn_log::TurnLog};
use inquest_store::{FireTick, ScheduleState, Store, StoreError, TickOutcome};
use time::OffsetDateTime;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use config::Due;
pub use config::{CatchUp, Schedule, ScheduleEntry};

/// How often each replica looks for a due tick: a tick fires within this
/// of its time.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// The running schedules of this replica.
pub struct Scheduler {
    pub store: Store,
    pub log: TurnLog,
    pub runner: Runner,
    pub schedules: Arc<Vec<Schedule>>,
    pub tenants: crate::config::tenants::TenantsSection,
    pub limits: Limits,
}

fn to_chrono(t: OffsetDateTime) -> DateTime<Utc> {
    DateTime::from_timestamp(t.unix_timestamp(), t.nanosecond()).unwrap_or_default()
}

fn to_time(t: DateTime<Utc>) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(t.timestamp()).unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// Ticks are recorded to the second: a cron tick never has a fraction.
fn tick_time(t: DateTime<Utc>) -> OffsetDateTime {
    to_time(t)
}

impl Scheduler {
    /// Registers the schedules (a new one starts from now, not from the
    /// epoch), then looks every [`LOOK_EVERY`] until `shutdown`. Nothing
    /// runs without schedules; nothing fires without a model provider
    /// (`refuse`), since no burst would run.
    pub fn spawn(self, refuse: bool, tasks: &TaskTracker, shutdown: CancellationToken) {
        if self.schedules.is_empty() {
            return;
        }
        if refuse {
            tracing::warn!(
                schedules = self.schedules.len(),
                "[[schedules]] are configured but no [[providers]]: no scheduled investigation starts"
            );
            return;
        }
        tasks.spawn(async move {
            let names: Vec<String> = self.schedules.iter().map(|s| s.entry.name.clone()).collect();
            let mut registered = false;
            loop {
                if !registered {
                    match self.store.register_schedules(&names).await {
                        Ok(()) => registered = true,
                        Err(e) => {
                            tracing::warn!(error = %error_chain(&e), "cannot register the schedules yet");
                        }
                    }
                }
                if registered {
                    self.pass(Utc::now(), &names).await;
                }
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(LOOK_EVERY) => {}
                }
            }
        });
    }

    /// One look at every schedule at `now`.
    pub async fn pass(&self, now: DateTime<Utc>, names: &[String]) {
        let states = match self.store.schedule_states(names).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %error_chain(&e), "cannot read the schedules' ticks now");
                return;
            }
        };
        for schedule in self.schedules.iter() {
            let Some(state) = states.iter().find(|s| s.name == schedule.entry.name) else {
                continue;
            };
            let after = state
                .last
                .as_ref()
                .map_or(state.registered_at, |l| l.tick.max(state.registered_at));
            let outcome = match schedule.due(now, to_chrono(after)) {
                Due::Wait { .. } => continue,
                Due::Fire(tick) => self.fire(schedule, tick).await,
                Due::Skip(tick) => self.skip(schedule, tick).await,
            };
            if let Err(e) = outcome {
                tracing::warn!(schedule = %schedule.entry.name, error = %error_chain(&e), "cannot fire the schedule's tick now; trying again");
            }
        }
    }

    async fn fire(&self, schedule: &Schedule, tick: DateTime<Utc>) -> Result<(), StoreError> {
        let name = schedule.entry.name.clone();
        // Checked at startup against the same limits: a failure here is a
        // limit changed under a running config, logged once per tick try.
        let incident = IncidentText::parse(
            schedule.entry.title.clone(),
            format!(
                "Scheduled investigation {name:?} ({} in {}), tick {}.",
                schedule.entry.cron,
                schedule.entry.timezone,
                tick.to_rfc3339()
            ),
            &self.limits,
        )
        .map_err(|e| StoreError::Internal(format!("schedule {name:?}: the title: {e}")))?;
        let message = UserMessage::parse(schedule.entry.prompt.clone(), &self.limits)
            .map_err(|e| StoreError::Internal(format!("schedule {name:?}: the prompt: {e}")))?;
        let tenant = schedule.tenant.clone();
        let skills = schedule.entry.skills.clone();
        let quota = self.tenants.quota(&tenant);
        let (store, log, runner) = (self.store.clone(), self.log.clone(), self.runner.clone());
        let outcome = self
            .runner
            .unit::<_, StoreError, _>(async move {
                let outcome = store
                    .fire_schedule_tick(FireTick {
                        schedule: &name,
                        tick: tick_time(tick),
                        tenant: &tenant,
                        quota,
                        incident: &incident,
                        message: &message,
                        skills: skills.as_deref(),
                    })
                    .await?;
                if let TickOutcome::Fired(started) = &outcome {
                    log.publish_started(started);
                    runner.start(started.session.id);
                }
                Ok(outcome)
            })
            .await?;
        let name = &schedule.entry.name;
        match outcome {
            TickOutcome::Fired(started) => {
                metrics::counter!("inquest_schedule_ticks_total", "outcome" => "fired")
                    .increment(1);
                tracing::info!(schedule = %name, tick = %tick.to_rfc3339(), session_id = %started.session.id, incident_id = %started.session.incident_id, "scheduled investigation started");
            }
            TickOutcome::Skipped(why) => {
                metrics::counter!("inquest_schedule_ticks_total", "outcome" => "skipped")
                    .increment(1);
                tracing::warn!(schedule = %name, tick = %tick.to_rfc3339(), %why, "scheduled tick skipped");
            }
            TickOutcome::AlreadyDone => {}
        }
        Ok(())
    }

    async fn skip(&self, schedule: &Schedule, tick: DateTime<Utc>) -> Result<(), StoreError> {
        let why = "missed: no replica was running at its time, and catch_up is \"none\"";
        if self
            .store
            .skip_schedule_tick(&schedule.entry.name, tick_time(tick), &schedule.tenant, why)
            .await?
        {
            metrics::counter!("inquest_schedule_ticks_total", "outcome" => "skipped").increment(1);
            tracing::info!(schedule = %schedule.entry.name, tick = %tick.to_rfc3339(), "a tick missed while no replica ran is skipped (catch_up = \"none\")");
        }
        Ok(())
    }
}

/// `ListSchedules`' view of one schedule: the config, when it runs next,
/// and its last recorded tick.
pub struct Listed<'a> {
    pub schedule: &'a Schedule,
    pub state: Option<&'a ScheduleState>,
    pub next: Option<OffsetDateTime>,
}

/// The tenant's schedules with their state, in config order.
pub fn listed<'a>(
    schedules: &'a [Schedule],
    states: &'a [ScheduleState],
    tenant: &inquest_core::Tenant,
    now: DateTime<Utc>,
) -> Vec<Listed<'a>> {
    schedules
        .iter()
        .filter(|s| s.tenant == *tenant)
        .map(|schedule| {
            let state = states.iter().find(|s| s.name == schedule.entry.name);
            let after = state.map_or(now, |s| {
                to_chrono(
                    s.last
                        .as_ref()
                        .map_or(s.registered_at, |l| l.tick.max(s.registered_at)),
                )
            });
            // The next tick to fire: after the last recorded one, and
            // from now on when that one is in the past.
            let next = schedule.next_after(after.max(now)).map(to_time);
            Listed {
                schedule,
                state,
                next,
            }
        })
        .collect()
}
