//! Setting the run up: its directory, the replicas' specs and configs,
//! and the guards that clean up after it.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener},
    path::{Path, PathBuf},
};

use super::{
    Settings, announce,
    cluster::Cluster,
    executions,
    model::Model,
    netns::{self, Netns},
    receiver::{self, Receiver},
    replicas::Spec,
    tools_script,
};

pub const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// The index in [`specs`] of the replica inside the namespace.
pub const PARTITIONED: usize = 2;

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The three replicas: a and b on loopback, c inside the namespace
/// (reaching PostgreSQL and the model at the host side of the link).
pub fn specs(
    s: &Settings,
    dir: &Path,
    peers: Peers<'_>,
    cluster: &Cluster,
    netns: &Netns,
    exec_log: &Path,
    pid_log: &Path,
) -> Vec<Spec> {
    let Peers { model, receiver } = peers;
    let host = config(
        s,
        dir,
        "host",
        &model.base_url(LOCALHOST),
        &receiver.url(LOCALHOST),
        exec_log,
        pid_log,
    );
    let inside = config(
        s,
        dir,
        "netns",
        &model.base_url(netns::host_ip()),
        &receiver.url(netns::host_ip()),
        exec_log,
        pid_log,
    );
    let on_loopback = |name: &str| Spec {
        name: name.into(),
        listen: SocketAddr::new(LOCALHOST, free_port()),
        config: host.clone(),
        database_url: cluster.url("127.0.0.1"),
        prefix: Vec::new(),
    };
    vec![
        on_loopback("replica-a"),
        on_loopback("replica-b"),
        Spec {
            name: "replica-c".into(),
            listen: SocketAddr::new(netns::ns_ip(), free_port()),
            config: inside,
            database_url: cluster.url(netns::HOST_IP),
            prefix: netns.exec_prefix(),
        },
    ]
}

/// The HTTP servers of the test that replicas call: the model and the
/// webhook receiver.
#[derive(Clone, Copy)]
pub struct Peers<'a> {
    pub model: &'a Model,
    pub receiver: &'a Receiver,
}

/// `inquest.toml` (short leases, the fake model, the chaos MCP server, the
/// webhook receiver) for replicas reaching the model at `model_url` and
/// the receiver at `webhook_url`.
pub fn config(
    s: &Settings,
    dir: &Path,
    name: &str,
    model_url: &str,
    webhook_url: &str,
    exec_log: &Path,
    pid_log: &Path,
) -> PathBuf {
    let servers = serde_json::json!({"mcpServers": {"chaos": {
        "command": s.python,
        "args": [tools_script().display().to_string()],
        "env": {
            "CHAOS_EXEC_LOG": exec_log.display().to_string(),
            "CHAOS_PID_LOG": pid_log.display().to_string(),
        },
    }}});
    let mcp = dir.join(format!("mcp-{name}.json"));
    std::fs::write(&mcp, servers.to_string()).expect("writing the MCP config");
    let secret = dir.join("webhook-secret");
    std::fs::write(&secret, receiver::SECRET).expect("writing the webhook secret");
    let toml = format!(
        "[lease]\nttl = \"{}ms\"\nrenew_interval = \"{}ms\"\nreap_interval = \"{}ms\"\n\n\
         [shutdown]\ngrace = \"{}ms\"\n\n[watch]\nheartbeat = \"1s\"\n\n\
         [store]\nmax_connections = 8\n\n[approval]\nmode = \"mutating\"\n\n\
         [[providers]]\nkind = \"openai\"\nname = \"fake\"\nmodel = \"fake-model\"\n\
         base_url = \"{model_url}\"\nmax_retries = 1\ntimeout = \"8s\"\n\n\
         [mcp]\nconfig = \"{}\"\n\n\
         [[events.webhooks]]\nname = \"chaos\"\nurl = \"{webhook_url}\"\nsecret_file = \"{}\"\n",
        s.lease_ttl.as_millis(),
        s.renew_interval.as_millis(),
        s.reap_interval.as_millis(),
        s.shutdown_grace.as_millis(),
        mcp.display(),
        secret.display()
    );
    let path = dir.join(format!("inquest-{name}.toml"));
    std::fs::write(&path, toml).expect("writing the replica config");
    path
}

/// The run's directory: removed after a passing run, kept after a failing
/// one (replica logs, the execution log, the PostgreSQL log). Readable by
/// the `postgres` user, who runs the cluster inside it.
pub struct Workdir(Option<tempfile::TempDir>);

impl Workdir {
    pub fn new() -> Workdir {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::Builder::new()
            .prefix("inquest-chaos-")
            .tempdir_in("/tmp")
            .expect("creating the run's directory");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("opening the run's directory to the postgres user");
        Workdir(Some(dir))
    }

    pub fn path(&self) -> &Path {
        self.0
            .as_ref()
            .map(|d| d.path())
            .expect("the run's directory")
    }

    pub fn keep(mut self) -> PathBuf {
        self.0
            .take()
            .map(tempfile::TempDir::keep)
            .unwrap_or_default()
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(dir) = self.0.take()
        {
            announce(&format!(
                "chaos: run directory kept in {}",
                dir.keep().display()
            ));
        }
    }
}

/// Ends the MCP servers this test started that outlived their replica.
pub struct EndServers(pub PathBuf);

impl Drop for EndServers {
    fn drop(&mut self) {
        executions::end_servers(&self.0, &tools_script());
    }
}
