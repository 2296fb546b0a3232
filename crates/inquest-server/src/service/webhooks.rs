//! The webhook RPCs (admin): CreateWebhook, ListWebhooks, DeleteWebhook,
//! RotateWebhookSecret, ListWebhookDeliveries, RedeliverEvent. Everything
//! is scoped by the caller's tenant: another tenant's webhook is NOT_FOUND
//! (`WEBHOOK_NOT_FOUND`) exactly as an unknown id. Stored by
//! `inquest_store` (migration V25); delivered by
//! `inquest_engine::delivery`, which also sends RedeliverEvent's attempt;
//! URLs checked by `inquest_engine::targets`. Secrets are shown only in
//! the answers of CreateWebhook and RotateWebhookSecret, and registered
//! for redaction as soon as they exist.

use inquest_engine::delivery::Sender;
use inquest_engine::targets::TargetPolicy;
use inquest_engine::webhooks::{EVENT_TYPES, Webhook};
use inquest_proto::v1 as pb;
use inquest_store::{NewAttempt, NewWebhook};
use tonic::{Code, Request, Response, Status};
use uuid::Uuid;

use super::{InvestigationsService, PageList, page_size};
use crate::service::audit::{AuditIds, Caller};
use crate::{convert, reason::Reason, status::ApiError};

/// Webhooks one tenant may have at once: each is a delivery task on every
/// replica.
pub const MAX_WEBHOOKS_PER_TENANT: i64 = 50;
const MAX_URL_CHARS: usize = 2048;
const MAX_DESCRIPTION_CHARS: usize = 1000;
const DEFAULT_DELIVERY_PAGE: u32 = 100;
const MAX_DELIVERY_PAGE: u32 = 1000;

/// What the webhook RPCs need beyond the store: the `[webhooks]` policy
/// and the guarded sender RedeliverEvent posts with.
#[derive(Clone)]
pub struct WebhookApi {
    pub policy: TargetPolicy,
    pub sender: Sender,
}

fn not_found(what: &str, id: String) -> Status {
    let key = if what == "event" {
        "event_id"
    } else {
        "webhook_id"
    };
    crate::reason::status(
        Code::NotFound,
        Reason::WebhookNotFound,
        format!("{what} {id} not found"),
        vec![(key, id)],
    )
}

fn webhook_id(text: &str) -> Result<Uuid, Status> {
    Uuid::parse_str(text).map_err(|_| {
        ApiError::InvalidArgument(format!(
            "webhook_id: {} is not a webhook id (a UUID, from ListWebhooks)",
            crate::reason::excerpt(text)
        ))
        .into()
    })
}

fn new_secret() -> Result<String, Status> {
    let secret = Webhook::new_secret().map_err(|e| {
        tracing::error!(error = %e, "cannot make a webhook secret");
        crate::status::internal()
    })?;
    inquest_redact::register(&secret);
    Ok(secret)
}

impl InvestigationsService {
    pub(super) async fn webhooks_create(
        &self,
        request: Request<pb::CreateWebhookRequest>,
    ) -> Result<Response<pb::CreateWebhookResponse>, Status> {
        let caller = Caller::of(&request)?;
        let outcome = self.do_create_webhook(&caller, request.into_inner()).await;
        self.audit
            .record(
                &caller,
                "CreateWebhook",
                AuditIds::default(),
                &outcome,
                |r, ids| {
                    ids.detail = r.webhook.as_ref().map(|w| format!("webhook {}", w.id));
                },
            )
            .await;
        outcome
    }

    async fn do_create_webhook(
        &self,
        caller: &Caller,
        req: pb::CreateWebhookRequest,
    ) -> Result<Response<pb::CreateWebhookResponse>, Status> {
        let format = inquest_engine::webhooks::Format::parse(&req.format)
            .ok_or_else(|| {
                ApiError::InvalidArgument(format!(
                    "format: {} is neither \"standard\" (Standard Webhooks) nor \"slack\" (a Slack incoming webhook)",
                    crate::reason::excerpt(&req.format)
                ))
            })?
            .as_str();
        if req.url.chars().count() > MAX_URL_CHARS || req.url.contains('\0') {
            return Err(ApiError::InvalidArgument(format!(
                "url: at most {MAX_URL_CHARS} characters, no NUL"
            ))
            .into());
        }
        let url = self
            .webhooks
            .policy
            .check_url(&req.url)
            .map_err(ApiError::InvalidArgument)?;
        let mut types: Vec<String> = Vec::new();
        for t in &req.event_types {
            if !EVENT_TYPES.contains(&t.as_str()) {
                return Err(ApiError::InvalidArgument(format!(
                    "event_types: unknown event type {} (known: {})",
                    crate::reason::excerpt(t),
                    EVENT_TYPES.join(", ")
                ))
                .into());
            }
            if !types.contains(t) {
                types.push(t.clone());
            }
        }
        if req.description.chars().count() > MAX_DESCRIPTION_CHARS || req.description.contains('\0')
        {
            return Err(ApiError::InvalidArgument(format!(
                "description: at most {MAX_DESCRIPTION_CHARS} characters, no NUL"
            ))
            .into());
        }
        // An early answer for a name that already resolves to a refused
        // address; each delivery's connection is checked again.
        self.webhooks
            .policy
            .check_resolved(&url)
            .await
            .map_err(ApiError::InvalidArgument)?;
        if format == "slack" {
            // A Slack incoming webhook's URL is its credential.
            inquest_redact::register(url.as_str());
        }
        let secret = new_secret()?;
        let created = self
            .store
            .create_webhook(
                NewWebhook {
                    tenant: &caller.tenant,
                    url: url.as_str(),
                    event_types: &types,
                    description: &req.description,
                    format,
                    secret: &secret,
                },
                MAX_WEBHOOKS_PER_TENANT,
            )
            .await
            .map_err(ApiError::from)?;
        let Some(row) = created else {
            return Err(crate::reason::status(
                Code::ResourceExhausted,
                Reason::LimitExceeded,
                format!(
                    "the tenant has {MAX_WEBHOOKS_PER_TENANT} webhooks, the most it may; delete one first"
                ),
                vec![
                    ("limit", "webhooks per tenant".into()),
                    ("value", MAX_WEBHOOKS_PER_TENANT.to_string()),
                ],
            ));
        };
        // Not the URL: some receivers carry a secret in it.
        tracing::info!(webhook_id = %row.id, "webhook created");
        Ok(Response::new(pb::CreateWebhookResponse {
            webhook: Some(convert::webhook(&row)),
            secret,
        }))
    }

    pub(super) async fn webhooks_list(
        &self,
        request: Request<pb::ListWebhooksRequest>,
    ) -> Result<Response<pb::ListWebhooksResponse>, Status> {
        let caller = Caller::of(&request)?;
        let rows = self
            .store
            .list_webhooks(&caller.tenant)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ListWebhooksResponse {
            webhooks: rows.iter().map(convert::webhook).collect(),
        }))
    }

    pub(super) async fn webhooks_delete(
        &self,
        request: Request<pb::DeleteWebhookRequest>,
    ) -> Result<Response<pb::DeleteWebhookResponse>, Status> {
        let caller = Caller::of(&request)?;
        let text = request.into_inner().webhook_id;
        let outcome = async {
            let id = webhook_id(&text)?;
            match self
                .store
                .delete_webhook(&caller.tenant, id)
                .await
                .map_err(ApiError::from)?
            {
                None => Err(not_found("webhook", id.to_string())),
                Some(deleted) => {
                    if deleted {
                        tracing::info!(webhook_id = %id, "webhook deleted");
                    }
                    Ok(Response::new(pb::DeleteWebhookResponse { deleted }))
                }
            }
        }
        .await;
        let ids = AuditIds {
            detail: Some(format!("webhook {}", crate::reason::excerpt(&text))),
            ..AuditIds::default()
        };
        self.audit
            .record(&caller, "DeleteWebhook", ids, &outcome, |_, _| {})
            .await;
        outcome
    }

    pub(super) async fn webhooks_rotate(
        &self,
        request: Request<pb::RotateWebhookSecretRequest>,
    ) -> Result<Response<pb::CreateWebhookResponse>, Status> {
        let caller = Caller::of(&request)?;
        let text = request.into_inner().webhook_id;
        let outcome = async {
            let id = webhook_id(&text)?;
            let secret = new_secret()?;
            let row = self
                .store
                .rotate_webhook_secret(&caller.tenant, id, &secret)
                .await
                .map_err(ApiError::from)?
                .ok_or_else(|| not_found("webhook", id.to_string()))?;
            tracing::info!(webhook_id = %id, "webhook secret rotated");
            Ok(Response::new(pb::CreateWebhookResponse {
                webhook: Some(convert::webhook(&row)),
                secret,
            }))
        }
        .await;
        let ids = AuditIds {
            detail: Some(format!("webhook {}", crate::reason::excerpt(&text))),
            ..AuditIds::default()
        };
        self.audit
            .record(&caller, "RotateWebhookSecret", ids, &outcome, |_, _| {})
            .await;
        outcome
    }

    pub(super) async fn webhooks_deliveries(
        &self,
        request: Request<pb::ListWebhookDeliveriesRequest>,
    ) -> Result<Response<pb::ListWebhookDeliveriesResponse>, Status> {
        let caller = Caller::of(&request)?;
        let req = request.into_inner();
        let id = webhook_id(&req.webhook_id)?;
        let before =
            self.page_cursor(PageList::WebhookDeliveries, &caller, &req.page_token, |c| {
                c.parse::<i64>()
            })?;
        let limit = page_size(req.page_size, DEFAULT_DELIVERY_PAGE, MAX_DELIVERY_PAGE);
        let page = self
            .store
            .list_webhook_attempts(&caller.tenant, id, before, limit)
            .await
            .map_err(ApiError::from)?
            .ok_or_else(|| not_found("webhook", id.to_string()))?;
        Ok(Response::new(pb::ListWebhookDeliveriesResponse {
            deliveries: page
                .attempts
                .iter()
                .map(convert::webhook_delivery)
                .collect(),
            next_page_token: self.next_page(PageList::WebhookDeliveries, &caller, page.next),
        }))
    }

    pub(super) async fn webhooks_redeliver(
        &self,
        request: Request<pb::RedeliverEventRequest>,
    ) -> Result<Response<pb::WebhookDelivery>, Status> {
        let caller = Caller::of(&request)?;
        let req = request.into_inner();
        let outcome = self.do_redeliver(&caller, &req).await;
        let ids = AuditIds {
            detail: Some(format!(
                "event {} to webhook {}",
                req.event_id,
                crate::reason::excerpt(&req.webhook_id)
            )),
            ..AuditIds::default()
        };
        self.audit
            .record(&caller, "RedeliverEvent", ids, &outcome, |_, _| {})
            .await;
        outcome
    }

    async fn do_redeliver(
        &self,
        caller: &Caller,
        req: &pb::RedeliverEventRequest,
    ) -> Result<Response<pb::WebhookDelivery>, Status> {
        let id = webhook_id(&req.webhook_id)?;
        let row = self
            .store
            .webhook_of(&caller.tenant, id)
            .await
            .map_err(ApiError::from)?
            .ok_or_else(|| not_found("webhook", id.to_string()))?;
        let event = self
            .store
            .event_of(&caller.tenant, req.event_id)
            .await
            .map_err(ApiError::from)?
            .ok_or_else(|| not_found("event", req.event_id.to_string()))?;
        let hook = Webhook::from_row(&row).map_err(|e| {
            tracing::error!(webhook_id = %id, error = %e, "a stored webhook is unusable");
            crate::status::internal()
        })?;
        let attempt = self.webhooks.sender.send(&hook, &event, &self.store).await;
        let recorded = self
            .store
            .record_webhook_attempt(NewAttempt {
                webhook: id,
                event_id: event.id,
                status_code: attempt.status,
                error: attempt.error.as_deref(),
                duration: attempt.duration,
                redelivery: true,
            })
            .await
            .map_err(ApiError::from)?
            // Deleted while the attempt ran.
            .ok_or_else(|| not_found("webhook", id.to_string()))?;
        Ok(Response::new(convert::webhook_delivery(&recorded)))
    }
}
