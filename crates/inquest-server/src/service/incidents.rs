//! CreateIncident, GetIncident, ListIncidents.

use super::*;
use inquest_store::IncidentSource;

/// The newest alert events GetIncident shows: each event's labels are
/// stored within `alerts::render::MAX_STORED_LABELS_BYTES` (8 KiB), so the
/// answer stays far below the response cap.
const ALERT_EVENTS_SHOWN: i64 = 100;

impl InvestigationsService {
    pub(super) async fn do_create_incident(
        &self,
        caller: &Caller,
        req: pb::CreateIncidentRequest,
    ) -> Result<Response<pb::Incident>, Status> {
        let text = IncidentText::parse(req.title, req.description, &self.limits)
            .map_err(ApiError::from)?;
        let incident = self
            .store
            .create_incident(&caller.tenant, &text)
            .await
            .map_err(ApiError::from)?;
        tracing::info!(incident_id = %incident.id, "incident created");
        Ok(Response::new(convert::incident(incident)))
    }

    pub(super) async fn do_get_incident(
        &self,
        request: Request<pb::GetIncidentRequest>,
    ) -> Result<Response<pb::Incident>, Status> {
        let caller = Caller::of(&request)?;
        let id = IncidentId::parse(&request.get_ref().incident_id).map_err(ApiError::from)?;
        let incident = self
            .store
            .get_incident(&caller.tenant, id)
            .await
            .map_err(ApiError::from)?;
        let origin = self
            .store
            .alert_origin(&caller.tenant, id, ALERT_EVENTS_SHOWN)
            .await
            .map_err(ApiError::from)?;
        let mut incident = convert::incident(incident);
        incident.alert_origin = origin.map(convert::alert_origin);
        Ok(Response::new(incident))
    }

    pub(super) async fn do_list_incidents(
        &self,
        request: Request<pb::ListIncidentsRequest>,
    ) -> Result<Response<pb::ListIncidentsResponse>, Status> {
        let caller = Caller::of(&request)?;
        let req = request.into_inner();
        let before = self.page_cursor(
            PageList::Incidents,
            &caller,
            &req.page_token,
            IncidentId::parse,
        )?;
        let source = match pb::IncidentSource::try_from(req.source) {
            Ok(pb::IncidentSource::Unspecified) => None,
            Ok(pb::IncidentSource::Manual) => Some(IncidentSource::Manual),
            Ok(pb::IncidentSource::Alert) => Some(IncidentSource::Alert),
            Ok(pb::IncidentSource::Schedule) => Some(IncidentSource::Schedule),
            Err(_) => {
                return Err(ApiError::InvalidArgument(format!(
                    "source {} is not an IncidentSource",
                    req.source
                ))
                .into());
            }
        };
        let limit = page_size(req.page_size, DEFAULT_INCIDENT_PAGE, MAX_INCIDENT_PAGE);
        let page = self
            .store
            .list_incidents(&caller.tenant, before, limit, source)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ListIncidentsResponse {
            incidents: page.incidents.into_iter().map(convert::incident).collect(),
            next_page_token: self.next_page(PageList::Incidents, &caller, page.next),
        }))
    }
}
