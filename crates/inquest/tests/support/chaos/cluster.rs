//! The chaos test's own PostgreSQL cluster: it restarts it, so it cannot
//! share the suite's. Made with the machine's `initdb` / `pg_ctl` (found
//! the way `inquest_store::embedded` finds them) in a temporary directory,
//! run as the `postgres` user when the test runs as root, listening on
//! 127.0.0.1 and on the host side of the namespace link, with
//! `max_connections = 300`. Stopped (immediate) when dropped.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

const SUPERUSER: &str = "inquest";
pub const DATABASE: &str = "chaos";

pub struct Cluster {
    bin: PathBuf,
    pgdata: PathBuf,
    log: PathBuf,
    pub port: u16,
    as_postgres: bool,
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs `cmd`; its stdout, or why it failed.
fn run(what: &str, cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot start {what}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        ))
    }
}

impl Cluster {
    /// initdb into `dir` (which must be reachable by the `postgres` user
    /// when root), then starts it on `port`, listening on `listen`.
    pub fn start(dir: &Path, port: u16, listen: &[&str]) -> Result<Cluster, String> {
        let bin = inquest_store::embedded::find_binaries().ok_or(
            "PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql",
        )?;
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let as_postgres = is_root();
        let cluster = Cluster {
            bin,
            pgdata: dir.join("pgdata"),
            log: dir.join("postgres.log"),
            port,
            as_postgres,
        };
        if as_postgres {
            run(
                "chown of the cluster directory",
                Command::new("chown").args(["-R", "postgres:"]).arg(dir),
            )?;
        }
        run(
            "initdb",
            cluster
                .command("initdb")
                .arg("-D")
                .arg(&cluster.pgdata)
                .args(["--auth=trust", "--encoding=UTF8", "--no-instructions"])
                .arg(format!("--username={SUPERUSER}")),
        )?;
        // initdb trusts loopback only; the namespace's replica connects
        // from the other end of the link.
        let hba = cluster.pgdata.join("pg_hba.conf");
        let mut rules =
            std::fs::read_to_string(&hba).map_err(|e| format!("reading pg_hba: {e}"))?;
        rules.push_str("\nhost all all 10.231.0.0/30 trust\n");
        std::fs::write(&hba, rules).map_err(|e| format!("writing pg_hba: {e}"))?;
        let options = format!(
            "-c listen_addresses='{}' -p {port} -c unix_socket_directories='' \
             -c max_connections=300",
            listen.join(",")
        );
        run(
            "pg_ctl start",
            cluster
                .command("pg_ctl")
                .arg("-D")
                .arg(&cluster.pgdata)
                .arg("-l")
                .arg(&cluster.log)
                .arg("-o")
                .arg(options)
                .args(["-w", "-t", "60", "start"]),
        )?;
        cluster.psql("postgres", &format!("CREATE DATABASE {DATABASE}"))?;
        Ok(cluster)
    }

    /// The URL of the test database at `host`.
    pub fn url(&self, host: &str) -> String {
        format!("postgres://{SUPERUSER}@{host}:{}/{DATABASE}", self.port)
    }

    /// `pg_ctl restart -m fast`: every connection is dropped, the server is
    /// back when this returns.
    pub async fn restart(&self) -> Result<(), String> {
        let mut cmd = self.command("pg_ctl");
        // With its log file: a server started without one would hold
        // pg_ctl's output pipes open, and pg_ctl would never seem done.
        cmd.arg("-D")
            .arg(&self.pgdata)
            .arg("-l")
            .arg(&self.log)
            .args(["-m", "fast", "-w", "-t", "60", "restart"]);
        blocking("pg_ctl restart", cmd).await.map(|_| ())
    }

    /// `pg_terminate_backend` of every backend whose `application_name`
    /// matches `condition` (an SQL condition on `application_name`);
    /// returns how many were terminated.
    pub async fn terminate(&self, condition: &str) -> Result<u64, String> {
        let sql = format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE pid <> pg_backend_pid() AND ({condition})"
        );
        // From the maintenance database: the test database may be refusing
        // connections (see `allow_connections`).
        let out = blocking("psql (terminate)", self.psql_command("postgres", &sql)).await?;
        out.trim()
            .parse()
            .map_err(|e| format!("psql answered {out:?}: {e}"))
    }

    /// Whether the test database accepts new connections (`ALTER DATABASE
    /// ... ALLOW_CONNECTIONS`): with `false`, every new connection is
    /// refused, as during a failover.
    pub async fn allow_connections(&self, allow: bool) -> Result<(), String> {
        let sql = format!("ALTER DATABASE {DATABASE} WITH ALLOW_CONNECTIONS {allow}");
        blocking(
            "psql (allow connections)",
            self.psql_command("postgres", &sql),
        )
        .await
        .map(|_| ())
    }

    fn psql(&self, database: &str, sql: &str) -> Result<String, String> {
        run("psql", &mut self.psql_command(database, sql))
    }

    fn psql_command(&self, database: &str, sql: &str) -> Command {
        let psql = self.bin.join("psql");
        let psql = if psql.is_file() {
            psql
        } else {
            PathBuf::from("psql")
        };
        let mut cmd = Command::new(psql);
        cmd.args(["-XtA", "-v", "ON_ERROR_STOP=1", "-d"])
            .arg(format!(
                "postgres://{SUPERUSER}@127.0.0.1:{}/{database}?connect_timeout=5",
                self.port
            ))
            .arg("-c")
            .arg(sql);
        cmd
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(path);
            cmd
        } else {
            Command::new(path)
        }
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }
}

/// Runs a command off the async workers.
async fn blocking(what: &'static str, mut cmd: Command) -> Result<String, String> {
    let joined = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::task::spawn_blocking(move || run(what, &mut cmd)),
    )
    .await
    .map_err(|_| format!("{what} did not finish in 90 s"))?;
    joined.map_err(|e| format!("{what}: {e}"))?
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&self.pgdata)
            .args(["-m", "immediate", "-w", "-t", "30", "stop"])
            .output();
    }
}
