//! The `inquest` CLI run as a process by the process tests: one command
//! to its end ([`inquest`], [`Run`]'s checks of its exit code and plain
//! output), or a long-running one whose stdout is collected as it comes
//! ([`Cli`], e.g. `inquest watch`).

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use super::{Server, crash::GUARD};

/// What a CLI run left.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Exit 0, no escape code in either stream.
    pub fn ok(self, what: &str) -> Run {
        assert_eq!(
            self.code,
            Some(0),
            "{what}: {}\n{}",
            self.stdout,
            self.stderr
        );
        self.plain(what)
    }

    /// Exit 1 (an error, said on stderr; nothing on stdout).
    pub fn failed(self, what: &str) -> Run {
        assert_eq!(
            self.code,
            Some(1),
            "{what}: {}\n{}",
            self.stdout,
            self.stderr
        );
        assert!(
            self.stderr.starts_with("error: "),
            "{what}: errors go to stderr: {}",
            self.stderr
        );
        assert_eq!(
            self.stdout, "",
            "{what}: a failure prints nothing on stdout"
        );
        self.plain(what)
    }

    pub fn plain(self, what: &str) -> Run {
        for (name, text) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            assert!(
                !text.contains('\x1b'),
                "{what}: an escape code in {name} though it is a pipe: {text:?}"
            );
        }
        self
    }
}

/// Runs `inquest ARGS` with `env`, stdout and stderr piped (not a
/// terminal), `NO_COLOR` unset: what it writes must be plain anyway.
pub async fn inquest(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_inquest"));
    command
        .args(args)
        .env_remove("NO_COLOR")
        .env_remove("INQUEST_TOKEN")
        .env_remove("INQUEST_SERVER")
        .env_remove("DATABASE_URL")
        .env_remove("INQUEST_DATABASE_URL")
        .env_remove("INQUEST_DATA_DIR")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for (k, v) in env {
        command.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .unwrap_or_else(|_| panic!("inquest {args:?} hung"))
        .unwrap();
    let run = Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    eprintln!(
        "$ inquest {}\n[rc {:?}]\n{}{}",
        args.join(" "),
        run.code,
        run.stdout,
        run.stderr
    );
    run
}

/// A CLI process (`inquest watch`) whose stdout lines are collected.
pub struct Cli {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Cli {
    pub fn start(server: &Server, args: &[&str]) -> Cli {
        let mut child = Command::new(env!("CARGO_BIN_EXE_inquest"))
            .args(args)
            .args(["--server", &format!("http://127.0.0.1:{}", server.port)])
            .env_remove("INQUEST_SERVER")
            .env_remove("INQUEST_TOKEN")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                eprintln!("[watch] {line}");
                sink.lock().unwrap().push(line);
            }
        });
        Cli { child, lines }
    }

    pub fn output(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    pub fn count(&self, needle: &str) -> usize {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }

    /// Waits (at most [`GUARD`]) until `n` lines contain `needle`.
    pub async fn wait_for(&self, needle: &str, n: usize) {
        let deadline = tokio::time::Instant::now() + GUARD;
        while self.count(needle) < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "watch never printed {needle:?} {n} times:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits (at most [`GUARD`]) for the process to exit.
    pub async fn exit(&mut self) -> ExitStatus {
        let deadline = tokio::time::Instant::now() + GUARD;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the reader thread drain the pipe.
                tokio::time::sleep(Duration::from_millis(50)).await;
                return status;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "watch did not exit:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Cli {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `inquest ARGS --server <server>` to its end; it must exit 0 and
/// write plain text. Returns its stdout.
pub async fn inquest_on(server: &Server, args: &[&str]) -> String {
    let at = format!("http://127.0.0.1:{}", server.port);
    let mut all = args.to_vec();
    all.extend(["--server", &at]);
    inquest(&all, &[])
        .await
        .ok(&format!("inquest {args:?}"))
        .stdout
}
