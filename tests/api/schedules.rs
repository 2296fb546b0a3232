//! Scheduled investigations (`[[schedules]]`, migration V31) against a real
//! database: a tick fired by several replicas at once starts one incident
//! and one session; an older tick cannot fire after a newer one; a skipped
//! tick says why; ListSchedules shows the caller's tenant's schedules with
//! their next and last runs. (Three real replicas firing on the clock,
//! one killed at the tick: `crates/inquest/tests/schedules.rs`.)

use inquest_core::{IncidentText, Limits, Tenant, TenantQuota, UserMessage};
use inquest_proto::v1 as pb;
use inquest_server::schedules::{CatchUp, ScheduleEntry};
use inquest_store::{FireTick, TickOutcome};
use inquest_tests::spawn_app_with;
use time::macros::datetime;

use crate::leases::store_as;

fn entry(name: &str, cron: &str, tenant: &str) -> ScheduleEntry {
    ScheduleEntry {
        name: name.into(),
        cron: cron.into(),
        timezone: "Europe/Berlin".into(),
        tenant: tenant.into(),
        title: format!("{name} review"),
        prompt: "Review the error budget burn.".into(),
        catch_up: CatchUp::Latest,
        skills: None,
    }
}

#[tokio::test]
async fn a_tick_fired_by_three_replicas_at_once_starts_one_session() {
    let app = spawn_app_with(|_| {}).await;
    let limits = Limits::default();
    let incident = IncidentText::parse("budget".into(), String::new(), &limits).unwrap();
    let message = UserMessage::parse("review it".into(), &limits).unwrap();
    let tenant = Tenant::default_tenant();
    let stores: Vec<_> = ["sched-a", "sched-b", "sched-c"]
        .iter()
        .map(|r| store_as(&app.db_url, r))
        .collect();
    stores[0]
        .register_schedules(&["budget".to_owned()])
        .await
        .unwrap();
    for tick in [
        datetime!(2026-12-07 07:00 UTC),
        datetime!(2026-12-08 07:00 UTC),
    ] {
        let mut fires = tokio::task::JoinSet::new();
        for store in &stores {
            let (store, tenant) = (store.clone(), tenant.clone());
            let (incident, message) = (incident.clone(), message.clone());
            fires.spawn(async move {
                store
                    .fire_schedule_tick(FireTick {
                        schedule: "budget",
                        tick,
                        tenant: &tenant,
                        quota: TenantQuota::UNLIMITED,
                        incident: &incident,
                        message: &message,
                        skills: Some(&["slo".to_owned()]),
                    })
                    .await
            });
        }
        let outcomes = fires.join_all().await;
        // The session keeps the schedule's skills for every burst.
        for outcome in &outcomes {
            if let Ok(TickOutcome::Fired(started)) = outcome {
                let row = app.store.get_session(started.session.id).await.unwrap();
                assert_eq!(row.skills, Some(vec!["slo".to_owned()]));
            }
        }
        let fired = outcomes
            .iter()
            .filter(|o| matches!(o, Ok(TickOutcome::Fired(_))))
            .count();
        let done = outcomes
            .iter()
            .filter(|o| matches!(o, Ok(TickOutcome::AlreadyDone)))
            .count();
        assert_eq!((fired, done), (1, 2), "{outcomes:?}");
    }
    // An older tick (a replica whose clock lags) cannot fire after a newer.
    let late = stores[1]
        .fire_schedule_tick(FireTick {
            schedule: "budget",
            tick: datetime!(2026-12-07 07:00 UTC),
            tenant: &tenant,
            quota: TenantQuota::UNLIMITED,
            incident: &incident,
            message: &message,
            skills: None,
        })
        .await
        .unwrap();
    assert!(matches!(late, TickOutcome::AlreadyDone), "{late:?}");
    assert_eq!(app.count("incidents").await, 2);
    assert_eq!(app.count("sessions").await, 2);
    let db = inquest_tests::connect(&app.db_url).await;
    let pending: i64 = db
        .query_one(
            "SELECT count(*) FROM sessions s JOIN schedule_ticks t ON t.session_id = s.id \
             WHERE s.status = 'pending' AND t.incident_id = s.incident_id",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(pending, 2, "each tick's session, pending for a burst");
    // A skipped tick is recorded with why, and moves the schedule on.
    assert!(
        stores[2]
            .skip_schedule_tick("budget", datetime!(2026-12-09 07:00 UTC), &tenant, "missed")
            .await
            .unwrap()
    );
    let states = stores[0]
        .schedule_states(&["budget".to_owned()])
        .await
        .unwrap();
    let last = states[0].last.as_ref().unwrap();
    assert_eq!(last.tick, datetime!(2026-12-09 07:00 UTC));
    assert_eq!(last.skipped.as_deref(), Some("missed"));
    assert_eq!(last.session_id, None);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn list_schedules_shows_the_tenants_schedules_with_next_and_last_runs() {
    let app = spawn_app_with(|c| {
        c.schedules = vec![
            entry("budget", "0 8 * * 1-5", "default"),
            entry("other-tenant", "0 9 * * *", "acme"),
        ];
    })
    .await;
    let mut c = app.client().await;
    let list = c
        .list_schedules(pb::ListSchedulesRequest {})
        .await
        .unwrap()
        .into_inner();
    // No tick is due yet: no last run, and the next one is known.
    assert_eq!(list.schedules.len(), 1, "{list:?}");
    let s = &list.schedules[0];
    assert_eq!(
        (
            s.name.as_str(),
            s.cron.as_str(),
            s.timezone.as_str(),
            s.catch_up.as_str()
        ),
        ("budget", "0 8 * * 1-5", "Europe/Berlin", "latest")
    );
    let next = s.next_run.as_ref().expect("a next run");
    let next = time::OffsetDateTime::from_unix_timestamp(next.seconds).unwrap();
    let berlin = next.to_offset(time::macros::offset!(+1));
    assert!(
        (berlin.hour() == 8 || berlin.hour() == 9) && berlin.minute() == 0,
        "08:00 Berlin (07:00 UTC in winter, 06:00 in summer): {next}"
    );
    assert!(s.last_run.is_none());

    // Once a tick is recorded, it is the last run.
    let store = store_as(&app.db_url, "sched-list");
    store
        .register_schedules(&["budget".to_owned()])
        .await
        .unwrap();
    let limits = Limits::default();
    let fired = store
        .fire_schedule_tick(FireTick {
            schedule: "budget",
            tick: datetime!(2026-12-07 07:00 UTC),
            tenant: &Tenant::default_tenant(),
            quota: TenantQuota::UNLIMITED,
            incident: &IncidentText::parse("budget review".into(), String::new(), &limits).unwrap(),
            message: &UserMessage::parse("review".into(), &limits).unwrap(),
            skills: None,
        })
        .await
        .unwrap();
    let TickOutcome::Fired(started) = fired else {
        panic!("{fired:?}");
    };
    let list = c
        .list_schedules(pb::ListSchedulesRequest {})
        .await
        .unwrap()
        .into_inner();
    let last = list.schedules[0].last_run.as_ref().expect("a last run");
    assert_eq!(last.session_id, started.session.id.to_string());
    assert_eq!(
        last.tick.as_ref().unwrap().seconds,
        datetime!(2026-12-07 07:00 UTC).unix_timestamp()
    );
    assert!(list.schedules[0].registered_at.is_some());
    app.stop().await.unwrap();
}
