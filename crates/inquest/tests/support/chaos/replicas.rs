//! The three `inquest serve` processes and the history of what was done
//! to them.
//!
//! [`Fleet`] owns the processes (only the fault task touches it) and
//! keeps the shared [`Directory`] of who is up current; [`History`]
//! records every process generation and every stop and partition window
//! for the checker. A replica keeps its name across restarts, as a pod of
//! a StatefulSet does. Each generation logs to its own file.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio::process::{Child, Command};

use super::{directory::Directory, now};

/// One process a replica ran as.
#[derive(Debug, Clone)]
pub struct Generation {
    pub replica: String,
    pub pid: u32,
    pub started: f64,
    /// When it was killed or exited, and how.
    pub ended: Option<(f64, String)>,
}

/// What was done to the replicas, for the checker.
#[derive(Debug, Default, Clone)]
pub struct History {
    pub generations: Vec<Generation>,
    /// (pid, from, to): SIGSTOP .. SIGCONT.
    pub stops: Vec<(u32, f64, f64)>,
    /// (pid, from, to): link down .. up.
    pub partitions: Vec<(u32, f64, f64)>,
    /// Things that went wrong with the processes themselves (a replica
    /// that did not exit 0 after SIGTERM).
    pub problems: Vec<String>,
}

/// How a replica is started: its name, address, config, database URL and
/// an optional prefix (`ip netns exec NAME`).
pub struct Spec {
    pub name: String,
    pub listen: SocketAddr,
    pub config: PathBuf,
    pub database_url: String,
    pub prefix: Vec<String>,
}

struct Replica {
    spec: Spec,
    child: Option<Child>,
    pid: u32,
    generation: u32,
}

/// The replica processes. Dropping it kills any still running (after a
/// SIGCONT, in case one is stopped).
pub struct Fleet {
    replicas: Vec<Replica>,
    logs: PathBuf,
    pub directory: Arc<Directory>,
    pub history: Arc<Mutex<History>>,
}

impl Fleet {
    pub fn new(specs: Vec<Spec>, logs: &Path) -> Fleet {
        let addrs: Vec<(String, SocketAddr)> =
            specs.iter().map(|s| (s.name.clone(), s.listen)).collect();
        Fleet {
            replicas: specs
                .into_iter()
                .map(|spec| Replica {
                    spec,
                    child: None,
                    pid: 0,
                    generation: 0,
                })
                .collect(),
            logs: logs.to_owned(),
            directory: Arc::new(Directory::new(&addrs)),
            history: Arc::new(Mutex::new(History::default())),
        }
    }

    pub fn len(&self) -> usize {
        self.replicas.len()
    }

    pub fn name(&self, i: usize) -> &str {
        &self.replicas[i].spec.name
    }

    /// The pid of replica `i`'s current process, if it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.replicas[i]
            .child
            .as_ref()
            .map(|_| self.replicas[i].pid)
    }

    pub fn index_of_pid(&self, pid: u32) -> Option<usize> {
        (0..self.len()).find(|i| self.pid(*i) == Some(pid))
    }

    fn history(&self) -> std::sync::MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts every replica at once and waits until all serve.
    pub async fn start_all(&mut self) -> Result<(), String> {
        for i in 0..self.len() {
            self.spawn(i)?;
        }
        for i in 0..self.len() {
            self.wait_ready(i).await?;
        }
        Ok(())
    }

    /// Starts replica `i` (it must not be running) and waits until it
    /// serves.
    pub async fn restart(&mut self, i: usize) -> Result<(), String> {
        self.spawn(i)?;
        self.wait_ready(i).await
    }

    fn spawn(&mut self, i: usize) -> Result<(), String> {
        let r = &mut self.replicas[i];
        r.generation += 1;
        let log = self
            .logs
            .join(format!("{}.{}.log", r.spec.name, r.generation));
        let file = std::fs::File::create(&log).map_err(|e| format!("creating {log:?}: {e}"))?;
        let err = file.try_clone().map_err(|e| format!("log file: {e}"))?;
        let bin = env!("CARGO_BIN_EXE_inquest");
        let mut cmd = match r.spec.prefix.split_first() {
            None => Command::new(bin),
            Some(_) => {
                let mut c = Command::new("ip");
                c.args(&r.spec.prefix).arg(bin);
                c
            }
        };
        // One replica listens on its network namespace's address: a test
        // cluster with no tokens, so say so.
        cmd.args([
            "serve",
            "--insecure-no-auth",
            "--listen",
            &r.spec.listen.to_string(),
            "--config",
        ])
        .arg(&r.spec.config)
        .args(["--database-url", &r.spec.database_url])
        .env_remove("DATABASE_URL")
        .env_remove("INQUEST_DATABASE_URL")
        .env_remove("INQUEST_FAILPOINTS")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("all_proxy")
        .env("INQUEST_REPLICA_ID", &r.spec.name)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::from(file))
        .stderr(Stdio::from(err));
        let child = cmd
            .spawn()
            .map_err(|e| format!("starting {}: {e}", r.spec.name))?;
        // `ip netns exec` execs the program in place: the pid is the
        // server's.
        r.pid = child.id().ok_or("a just-started child has no pid")?;
        r.child = Some(child);
        let generation = Generation {
            replica: r.spec.name.clone(),
            pid: r.pid,
            started: now(),
            ended: None,
        };
        self.history().generations.push(generation);
        Ok(())
    }

    fn log_path(&self, i: usize) -> PathBuf {
        let r = &self.replicas[i];
        self.logs
            .join(format!("{}.{}.log", r.spec.name, r.generation))
    }

    async fn wait_ready(&mut self, i: usize) -> Result<(), String> {
        let log = self.log_path(i);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        loop {
            let serving = std::fs::read_to_string(&log)
                .is_ok_and(|l| l.contains("serving inquest.v1.Investigations"));
            let listen = self.replicas[i].spec.listen;
            if serving && tokio::net::TcpStream::connect(listen).await.is_ok() {
                self.directory.set_up(self.name(i), true);
                return Ok(());
            }
            let r = &mut self.replicas[i];
            if let Some(child) = r.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                r.child = None;
                return Err(format!(
                    "{} exited before serving ({status}); see {}",
                    r.spec.name,
                    log.display()
                ));
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!(
                    "{} did not serve within 90 s; see {}",
                    r.spec.name,
                    log.display()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn ended(&mut self, pid: u32, how: String) {
        let mut h = self.history();
        if let Some(g) = h.generations.iter_mut().rev().find(|g| g.pid == pid) {
            g.ended = Some((now(), how));
        }
    }

    /// Sends `signal` to replica `i`'s process.
    fn signal(&self, i: usize, signal: &str) -> Result<(), String> {
        let pid = self
            .pid(i)
            .ok_or_else(|| format!("{} is not running", self.name(i)))?;
        let status = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .map_err(|e| format!("kill -{signal}: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("kill -{signal} {pid} failed"))
        }
    }

    /// kill -9, then reaps the process.
    pub async fn kill9(&mut self, i: usize) -> Result<(), String> {
        self.directory.set_up(self.name(i), false);
        self.signal(i, "KILL")?;
        let pid = self.replicas[i].pid;
        self.ended(pid, "kill -9".into());
        if let Some(mut child) = self.replicas[i].child.take() {
            let _ = child.wait().await;
        }
        Ok(())
    }

    /// SIGTERM, then waits for the exit (grace + 60 s at most); a status
    /// other than 0 is recorded as a problem.
    pub async fn sigterm(&mut self, i: usize, grace: Duration) -> Result<(), String> {
        self.directory.set_up(self.name(i), false);
        self.signal(i, "TERM")?;
        let pid = self.replicas[i].pid;
        let name = self.name(i).to_owned();
        let Some(mut child) = self.replicas[i].child.take() else {
            return Ok(());
        };
        let waited = tokio::time::timeout(grace + Duration::from_secs(60), child.wait()).await;
        let how = match waited {
            Ok(Ok(status)) if status.success() => "SIGTERM, exit 0".to_owned(),
            Ok(Ok(status)) => {
                let p = format!("{name} (pid {pid}) exited with {status} after SIGTERM");
                self.history().problems.push(p.clone());
                p
            }
            Ok(Err(e)) => format!("SIGTERM, wait failed: {e}"),
            Err(_) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                let p = format!("{name} (pid {pid}) did not exit within grace + 60 s of SIGTERM");
                self.history().problems.push(p.clone());
                p
            }
        };
        self.ended(pid, how);
        Ok(())
    }

    /// SIGSTOP for `pause`, then SIGCONT.
    pub async fn pause(&mut self, i: usize, pause: Duration) -> Result<(), String> {
        self.directory.set_up(self.name(i), false);
        self.signal(i, "STOP")?;
        let from = now();
        tokio::time::sleep(pause).await;
        self.signal(i, "CONT")?;
        let pid = self.replicas[i].pid;
        self.history().stops.push((pid, from, now()));
        self.directory.set_up(self.name(i), true);
        Ok(())
    }

    /// SIGTERM to every replica still running; each must exit 0.
    pub async fn stop_all(&mut self, grace: Duration) {
        for i in 0..self.len() {
            if self.pid(i).is_some() {
                let _ = self.sigterm(i, grace).await;
            }
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for r in &mut self.replicas {
            if let Some(child) = r.child.as_mut() {
                let pid = r.pid.to_string();
                let _ = std::process::Command::new("kill")
                    .args(["-CONT", &pid])
                    .status();
                let _ = child.start_kill();
            }
        }
    }
}
