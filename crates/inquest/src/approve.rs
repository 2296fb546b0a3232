//! `inquest approve SESSION [CALL…]` and `inquest deny SESSION [CALL…]`:
//! decide tool calls the approval policy held. Without call ids, every
//! call of the session still pending is decided. Each command makes one
//! idempotency key, so its own retries (through an outage) decide once.

use clap::Args;
use inquest_proto::v1 as pb;

use crate::{
    client::{Target, idempotency_key},
    retry::retrying,
    view::approval_text,
    watch::get_session,
};

#[derive(Args)]
pub struct DecideArgs {
    session_id: String,
    /// The calls to decide (`call` ids as `watch` shows them); none: every
    /// call of the session still pending.
    calls: Vec<String>,
    /// Why; a denied call's result shows it to the model.
    #[arg(long, default_value = "")]
    comment: String,
    /// Makes the call safe to retry: the same key decides once.
    #[arg(long, default_value = "")]
    idempotency_key: String,
    #[command(flatten)]
    target: Target,
}

/// Decides the calls `args` names with `verdict`, then prints the hold.
pub async fn decide(args: DecideArgs, verdict: pb::ToolCallVerdict) -> anyhow::Result<()> {
    let mut client = args.target.connect_retrying().await?;
    let calls = if args.calls.is_empty() {
        let s = get_session(&mut client, &args.session_id).await?;
        let pending: Vec<String> = s
            .approvals
            .iter()
            .filter(|a| a.state() == pb::ApprovalState::Pending)
            .map(|a| a.call_id.clone())
            .collect();
        if pending.is_empty() {
            anyhow::bail!(
                "session {} has no tool call waiting for approval (status {})",
                args.session_id,
                s.status()
                    .as_str_name()
                    .trim_start_matches("SESSION_STATUS_")
                    .to_lowercase()
            );
        }
        pending
    } else {
        args.calls
    };
    let request = pb::DecideToolCallsRequest {
        session_id: args.session_id,
        decisions: calls
            .iter()
            .map(|call_id| pb::ToolCallDecision {
                call_id: call_id.clone(),
                verdict: verdict.into(),
                comment: args.comment.clone(),
            })
            .collect(),
        idempotency_key: idempotency_key(args.idempotency_key),
    };
    let s = retrying(|| {
        let (mut client, request) = (client.clone(), request.clone());
        async move { client.decide_tool_calls(request).await }
    })
    .await?;
    for a in &s.approvals {
        println!("{}", approval_text(a));
    }
    let status = s
        .status()
        .as_str_name()
        .trim_start_matches("SESSION_STATUS_")
        .to_lowercase();
    println!("session {} is {status}", s.id);
    Ok(())
}
