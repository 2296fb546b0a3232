//! ListEvents: the caller's tenant's event log (migration V22), read by
//! id. No page token: an event id is already a cursor that skips nothing,
//! since ids commit in order.

use inquest_core::SessionId;
use inquest_engine::webhooks::EVENT_TYPES;
use inquest_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::{InvestigationsService, page_size};
use crate::service::audit::Caller;
use crate::{convert, status::ApiError};

const DEFAULT_EVENT_PAGE: u32 = 100;
const MAX_EVENT_PAGE: u32 = 1000;

impl InvestigationsService {
    pub(super) async fn do_list_events(
        &self,
        request: Request<pb::ListEventsRequest>,
    ) -> Result<Response<pb::ListEventsResponse>, Status> {
        let caller = Caller::of(&request)?;
        let req = request.into_inner();
        if req.after_id < 0 {
            return Err(ApiError::InvalidArgument("after_id must not be negative".into()).into());
        }
        if let Some(unknown) = req
            .types
            .iter()
            .find(|t| !EVENT_TYPES.contains(&t.as_str()))
        {
            // Quoted through the status's redaction, cut to a sane size.
            let shown: String = unknown.chars().take(64).collect();
            return Err(ApiError::InvalidArgument(format!(
                "unknown event type {shown:?} (known: {})",
                EVENT_TYPES.join(", ")
            ))
            .into());
        }
        let session = if req.session_id.is_empty() {
            None
        } else {
            let id = SessionId::parse(&req.session_id).map_err(ApiError::from)?;
            // Another tenant's session is NOT_FOUND, exactly as an unknown one.
            self.session_of(&caller, id).await?;
            Some(id)
        };
        let limit = page_size(req.page_size, DEFAULT_EVENT_PAGE, MAX_EVENT_PAGE);
        let events = self
            .store
            .list_events(&caller.tenant, req.after_id, &req.types, session, limit)
            .await
            .map_err(ApiError::from)?;
        let next_after_id = events.last().map_or(req.after_id, |e| e.id);
        Ok(Response::new(pb::ListEventsResponse {
            events: events.iter().map(convert::event).collect(),
            next_after_id,
        }))
    }
}
