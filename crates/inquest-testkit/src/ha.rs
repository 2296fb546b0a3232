//! A real PostgreSQL HA cluster on this machine, for the failover tests and
//! the failover benchmark: nodes made with `initdb` and `pg_basebackup -R
//! -X stream` (plain streaming replication), each on its own port under one
//! directory, and the moves an HA manager makes, driven by the caller:
//! kill -9 of a postmaster, a promotion, a planned switchover, an old
//! primary brought back as a standby (a demotion).
//!
//! Why not pg_auto_failover: its monitor decides when to fail over and
//! which node wins, so a test could not say which commits a standby lacks
//! nor time the promotion itself; the failures Inquest must survive are the
//! same (a node gone, a new primary on another port, an old one that now
//! refuses writes), and these are what the caller drives here.
//!
//! Synchronous mode is what Patroni's `synchronous_mode` does: the primary
//! waits for one standby (`synchronous_standby_names = '*'`) while one is
//! attached, and a promoted node starts without that wait (it has no
//! standby yet) until a node rejoins under it. Commits wait for the
//! standby's replay (`synchronous_commit = remote_apply`), so what a client
//! was told is committed is readable on the standby.
//!
//! Every call blocks (it runs `pg_ctl`, `psql`); async callers wrap them in
//! `spawn_blocking`. Run as root, every PostgreSQL program runs as
//! `postgres` (`runuser`). Every node is stopped (immediate) and the
//! directory removed when the cluster is dropped.

use std::{
    io,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

/// One node: its data directory name and port.
#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub port: u16,
    /// The address it listens on and is reached at.
    pub host: String,
}

/// The cluster. Node 0 starts as the primary.
pub struct Cluster {
    root: PathBuf,
    bin: PathBuf,
    as_postgres: bool,
    pub nodes: Vec<Node>,
    /// Which node is the primary now.
    pub primary: usize,
    synchronous: bool,
    /// Node 0's network namespace, when it runs in one
    /// ([`Cluster::start_partitionable`]). Dropped after the nodes.
    partition: Option<Partition>,
    /// The children of a postmaster killed with kill -9, still exiting.
    orphans: Vec<u32>,
}

/// The processes whose parent is `pid`, from `/proc`.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat"))
                .ok()
                .and_then(|stat| {
                    // The fields after the command name: state, then ppid.
                    let rest = stat.rsplit_once(')')?.1.to_owned();
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// A network namespace joined to the host by a veth pair on a private /30
/// link: a node started inside it is reached at [`Partition::inner_ip`]
/// while the link is up, and not at all once it is cut ([`Partition::cut`]),
/// while it keeps running (no connection is closed; packets are dropped).
/// The namespace and the pair are removed when it drops.
pub struct Partition {
    namespace: String,
    host_if: String,
    inner_if: String,
    pub inner_ip: String,
}

fn ip(args: &[&str]) -> io::Result<()> {
    run(Command::new("ip").args(args))
}

impl Partition {
    /// Named after this process; the link is 10.232.X.0/30 with X from the
    /// pid, away from the chaos test's 10.231.0.0/30.
    fn create() -> io::Result<Partition> {
        let pid = std::process::id();
        let x = pid % 250;
        let partition = Partition {
            namespace: format!("inquest-ha-{pid}"),
            host_if: format!("iqh{pid}h"),
            inner_if: format!("iqh{pid}n"),
            inner_ip: format!("10.232.{x}.2"),
        };
        let inner_if = partition.inner_if.clone();
        ip(&["netns", "add", &partition.namespace])?;
        // From here on the guard removes what was made.
        let ns = partition.namespace.as_str();
        ip(&[
            "link",
            "add",
            &partition.host_if,
            "type",
            "veth",
            "peer",
            "name",
            &inner_if,
        ])?;
        ip(&["link", "set", &inner_if, "netns", ns])?;
        ip(&[
            "addr",
            "add",
            &format!("10.232.{x}.1/30"),
            "dev",
            &partition.host_if,
        ])?;
        ip(&["link", "set", &partition.host_if, "up"])?;
        ip(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{}/30", partition.inner_ip),
            "dev",
            &inner_if,
        ])?;
        ip(&["-n", ns, "link", "set", &inner_if, "up"])?;
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
        Ok(partition)
    }

    /// The namespace's side of the link goes down: nothing reaches it,
    /// nothing leaves. The host keeps its route, so to the host this looks
    /// like a peer gone silent behind a router: a new connection gets no
    /// answer until neighbour discovery gives up (about 3 s), and an open
    /// one is answered by nobody, never closed.
    pub fn cut(&self) -> io::Result<()> {
        ip(&["-n", &self.namespace, "link", "set", &self.inner_if, "down"])
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        // Deleting one side of a veth pair deletes both.
        let _ = ip(&["link", "del", &self.host_if]);
        let _ = ip(&["netns", "del", &self.namespace]);
    }
}

fn free_port() -> io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl Cluster {
    /// A primary and `standbys` standbys, all running, each standby
    /// streaming from the primary. `bin`: the directory of `initdb`,
    /// `pg_ctl`, `pg_basebackup` and `psql`.
    pub fn start(bin: &Path, standbys: usize, synchronous: bool) -> io::Result<Cluster> {
        Self::start_with(bin, standbys, synchronous, None)
    }

    /// [`Cluster::start`] with the primary (node 0) in a network namespace
    /// of its own, so that [`Cluster::cut_primary`] can partition it away.
    /// Needs root (`ip netns`).
    pub fn start_partitionable(
        bin: &Path,
        standbys: usize,
        synchronous: bool,
    ) -> io::Result<Cluster> {
        Self::start_with(bin, standbys, synchronous, Some(Partition::create()?))
    }

    /// Cuts node 0 off the network (it goes on running, a primary that
    /// nobody reaches).
    pub fn cut_primary(&self) -> io::Result<()> {
        self.partition
            .as_ref()
            .ok_or_else(|| io::Error::other("this cluster has no partition"))?
            .cut()
    }

    fn start_with(
        bin: &Path,
        standbys: usize,
        synchronous: bool,
        partition: Option<Partition>,
    ) -> io::Result<Cluster> {
        let root = std::env::temp_dir().join(format!(
            "inquest-ha-{}-{}",
            std::process::id(),
            free_port()?
        ));
        std::fs::create_dir_all(&root)?;
        let as_postgres = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        if as_postgres {
            run(Command::new("chown").arg("postgres").arg(&root))?;
        }
        let mut nodes = Vec::new();
        for i in 0..=standbys {
            nodes.push(Node {
                name: format!("n{i}"),
                port: free_port()?,
                host: match (&partition, i) {
                    (Some(p), 0) => p.inner_ip.clone(),
                    _ => "127.0.0.1".to_owned(),
                },
            });
        }
        let cluster = Cluster {
            root,
            bin: bin.to_owned(),
            as_postgres,
            nodes,
            primary: 0,
            synchronous,
            partition,
            orphans: Vec::new(),
        };
        run(cluster
            .pg("initdb")
            .args(["--auth=trust", "-U", "postgres", "-D"])
            .arg(cluster.data(0)))?;
        // Standbys and clients come from other addresses than loopback when
        // the primary is in a namespace (pg_basebackup copies this file).
        let hba = cluster.data(0).join("pg_hba.conf");
        let mut rules = std::fs::read_to_string(&hba)?;
        rules.push_str("host all all 0.0.0.0/0 trust\nhost replication all 0.0.0.0/0 trust\n");
        std::fs::write(&hba, rules)?;
        cluster.start_node(0)?;
        for i in 1..=standbys {
            cluster.clone_from_primary(i)?;
            cluster.start_node(i)?;
        }
        cluster.await_standbys()?;
        Ok(cluster)
    }

    /// The multi-host URL an Inquest replica uses: every node, the one
    /// taking writes found by `target_session_attrs=read-write`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("{}:{}", n.host, n.port))
            .collect();
        format!(
            "postgres://postgres@{}/postgres?target_session_attrs=read-write",
            hosts.join(",")
        )
    }

    /// One node's URL.
    pub fn node_url(&self, node: usize) -> String {
        format!(
            "postgres://postgres@{}:{}/postgres",
            self.nodes[node].host, self.nodes[node].port
        )
    }

    /// The node that is not the primary (with one standby), or the first
    /// standby.
    pub fn standby(&self) -> usize {
        (0..self.nodes.len())
            .find(|i| *i != self.primary)
            .unwrap_or(0)
    }

    fn data(&self, node: usize) -> PathBuf {
        self.root.join(&self.nodes[node].name)
    }

    fn pg(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(path);
            cmd
        } else {
            Command::new(path)
        }
    }

    /// Starts `node` on its port (a standby when its data directory says
    /// so).
    pub fn start_node(&self, node: usize) -> io::Result<()> {
        let options = format!(
            "-p {} -c listen_addresses={} -c unix_socket_directories={} \
             -c max_connections=200 -c wal_level=replica -c max_wal_senders=8 \
             -c hot_standby=on -c wal_log_hints=on -c synchronous_commit=remote_apply \
             -c wal_receiver_status_interval=1s -c track_commit_timestamp=on",
            self.nodes[node].port,
            self.nodes[node].host,
            self.root.display()
        );
        // Started inside the partition's namespace when it is node 0 and
        // there is one: the postmaster stays there.
        let mut command = match (&self.partition, node) {
            (Some(p), 0) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &p.namespace]);
                if self.as_postgres {
                    c.args(["runuser", "-u", "postgres", "--"]);
                }
                c.arg(self.bin.join("pg_ctl"));
                c
            }
            _ => self.pg("pg_ctl"),
        };
        run(command
            .arg("-D")
            .arg(self.data(node))
            .arg("-l")
            .arg(self.root.join(format!("{}.log", self.nodes[node].name)))
            .args(["-o", &options, "-w", "-t", "60", "start"]))
    }

    /// Stops `node`: `mode` is `fast` (a clean shutdown, as a switchover
    /// does) or `immediate`.
    pub fn stop_node(&self, node: usize, mode: &str) -> io::Result<()> {
        run(self
            .pg("pg_ctl")
            .arg("-D")
            .arg(self.data(node))
            .args(["-m", mode, "-w", "stop"]))
    }

    /// kill -9 of `node`'s postmaster. Its children (backends, the
    /// checkpointer, the WAL writer) notice and exit on their own, which
    /// this does not wait for: [`Cluster::rejoin`] does, before it starts
    /// anything in their place.
    pub fn kill_postmaster(&mut self, node: usize) -> io::Result<()> {
        let pid = std::fs::read_to_string(self.data(node).join("postmaster.pid"))?;
        let pid: u32 = pid
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| io::Error::other("no pid in postmaster.pid"))?;
        self.orphans = children_of(pid);
        run(Command::new("kill").args(["-KILL", &pid.to_string()]))
    }

    /// Promotes `node` and waits until it takes writes; it is the primary
    /// from now on. In synchronous mode it waits for no standby until one
    /// rejoins ([`Cluster::rejoin`]).
    pub fn promote(&mut self, node: usize) -> io::Result<()> {
        run(self
            .pg("pg_ctl")
            .arg("-D")
            .arg(self.data(node))
            .args(["-w", "-t", "60", "promote"]))?;
        self.primary = node;
        if self.synchronous {
            self.set_synchronous(node, "")?;
        }
        Ok(())
    }

    /// Brings `node` back as a standby of the current primary. `clean`:
    /// it was shut down cleanly before the promotion (a switchover), so
    /// its WAL is a prefix of the new primary's and it only needs to
    /// follow the new timeline; otherwise (it died) its directory is
    /// made again from the primary, as an HA manager would re-clone or
    /// `pg_rewind` it.
    pub fn rejoin(&mut self, node: usize, clean: bool) -> io::Result<()> {
        if clean {
            let conninfo = format!(
                "primary_conninfo = 'host={} port={} user=postgres application_name={}'\n",
                self.nodes[self.primary].host, self.nodes[self.primary].port, self.nodes[node].name
            );
            let auto = self.data(node).join("postgresql.auto.conf");
            let text = std::fs::read_to_string(&auto)?;
            let mut kept: String = text
                .lines()
                .filter(|l| !l.starts_with("primary_conninfo"))
                .map(|l| format!("{l}\n"))
                .collect();
            kept.push_str(&conninfo);
            std::fs::write(&auto, kept)?;
            std::fs::write(self.data(node).join("standby.signal"), "")?;
        } else {
            // A killed postmaster's children still attached to its shared
            // memory would keep a new postmaster from starting (a data
            // directory made again can get the same inode, hence the same
            // shared memory key).
            let deadline = Instant::now() + Duration::from_secs(60);
            while self
                .orphans
                .iter()
                .any(|pid| Path::new(&format!("/proc/{pid}")).exists())
            {
                if Instant::now() > deadline {
                    return Err(io::Error::other(
                        "a killed postmaster's children did not exit in 60 s",
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            std::fs::remove_dir_all(self.data(node))?;
            self.clone_from_primary(node)?;
        }
        self.start_node(node)?;
        self.await_standbys()
    }

    /// A planned switchover to `to`: the primary is shut down cleanly
    /// (its last WAL streams to the standbys), `to` is promoted, and the
    /// old primary comes back as a standby of it.
    pub fn switchover(&mut self, to: usize) -> io::Result<()> {
        let old = self.primary;
        self.stop_node(old, "fast")?;
        self.promote(to)?;
        self.rejoin(old, true)
    }

    fn clone_from_primary(&self, node: usize) -> io::Result<()> {
        run(self
            .pg("pg_basebackup")
            .args(["-h", &self.nodes[self.primary].host])
            .args(["-p", &self.nodes[self.primary].port.to_string()])
            // A fast checkpoint: a spread one can keep the clone waiting.
            .args(["-U", "postgres", "-R", "-X", "stream", "-c", "fast", "-D"])
            .arg(self.data(node)))?;
        // Each standby names itself to the primary.
        let auto = self.data(node).join("postgresql.auto.conf");
        let text = std::fs::read_to_string(&auto)?;
        let text = text.replace(
            "primary_conninfo = '",
            &format!(
                "primary_conninfo = 'application_name={} ",
                self.nodes[node].name
            ),
        );
        std::fs::write(&auto, text)
    }

    /// Waits until every other running node streams from the primary; in
    /// synchronous mode, then makes the primary wait for one of them.
    fn await_standbys(&self) -> io::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let want = self.nodes.len() - 1;
        loop {
            let streaming = self.sql(
                self.primary,
                "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'",
            )?;
            if streaming.trim().parse::<usize>().unwrap_or(0) >= want {
                break;
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "only {} of {want} standbys streaming",
                    streaming.trim()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if self.synchronous {
            self.set_synchronous(self.primary, "*")?;
        }
        Ok(())
    }

    /// `synchronous_standby_names` on `node`, applied now.
    fn set_synchronous(&self, node: usize, names: &str) -> io::Result<()> {
        self.sql(
            node,
            &format!("ALTER SYSTEM SET synchronous_standby_names = '{names}'"),
        )?;
        self.sql(node, "SELECT pg_reload_conf()").map(drop)
    }

    /// Runs `sql` (one statement) on `node` with `psql`; its unaligned output.
    pub fn sql(&self, node: usize, sql: &str) -> io::Result<String> {
        let out = self
            .pg("psql")
            .args(["-h", &self.nodes[node].host])
            .args(["-p", &self.nodes[node].port.to_string()])
            .args([
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-XAtq",
                "-v",
                "ON_ERROR_STOP=1",
            ])
            .args(["-c", sql])
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "psql on {}: {}",
                self.nodes[node].name,
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in 0..self.nodes.len() {
            let _ = self
                .pg("pg_ctl")
                .arg("-D")
                .arg(self.data(node))
                .args(["-m", "immediate", "-w", "stop"])
                .output();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn run(cmd: &mut Command) -> io::Result<()> {
    let out = cmd.output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{cmd:?} failed: {}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        )))
    }
}
