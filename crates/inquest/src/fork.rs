//! `inquest fork SESSION --at SEQ ["message"]`: a new session of the same
//! incident from the source's turns `1..=SEQ` (ForkSession).

use clap::Args;
use inquest_proto::v1 as pb;

use crate::{
    client::{Target, idempotency_key},
    retry::retrying,
    watch::follow,
};

#[derive(Args)]
pub struct ForkArgs {
    /// The session to fork; it is only read, and may be running.
    session_id: String,
    /// The last turn of the source the fork copies (see `inquest turns`).
    #[arg(long = "at", value_name = "SEQ")]
    at_seq: i64,
    /// The fork's first message: it runs at once and the command follows
    /// its burst. Without one the fork is left idle with its history
    /// (`inquest send` it a message later).
    message: Option<String>,
    /// Makes the call safe to retry: the same key makes one fork. Without
    /// one a fresh key is made, so that this command's own retries (while
    /// the server is unavailable) make it once.
    #[arg(long, default_value = "")]
    idempotency_key: String,
    /// One JSON object per line, for scripts.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    target: Target,
}

/// Forks, prints the new session's id, then follows its first burst when
/// a message was given.
pub async fn fork(args: ForkArgs) -> anyhow::Result<()> {
    let mut client = args.target.connect_retrying().await?;
    let runs = args.message.is_some();
    let request = pb::ForkSessionRequest {
        session_id: args.session_id.clone(),
        at_seq: args.at_seq,
        message: args.message,
        idempotency_key: idempotency_key(args.idempotency_key),
    };
    let forked = retrying(|| {
        let (mut client, request) = (client.clone(), request.clone());
        async move { client.fork_session(request).await }
    })
    .await?;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "type": "forked",
                "session_id": forked.id,
                "forked_from_session_id": forked.forked_from_session_id,
                "forked_at_seq": forked.forked_at_seq,
            })
        );
    } else {
        println!(
            "forked session {} at seq {} into session {}",
            forked.forked_from_session_id, forked.forked_at_seq, forked.id
        );
    }
    if !runs {
        return Ok(());
    }
    // From the cut on: the notice, any cut calls' results, the message,
    // then the burst.
    follow(
        &mut client,
        &args.target,
        &forked.id,
        forked.forked_at_seq,
        args.json,
    )
    .await
    .map(|_| ())
}
