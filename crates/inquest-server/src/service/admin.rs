//! The admin RPCs of `inquest.v1.Investigations`: the caller's tenant's
//! API tokens and audit trail. The trait methods in `service.rs` delegate
//! here; the role check (admin) is the auth layer's.

use inquest_core::SessionId;
use inquest_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::{InvestigationsService, PageList, page_size};
use crate::service::audit::{AuditIds, Caller};
use crate::{convert, reason::Reason, status::ApiError};

/// A token's name, as `api_tokens` allows (V15).
const MAX_TOKEN_NAME_CHARS: usize = 200;
/// The longest lifetime CreateToken gives: ten years.
const MAX_TOKEN_LIFETIME_SECS: i64 = 10 * 366 * 86_400;
const DEFAULT_TOKEN_PAGE: u32 = 100;
const MAX_TOKEN_PAGE: u32 = 1000;
const DEFAULT_AUDIT_PAGE: u32 = 100;
const MAX_AUDIT_PAGE: u32 = 1000;

impl InvestigationsService {
    pub(super) async fn admin_create_token(
        &self,
        request: Request<pb::CreateTokenRequest>,
    ) -> Result<Response<pb::CreateTokenResponse>, Status> {
        let caller = Caller::of(&request)?;
        let outcome = self.do_create_token(&caller, request.into_inner()).await;
        self.audit
            .record(
                &caller,
                "CreateToken",
                AuditIds::default(),
                &outcome,
                |r, ids| {
                    ids.token = r
                        .token
                        .as_ref()
                        .and_then(|t| uuid::Uuid::parse_str(&t.id).ok());
                },
            )
            .await;
        outcome
    }

    async fn do_create_token(
        &self,
        caller: &Caller,
        req: pb::CreateTokenRequest,
    ) -> Result<Response<pb::CreateTokenResponse>, Status> {
        let role = inquest_auth::Role::parse(&req.role).ok_or_else(|| {
            ApiError::InvalidArgument(format!(
                "role: {} is not viewer, operator or admin",
                crate::reason::excerpt(&req.role)
            ))
        })?;
        if !req.tenant.is_empty() && req.tenant != caller.tenant.as_str() {
            return Err(crate::reason::status(
                tonic::Code::PermissionDenied,
                Reason::PermissionDenied,
                "a token may only be created for the caller's own tenant",
                vec![("tenant", caller.tenant.to_string())],
            ));
        }
        let name = if req.name.is_empty() {
            role.to_string()
        } else {
            req.name
        };
        if name.chars().count() > MAX_TOKEN_NAME_CHARS || name.contains('\0') {
            return Err(ApiError::InvalidArgument(format!(
                "name: at most {MAX_TOKEN_NAME_CHARS} characters, no NUL"
            ))
            .into());
        }
        let expires_at = match req.expires_in_seconds {
            0 => None,
            secs => {
                let secs = i64::try_from(secs)
                    .ok()
                    .filter(|s| *s <= MAX_TOKEN_LIFETIME_SECS)
                    .ok_or_else(|| {
                        ApiError::InvalidArgument(format!(
                            "expires_in_seconds: at most {MAX_TOKEN_LIFETIME_SECS}"
                        ))
                    })?;
                Some(time::OffsetDateTime::now_utc() + time::Duration::seconds(secs))
            }
        };
        let issued = self
            .store
            .create_token(&name, &caller.tenant, role, expires_at)
            .await
            .map_err(ApiError::from)?;
        tracing::info!(token_id = %issued.token.id, %role, "API token issued");
        Ok(Response::new(pb::CreateTokenResponse {
            token: Some(convert::api_token(&issued.token)),
            secret: issued.secret,
        }))
    }

    pub(super) async fn admin_list_tokens(
        &self,
        request: Request<pb::ListTokensRequest>,
    ) -> Result<Response<pb::ListTokensResponse>, Status> {
        let caller = Caller::of(&request)?;
        let limit = page_size(request.get_ref().limit, DEFAULT_TOKEN_PAGE, MAX_TOKEN_PAGE);
        let tokens = self
            .store
            .list_tenant_tokens(&caller.tenant, i64::from(limit))
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ListTokensResponse {
            tokens: tokens.iter().map(convert::api_token).collect(),
        }))
    }

    pub(super) async fn admin_revoke_token(
        &self,
        request: Request<pb::RevokeTokenRequest>,
    ) -> Result<Response<pb::ApiToken>, Status> {
        let caller = Caller::of(&request)?;
        let id = uuid::Uuid::parse_str(&request.get_ref().token_id).ok();
        let outcome = match id {
            None => Err(ApiError::InvalidArgument(format!(
                "token_id: {} is not a token id (a UUID, from ListTokens)",
                crate::reason::excerpt(&request.get_ref().token_id)
            ))
            .into()),
            Some(id) => match self.store.revoke_tenant_token(&caller.tenant, id).await {
                Ok(Some(token)) => {
                    tracing::info!(token_id = %id, "API token revoked");
                    Ok(Response::new(convert::api_token(&token)))
                }
                Ok(None) => Err(crate::reason::status(
                    tonic::Code::NotFound,
                    Reason::TokenNotFound,
                    format!("token {id} not found"),
                    vec![("token_id", id.to_string())],
                )),
                Err(e) => Err(ApiError::from(e).into()),
            },
        };
        let ids = AuditIds {
            token: id,
            ..AuditIds::default()
        };
        self.audit
            .record(&caller, "RevokeToken", ids, &outcome, |_, _| {})
            .await;
        outcome
    }

    pub(super) async fn admin_list_audit_events(
        &self,
        request: Request<pb::ListAuditEventsRequest>,
    ) -> Result<Response<pb::ListAuditEventsResponse>, Status> {
        let caller = Caller::of(&request)?;
        let req = request.into_inner();
        let session = if req.session_id.is_empty() {
            None
        } else {
            Some(SessionId::parse(&req.session_id).map_err(ApiError::from)?)
        };
        let before = self.page_cursor(PageList::AuditEvents, &caller, &req.page_token, |c| {
            c.parse::<i64>()
        })?;
        let limit = page_size(req.page_size, DEFAULT_AUDIT_PAGE, MAX_AUDIT_PAGE);
        let page = self
            .store
            .list_audit(&caller.tenant, session, before, limit)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ListAuditEventsResponse {
            events: page.events.iter().map(convert::audit_event).collect(),
            next_page_token: self.next_page(PageList::AuditEvents, &caller, page.next),
        }))
    }
}
