//! The checker checked: small made-up evidence for each rule, so a run
//! that reports no violations means the rules held, not that the checker
//! looked away. These run in the chaos test binary in milliseconds.

use std::sync::Arc;

use inquest_proto::v1 as pb;

use super::{
    checker::{Evidence, Final, check},
    executions::Execution,
    replicas::{Generation, History},
    watchers::{End, Stream},
    workload::{Reopen, Tracked},
};

const ID: &str = "0190c0de-0000-7000-8000-000000000001";

fn turn(seq: i64, role: pb::TurnRole) -> pb::SessionTurn {
    pb::SessionTurn {
        session_id: ID.into(),
        seq,
        role: role.into(),
        content: format!("turn {seq}"),
        ..Default::default()
    }
}

fn call(seq: i64, id: &str) -> pb::SessionTurn {
    let mut t = turn(seq, pb::TurnRole::Assistant);
    t.tool_calls.push(pb::ToolCall {
        id: id.into(),
        name: "restart_service".into(),
        arguments_json: "{}".into(),
    });
    t
}

fn result(seq: i64, id: &str) -> pb::SessionTurn {
    let mut t = turn(seq, pb::TurnRole::Tool);
    t.tool_call_id = id.into();
    t.tool_name = "restart_service".into();
    t
}

/// user, a call, its result, the final answer.
fn good_turns() -> Vec<pb::SessionTurn> {
    vec![
        turn(1, pb::TurnRole::User),
        call(2, "c1"),
        result(3, "c1"),
        turn(4, pb::TurnRole::Assistant),
    ]
}

fn session(turns: &[pb::SessionTurn], status: pb::SessionStatus) -> Final {
    Final {
        index: 0,
        id: ID.into(),
        session: pb::Session {
            id: ID.into(),
            status: status.into(),
            head_seq: turns.last().map_or(0, |t| t.seq),
            ..Default::default()
        },
        turns: turns.to_vec(),
    }
}

fn stream(after_seq: i64, seqs: &[i64], end: End, after: Option<pb::SessionStatus>) -> Stream {
    let all = good_turns();
    Stream {
        session: 0,
        replica: "replica-a".into(),
        after_seq,
        started: 100.0,
        ended: 101.0,
        turns: seqs
            .iter()
            .filter_map(|s| all.get(usize::try_from(*s - 1).ok()?).cloned())
            .collect(),
        tool_starts: 0,
        end,
        status_after: after.map(|s| ("replica-a".into(), s, seqs.last().copied().unwrap_or(0))),
    }
}

fn execution(ppid: u32, call: &str, started: f64, ended: Option<f64>) -> Execution {
    Execution {
        key: format!("inquest:{ID}:{call}"),
        tool: "restart_service".into(),
        mutating: true,
        service: format!("svc-{call}"),
        ppid,
        started,
        ended,
    }
}

struct Case {
    finals: Vec<Final>,
    tracked: Vec<Arc<Tracked>>,
    streams: Vec<Stream>,
    executions: Vec<Execution>,
    history: History,
}

impl Case {
    fn new(turns: &[pb::SessionTurn]) -> Case {
        let tracked = Arc::new(Tracked::new(0));
        let _ = tracked.id.set(ID.into());
        // The good case's mutating call was approved by a human.
        tracked.log().decisions.insert("c1".into(), true);
        Case {
            finals: vec![session(turns, pb::SessionStatus::Completed)],
            tracked: vec![tracked],
            streams: Vec::new(),
            executions: Vec::new(),
            history: History::default(),
        }
    }

    fn violations(&self) -> Vec<String> {
        check(&Evidence {
            finals: &self.finals,
            tracked: &self.tracked,
            streams: &self.streams,
            executions: &self.executions,
            history: &self.history,
            rejections: &[],
            ttl: 3.0,
            now: 1000.0,
        })
    }
}

fn assert_flags(case: &Case, needle: &str) {
    let v = case.violations();
    assert!(
        v.iter().any(|v| v.contains(needle)),
        "expected a violation containing {needle:?}, got {v:#?}"
    );
}

#[test]
fn a_clean_session_has_no_violations() {
    let mut case = Case::new(&good_turns());
    case.streams.push(stream(
        0,
        &[1, 2, 3, 4],
        End::Ok,
        Some(pb::SessionStatus::Completed),
    ));
    case.streams.push(stream(
        1,
        &[2],
        End::Status(tonic::Code::Aborted, "lagged".into()),
        None,
    ));
    case.executions.push(execution(7, "c1", 10.0, Some(11.0)));
    assert_eq!(case.violations(), Vec::<String>::new());
}

#[test]
fn gaps_unanswered_calls_and_bad_ends_are_flagged() {
    let mut gap = good_turns();
    gap.remove(2);
    assert_flags(&Case::new(&gap), "gap or duplicate");

    let unanswered = vec![turn(1, pb::TurnRole::User), call(2, "c1"), call(3, "c2")];
    assert_flags(
        &Case::new(&unanswered),
        "have neither a result nor a repair",
    );

    let mut cut_off = good_turns();
    cut_off[2].content =
        "the server shut down while this tool was running; it may have partly run".into();
    assert_flags(
        &Case::new(&cut_off),
        "instead of leaving it to the recovery plan",
    );

    let mut failed = Case::new(&good_turns());
    failed.finals[0].session.status = pb::SessionStatus::Failed.into();
    assert_flags(&failed, "FAILED at the end");

    let mut running = Case::new(&good_turns());
    running.finals[0].session.status = pb::SessionStatus::Running.into();
    assert_flags(&running, "still Running");
}

#[test]
fn watch_streams_must_match_the_store_and_end_ok_only_when_settled() {
    let mut dup = Case::new(&good_turns());
    dup.streams.push(stream(0, &[1, 2, 2], End::Idle, None));
    assert_flags(&dup, "gap, duplicate or reorder");

    let mut changed = Case::new(&good_turns());
    let mut s = stream(0, &[1], End::Idle, None);
    s.turns[0].content = "something else".into();
    changed.streams.push(s);
    assert_flags(&changed, "differs from the stored turn");

    let mut early = Case::new(&good_turns());
    early.streams.push(stream(
        0,
        &[1, 2],
        End::Ok,
        Some(pb::SessionStatus::Running),
    ));
    assert_flags(&early, "ended OK at seq 2");

    // The same early end is fine when a follow-up at that head raced it.
    let mut raced = Case::new(&good_turns());
    raced.streams.push(stream(
        0,
        &[1, 2],
        End::Ok,
        Some(pb::SessionStatus::Running),
    ));
    raced.tracked[0].log().reopens.push(Reopen {
        kind: "send",
        head_before: 2,
        sent: 100.5,
        returned: 100.6,
    });
    assert_eq!(raced.violations(), Vec::<String>::new());

    // And when a typed-ahead message raced it, with only the results of
    // the calls it superseded between that head and the message.
    let overlap = |head_before: i64| {
        let mut case = Case::new(&good_turns());
        case.streams.push(stream(
            0,
            &[1, 2],
            End::Ok,
            Some(pb::SessionStatus::Running),
        ));
        case.tracked[0].log().reopens.push(Reopen {
            kind: "overlap",
            head_before,
            sent: 100.5,
            returned: 100.6,
        });
        case
    };
    assert_eq!(overlap(3).violations(), Vec::<String>::new());
    // An answer in between: the session had not settled at seq 2.
    assert_flags(&overlap(4), "ended OK at seq 2");
}

#[test]
fn repeated_and_concurrent_executions_are_flagged() {
    let mut twice = Case::new(&good_turns());
    twice.executions.push(execution(7, "c1", 10.0, Some(11.0)));
    twice.executions.push(execution(7, "c1", 20.0, Some(21.0)));
    assert_flags(&twice, "executed 2 times with 0 confirmation(s)");
    twice.tracked[0].log().confirmations = 1;
    assert_eq!(twice.violations(), Vec::<String>::new());

    let mut unknown = Case::new(&good_turns());
    unknown
        .executions
        .push(execution(7, "c9", 10.0, Some(11.0)));
    assert_flags(&unknown, "which no stored assistant turn holds");

    let mut both = Case::new(&good_turns());
    both.executions.push(execution(7, "c1", 10.0, Some(14.0)));
    let mut other = execution(8, "c1", 12.0, Some(13.0));
    other.service = "svc-other".into();
    both.executions.push(other);
    both.tracked[0].log().confirmations = 1;
    assert_flags(&both, "two replicas ran its tools at once");
    // Not when the first replica was stopped meanwhile (it cannot cancel).
    both.history.stops.push((7, 10.5, 12.5));
    assert_eq!(both.violations(), Vec::<String>::new());
    both.history.stops.clear();
    both.history.generations.push(Generation {
        replica: "replica-a".into(),
        pid: 7,
        started: 0.0,
        ended: Some((11.0, "kill -9".into())),
    });
    assert_eq!(both.violations(), Vec::<String>::new());

    let mut partitioned = Case::new(&good_turns());
    partitioned
        .executions
        .push(execution(7, "c1", 14.0, Some(15.0)));
    partitioned.history.partitions.push((7, 10.0, 16.0));
    assert_flags(&partitioned, "past its lease TTL");
}

#[test]
fn a_mutating_call_without_an_approval_or_against_a_denial_is_flagged() {
    let mut unapproved = Case::new(&good_turns());
    unapproved.tracked[0].log().decisions.clear();
    unapproved
        .executions
        .push(execution(7, "c1", 10.0, Some(11.0)));
    assert_flags(&unapproved, "without an approval");

    let mut denied = Case::new(&good_turns());
    denied.tracked[0].log().decisions.insert("c1".into(), false);
    denied.executions.push(execution(7, "c1", 10.0, Some(11.0)));
    assert_flags(&denied, "which a human denied");
}

fn said(seq: i64, role: pb::TurnRole, content: &str) -> pb::SessionTurn {
    pb::SessionTurn {
        content: content.into(),
        ..turn(seq, role)
    }
}

/// Messages 0 and 1 of session 0, each answered; message 1 was queued
/// while message 0's burst ran, and interrupted it after its first step.
fn conversation() -> Vec<pb::SessionTurn> {
    let mut step = call(2, "c1");
    step.content = "Step 0 of message 0: checking.".into();
    vec![
        said(1, pb::TurnRole::User, &super::script::user_message(0, 0)),
        step,
        result(3, "c1"),
        said(4, pb::TurnRole::User, &super::script::user_message(0, 1)),
        said(
            5,
            pb::TurnRole::Assistant,
            "Final answer to message 1 of session 0: checkout is healthy again.",
        ),
    ]
}

fn acknowledged(turns: &[pb::SessionTurn], sent: &[usize]) -> Case {
    let case = Case::new(turns);
    case.tracked[0].log().acknowledged = sent.to_vec();
    case
}

#[test]
fn queued_and_interrupting_messages_must_be_stored_once_in_order_and_answered_whole() {
    let good = acknowledged(&conversation(), &[0, 1]);
    assert_eq!(good.violations(), Vec::<String>::new());

    // Acknowledged but never stored, or stored twice.
    assert_flags(
        &acknowledged(&conversation(), &[0, 1, 2]),
        "each once, in order",
    );
    let mut twice = conversation();
    twice.insert(
        4,
        said(5, pb::TurnRole::User, &super::script::user_message(0, 1)),
    );
    for (i, t) in twice.iter_mut().enumerate() {
        t.seq = i64::try_from(i).unwrap() + 1;
    }
    assert_flags(&acknowledged(&twice, &[0, 1]), "each once, in order");

    // Out of order.
    let mut swapped = conversation();
    swapped[0].content = super::script::user_message(0, 1);
    swapped[3].content = super::script::user_message(0, 0);
    assert_flags(&acknowledged(&swapped, &[0, 1]), "each once, in order");

    // The part of an abandoned model call.
    let mut partial = conversation();
    partial[4].content = "Final answer to message 1 of sess".into();
    assert_flags(&acknowledged(&partial, &[0, 1]), "no whole reply");

    // The last message never answered.
    let unanswered = conversation()[..4].to_vec();
    let mut case = acknowledged(&unanswered, &[0, 1]);
    case.finals[0].session.status = pb::SessionStatus::Idle.into();
    assert_flags(&case, "opened no burst that answered it");
}
