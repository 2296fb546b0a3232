//! Watchers: each follows one session through its bursts, every stream on
//! a random replica, reconnecting from its last seq after any end that is
//! not OK. Every stream is recorded (its range, every turn it received,
//! how it ended), and right after an OK end the watcher asks GetSession
//! what the session's status is, so the checker can tell whether the
//! stream ended while the burst was still going.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use inquest_proto::v1 as pb;
use tokio::time::Instant;

use super::{
    Rng,
    directory::Directory,
    now,
    workload::{Tracked, transient},
};

/// How a stream ended.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// The server ended it with OK.
    Ok,
    /// With this status (or the connection failed with it).
    Status(tonic::Code, String),
    /// Nothing arrived for [`IDLE`] (heartbeats come every second while a
    /// session runs): the watcher gave up on it.
    Idle,
}

/// One `WatchSession` stream.
#[derive(Debug, Clone)]
pub struct Stream {
    pub session: usize,
    pub replica: String,
    pub after_seq: i64,
    pub started: f64,
    pub ended: f64,
    pub turns: Vec<pb::SessionTurn>,
    pub tool_starts: usize,
    pub end: End,
    /// After an OK end: the replica asked, the status and head it gave.
    pub status_after: Option<(String, pb::SessionStatus, i64)>,
}

pub type Streams = Arc<Mutex<Vec<Stream>>>;

/// A stream silent this long is abandoned (and the watcher reconnects).
pub const IDLE: Duration = Duration::from_secs(10);

/// Follows `t` from `start_after` (0, or the head when it begins) until
/// the workload is done with the session and one last stream ended OK,
/// or `deadline`.
pub async fn follow(
    t: Arc<Tracked>,
    dir: Arc<Directory>,
    streams: Streams,
    delay: Duration,
    deadline: Instant,
    mut rng: Rng,
) {
    tokio::time::sleep(delay).await;
    let id = loop {
        if let Some(id) = t.id.get() {
            break id.clone();
        }
        if t.is_done() || Instant::now() > deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut last = if rng.chance(0.5) {
        0
    } else {
        head(&dir, &mut rng, &id).await.unwrap_or(0)
    };
    while Instant::now() < deadline {
        let done_before = t.is_done();
        let stream = watch_once(&dir, &mut rng, t.index, &id, last, deadline).await;
        if let Some(turn) = stream.turns.last() {
            last = turn.seq;
        }
        let ok = stream.end == End::Ok;
        let received = !stream.turns.is_empty();
        lock(&streams).push(stream);
        if ok && done_before {
            return;
        }
        let pause = match (ok, received) {
            (true, false) => rng.pause(0.3, 0.8),
            _ => rng.pause(0.05, 0.4),
        };
        tokio::time::sleep(pause).await;
    }
}

fn lock(streams: &Streams) -> std::sync::MutexGuard<'_, Vec<Stream>> {
    streams.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn head(dir: &Directory, rng: &mut Rng, id: &str) -> Option<i64> {
    for _ in 0..5 {
        let (_, mut c) = dir.unary(rng);
        let request = pb::GetSessionRequest {
            session_id: id.to_owned(),
        };
        if let Ok(s) = c.get_session(request).await {
            return Some(s.into_inner().head_seq);
        }
    }
    None
}

/// One stream from `after_seq` on a random replica, to its end (or to
/// `deadline`).
async fn watch_once(
    dir: &Directory,
    rng: &mut Rng,
    session: usize,
    id: &str,
    after_seq: i64,
    deadline: Instant,
) -> Stream {
    let (replica, mut client) = dir.watch(rng);
    let mut stream = Stream {
        session,
        replica: replica.clone(),
        after_seq,
        started: now(),
        ended: 0.0,
        turns: Vec::new(),
        tool_starts: 0,
        end: End::Ok,
        status_after: None,
    };
    let request = pb::WatchSessionRequest {
        session_id: id.to_owned(),
        after_seq,
        after_committed_at: None,
    };
    let opened = tokio::time::timeout(IDLE, client.watch_session(request)).await;
    let mut events = match opened {
        Ok(Ok(r)) => r.into_inner(),
        Ok(Err(s)) => {
            stream.end = End::Status(s.code(), s.message().to_owned());
            stream.ended = now();
            return stream;
        }
        Err(_) => {
            stream.end = End::Idle;
            stream.ended = now();
            return stream;
        }
    };
    stream.end = loop {
        // Silent for IDLE, or still open at the watcher's deadline (a
        // session that never settles): given up on.
        let until = deadline.min(Instant::now() + IDLE);
        match tokio::time::timeout_at(until, events.message()).await {
            Err(_) => break End::Idle,
            Ok(Ok(None)) => break End::Ok,
            Ok(Err(s)) => break End::Status(s.code(), s.message().to_owned()),
            Ok(Ok(Some(event))) => match event.event {
                Some(pb::watch_event::Event::Turn(turn)) => stream.turns.push(turn),
                Some(pb::watch_event::Event::ToolCallStart(_)) => stream.tool_starts += 1,
                _ => {}
            },
        }
    };
    stream.ended = now();
    if stream.end == End::Ok {
        stream.status_after = status_after(dir, rng, &replica, id).await;
    }
    stream
}

/// GetSession right after an OK end: on the same replica first, else on
/// any.
async fn status_after(
    dir: &Directory,
    rng: &mut Rng,
    replica: &str,
    id: &str,
) -> Option<(String, pb::SessionStatus, i64)> {
    let request = pb::GetSessionRequest {
        session_id: id.to_owned(),
    };
    if let Some(mut c) = dir.unary_on(replica)
        && let Ok(s) = c.get_session(request.clone()).await
    {
        let s = s.into_inner();
        return Some((replica.to_owned(), s.status(), s.head_seq));
    }
    for _ in 0..10 {
        let (name, mut c) = dir.unary(rng);
        match c.get_session(request.clone()).await {
            Ok(s) => {
                let s = s.into_inner();
                return Some((name, s.status(), s.head_seq));
            }
            Err(s) if transient(&s) => tokio::time::sleep(Duration::from_millis(200)).await,
            Err(_) => return None,
        }
    }
    None
}
