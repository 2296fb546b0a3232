//! The MCP server's execution log (`chaos_tools.py`): one `start` line
//! per tool execution with its idempotency key, and an `end` line when it
//! finished or was cancelled.

use std::{
    collections::{HashMap, HashSet},
    path::Path,
};

use serde_json::Value;

use super::replicas::History;

/// One tool execution as the MCP server saw it.
#[derive(Debug, Clone)]
pub struct Execution {
    /// `inquest/idempotency_key` from the request's `_meta` (empty when
    /// the request carried none).
    pub key: String,
    pub tool: String,
    pub mutating: bool,
    /// The `service` argument: the action, unique within a session.
    pub service: String,
    /// The replica process that called the tool (the MCP server's parent).
    pub ppid: u32,
    pub started: f64,
    /// `None` while it runs, or when its server died first.
    pub ended: Option<f64>,
}

impl Execution {
    /// The session and call id inside the key (`inquest:<session>:<call>`).
    pub fn session_and_call(&self) -> Option<(&str, &str)> {
        self.key.strip_prefix("inquest:")?.split_once(':')
    }
}

/// Reads the log; a line that does not parse is reported, not skipped.
pub fn read(path: &Path) -> (Vec<Execution>, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut executions: Vec<(String, Execution)> = Vec::new();
    let mut problems = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            problems.push(format!("execution log: unreadable line {line:?}"));
            continue;
        };
        let id = v["execution"].as_str().unwrap_or_default().to_owned();
        match v["event"].as_str() {
            Some("start") => executions.push((
                id,
                Execution {
                    key: v["key"].as_str().unwrap_or_default().to_owned(),
                    tool: v["tool"].as_str().unwrap_or_default().to_owned(),
                    mutating: v["mutating"].as_bool().unwrap_or(true),
                    service: v["arguments"]["service"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    ppid: v["ppid"]
                        .as_u64()
                        .and_then(|p| u32::try_from(p).ok())
                        .unwrap_or(0),
                    started: v["t"].as_f64().unwrap_or(0.0),
                    ended: None,
                },
            )),
            Some("end") => {
                if let Some((_, e)) = executions.iter_mut().rev().find(|(x, _)| *x == id) {
                    e.ended = v["t"].as_f64();
                }
            }
            _ => problems.push(format!("execution log: unknown event {line:?}")),
        }
    }
    (executions.into_iter().map(|(_, e)| e).collect(), problems)
}

/// The replica processes (by pid) running a tool right now.
pub fn running_callers(path: &Path) -> Vec<u32> {
    read(path)
        .0
        .into_iter()
        .filter(|e| e.ended.is_none())
        .map(|e| e.ppid)
        .collect()
}

/// Ends the MCP servers this test started that are still alive (a server
/// whose replica was killed may outlive it): each pid from the pid log
/// whose command line names `script`.
pub fn end_servers(pid_log: &Path, script: &Path) {
    let text = std::fs::read_to_string(pid_log).unwrap_or_default();
    let script = script.display().to_string();
    for pid in text.lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&script) {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// What the execution log must show (see the checker): every execution
/// carries an idempotency key naming a stored call; a mutating call (by
/// key) and a mutating action (the model asking for the same restart
/// again) ran at most once, plus once per human confirmation of the
/// session; no two replica processes ran tools for one session at once,
/// unless the earlier one was dead or stopped by then (a killed or
/// stopped process cannot cancel its tool); a partitioned replica started
/// no tool later than one TTL into the partition; every mutating call that
/// ran was approved by a human (`decisions`: per session, call id →
/// approved), and no denied one ran.
pub fn check(
    e: &super::checker::Evidence<'_>,
    confirmations: &HashMap<&str, u32>,
    decisions: &HashMap<&str, HashMap<String, bool>>,
    v: &mut Vec<String>,
) {
    let stored_calls: HashMap<&str, HashSet<&str>> = e
        .finals
        .iter()
        .map(|f| {
            let calls = f
                .turns
                .iter()
                .flat_map(|t| t.tool_calls.iter().map(|c| c.id.as_str()))
                .collect();
            (f.id.as_str(), calls)
        })
        .collect();
    let mut by_key: HashMap<&str, u32> = HashMap::new();
    let mut by_action: HashMap<(&str, &str), u32> = HashMap::new();
    let mut by_session: HashMap<&str, Vec<&Execution>> = HashMap::new();
    for x in e.executions {
        let Some((session, call)) = x.session_and_call() else {
            v.push(format!(
                "{} {:?} ran without an inquest idempotency key (key {:?})",
                x.tool, x.service, x.key
            ));
            continue;
        };
        if !stored_calls.get(session).is_some_and(|c| c.contains(call)) {
            v.push(format!(
                "{session}: {} {:?} ran for call {call}, which no stored assistant turn holds",
                x.tool, x.service
            ));
        }
        if x.mutating {
            match decisions.get(session).and_then(|d| d.get(call)) {
                Some(true) => {}
                Some(false) => v.push(format!(
                    "{session}: {} {:?} ran for call {call}, which a human denied",
                    x.tool, x.service
                )),
                None => v.push(format!(
                    "{session}: mutating {} {:?} ran for call {call} without an approval",
                    x.tool, x.service
                )),
            }
            *by_key.entry(x.key.as_str()).or_default() += 1;
            *by_action.entry((session, x.service.as_str())).or_default() += 1;
        }
        by_session.entry(session).or_default().push(x);
    }
    let allowed = |session: &str| 1 + confirmations.get(session).copied().unwrap_or(0);
    for (key, n) in &by_key {
        let session = key.split(':').nth(1).unwrap_or_default();
        if *n > allowed(session) {
            v.push(format!(
                "mutating call {key} executed {n} times with {} confirmation(s)",
                allowed(session) - 1
            ));
        }
    }
    for ((session, action), n) in &by_action {
        if *n > allowed(session) {
            v.push(format!(
                "{session}: restart {action:?} executed {n} times with {} confirmation(s): a \
                 cut-off mutating call was re-run without a human's go-ahead",
                allowed(session) - 1
            ));
        }
    }
    for (session, runs) in &by_session {
        check_overlaps(session, runs, e.history, v);
    }
    for (pid, from, to) in &e.history.partitions {
        for x in e.executions.iter().filter(|x| x.ppid == *pid) {
            if x.started > from + e.ttl && x.started < *to {
                v.push(format!(
                    "partitioned replica (pid {pid}) started {} {:?} {:.1} s into a {:.1} s \
                     partition, past its lease TTL",
                    x.tool,
                    x.service,
                    x.started - from,
                    to - from
                ));
            }
        }
    }
}

fn check_overlaps(session: &str, runs: &[&Execution], h: &History, v: &mut Vec<String>) {
    let dead_by = |pid: u32, at: f64| {
        h.generations
            .iter()
            .any(|g| g.pid == pid && g.ended.as_ref().is_some_and(|(t, _)| *t <= at))
    };
    let stopped_between = |pid: u32, from: f64, to: f64| {
        h.stops
            .iter()
            .any(|(p, a, b)| *p == pid && *a < to && *b > from)
    };
    for a in runs {
        for b in runs {
            let overlaps = a.ppid != b.ppid
                && a.started <= b.started
                && a.ended.is_none_or(|end| b.started < end);
            if overlaps
                && !dead_by(a.ppid, b.started)
                && !stopped_between(a.ppid, a.started, b.started)
            {
                v.push(format!(
                    "{session}: two replicas ran its tools at once: pid {} ran {} {:?} from \
                     {:.1} (ended {:?}) while pid {} started {} {:?} at {:.1}",
                    a.ppid,
                    a.tool,
                    a.service,
                    a.started,
                    a.ended,
                    b.ppid,
                    b.tool,
                    b.service,
                    b.started
                ));
            }
        }
    }
}
