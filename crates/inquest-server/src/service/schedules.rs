//! ListSchedules: the caller's tenant's `[[schedules]]` with their next
//! run and last tick.

use inquest_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::InvestigationsService;
use crate::service::audit::Caller;
use crate::{convert, status::ApiError};

impl InvestigationsService {
    pub(super) async fn do_list_schedules(
        &self,
        request: Request<pb::ListSchedulesRequest>,
    ) -> Result<Response<pb::ListSchedulesResponse>, Status> {
        let caller = Caller::of(&request)?;
        let mine: Vec<String> = self
            .schedules
            .iter()
            .filter(|s| s.tenant == caller.tenant)
            .map(|s| s.entry.name.clone())
            .collect();
        let states = if mine.is_empty() {
            Vec::new()
        } else {
            self.store
                .schedule_states(&mine)
                .await
                .map_err(ApiError::from)?
        };
        let listed =
            crate::schedules::listed(&self.schedules, &states, &caller.tenant, chrono::Utc::now());
        Ok(Response::new(pb::ListSchedulesResponse {
            schedules: listed
                .iter()
                .map(|l| pb::Schedule {
                    name: l.schedule.entry.name.clone(),
                    cron: l.schedule.entry.cron.clone(),
                    timezone: l.schedule.entry.timezone.clone(),
                    title: l.schedule.entry.title.clone(),
                    catch_up: l.schedule.entry.catch_up.as_str().to_owned(),
                    next_run: l.next.map(convert::timestamp),
                    registered_at: l.state.map(|s| convert::timestamp(s.registered_at)),
                    last_run: l
                        .state
                        .and_then(|s| s.last.as_ref())
                        .map(|t| pb::ScheduleRun {
                            tick: Some(convert::timestamp(t.tick)),
                            fired_at: Some(convert::timestamp(t.fired_at)),
                            incident_id: t.incident_id.map(|i| i.to_string()).unwrap_or_default(),
                            session_id: t.session_id.map(|i| i.to_string()).unwrap_or_default(),
                            skipped: t.skipped.clone().unwrap_or_default(),
                        }),
                })
                .collect(),
        }))
    }
}
