//! `inquest webhook create|list|delete|deliveries|redeliver`: the caller's
//! tenant's webhooks, over the API (an admin token). `create` prints the
//! signing secret, which the server shows this once; `list` never has it.

use clap::Subcommand;
use inquest_proto::v1 as pb;

use crate::client::{PageArgs, Target, created, print_pages};
use crate::failure::status_error;

#[derive(Subcommand)]
pub enum WebhookCommand {
    /// Create a webhook: events of this tenant are POSTed to URL as
    /// Standard Webhooks. Prints its id and its signing secret (once).
    Create {
        /// https URL of the receiver.
        url: String,
        /// An event type to send (repeat for more); none: all.
        #[arg(long = "event-type")]
        event_types: Vec<String>,
        #[arg(long, default_value = "")]
        description: String,
        /// "standard" (Standard Webhooks, signed) or "slack" (Block Kit
        /// messages for a Slack incoming-webhook URL).
        #[arg(long, default_value = "standard")]
        format: String,
    },
    /// List the tenant's webhooks, one line each: id, url, types,
    /// delivered event, failures.
    List,
    /// Delete a webhook; deleting one already deleted is fine.
    Delete { webhook_id: String },
    /// Replace a webhook's signing secret; prints the new one (once).
    Rotate { webhook_id: String },
    /// A webhook's delivery attempts, newest first: time, event, status,
    /// error.
    Deliveries {
        webhook_id: String,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Send one event to a webhook again, now.
    Redeliver { webhook_id: String, event_id: i64 },
}

fn webhook_line(w: &pb::Webhook) -> String {
    let types = if w.event_types.is_empty() {
        "all events".to_owned()
    } else {
        w.event_types.join(",")
    };
    let mut line = format!(
        "{}  {}  {types}  delivered up to event {}",
        w.id, w.url, w.delivered_event_id
    );
    if w.failed_attempts > 0 {
        line.push_str(&format!(
            "  ({} failed attempt(s): {})",
            w.failed_attempts, w.last_error
        ));
    }
    if w.disabled_at.is_some() {
        line.push_str(&format!("  DISABLED: {}", w.disabled_reason));
    }
    if !w.description.is_empty() {
        line.push_str(&format!("  {}", w.description));
    }
    line
}

fn delivery_line(d: &pb::WebhookDelivery) -> String {
    let status = match d.status_code {
        0 => "no answer".to_owned(),
        code => code.to_string(),
    };
    let mut line = format!(
        "{}  event {}  {status}  {} ms",
        created(d.attempted_at.as_ref()),
        d.event_id,
        d.duration_ms
    );
    if d.redelivery {
        line.push_str("  (redelivery)");
    }
    if !d.error.is_empty() {
        line.push_str(&format!("  {}", d.error));
    }
    line
}

pub async fn run(target: Target, command: WebhookCommand) -> anyhow::Result<()> {
    let mut client = target.connect().await?;
    match command {
        WebhookCommand::Create {
            url,
            event_types,
            description,
            format,
        } => {
            let created = client
                .create_webhook(pb::CreateWebhookRequest {
                    url,
                    event_types,
                    description,
                    format,
                })
                .await
                .map_err(status_error)?
                .into_inner();
            if let Some(w) = &created.webhook {
                println!("webhook {}", webhook_line(w));
            }
            if created
                .webhook
                .as_ref()
                .is_some_and(|w| w.format == "slack")
            {
                // Slack checks no signature; its URL is the credential.
                eprintln!("(a Slack webhook is not signed: keep its URL secret)");
            } else {
                println!("secret {}", created.secret);
                eprintln!("(the secret is shown this once: give it to the receiver now)");
            }
        }
        WebhookCommand::List => {
            let list = client
                .list_webhooks(pb::ListWebhooksRequest {})
                .await
                .map_err(status_error)?
                .into_inner();
            if list.webhooks.is_empty() {
                eprintln!("(no webhooks)");
            }
            for w in &list.webhooks {
                println!("{}", webhook_line(w));
            }
        }
        WebhookCommand::Delete { webhook_id } => {
            let answer = client
                .delete_webhook(pb::DeleteWebhookRequest {
                    webhook_id: webhook_id.clone(),
                })
                .await
                .map_err(status_error)?
                .into_inner();
            if answer.deleted {
                println!("webhook {webhook_id} deleted");
            } else {
                println!("webhook {webhook_id} was deleted already");
            }
        }
        WebhookCommand::Rotate { webhook_id } => {
            let rotated = client
                .rotate_webhook_secret(pb::RotateWebhookSecretRequest { webhook_id })
                .await
                .map_err(status_error)?
                .into_inner();
            println!("secret {}", rotated.secret);
            eprintln!("(the next delivery is signed with it; the old secret no longer is)");
        }
        WebhookCommand::Deliveries { webhook_id, page } => {
            print_pages(page, "deliveries", |page_token| {
                let mut client = client.clone();
                let webhook_id = webhook_id.clone();
                async move {
                    let page = client
                        .list_webhook_deliveries(pb::ListWebhookDeliveriesRequest {
                            webhook_id,
                            page_size: page.limit,
                            page_token,
                        })
                        .await
                        .map_err(status_error)?
                        .into_inner();
                    let lines = page.deliveries.iter().map(delivery_line).collect();
                    Ok((lines, page.next_page_token))
                }
            })
            .await?;
        }
        WebhookCommand::Redeliver {
            webhook_id,
            event_id,
        } => {
            let attempt = client
                .redeliver_event(pb::RedeliverEventRequest {
                    webhook_id,
                    event_id,
                })
                .await
                .map_err(status_error)?
                .into_inner();
            println!("{}", delivery_line(&attempt));
            if !attempt.error.is_empty() {
                anyhow::bail!("the receiver did not take event {event_id}");
            }
        }
    }
    Ok(())
}
