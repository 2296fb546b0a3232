//! Configuration, layered: defaults → TOML file (`--config`) → environment
//! (`INQUEST_*`, and `DATABASE_URL`) → command-line flags, then validated
//! once in [`Config::validate`].

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use serde::Deserialize;

mod admin;
pub mod agent;
pub mod approval;
mod console;
mod env;
pub mod limits;
mod shutdown;
mod store;
pub mod tenants;
mod watch;

pub use admin::AdminSection;
pub use agent::ToolsSection;
pub use console::ConsoleSection;
pub use shutdown::ShutdownSection;
pub use store::StoreSection;
pub use watch::WatchSection;

pub use limits::LimitsConfig;

/// The whole server configuration. Every field has a default, so
/// `serve` works with no file at all.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address the gRPC server listens on.
    pub listen: SocketAddr,
    /// PostgreSQL URL. When absent, `serve` runs an embedded cluster in
    /// `data_dir`.
    pub database_url: Option<String>,
    /// Where the embedded cluster lives.
    pub data_dir: PathBuf,
    /// This replica's name in lease rows and notifications (a pod name
    /// fits). Absent: host name, process id and a random suffix.
    pub replica_id: Option<String>,
    pub limits: LimitsConfig,
    pub store: StoreSection,
    pub shutdown: ShutdownSection,
    pub watch: WatchSection,
    /// `[runtime]`: where bursts run (`inquest_engine::agent_runtime`).
    pub runtime: inquest_engine::agent_runtime::RuntimeSection,
    /// `[lease]`: leases of running bursts and the reaper (the engine's).
    pub lease: inquest_engine::LeaseSection,
    /// `[events]`: webhooks that receive the event log (the engine's
    /// `webhooks`).
    pub events: inquest_engine::webhooks::EventsSection,
    /// `[webhooks]`: where webhooks made over the API may send (the
    /// engine's `targets`).
    pub webhooks: inquest_engine::targets::TargetPolicy,
    pub admin: AdminSection,
    /// `[console]`: the console's public address, for links in messages.
    pub console: ConsoleSection,
    /// `[auth]`: bearer tokens (`mode = "none"` by default, loopback only).
    pub auth: crate::edge::auth::AuthSection,
    /// `[approval]`: which tool calls wait for a human before they run.
    pub approval: approval::ApprovalSection,
    /// `[tenants]`: per-tenant limits on new bursts.
    pub tenants: crate::config::tenants::TenantsSection,
    /// `[retention]`: how long settled sessions and audit events are kept
    /// (`crate::retention`).
    pub retention: crate::retention::RetentionSection,
    /// `[tls]`: serve gRPC over TLS (absent: plaintext).
    pub tls: Option<crate::edge::tls::TlsSection>,
    /// `[alerts]`: the Alertmanager webhook's bounds and triggers
    /// (`crate::alerts::config`).
    pub alerts: crate::alerts::config::AlertsSection,
    /// `[[schedules]]`: investigations started by the clock
    /// (`crate::schedules`).
    pub schedules: Vec<crate::schedules::ScheduleEntry>,
    /// `[http]`: the names a loopback server without authentication
    /// answers to (`crate::edge::hosts`).
    pub http: crate::edge::hosts::HttpSection,
    /// The model providers, in failover order. None: no agent runs.
    pub providers: Vec<inquest_agent::ProviderConfig>,
    /// The loop's rails and prompt.
    pub agent: inquest_agent::AgentConfig,
    /// MCP tool servers (`config` names an `mcpServers` JSON file).
    pub mcp: Option<inquest_agent::McpSection>,
    /// Built-in tools.
    pub tools: ToolsSection,
    /// Prompt snippets tied to a tool server.
    pub skills: Vec<inquest_agent::Skill>,
    /// Set by `serve`: with no `[[providers]]`, calls that would open a
    /// burst (StartSession, SendMessage, ContinueSession) are refused
    /// FAILED_PRECONDITION `NO_MODEL_PROVIDER` instead of storing a
    /// session nobody answers. Off for embedders that run bursts
    /// themselves (the test harness plays the agent).
    #[serde(skip)]
    pub require_agent: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 50051)),
            database_url: None,
            data_dir: default_data_dir(),
            replica_id: None,
            limits: LimitsConfig::default(),
            store: StoreSection::default(),
            shutdown: ShutdownSection::default(),
            watch: WatchSection::default(),
            runtime: Default::default(),
            lease: inquest_engine::LeaseSection::default(),
            events: Default::default(),
            webhooks: Default::default(),
            admin: AdminSection::default(),
            console: ConsoleSection::default(),
            tls: None,
            http: Default::default(),
            alerts: Default::default(),
            schedules: Vec::new(),
            auth: Default::default(),
            tenants: Default::default(),
            retention: Default::default(),
            approval: Default::default(),
            providers: Vec::new(),
            agent: inquest_agent::AgentConfig::default(),
            mcp: None,
            tools: ToolsSection::default(),
            skills: Vec::new(),
            require_agent: false,
        }
    }
}

/// `$XDG_DATA_HOME/inquest`, else `~/.local/share/inquest`. For root, whose
/// home the `postgres` user cannot enter, `/var/lib/inquest`.
pub fn default_data_dir() -> PathBuf {
    if std::env::var("USER").is_ok_and(|u| u == "root")
        || std::env::var_os("HOME").is_some_and(|h| h == "/root")
    {
        return PathBuf::from("/var/lib/inquest");
    }
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(xdg).join("inquest");
    }
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".local/share/inquest"),
        None => PathBuf::from(".inquest"),
    }
}

/// Values given on the command line; `None` leaves the lower layers alone.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub listen: Option<SocketAddr>,
    pub database_url: Option<String>,
    pub data_dir: Option<PathBuf>,
    /// `[admin] listen`.
    pub admin_listen: Option<SocketAddr>,
    /// `[lease] ttl`.
    pub lease_ttl: Option<Duration>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path} is invalid")]
    Parse {
        path: PathBuf,
        #[source]
        source: Box<toml::de::Error>,
    },
    #[error("environment variable {name} is invalid: {reason}")]
    Env { name: &'static str, reason: String },
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl Config {
    /// Loads all layers. `file` is the `--config` path, if any.
    pub fn load(file: Option<&std::path::Path>, flags: Overrides) -> Result<Self, ConfigError> {
        let mut config = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_owned(),
                    source,
                })?;
                let mut config = Self::from_toml(&text).map_err(|source| ConfigError::Parse {
                    path: path.to_owned(),
                    source: Box::new(source),
                })?;
                if let Some(base) = path.parent() {
                    config.resolve_paths(base);
                }
                config.check_agent_paths(path)?;
                config
            }
            None => Self::default(),
        };
        config.apply_env(|name| std::env::var(name).ok())?;
        config.apply(flags);
        config.validate()?;
        Ok(config)
    }

    pub fn from_toml(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }

    pub fn apply(&mut self, flags: Overrides) {
        if let Some(v) = flags.listen {
            self.listen = v;
        }
        if let Some(v) = flags.database_url {
            self.database_url = Some(v);
        }
        if let Some(v) = flags.data_dir {
            self.data_dir = v;
        }
        if let Some(v) = flags.admin_listen {
            self.admin.listen = v;
        }
        if let Some(v) = flags.lease_ttl {
            self.lease.ttl = v;
        }
    }

    /// Every tenant's approval policy: `[approval]`, and each
    /// `[tenants.overrides.<tenant>.approval]` in its place.
    pub fn approval_gates(&self) -> Result<inquest_engine::ApprovalGates, String> {
        let default = self.approval.gate("approval")?;
        let mut tenants = Vec::new();
        for (name, own) in &self.tenants.overrides {
            if let Some(section) = &own.approval {
                let tenant = inquest_core::Tenant::parse(name)
                    .map_err(|e| format!("tenants.overrides.{name:?}: {e}"))?;
                let gate = section.gate(&format!("tenants.overrides.{name}.approval"))?;
                tenants.push((tenant, gate));
            }
        }
        Ok(inquest_engine::ApprovalGates::new(default, tenants))
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_agent()?;
        self.runtime.validate().map_err(ConfigError::Invalid)?;
        self.lease.validate().map_err(ConfigError::Invalid)?;
        self.events.validate().map_err(ConfigError::Invalid)?;
        self.console.validate().map_err(ConfigError::Invalid)?;
        self.tenants.validate().map_err(ConfigError::Invalid)?;
        self.retention.validate().map_err(ConfigError::Invalid)?;
        self.approval_gates().map_err(ConfigError::Invalid)?;
        self.limits.validate()?;
        self.auth.validate().map_err(ConfigError::Invalid)?;
        self.alerts.validate().map_err(ConfigError::Invalid)?;
        self.compiled_schedules().map_err(ConfigError::Invalid)?;
        self.validate_skill_choices()
            .map_err(ConfigError::Invalid)?;
        for (name, n) in [
            ("store.max_connections", self.store.max_connections),
            ("store.burst_connections", self.store.burst_connections),
            ("store.append_statements", self.store.append_statements),
            ("limits.max_running_bursts", self.limits.max_running_bursts),
            (
                "limits.feed_queue_capacity",
                self.limits.feed_queue_capacity,
            ),
        ] {
            if n == 0 {
                return Err(ConfigError::Invalid(format!("{name} must be > 0")));
            }
        }
        if !(1..=1_000_000).contains(&self.watch.channel_capacity) {
            return Err(ConfigError::Invalid(
                "watch.channel_capacity must be between 1 and 1000000".into(),
            ));
        }
        if !(1..=1000).contains(&self.watch.drain_page) {
            return Err(ConfigError::Invalid(
                "watch.drain_page must be between 1 and 1000".into(),
            ));
        }
        if self.watch.heartbeat < Duration::from_millis(10) {
            return Err(ConfigError::Invalid(
                "watch.heartbeat must be at least 10ms".into(),
            ));
        }
        if let Some(id) = &self.replica_id {
            inquest_store::ReplicaId::parse(id).map_err(ConfigError::Invalid)?;
        }
        for (name, d) in [
            ("store.op_timeout", self.store.op_timeout),
            ("store.turn_write_timeout", self.store.turn_write_timeout),
            ("store.connect_timeout", self.store.connect_timeout),
        ] {
            if d.is_zero() {
                return Err(ConfigError::Invalid(format!("{name} must be > 0")));
            }
        }
        Ok(())
    }

    /// The caps the tools run under.
    pub fn tool_limits(&self) -> inquest_agent::ToolLimits {
        inquest_agent::ToolLimits {
            max_result_bytes: self.limits.max_tool_result_bytes,
            max_stderr_line_bytes: self.limits.max_mcp_stderr_line_bytes,
        }
    }

    /// Every `skills` list of a trigger or a schedule names configured
    /// `[[skills]]`: a typo would otherwise load nothing, silently.
    fn validate_skill_choices(&self) -> Result<(), String> {
        let known: std::collections::BTreeSet<&str> =
            self.skills.iter().map(|s| s.name.as_str()).collect();
        let triggers = self
            .alerts
            .triggers
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("alerts.triggers[{i}].skills"), &t.skills));
        let schedules = self
            .schedules
            .iter()
            .map(|s| (format!("schedules {:?}: skills", s.name), &s.skills));
        for (what, chosen) in triggers.chain(schedules) {
            for name in chosen.iter().flatten() {
                if !known.contains(name.as_str()) {
                    let known = known.iter().copied().collect::<Vec<_>>().join(", ");
                    return Err(format!(
                        "{what}: no [[skills]] entry is named {name:?} (configured: [{known}])"
                    ));
                }
            }
        }
        Ok(())
    }

    /// The `[[schedules]]` checked and compiled, their title and prompt
    /// within the message limits.
    pub fn compiled_schedules(&self) -> Result<Vec<crate::schedules::Schedule>, String> {
        let schedules = crate::schedules::config::compile_all(&self.schedules)?;
        let limits = self.limits();
        for s in &schedules {
            let name = &s.entry.name;
            inquest_core::IncidentText::parse(s.entry.title.clone(), String::new(), &limits)
                .map_err(|e| format!("schedules {name:?}: title: {e}"))?;
            inquest_core::UserMessage::parse(s.entry.prompt.clone(), &limits)
                .map_err(|e| format!("schedules {name:?}: prompt: {e}"))?;
        }
        Ok(schedules)
    }

    pub fn limits(&self) -> inquest_core::Limits {
        inquest_core::Limits {
            max_message_bytes: self.limits.max_message_bytes,
            max_queued_messages: self.limits.max_queued_messages,
        }
    }

    pub fn store_config(&self, database_url: &str) -> inquest_store::StoreConfig {
        inquest_store::StoreConfig {
            database_url: database_url.to_owned(),
            max_connections: self.store.max_connections,
            burst_connections: self.store.burst_connections,
            op_timeout: self.store.op_timeout,
            turn_write_timeout: self.store.turn_write_timeout,
            connect_timeout: self.store.connect_timeout,
            replica_id: self
                .replica_id
                .as_deref()
                .and_then(|id| inquest_store::ReplicaId::parse(id).ok())
                .unwrap_or_else(inquest_store::ReplicaId::generate),
            lease_ttl: self.lease.ttl,
            burst_runtime: None,
            append_statements: self.store.append_statements,
            // A frozen replica's transaction ends well before its lease
            // could pass to another replica (10 s at the default 30 s).
            idle_in_transaction_timeout: (self.lease.ttl / 3)
                .max(inquest_store::MIN_IDLE_IN_TRANSACTION_TIMEOUT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_apply_in_order() {
        let mut c = Config::from_toml(
            r#"
            listen = "127.0.0.1:7000"
            database_url = "postgres://file/db"
            [limits]
            max_message_bytes = 100
            [store]
            turn_write_timeout = "250ms"
            "#,
        )
        .unwrap();
        assert_eq!(c.store.turn_write_timeout, Duration::from_millis(250));
        assert_eq!(c.store.max_connections, 16);
        c.apply_env(|k| match k {
            "DATABASE_URL" => Some("postgres://env/db".into()),
            "INQUEST_MAX_MESSAGE_BYTES" => Some("200".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.database_url.as_deref(), Some("postgres://env/db"));
        assert_eq!(c.limits.max_message_bytes, 200);
        c.apply(Overrides {
            listen: Some("127.0.0.1:7001".parse().unwrap()),
            ..Overrides::default()
        });
        assert_eq!(c.listen.port(), 7001);
        c.validate().unwrap();
    }

    /// A copy of the example config away from its files is refused at
    /// load, naming the missing file and where it was looked for.
    #[test]
    fn a_config_file_away_from_its_files_is_refused_at_load() {
        let dir = std::env::temp_dir().join(format!("inquest-config-copy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let example = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/checkout-latency/inquest.toml"
        );
        let copy = dir.join("inquest.toml");
        std::fs::copy(example, &copy).unwrap();
        let err = Config::load(Some(&copy), Overrides::default())
            .unwrap_err()
            .to_string();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(err.contains("providers[0].script"), "{err}");
        assert!(
            err.contains(&dir.join("script.json").display().to_string()),
            "{err}"
        );
        assert!(err.contains("absolute paths"), "{err}");
        Config::load(Some(std::path::Path::new(example)), Overrides::default())
            .expect("the example itself loads");
    }

    #[test]
    fn lease_ttl_and_admin_listen_come_from_the_environment_and_flags() {
        let mut c = Config::from_toml("[lease]\nttl = \"20s\"").unwrap();
        c.apply_env(|k| match k {
            "INQUEST_LEASE_TTL" => Some("3s".into()),
            "INQUEST_ADMIN_LISTEN" => Some("127.0.0.1:9465".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.lease.ttl, Duration::from_secs(3));
        assert_eq!(c.admin.listen.port(), 9465);
        c.validate().unwrap();
        c.apply(Overrides {
            lease_ttl: Some(Duration::from_secs(5)),
            admin_listen: Some("127.0.0.1:9466".parse().unwrap()),
            ..Overrides::default()
        });
        assert_eq!(c.lease.ttl, Duration::from_secs(5));
        assert_eq!(c.admin.listen.port(), 9466);
        let err = c
            .apply_env(|k| (k == "INQUEST_LEASE_TTL").then(|| "3".into()))
            .unwrap_err();
        assert!(err.to_string().contains("INQUEST_LEASE_TTL"), "{err}");
    }

    #[test]
    fn inquest_env_wins_over_database_url() {
        let mut c = Config::default();
        c.apply_env(|k| match k {
            "DATABASE_URL" => Some("postgres://generic".into()),
            "INQUEST_DATABASE_URL" => Some("postgres://specific".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.database_url.as_deref(), Some("postgres://specific"));
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(Config::from_toml("bogus = 1").is_err());
        assert!(Config::from_toml("[store]\nop_timeout = \"5 parsecs\"").is_err());
        let mut c = Config::default();
        assert!(
            c.apply_env(|k| (k == "INQUEST_LISTEN").then(|| "nope".into()))
                .is_err()
        );
        c.limits.max_message_bytes = 0;
        assert!(c.validate().is_err());
    }

    #[test]
    fn a_trigger_or_schedule_naming_an_unknown_skill_is_refused_by_name() {
        let skills = "[[skills]]\nname = \"pg\"\nserver = \"db\"\nprompt = \"p\"\n";
        let trigger = "[[alerts.triggers]]\nmatch = { severity = \"critical\" }\nprompt = \"x\"\n";
        let ok = Config::from_toml(&format!("{skills}{trigger}skills = [\"pg\"]\n")).unwrap();
        assert_eq!(ok.alerts.triggers[0].skills, Some(vec!["pg".to_owned()]));
        assert!(ok.validate().is_ok());
        let bad = Config::from_toml(&format!("{skills}{trigger}skills = [\"pgg\"]\n")).unwrap();
        let err = bad.validate().unwrap_err().to_string();
        assert!(
            err.contains("alerts.triggers[0].skills") && err.contains("\"pgg\""),
            "{err}"
        );
        let schedule = "[[schedules]]\nname = \"s\"\ncron = \"0 8 * * *\"\ntitle = \"t\"\n\
                        prompt = \"p\"\nskills = [\"nope\"]\n";
        let bad = Config::from_toml(&format!("{skills}{schedule}")).unwrap();
        let err = bad.validate().unwrap_err().to_string();
        assert!(
            err.contains("schedules \"s\": skills") && err.contains("\"nope\""),
            "{err}"
        );
    }

    #[test]
    fn agent_threads_come_from_the_file_and_the_environment() {
        assert!(Config::default().runtime.agent_threads >= 1);
        let mut c = Config::from_toml("[runtime]\nagent_threads = 0").unwrap();
        assert_eq!(c.runtime.agent_threads, 0);
        c.apply_env(|k| (k == "INQUEST_AGENT_THREADS").then(|| "3".into()))
            .unwrap();
        assert_eq!(c.runtime.agent_threads, 3);
        assert!(
            c.apply_env(|k| (k == "INQUEST_AGENT_THREADS").then(|| "-1".into()))
                .is_err()
        );
        assert!(Config::from_toml("[runtime]\nthreads = 2").is_err());
        c.runtime.agent_threads = 100_000;
        assert!(c.validate().is_err());
    }

    #[test]
    fn serving_nice_comes_from_the_file_and_the_environment_and_is_bounded() {
        assert_eq!(
            Config::default().runtime.serving_nice,
            inquest_engine::agent_runtime::DEFAULT_SERVING_NICE
        );
        let mut c = Config::from_toml("[runtime]\nserving_nice = 0").unwrap();
        assert_eq!(c.runtime.serving_nice, 0);
        c.apply_env(|k| (k == "INQUEST_SERVING_NICE").then(|| "12".into()))
            .unwrap();
        assert_eq!(c.runtime.serving_nice, 12);
        assert!(c.validate().is_ok());
        for bad in ["-1", "x", "300"] {
            assert!(
                c.apply_env(|k| (k == "INQUEST_SERVING_NICE").then(|| bad.into()))
                    .is_err(),
                "{bad}"
            );
        }
        c.runtime.serving_nice = 20;
        assert!(c.validate().is_err());
    }

    #[test]
    fn model_side_caps_are_read_and_validated() {
        let c = Config::from_toml(
            "[limits]\nmax_provider_response_bytes = 1000\nmax_model_text_bytes = 10\nmax_tool_arguments_bytes = 20",
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.limits.max_provider_response_bytes, 1000);
        assert_eq!(c.limits.max_model_text_bytes, 10);
        assert_eq!(c.limits.max_tool_arguments_bytes, 20);
        for key in [
            "max_provider_response_bytes",
            "max_model_text_bytes",
            "max_tool_arguments_bytes",
        ] {
            for bad in ["0", "2000000000"] {
                let c = Config::from_toml(&format!("[limits]\n{key} = {bad}")).unwrap();
                let err = c.validate().unwrap_err().to_string();
                assert!(err.contains(key), "{err}");
            }
        }
    }

    #[test]
    fn watch_section_is_read_and_validated() {
        let c = Config::from_toml("[watch]\nheartbeat = \"50ms\"\nchannel_capacity = 8").unwrap();
        assert_eq!(c.watch.heartbeat, Duration::from_millis(50));
        assert_eq!(c.watch.channel_capacity, 8);
        assert_eq!(c.watch.test_drain_delay, None);
        c.validate().unwrap();
        assert!(Config::from_toml("[watch]\ntest_drain_delay = \"1s\"").is_err());
        for bad in [
            "[watch]\nheartbeat = \"0ms\"",
            "[watch]\nchannel_capacity = 0",
            "[watch]\ndrain_page = 0",
        ] {
            assert!(Config::from_toml(bad).unwrap().validate().is_err(), "{bad}");
        }
    }

    #[test]
    fn idempotency_key_retention_is_read_and_validated() {
        let c = Config::default();
        assert_eq!(
            c.limits.idempotency_key_retention,
            Duration::from_secs(24 * 3600)
        );
        assert_eq!(
            c.limits.idempotency_cleanup_interval(),
            Duration::from_secs(600)
        );
        let c = Config::from_toml("[limits]\nidempotency_key_retention = \"2m\"").unwrap();
        assert_eq!(c.limits.idempotency_key_retention, Duration::from_secs(120));
        assert_eq!(
            c.limits.idempotency_cleanup_interval(),
            Duration::from_secs(30)
        );
        c.validate().unwrap();
        let c = Config::from_toml("[limits]\nidempotency_key_retention = \"500ms\"").unwrap();
        assert!(c.validate().is_err());
        assert!(Config::from_toml("[limits]\nidempotency_key_retention = \"1 day\"").is_err());
    }

    #[test]
    fn tool_output_limits_are_read_and_validated() {
        let defaults = Config::default();
        assert_eq!(defaults.limits.max_tool_result_bytes, 64 * 1024);
        assert_eq!(defaults.limits.max_mcp_stderr_line_bytes, 4 * 1024);
        defaults.validate().unwrap();
        let c = Config::from_toml(
            "[limits]\nmax_tool_result_bytes = 1000\nmax_mcp_stderr_line_bytes = 200",
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.tool_limits().max_result_bytes, 1000);
        assert_eq!(c.tool_limits().max_stderr_line_bytes, 200);
        for bad in [
            "[limits]\nmax_tool_result_bytes = 0",
            "[limits]\nmax_tool_result_bytes = 16777217",
            "[limits]\nmax_mcp_stderr_line_bytes = 0",
            "[limits]\nmax_mcp_stderr_line_bytes = 1048577",
        ] {
            let error = Config::from_toml(bad).unwrap().validate().unwrap_err();
            assert!(error.to_string().contains("limits.max_"), "{bad}: {error}");
        }
    }
}

#[cfg(test)]
mod example_file {
    use super::Config;

    /// deploy/inquest.example.toml must stay loadable and match the defaults
    /// it claims to show.
    #[test]
    fn example_config_parses_to_the_defaults() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/inquest.example.toml"
        );
        let text = std::fs::read_to_string(path).expect("reading the example config");
        let parsed = Config::from_toml(&text).expect("example config parses");
        parsed.validate().expect("example config is valid");
        let defaults = Config::default();
        assert_eq!(parsed.listen, defaults.listen);
        assert_eq!(
            parsed.limits.max_message_bytes,
            defaults.limits.max_message_bytes
        );
        assert_eq!(parsed.tool_limits(), defaults.tool_limits());
        assert_eq!(
            parsed.limits.idempotency_key_retention,
            defaults.limits.idempotency_key_retention
        );
        assert_eq!(
            (
                parsed.limits.max_provider_response_bytes,
                parsed.limits.max_model_text_bytes,
                parsed.limits.max_tool_arguments_bytes,
            ),
            (
                defaults.limits.max_provider_response_bytes,
                defaults.limits.max_model_text_bytes,
                defaults.limits.max_tool_arguments_bytes,
            )
        );
        assert_eq!(
            parsed.store.turn_write_timeout,
            defaults.store.turn_write_timeout
        );
        assert_eq!(parsed.store.max_connections, defaults.store.max_connections);
        assert_eq!(
            crate::limits::ApiLimits::from_config(&parsed.limits),
            crate::limits::ApiLimits::from_config(&defaults.limits)
        );
        assert_eq!(parsed.shutdown.grace, defaults.shutdown.grace);
        assert_eq!(parsed.lease.ttl, defaults.lease.ttl);
        assert_eq!(parsed.lease.reap_interval, defaults.lease.reap_interval);
        assert_eq!(
            parsed.lease.renew_interval(),
            defaults.lease.renew_interval()
        );
        assert_eq!(
            (
                parsed.limits.compact_at,
                parsed.limits.tool_result_window_share
            ),
            (
                defaults.limits.compact_at,
                defaults.limits.tool_result_window_share
            )
        );
        assert_eq!(
            (
                parsed.watch.heartbeat,
                parsed.watch.channel_capacity,
                parsed.watch.drain_page
            ),
            (
                defaults.watch.heartbeat,
                defaults.watch.channel_capacity,
                defaults.watch.drain_page
            )
        );
        let (a, d) = (&parsed.agent, &defaults.agent);
        assert_eq!(
            (
                a.max_tokens,
                a.iteration_budget,
                a.max_model_calls_per_burst,
                a.empty_reply_retries,
                a.bad_tool_strikes,
                &a.system_prompt
            ),
            (
                d.max_tokens,
                d.iteration_budget,
                d.max_model_calls_per_burst,
                d.empty_reply_retries,
                d.bad_tool_strikes,
                &d.system_prompt
            )
        );
        assert!(parsed.providers.is_empty() && parsed.mcp.is_none() && parsed.skills.is_empty());
        assert_eq!(parsed.tenants, defaults.tenants);
    }

    #[test]
    fn lease_settings_and_replica_id_are_checked() {
        let c = Config::from_toml("[lease]\nttl = \"2s\"\n").unwrap();
        c.validate().unwrap();
        assert_eq!(
            c.lease.renew_interval(),
            std::time::Duration::from_secs(2) / 3
        );
        for bad in [
            "[lease]\nttl = \"50ms\"\n",
            "[lease]\nttl = \"2s\"\nrenew_interval = \"2s\"\n",
            "[lease]\nttl = \"2s\"\nrenew_interval = \"1s\"\nsafety_margin = \"1s\"\n",
            "[lease]\nreap_interval = \"0ms\"\n",
            "replica_id = \"has space\"\n",
            "replica_id = \"\"\n",
        ] {
            let c = Config::from_toml(bad).unwrap();
            assert!(c.validate().is_err(), "{bad}");
        }
        let mut c = Config::default();
        c.apply_env(|name| (name == "INQUEST_REPLICA_ID").then(|| "pod-7".to_owned()))
            .unwrap();
        assert_eq!(c.replica_id.as_deref(), Some("pod-7"));
        assert_eq!(
            c.store_config("postgres://x/y").replica_id.as_str(),
            "pod-7"
        );
    }
}
