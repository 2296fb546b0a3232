//! The chaos test's own PostgreSQL cluster: it restarts it, so it cannot
//! share the suite's. Made with the machine's `initdb` / `pg_ctl` (found
//! the way `inquest_store::embedded` finds them) in a temporary directory,
//! run as the `postgres` user when the test runs as root, listening on
//! 127.0.0.1 and on the host side of the namespace link, with
//! `max_connections = 300`. Stopped (immediate) when dropped.
//!
//! In the failover mode it is a primary and a synchronous streaming
//! standby (`pg_basebackup -R`, `synchronous_standby_names = '*'`), and the
//! replicas use a multi-host URL (`target_session_attrs=read-write`). A
//! failover is what an HA manager such as Patroni does when a primary
//! dies: kill -9 of the primary's postmaster, `pg_ctl promote` of the
//! standby, which runs without a synchronous standby until the old
//! primary has been made its standby again (a fresh `pg_basebackup`), and
//! then waits for it again. The next failover comes only after that, so
//! no acknowledged commit can be lost: any loss is Inquest's.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

const SUPERUSER: &str = "inquest";
pub const DATABASE: &str = "chaos";

/// One PostgreSQL server: its data directory, log and port.
struct Node {
    pgdata: PathBuf,
    log: PathBuf,
    port: u16,
}

pub struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    listen: Vec<String>,
    nodes: Vec<Node>,
    /// The index in `nodes` of the one that takes writes.
    primary: AtomicUsize,
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
            dir: dir.to_owned(),
            listen: listen.iter().map(|l| (*l).to_owned()).collect(),
            nodes: vec![Node {
                pgdata: dir.join("pgdata"),
                log: dir.join("postgres.log"),
                port,
            }],
            primary: AtomicUsize::new(0),
            as_postgres,
        };
        cluster.chown()?;
        let node = &cluster.nodes[0];
        run(
            "initdb",
            cluster
                .command("initdb")
                .arg("-D")
                .arg(&node.pgdata)
                .args(["--auth=trust", "--encoding=UTF8", "--no-instructions"])
                .arg(format!("--username={SUPERUSER}")),
        )?;
        // initdb trusts loopback only; the namespace's replica connects
        // from the other end of the link. (A standby copies this file.)
        let hba = node.pgdata.join("pg_hba.conf");
        let mut rules =
            std::fs::read_to_string(&hba).map_err(|e| format!("reading pg_hba: {e}"))?;
        rules.push_str("\nhost all all 10.231.0.0/30 trust\n");
        std::fs::write(&hba, rules).map_err(|e| format!("writing pg_hba: {e}"))?;
        cluster.start_node(0)?;
        cluster.psql("postgres", &format!("CREATE DATABASE {DATABASE}"))?;
        Ok(cluster)
    }

    /// Adds a synchronous streaming standby of the primary on `port`
    /// (the failover mode); returns when the primary waits for it.
    pub fn add_standby(&mut self, port: u16) -> Result<(), String> {
        let i = self.nodes.len();
        self.nodes.push(Node {
            pgdata: self.dir.join(format!("pgdata-{i}")),
            log: self.dir.join(format!("postgres-{i}.log")),
            port,
        });
        self.make_standby(i)
    }

    /// Whether there is a standby to fail over to.
    pub fn replicated(&self) -> bool {
        self.nodes.len() > 1
    }

    /// Node `i` made a synchronous standby of the primary from a fresh
    /// base backup, started, and waited for.
    fn make_standby(&self, i: usize) -> Result<(), String> {
        let node = &self.nodes[i];
        let primary = &self.nodes[self.primary.load(Ordering::SeqCst)];
        if node.pgdata.exists() {
            std::fs::remove_dir_all(&node.pgdata)
                .map_err(|e| format!("removing {}: {e}", node.pgdata.display()))?;
        }
        self.chown()?;
        run(
            "pg_basebackup",
            self.command("pg_basebackup")
                .arg("-D")
                .arg(&node.pgdata)
                .args(["-R", "-X", "stream", "-c", "fast", "-d"])
                .arg(format!(
                    "host=127.0.0.1 port={} user={SUPERUSER} application_name=standby{i}",
                    primary.port
                )),
        )?;
        self.start_node(i)?;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let streaming = self.psql(
                "postgres",
                "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'",
            )?;
            if streaming.trim() != "0" {
                break;
            }
            if std::time::Instant::now() > deadline {
                return Err(format!("standby {i} never streamed"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Only now: a primary waiting for a standby that does not stream
        // would hang every commit, the backup's own included.
        self.psql(
            "postgres",
            "ALTER SYSTEM SET synchronous_standby_names = '*'",
        )?;
        self.psql("postgres", "SELECT pg_reload_conf()")?;
        Ok(())
    }

    /// A failover: kill -9 of the primary's postmaster, `pause` without
    /// any primary, the standby promoted, then the old primary made its
    /// synchronous standby again. Says what it did and how long each part
    /// took.
    pub async fn failover(&self, pause: Duration) -> Result<String, String> {
        let old = self.primary.load(Ordering::SeqCst);
        let new = (old + 1) % self.nodes.len();
        let pid_file = self.nodes[old].pgdata.join("postmaster.pid");
        let pid = std::fs::read_to_string(&pid_file)
            .map_err(|e| format!("reading {}: {e}", pid_file.display()))?
            .lines()
            .next()
            .and_then(|l| l.trim().parse::<i32>().ok())
            .ok_or("postmaster.pid names no pid")?;
        // The node dies whole, as a machine would: the postmaster and its
        // backends, so none goes on writing into the data directory.
        let mut doomed = children(pid);
        doomed.insert(0, pid);
        let killed = std::time::Instant::now();
        let mut kill = Command::new("kill");
        kill.arg("-9").args(doomed.iter().map(i32::to_string));
        run("kill -9 of the primary", &mut kill)?;
        tokio::time::sleep(pause).await;
        let mut promote = self.command("pg_ctl");
        promote
            .arg("-D")
            .arg(&self.nodes[new].pgdata)
            .args(["-w", "-t", "60", "promote"]);
        blocking("pg_ctl promote", promote).await?;
        self.primary.store(new, Ordering::SeqCst);
        // Alone, it must not wait for a standby (its copied settings may
        // name one).
        let alone = "ALTER SYSTEM SET synchronous_standby_names = ''";
        blocking("psql (async)", self.psql_command("postgres", alone)).await?;
        let reload = "SELECT pg_reload_conf()";
        blocking("psql (reload)", self.psql_command("postgres", reload)).await?;
        let promoted = killed.elapsed();
        for pid in doomed {
            wait_gone(pid).await;
        }
        let rejoin = std::time::Instant::now();
        let rejoined = tokio::task::block_in_place(|| self.make_standby(old));
        rejoined?;
        Ok(format!(
            "kill -9 of the primary (port {}), standby (port {}) promoted after {promoted:.1?}, \
             old primary back as its synchronous standby after {:.1?} more",
            self.nodes[old].port,
            self.nodes[new].port,
            rejoin.elapsed()
        ))
    }

    fn start_node(&self, i: usize) -> Result<(), String> {
        let node = &self.nodes[i];
        let options = format!(
            "-c listen_addresses='{}' -p {} -c unix_socket_directories='' \
             -c max_connections=300",
            self.listen.join(","),
            node.port
        );
        run(
            "pg_ctl start",
            self.command("pg_ctl")
                .arg("-D")
                .arg(&node.pgdata)
                .arg("-l")
                .arg(&node.log)
                .arg("-o")
                .arg(options)
                .args(["-w", "-t", "60", "start"]),
        )
        .map(|_| ())
    }

    fn chown(&self) -> Result<(), String> {
        if self.as_postgres {
            run(
                "chown of the cluster directory",
                Command::new("chown")
                    .args(["-R", "postgres:"])
                    .arg(&self.dir),
            )?;
        }
        Ok(())
    }

    /// The URL of the test database at `host`: every node, the writable
    /// one chosen at connect time.
    pub fn url(&self, host: &str) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("{host}:{}", n.port))
            .collect();
        let url = format!("postgres://{SUPERUSER}@{}/{DATABASE}", hosts.join(","));
        if self.replicated() {
            format!("{url}?target_session_attrs=read-write")
        } else {
            url
        }
    }

    /// `pg_ctl restart -m fast`: every connection is dropped, the server is
    /// back when this returns.
    pub async fn restart(&self) -> Result<(), String> {
        let node = &self.nodes[self.primary.load(Ordering::SeqCst)];
        let mut cmd = self.command("pg_ctl");
        // With its log file: a server started without one would hold
        // pg_ctl's output pipes open, and pg_ctl would never seem done.
        cmd.arg("-D")
            .arg(&node.pgdata)
            .arg("-l")
            .arg(&node.log)
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
                self.nodes[self.primary.load(Ordering::SeqCst)].port
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
        &self.nodes[0].log
    }
}

/// The processes whose parent is `pid`.
fn children(pid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|child| {
            // `pid (comm) state ppid …`; comm may hold spaces, so after
            // the last ')'.
            std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<i32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}

/// Until no process `pid` exists (a killed process is gone once reaped),
/// at most 10 s.
async fn wait_gone(pid: i32) {
    for _ in 0..200 {
        // Gone, or a zombie nobody reaped yet (dead all the same).
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                stat.rsplit_once(')')?
                    .1
                    .split_whitespace()
                    .next()
                    .map(str::to_owned)
            });
        if state.is_none_or(|s| s == "Z") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
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
        for node in &self.nodes {
            let _ = self
                .command("pg_ctl")
                .arg("-D")
                .arg(&node.pgdata)
                .args(["-m", "immediate", "-w", "-t", "30", "stop"])
                .output();
        }
    }
}
