//! A private PostgreSQL cluster run from the machine's server binaries.
//!
//! Used when `serve` is given no database URL (the zero-config default) and
//! by `cargo xtask test` for a throwaway cluster. The cluster lives in
//! `<data dir>/pgdata`, is created on first start with `initdb`, reused
//! after, listens on 127.0.0.1 only (no Unix socket), and is stopped by
//! [`EmbeddedPostgres::stop`].
//!
//! PostgreSQL refuses to run as root. When this process is root, the
//! binaries run as the `postgres` user (via `runuser`) and the data
//! directory is handed to that user.

use std::{
    ffi::OsString,
    fmt, io,
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Command, Output},
};

/// What went wrong bringing the cluster up or down.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    #[error(
        "PostgreSQL server binaries (initdb, pg_ctl) were not found in /usr/lib/postgresql/*/bin \
         or on PATH; install the `postgresql` package (Debian/Ubuntu: apt-get install -y postgresql) \
         or pass --database-url"
    )]
    BinariesMissing,
    #[error(
        "running as root, but the `postgres` system user that PostgreSQL must run as does not exist"
    )]
    NoPostgresUser,
    #[error(
        "the data directory {0} is not reachable by the `postgres` user; choose a --data-dir \
         outside a private home directory (for example under /var/lib)"
    )]
    DataDirUnreachable(PathBuf),
    #[error("{step} failed ({status}): {stderr}")]
    Command {
        step: &'static str,
        status: String,
        stderr: String,
    },
    #[error("{0}")]
    Io(String, #[source] io::Error),
}

/// Options for the cluster.
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    /// Directory that holds `pgdata/` and the server log.
    pub data_dir: PathBuf,
    /// `max_connections` of the server.
    pub max_connections: u32,
    /// TCP port; `None` picks a free one at each start.
    pub port: Option<u16>,
    /// Database the service uses (created if missing).
    pub database: String,
}

impl EmbeddedOptions {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            max_connections: 100,
            port: None,
            database: "inquest".into(),
        }
    }
}

/// A running cluster. Call [`EmbeddedPostgres::stop`] to shut it down;
/// dropping the handle leaves it running (the process must not block in a
/// destructor), which the next start then reuses.
pub struct EmbeddedPostgres {
    bin: PathBuf,
    pgdata: PathBuf,
    port: u16,
    database: String,
    as_postgres_user: bool,
}

impl fmt::Debug for EmbeddedPostgres {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedPostgres")
            .field("pgdata", &self.pgdata)
            .field("port", &self.port)
            .finish()
    }
}

/// Superuser created by `initdb`; authentication is `trust` on 127.0.0.1.
const SUPERUSER: &str = "inquest";

/// Finds the directory holding `initdb`, `pg_ctl` and `postgres`: the newest
/// `/usr/lib/postgresql/<version>/bin` (Debian's layout, not on PATH), then
/// PATH.
pub fn find_binaries() -> Option<PathBuf> {
    let has_all = |dir: &Path| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|b| dir.join(b).is_file())
    };
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            Some((v, e.path().join("bin")))
        })
        .collect();
    versions.sort();
    if let Some((_, dir)) = versions.into_iter().rev().find(|(_, d)| has_all(d)) {
        return Some(dir);
    }
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .find(|d| has_all(d))
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc_geteuid() == 0 }
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> EmbeddedError {
    let what = what.into();
    move |e| EmbeddedError::Io(what, e)
}

impl EmbeddedPostgres {
    /// Creates the cluster if `pgdata` holds none, starts it, and makes
    /// sure the service database exists. Blocking; call from
    /// `spawn_blocking` inside async code.
    pub fn start(options: &EmbeddedOptions) -> Result<Self, EmbeddedError> {
        let bin = find_binaries().ok_or(EmbeddedError::BinariesMissing)?;
        let as_postgres_user = is_root();
        std::fs::create_dir_all(&options.data_dir)
            .map_err(io_err(format!("creating {}", options.data_dir.display())))?;
        let data_dir = options
            .data_dir
            .canonicalize()
            .map_err(io_err(format!("resolving {}", options.data_dir.display())))?;
        let pgdata = data_dir.join("pgdata");
        let port = match options.port {
            Some(p) => p,
            None => free_port().map_err(io_err("picking a free port"))?,
        };
        let pg = Self {
            bin,
            pgdata,
            port,
            database: options.database.clone(),
            as_postgres_user,
        };
        if as_postgres_user {
            pg.hand_to_postgres_user(&data_dir)?;
        }
        if !pg.pgdata.join("PG_VERSION").is_file() {
            pg.initdb()?;
        }
        pg.pg_ctl_start(&data_dir, options.max_connections)?;
        pg.ensure_database()?;
        Ok(pg)
    }

    /// `postgres://` URL of the service database.
    pub fn url(&self) -> String {
        self.url_for(&self.database)
    }

    /// URL of another database on this cluster.
    pub fn url_for(&self, database: &str) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{database}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the cluster (fast shutdown: open sessions are disconnected,
    /// committed data is safe). Blocking.
    pub fn stop(&self) -> Result<(), EmbeddedError> {
        let mut cmd = self.command("pg_ctl");
        cmd.arg("-D")
            .arg(&self.pgdata)
            .args(["-m", "fast", "-w", "stop"]);
        run("pg_ctl stop", cmd).map(|_| ())
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres_user {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(path);
            cmd
        } else {
            Command::new(path)
        }
    }

    fn hand_to_postgres_user(&self, data_dir: &Path) -> Result<(), EmbeddedError> {
        let id = Command::new("id").args(["-u", "postgres"]).output();
        if !id.is_ok_and(|o| o.status.success()) {
            return Err(EmbeddedError::NoPostgresUser);
        }
        let mut chown = Command::new("chown");
        chown.args(["-R", "postgres:"]).arg(data_dir);
        run("chown of the data directory", chown)?;
        let mut probe = Command::new("runuser");
        probe
            .args(["-u", "postgres", "--", "test", "-w"])
            .arg(data_dir);
        if !probe.status().is_ok_and(|s| s.success()) {
            return Err(EmbeddedError::DataDirUnreachable(data_dir.to_owned()));
        }
        Ok(())
    }

    fn initdb(&self) -> Result<(), EmbeddedError> {
        let mut cmd = self.command("initdb");
        cmd.arg("-D")
            .arg(&self.pgdata)
            .args(["--auth=trust", "--encoding=UTF8", "--no-instructions"])
            .arg(format!("--username={SUPERUSER}"));
        run("initdb", cmd).map(|_| ())
    }

    fn pg_ctl_start(&self, data_dir: &Path, max_connections: u32) -> Result<(), EmbeddedError> {
        let options: OsString = format!(
            "-c listen_addresses=127.0.0.1 -p {} -c unix_socket_directories='' \
             -c max_connections={max_connections}",
            self.port
        )
        .into();
        let mut cmd = self.command("pg_ctl");
        cmd.arg("-D")
            .arg(&self.pgdata)
            .arg("-l")
            .arg(data_dir.join("postgres.log"))
            .arg("-o")
            .arg(options)
            .args(["-w", "-t", "60", "start"]);
        run("pg_ctl start", cmd).map(|_| ())
    }

    fn ensure_database(&self) -> Result<(), EmbeddedError> {
        let psql = self.bin.join("psql");
        let psql = if psql.is_file() {
            psql
        } else {
            PathBuf::from("psql")
        };
        let exists = Command::new(&psql)
            .args(["-XtA", "-d"])
            .arg(self.url_for("postgres"))
            .arg("-c")
            .arg(format!(
                "SELECT 1 FROM pg_database WHERE datname = '{}'",
                self.database.replace('\'', "''")
            ))
            .output()
            .map_err(io_err("running psql"))?;
        if String::from_utf8_lossy(&exists.stdout).trim() == "1" {
            return Ok(());
        }
        let mut create = Command::new(&psql);
        create
            .args(["-X", "-q", "-d"])
            .arg(self.url_for("postgres"))
            .arg("-c")
            .arg(format!(
                "CREATE DATABASE \"{}\"",
                self.database.replace('"', "\"\"")
            ));
        run("creating the database", create).map(|_| ())
    }
}

fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn run(step: &'static str, mut cmd: Command) -> Result<Output, EmbeddedError> {
    let output = cmd.output().map_err(io_err(format!("starting {step}")))?;
    if output.status.success() {
        Ok(output)
    } else {
        let mut stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        if stderr.is_empty() {
            stderr = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        }
        Err(EmbeddedError::Command {
            step,
            status: output.status.to_string(),
            stderr,
        })
    }
}
