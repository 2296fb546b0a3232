//! Named crash points, for the crash-recovery tests.
//!
//! Built on TiKV's `fail` crate, behind this crate's cargo feature
//! `failpoints` (off by default, so a release `inquest` carries none:
//! `fail_point!` compiles to nothing). `cargo test` turns it on through the
//! `inquest` crate's dev-dependency on this one; `inquest/failpoints` turns
//! it on for a plain build. Without the feature [`configure`] refuses any
//! point, so a test that asks for a crash against a binary without them
//! fails instead of passing without it. With it, every point is inert
//! unless the process was started with `INQUEST_FAILPOINTS` naming it; an
//! inert point costs one registry lookup. Besides `fail`'s own actions
//! (`sleep(ms)`, `panic`, `pause`, ...), two `return` arguments are meant
//! for tests driving real processes:
//!
//! - `return(crash)`: print `failpoint <name> reached` on stderr and abort
//!   the process on the spot (no destructors, no cleanup: a `kill -9` at
//!   exactly that instant).
//! - `return(hang)`: print the same line, then never return; the rest of
//!   the process (lease renewal, other sessions) keeps running, so a test
//!   can `kill -9` or `SIGSTOP` it at exactly that point.
//!
//! A count prefix limits how often a point fires: `1*return(hang)`.

/// After the assistant turn is committed and published, before its tools.
pub const AFTER_ASSISTANT_PERSISTED: &str = "after-assistant-persisted";
/// Just before a tool call is sent to its server.
pub const BEFORE_TOOL_RUN: &str = "before-tool-run";
/// Just after a tool call returned, before anything is done with it.
pub const AFTER_TOOL_RUN: &str = "after-tool-run";
/// Just before a tool result turn is written.
pub const BEFORE_TOOL_RESULT_PERSIST: &str = "before-tool-result-persist";
/// After a turn committed, before it is published to watchers.
pub const BETWEEN_COMMIT_AND_PUBLISH: &str = "between-commit-and-publish";
/// In the lease keeper, before a renewal is sent.
pub const LEASE_RENEW: &str = "lease-renew";
/// A compaction's summary came back from the model; its turn is not yet
/// stored (a crash here loses the summary, which is simply made again).
pub const COMPACTION_SUMMARY_RECEIVED: &str = "compaction-summary-received";

/// Held calls are stored as approval requests; the burst has not closed
/// into `awaiting_approval` yet.
pub const AFTER_APPROVALS_REQUESTED: &str = "after-approvals-requested";
/// A claimed burst is about to mark an approved call started: the decision
/// is committed, the call provably never ran.
pub const BEFORE_APPROVAL_STARTED: &str = "before-approval-started";
/// An approved call is marked started in the store; it has not been sent
/// to its server yet.
pub const AFTER_APPROVAL_STARTED: &str = "after-approval-started";

/// Every point, for validating configuration.
pub const ALL: [&str; 10] = [
    AFTER_ASSISTANT_PERSISTED,
    BEFORE_TOOL_RUN,
    AFTER_TOOL_RUN,
    BEFORE_TOOL_RESULT_PERSIST,
    BETWEEN_COMMIT_AND_PUBLISH,
    LEASE_RENEW,
    COMPACTION_SUMMARY_RECEIVED,
    AFTER_APPROVALS_REQUESTED,
    BEFORE_APPROVAL_STARTED,
    AFTER_APPROVAL_STARTED,
];

/// The environment variable that switches points on:
/// `name=actions;name=actions` (fail-rs action syntax).
pub const ENV: &str = "INQUEST_FAILPOINTS";

/// Whether this build carries the crash points (cargo feature `failpoints`).
pub const COMPILED: bool = cfg!(feature = "failpoints");

/// Configures the points named in `spec` (the value of [`ENV`]). Returns
/// the names configured; an unknown name or a bad action is an error, so a
/// typo in a test cannot silently disable a crash.
pub fn configure(spec: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    for entry in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, actions) = entry
            .split_once('=')
            .ok_or_else(|| format!("failpoint entry {entry:?} is not name=actions"))?;
        let name = name.trim();
        if !ALL.contains(&name) {
            return Err(format!(
                "unknown failpoint {name:?}; known: {}",
                ALL.join(", ")
            ));
        }
        if !COMPILED {
            return Err(format!(
                "failpoint {name}: this binary was built without the `failpoints` cargo \
                 feature, so it has no crash points (build with `--features inquest/failpoints`; \
                 `cargo test` enables it)"
            ));
        }
        fail::cfg(name, actions.trim()).map_err(|e| format!("failpoint {name}: {e}"))?;
        names.push(name.to_owned());
    }
    Ok(names)
}

/// Arms the points [`ENV`] names, if it is set, and says so on stderr. A
/// bad spec, or any spec in a build without crash points, is an error: the
/// server stops rather than silently running without the crash a test
/// asked for.
pub fn arm_from_env() -> Result<(), String> {
    let Ok(spec) = std::env::var(ENV) else {
        return Ok(());
    };
    let armed = configure(&spec).map_err(|e| format!("{ENV}: {e}"))?;
    if !armed.is_empty() {
        eprintln!("failpoints armed: {armed:?} (this process will crash or hang on purpose)");
    }
    Ok(())
}

/// Evaluates point `name`: returns at once when it is inert, aborts or
/// hangs when it is configured to.
pub async fn hit(name: &'static str) {
    let Some(action) = evaluate(name) else {
        return;
    };
    eprintln!("failpoint {name} reached ({action})");
    match action.as_str() {
        "crash" => std::process::abort(),
        "hang" => std::future::pending::<()>().await,
        other => tracing::warn!(
            failpoint = name,
            action = other,
            "unknown failpoint return value"
        ),
    }
}

fn evaluate(name: &str) -> Option<String> {
    #[cfg(feature = "failpoints")]
    fail::fail_point!(name, |arg: Option<String>| Some(arg.unwrap_or_default()));
    #[cfg(not(feature = "failpoints"))]
    let _ = name;
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_names_and_bad_actions_are_refused() {
        assert!(configure("no-such-point=return(crash)").is_err());
        assert!(configure("lease-renew").is_err());
        assert!(configure("lease-renew=bogus(1)").is_err());
        assert_eq!(configure("").unwrap(), Vec::<String>::new());
    }

    /// `cargo test -p inquest-agent` alone builds without the feature (the
    /// workspace suite has it, through `inquest`'s dev-dependency).
    #[cfg(not(feature = "failpoints"))]
    #[test]
    fn without_the_feature_every_point_is_refused() {
        let err = configure("after-tool-run=return(crash)").unwrap_err();
        assert!(
            err.contains("without the `failpoints` cargo feature"),
            "{err}"
        );
        assert_eq!(configure(" ; ").unwrap(), Vec::<String>::new());
    }

    #[cfg(feature = "failpoints")]
    #[tokio::test]
    async fn an_inert_point_returns_and_a_configured_one_fires_its_count() {
        hit(AFTER_TOOL_RUN).await;
        configure("after-tool-run=1*return(noted)").unwrap();
        assert_eq!(evaluate(AFTER_TOOL_RUN).as_deref(), Some("noted"));
        assert_eq!(evaluate(AFTER_TOOL_RUN), None);
        fail::remove(AFTER_TOOL_RUN);
    }
}
