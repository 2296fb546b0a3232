//! A private PostgreSQL cluster run from the machine's server binaries.
//!
//! Used when `serve` is given no database URL (the zero-config default) and
//! by `cargo xtask test` for a throwaway cluster. The cluster lives in
//! `<data dir>/pgdata`, is created on first start with `initdb`, reused
//! after, listens on 127.0.0.1 only (no Unix socket), and is stopped by
//! [`EmbeddedPostgres::stop`].
//!
//! It accepts only its owner: every connection, local or TCP, must give
//! the superuser's password (`scram-sha-256`), a random 244-bit secret
//! generated when the cluster is created and kept in
//! `<data dir>/superuser.password` (mode 0600, readable by this process's
//! user and, when it runs as root, by `postgres`). Another local user who
//! can reach 127.0.0.1 cannot connect without reading that file. A cluster
//! created by an older Inquest with `trust` is given a password and
//! switched to `scram-sha-256` at its next start.
//!
//! One process at a time runs a data directory's cluster: it holds an
//! exclusive lock on `<data dir>/inquest.lock` while the handle lives. A
//! postmaster of this data directory found running at start, with the lock
//! free, was left behind by a process that could not stop it (kill -9): it
//! is stopped, with a warning, and started again.
//!
//! PostgreSQL refuses to run as root. When this process is root, the
//! binaries run as the `postgres` user (via `runuser`) and the data
//! directory is handed to that user.

mod private;

use std::{
    ffi::OsString,
    fmt, io,
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Command, Output},
};

use private::{Password, check_private, is_root, trusted_owners};

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
    #[error(
        "another process (an `inquest serve`?) runs the embedded PostgreSQL in {0}; stop it \
         first, or give this one its own --data-dir"
    )]
    InUse(PathBuf),
    /// A postmaster of this data directory left running, that could not
    /// be stopped.
    #[error(
        "PostgreSQL (pid {pid}) is still running on {pgdata}, left by an earlier start, and \
         could not be stopped ({why}). Stop it with `{command}`, then start again; its log is {log}"
    )]
    Stale {
        pid: u32,
        pgdata: PathBuf,
        why: String,
        command: String,
        log: PathBuf,
    },
    /// `pg_ctl start` failed; the reason is in the server's log, whose
    /// last lines are quoted.
    #[error("pg_ctl start failed ({status}): {stderr}\nthe server's log is {log}{tail}")]
    Start {
        status: String,
        stderr: String,
        log: PathBuf,
        tail: String,
    },
    #[error("{step} failed ({status}): {stderr}")]
    Command {
        step: &'static str,
        status: String,
        stderr: String,
    },
    /// A data directory or password file another local user could have
    /// written or can read: its secret cannot be trusted or kept.
    #[error("{0}")]
    NotPrivate(String),
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
/// destructor) but lets go of the data directory's lock, so the next start
/// stops it and starts it again.
pub struct EmbeddedPostgres {
    bin: PathBuf,
    pgdata: PathBuf,
    /// `<data dir>/postgres.log`: the server's own log.
    log: PathBuf,
    /// `<data dir>/inquest.lock`, locked exclusively while this handle
    /// runs the cluster (released by [`EmbeddedPostgres::stop`], or by the
    /// OS when the process dies), so a second process cannot take the
    /// cluster for a stale one and stop it. `None` for a handle that only
    /// attached to a cluster another process runs
    /// ([`EmbeddedPostgres::running`]).
    lock: Option<std::fs::File>,
    port: u16,
    database: String,
    as_postgres_user: bool,
    password: Password,
}

impl fmt::Debug for EmbeddedPostgres {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedPostgres")
            .field("pgdata", &self.pgdata)
            .field("port", &self.port)
            .finish()
    }
}

/// Superuser created by `initdb`, authenticated by its password.
const SUPERUSER: &str = "inquest";
/// The file in the data directory that holds the superuser's password.
const PASSWORD_FILE: &str = "superuser.password";
/// The file in the data directory the running handle holds locked.
const LOCK_FILE: &str = "inquest.lock";
/// Lines of the server's log quoted when it does not start.
const LOG_TAIL_LINES: usize = 8;

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
        if !options.data_dir.exists() {
            use std::os::unix::fs::DirBuilderExt;
            // Private from the start, whatever the umask: the password file
            // will live here.
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&options.data_dir)
                .map_err(io_err(format!("creating {}", options.data_dir.display())))?;
        }
        let data_dir = options
            .data_dir
            .canonicalize()
            .map_err(io_err(format!("resolving {}", options.data_dir.display())))?;
        let pgdata = data_dir.join("pgdata");
        let port = match options.port {
            Some(p) => p,
            None => free_port().map_err(io_err("picking a free port"))?,
        };
        let password_file = data_dir.join(PASSWORD_FILE);
        let existing = password_file.is_file();
        check_private(&data_dir, &password_file, &trusted_owners(as_postgres_user))?;
        let lock = lock_data_dir(&data_dir)?;
        let password = if existing {
            let text = std::fs::read_to_string(&password_file)
                .map_err(io_err(format!("reading {}", password_file.display())))?;
            Password(text.trim().to_owned())
        } else {
            Password::generate()
        };
        let pg = Self {
            bin,
            pgdata,
            log: data_dir.join("postgres.log"),
            lock: Some(lock),
            port,
            database: options.database.clone(),
            as_postgres_user,
            password,
        };
        if !existing {
            pg.write_password(&password_file)?;
        }
        if as_postgres_user {
            pg.hand_to_postgres_user(&data_dir)?;
        }
        let created = !pg.pgdata.join("PG_VERSION").is_file();
        if created {
            pg.initdb(&password_file)?;
        } else {
            pg.stop_stale()?;
        }
        pg.pg_ctl_start(options.max_connections)?;
        if !created {
            pg.require_password()?;
        }
        pg.ensure_database()?;
        Ok(pg)
    }

    /// Writes the password where only this user (and `postgres`) can read
    /// it, before anything uses it.
    fn write_password(&self, path: &Path) -> Result<(), EmbeddedError> {
        use std::{io::Write, os::unix::fs::OpenOptionsExt};
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .map_err(io_err(format!("creating {}", path.display())))?;
        file.write_all(self.password.0.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(io_err(format!("writing {}", path.display())))
    }

    /// A cluster made by an older version trusts every local connection:
    /// give the superuser the password and switch `pg_hba.conf` to
    /// `scram-sha-256`. A no-op once done.
    fn require_password(&self) -> Result<(), EmbeddedError> {
        let hba = self.pgdata.join("pg_hba.conf");
        let text =
            std::fs::read_to_string(&hba).map_err(io_err(format!("reading {}", hba.display())))?;
        let trusting = |line: &str| {
            !line.trim_start().starts_with('#') && line.split_whitespace().last() == Some("trust")
        };
        if !text.lines().any(trusting) {
            return Ok(());
        }
        // The statement goes in on stdin: a command line is visible to
        // every local user.
        let mut alter = Command::new(self.psql());
        alter
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d"])
            .arg(self.url_without_password("postgres"));
        run_with_input(
            "setting the superuser's password",
            alter,
            &format!("ALTER ROLE {SUPERUSER} PASSWORD '{}';\n", self.password.0),
        )?;
        let rewritten: String = text
            .lines()
            .map(|line| {
                if trusting(line) {
                    let cut = line.len() - "trust".len();
                    format!("{}scram-sha-256\n", &line[..cut])
                } else {
                    format!("{line}\n")
                }
            })
            .collect();
        std::fs::write(&hba, rewritten).map_err(io_err(format!("writing {}", hba.display())))?;
        let mut reload = self.command("pg_ctl");
        reload.arg("-D").arg(&self.pgdata).arg("reload");
        run("pg_ctl reload", reload).map(|_| ())
    }

    /// `psql` for this cluster's `database`, the password in its
    /// environment (not on its command line, which other users can see).
    fn psql_on(&self, database: &str) -> Command {
        let mut cmd = Command::new(self.psql());
        cmd.env("PGPASSWORD", &self.password.0)
            .arg("-d")
            .arg(self.url_without_password(database));
        cmd
    }

    fn psql(&self) -> PathBuf {
        let psql = self.bin.join("psql");
        if psql.is_file() {
            psql
        } else {
            PathBuf::from("psql")
        }
    }

    /// `postgres://` URL of the service database, with the superuser's
    /// password in it: do not log it.
    pub fn url(&self) -> String {
        self.url_for(&self.database)
    }

    /// URL of another database on this cluster (with the password).
    pub fn url_for(&self, database: &str) -> String {
        format!(
            "postgres://{SUPERUSER}:{}@127.0.0.1:{}/{database}",
            self.password.0, self.port
        )
    }

    /// The same URL without the password: what a stranger would try.
    pub fn url_without_password(&self, database: &str) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{database}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the cluster (fast shutdown: open sessions are disconnected,
    /// committed data is safe) and lets another process run it. Blocking.
    pub fn stop(&self) -> Result<(), EmbeddedError> {
        run("pg_ctl stop", self.pg_ctl_stop())?;
        // Unlocking cannot fail on a lock this handle holds; if it did, the
        // lock goes with the process.
        if let Some(lock) = &self.lock {
            let _ = lock.unlock();
        }
        Ok(())
    }

    fn pg_ctl_stop(&self) -> Command {
        let mut cmd = self.command("pg_ctl");
        cmd.arg("-D")
            .arg(&self.pgdata)
            .args(["-m", "fast", "-w", "-t", "60", "stop"]);
        cmd
    }

    /// Where the server writes its own log.
    pub fn log_file(&self) -> &Path {
        &self.log
    }

    /// A postmaster of this data directory still running, while this
    /// process holds the data directory's lock, was left by a process that
    /// died without stopping it (kill -9, a crash): nobody uses it. Stops
    /// it, so the start that follows runs with this start's port and
    /// settings; a failure says what to run instead.
    fn stop_stale(&self) -> Result<(), EmbeddedError> {
        let Some(pid) = running_postmaster(&self.pgdata) else {
            return Ok(());
        };
        tracing::warn!(
            pid,
            pgdata = %self.pgdata.display(),
            "PostgreSQL of this data directory was left running by an earlier start that did \
             not stop it (killed?); stopping it and starting it again"
        );
        let cmd = self.pg_ctl_stop();
        let command = format!(
            "{} {}",
            cmd.get_program().to_string_lossy(),
            cmd.get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        );
        run("pg_ctl stop", cmd)
            .map(|_| ())
            .map_err(|e| EmbeddedError::Stale {
                pid,
                pgdata: self.pgdata.clone(),
                why: e.to_string(),
                command,
                log: self.log.clone(),
            })
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

    fn initdb(&self, password_file: &Path) -> Result<(), EmbeddedError> {
        let mut cmd = self.command("initdb");
        cmd.arg("-D")
            .arg(&self.pgdata)
            .args([
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--no-instructions",
            ])
            .arg(format!("--username={SUPERUSER}"))
            .arg(format!("--pwfile={}", password_file.display()));
        run("initdb", cmd).map(|_| ())
    }

    fn pg_ctl_start(&self, max_connections: u32) -> Result<(), EmbeddedError> {
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
            .arg(&self.log)
            .arg("-o")
            .arg(options)
            .args(["-w", "-t", "60", "start"]);
        match run("pg_ctl start", cmd) {
            Ok(_) => Ok(()),
            // pg_ctl's own words end in "Examine the log output": name the
            // log and quote its end, where the reason is.
            Err(EmbeddedError::Command { status, stderr, .. }) => Err(EmbeddedError::Start {
                status,
                stderr,
                log: self.log.clone(),
                tail: log_tail(&self.log),
            }),
            Err(e) => Err(e),
        }
    }

    fn ensure_database(&self) -> Result<(), EmbeddedError> {
        let exists = self
            .psql_on("postgres")
            .arg("-XtA")
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
        let mut create = self.psql_on("postgres");
        create.args(["-X", "-q"]).arg("-c").arg(format!(
            "CREATE DATABASE \"{}\"",
            self.database.replace('"', "\"\"")
        ));
        run("creating the database", create).map(|_| ())
    }
}

/// Takes `<data_dir>/inquest.lock` exclusively, or says who holds it.
fn lock_data_dir(data_dir: &Path) -> Result<std::fs::File, EmbeddedError> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = data_dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(io_err(format!("opening {}", path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(EmbeddedError::InUse(data_dir.to_owned())),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(io_err(format!("locking {}", path.display()))(e))
        }
    }
}

/// The pid of a postmaster running on `pgdata`: the one its
/// `postmaster.pid` names, if that process is alive, is a `postgres`, and
/// the file names this data directory. A pid file left by a postmaster
/// that is gone (or whose pid now belongs to something else) is not one:
/// PostgreSQL itself replaces such a file at start.
fn running_postmaster(pgdata: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(pgdata.join("postmaster.pid")).ok()?;
    let mut lines = text.lines();
    let pid: u32 = lines.next()?.trim().parse().ok()?;
    let dir = Path::new(lines.next()?.trim()).canonicalize().ok()?;
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    (comm.trim() == "postgres" && dir == pgdata.canonicalize().ok()?).then_some(pid)
}

/// The last lines of the server's log, indented, after a header; empty
/// when there is no log to read.
fn log_tail(log: &Path) -> String {
    let Ok(text) = std::fs::read_to_string(log) else {
        return String::new();
    };
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
    if tail.is_empty() {
        return String::new();
    }
    let mut out = String::from("; it ends with:");
    for line in tail {
        out.push_str("\n  ");
        out.push_str(line);
    }
    out
}

/// Attaching to a cluster that is already up: a running `serve` keeps its
/// embedded cluster up, and a short command on the same data directory
/// (`inquest token`) must use that one, not start a second postmaster.
impl EmbeddedPostgres {
    /// The cluster whose postmaster runs in `options.data_dir` now: its
    /// port from `pgdata/postmaster.pid`, its password from the data
    /// directory. `None` when no postmaster of this directory is alive
    /// (then [`EmbeddedPostgres::start`] one). Do not
    /// [`stop`](EmbeddedPostgres::stop) the handle: the cluster belongs to
    /// whoever started it.
    pub fn running(options: &EmbeddedOptions) -> Result<Option<Self>, EmbeddedError> {
        let Ok(data_dir) = options.data_dir.canonicalize() else {
            return Ok(None);
        };
        let pgdata = data_dir.join("pgdata");
        let pid_file = pgdata.join("postmaster.pid");
        let text = match std::fs::read_to_string(&pid_file) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(format!("reading {}", pid_file.display()))(e)),
        };
        // postmaster.pid: pid, data directory, start time, port, ...
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        let pid = lines.first().and_then(|l| l.parse::<u32>().ok());
        let port = lines.get(3).and_then(|l| l.parse::<u16>().ok());
        let (Some(pid), Some(port)) = (pid, port) else {
            return Ok(None);
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            return Ok(None);
        }
        let password_file = data_dir.join(PASSWORD_FILE);
        let password = std::fs::read_to_string(&password_file)
            .map_err(io_err(format!("reading {}", password_file.display())))?;
        Ok(Some(Self {
            bin: find_binaries().unwrap_or_default(),
            log: data_dir.join("postgres.log"),
            lock: None,
            pgdata,
            port,
            database: options.database.clone(),
            as_postgres_user: is_root(),
            password: Password(password.trim().to_owned()),
        }))
    }
}

fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn run(step: &'static str, mut cmd: Command) -> Result<Output, EmbeddedError> {
    let output = cmd.output().map_err(io_err(format!("starting {step}")))?;
    checked(step, output)
}

/// [`run`] with `input` on the command's stdin.
fn run_with_input(
    step: &'static str,
    mut cmd: Command,
    input: &str,
) -> Result<Output, EmbeddedError> {
    use std::{io::Write, process::Stdio};
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_err(format!("starting {step}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.as_bytes())
            .map_err(io_err(format!("writing to {step}")))?;
    }
    let output = child
        .wait_with_output()
        .map_err(io_err(format!("waiting for {step}")))?;
    checked(step, output)
}

fn checked(step: &'static str, output: Output) -> Result<Output, EmbeddedError> {
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
