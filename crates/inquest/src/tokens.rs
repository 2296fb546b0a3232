//! `inquest token create|list|revoke`: API tokens, straight in the
//! database (`--database-url`, or the embedded cluster in `--data-dir`),
//! so the first admin token can be made before any token exists. The
//! secret is printed once and never stored.

use std::path::Path;

use anyhow::Context;
use clap::Subcommand;
use inquest_auth::Role;
use inquest_core::Tenant;
use inquest_store::{
    ApiToken, Store, StoreConfig,
    embedded::{EmbeddedOptions, EmbeddedPostgres},
};
use time::OffsetDateTime;

#[derive(Subcommand)]
pub enum TokenCommand {
    /// Issue a token and print its secret (once).
    Create {
        /// The tenant the token acts for (a-z, 0-9, '-', '_'; at most 64).
        #[arg(long, value_parser = parse_tenant)]
        tenant: Tenant,
        /// viewer, operator or admin.
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// A name for the audit trail and `token list` (default: the role).
        #[arg(long)]
        name: Option<String>,
        /// Lifetime, e.g. `30d`, `12h`, `90m` (default: no expiry).
        #[arg(long, value_parser = parse_lifetime)]
        expires: Option<time::Duration>,
    },
    /// Tokens, newest first (never their secrets).
    List {
        #[arg(long, default_value_t = 100)]
        limit: i64,
    },
    /// Revoke a token by its id (from `token list`); every replica refuses
    /// it within a few seconds.
    Revoke { id: uuid::Uuid },
}

fn parse_tenant(text: &str) -> Result<Tenant, String> {
    Tenant::parse(text).map_err(|e| format!("{text:?}: {e}"))
}

fn parse_role(text: &str) -> Result<Role, String> {
    Role::parse(text).ok_or_else(|| format!("{text:?} is not viewer, operator or admin"))
}

/// `30d`, `12h`, `90m`, `45s`.
fn parse_lifetime(text: &str) -> Result<time::Duration, String> {
    let bad = || format!("{text:?} is not a lifetime like 30d, 12h, 90m or 45s");
    let split = text.len().checked_sub(1).ok_or_else(bad)?;
    let (n, unit) = text.split_at(split);
    let n: i64 = n.parse().map_err(|_| bad())?;
    if n <= 0 {
        return Err(bad());
    }
    match unit {
        "d" => Ok(time::Duration::days(n)),
        "h" => Ok(time::Duration::hours(n)),
        "m" => Ok(time::Duration::minutes(n)),
        "s" => Ok(time::Duration::seconds(n)),
        _ => Err(bad()),
    }
}

/// A time as RFC 3339 in UTC to the second (`2026-12-05T13:55:59Z`).
fn rfc3339(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    t.replace_nanosecond(0)
        .unwrap_or(t)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| t.to_string())
}

fn line(t: &ApiToken) -> String {
    let state = if t.revoked_at.is_some() {
        "revoked".to_owned()
    } else {
        match t.expires_at {
            Some(e) if e <= OffsetDateTime::now_utc() => "expired".to_owned(),
            Some(e) => format!("expires {}", rfc3339(e)),
            None => "no expiry".to_owned(),
        }
    };
    format!(
        "{}  {:<8}  tenant={}  name={}  {state}",
        t.id, t.role, t.tenant, t.name
    )
}

/// The token store `config` names, migrated (the first token may be made
/// before any server ran).
pub async fn store(config: &StoreConfig) -> anyhow::Result<Store> {
    let store = Store::connect(config)?;
    store.migrate().await?;
    Ok(store)
}

/// `inquest token` on the embedded default: the cluster a running `serve`
/// keeps up in `data_dir` when there is one (starting a second
/// postmaster there would fail), else one started for this command and
/// stopped after it. `store_config` makes the pool settings for a URL.
pub async fn on_embedded(
    data_dir: &Path,
    store_config: &dyn Fn(&str) -> StoreConfig,
    command: TokenCommand,
) -> anyhow::Result<()> {
    let options = EmbeddedOptions::new(data_dir);
    let dir = data_dir.display().to_string();
    let found = {
        let options = options.clone();
        tokio::task::spawn_blocking(move || EmbeddedPostgres::running(&options)).await??
    };
    if let Some(pg) = found {
        let store = store(&store_config(&pg.url())).await.with_context(|| {
            format!(
                "the embedded PostgreSQL in {dir} runs (port {}), but did not answer; \
                 if no `inquest serve` uses {dir}, its postmaster is left over: stop it with \
                 `pg_ctl -D {dir}/pgdata stop` and retry",
                pg.port()
            )
        })?;
        return run(store, command).await;
    }
    let pg = tokio::task::spawn_blocking(move || EmbeddedPostgres::start(&options))
        .await?
        .with_context(|| format!("starting the embedded PostgreSQL in {dir}"))?;
    let result = match store(&store_config(&pg.url())).await {
        Ok(store) => run(store, command).await,
        Err(e) => Err(e),
    };
    let stopped = tokio::task::spawn_blocking(move || pg.stop()).await?;
    result?;
    stopped.with_context(|| format!("stopping the embedded PostgreSQL in {dir}"))
}

pub async fn run(store: Store, command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create {
            tenant,
            role,
            name,
            expires,
        } => {
            let name = name.unwrap_or_else(|| role.to_string());
            anyhow::ensure!(
                !name.trim().is_empty() && name.len() <= 200,
                "--name must be 1 to 200 bytes"
            );
            let expires_at = expires.map(|d| OffsetDateTime::now_utc() + d);
            let issued = store.create_token(&name, &tenant, role, expires_at).await?;
            eprintln!("{}", line(&issued.token));
            eprintln!("the secret below is shown once; store it now");
            println!("{}", issued.secret);
            audit(&store, &issued.token, "CreateToken").await;
        }
        TokenCommand::List { limit } => {
            for t in store.list_tokens(limit.clamp(1, 10_000)).await? {
                println!("{}", line(&t));
            }
        }
        TokenCommand::Revoke { id } => {
            anyhow::ensure!(store.revoke_token(id).await?, "no token {id}");
            println!("revoked {id}");
            if let Some(t) = store.find_token(id).await? {
                audit(&store, &t, "RevokeToken").await;
            }
        }
    }
    Ok(())
}

/// Records a token change made from the command line in the token's
/// tenant's audit trail: the actor is whoever held the database URL, named
/// by the local user. A failed record is reported, not fatal: the change
/// itself is made.
async fn audit(store: &Store, token: &ApiToken, method: &str) {
    let Ok(tenant) = Tenant::parse(&token.tenant) else {
        return;
    };
    let user = std::env::var("USER").unwrap_or_else(|_| "unknown".into());
    let entry = inquest_store::AuditEntry {
        tenant,
        subject: format!("cli:{user}"),
        actor_name: "inquest token".into(),
        role: "database".into(),
        method: method.into(),
        incident_id: None,
        session_id: None,
        token_id: Some(token.id),
        code: "OK".into(),
        message: String::new(),
    };
    if let Err(e) = store.record_audit(entry).await {
        eprintln!("warning: the audit trail did not record this: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_prints_as_rfc3339_to_the_second() {
        let t = time::macros::datetime!(2026-12-05 13:55:59.105199 UTC);
        assert_eq!(rfc3339(t), "2026-12-05T13:55:59Z");
    }

    #[test]
    fn lifetimes_parse() {
        assert_eq!(parse_lifetime("30d"), Ok(time::Duration::days(30)));
        assert_eq!(parse_lifetime("90m"), Ok(time::Duration::minutes(90)));
        for bad in ["", "d", "0d", "-1h", "3w", "1.5h"] {
            assert!(parse_lifetime(bad).is_err(), "{bad}");
        }
    }
}
