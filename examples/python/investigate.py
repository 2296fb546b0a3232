#!/usr/bin/env python3
"""An Inquest client in Python: starts an investigation, watches it live
(reconnecting from the last seq it received), sends a follow-up once the
first burst settles, watches that burst, and prints the report.

    python generate.py          # once: writes the stubs to gen/
    python investigate.py --target 127.0.0.1:50051 \
        --title "checkout-api: p99 above 2 s" \
        --message "Why did checkout latency jump?" \
        --follow-up "What should we roll back?"

Exits 0 when both bursts ran and the report was read; 1 on a failed call or
a session that ended FAILED or CANCELLED.
"""

import argparse
import os
import sys
import time
import uuid

# Stubs from generate.py; a PYTHONPATH entry (e.g. another --out) comes first.
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen"))

import grpc  # noqa: E402
from inquest.v1 import investigations_pb2 as pb  # noqa: E402
from inquest.v1 import investigations_pb2_grpc as rpc  # noqa: E402

# Stream ends worth reopening from the last seq: ABORTED (this watcher fell
# behind: a Lagged event came first) and UNAVAILABLE (server shutting down,
# database unreadable, connection lost). The server documents both.
RETRYABLE = {grpc.StatusCode.ABORTED, grpc.StatusCode.UNAVAILABLE}
MAX_RETRIES = 8


def status_name(status: int) -> str:
    return pb.SessionStatus.Name(status).removeprefix("SESSION_STATUS_").lower()


def show_turn(turn: pb.SessionTurn) -> None:
    role = pb.TurnRole.Name(turn.role).removeprefix("TURN_ROLE_").lower()
    if turn.role == pb.TURN_ROLE_TOOL:
        first = turn.content.splitlines()[0] if turn.content else ""
        error = " (error)" if turn.is_error else ""
        print(f"[{turn.seq}] tool {turn.tool_name}{error}: {first[:100]}")
        return
    print(f"[{turn.seq}] {role}: {turn.content}")
    for call in turn.tool_calls:
        print(f"      -> {call.name}({call.arguments_json})")


def watch(stub, session_id: str, after_seq: int, drop_after: int = 0) -> int:
    """Follows the session until its burst settles (the stream ends OK) and
    returns the last seq received. A retryable end reopens the stream from
    that seq, so no turn is lost or shown twice. `drop_after` > 0 drops the
    stream once after that many turns, to show the reconnect."""
    attempt = 0
    while True:
        call = stub.WatchSession(
            pb.WatchSessionRequest(session_id=session_id, after_seq=after_seq)
        )
        try:
            dropped = False
            for event in call:
                kind = event.WhichOneof("event")
                if kind == "turn":
                    attempt = 0
                    after_seq = max(after_seq, event.turn.seq)
                    show_turn(event.turn)
                    drop_after -= 1
                    if drop_after == 0:
                        dropped = True
                        break
                elif kind == "tool_call_start":
                    print(f"      .. running {event.tool_call_start.tool_name}")
                elif kind == "lagged":
                    print(f"(fell behind at seq {event.lagged.last_delivered_seq})")
                elif kind == "approval_requested":
                    a = event.approval_requested
                    print(
                        f"      !! {a.server}.{a.tool}({a.arguments_json}) waits for "
                        f"approval: {a.rule} (call {a.call_id})"
                    )
            if not dropped:
                return after_seq
            call.cancel()
            print(f"(dropped the stream; reconnecting after seq {after_seq})")
        except grpc.RpcError as e:
            if e.code() not in RETRYABLE:
                raise
            attempt += 1
            if attempt > MAX_RETRIES:
                raise
            print(
                f"(stream ended {e.code().name}: {e.details()}; "
                f"reconnecting after seq {after_seq})"
            )
            time.sleep(min(0.2 * 2**attempt, 5.0))


def decide_held(stub, session: pb.Session, verdict: str) -> None:
    """Approves or denies every call of the session still pending. The key
    makes the decision safe to retry."""
    pending = [
        a.call_id for a in session.approvals if a.state == pb.APPROVAL_STATE_PENDING
    ]
    print(f"== {verdict} {', '.join(pending)}")
    stub.DecideToolCalls(
        pb.DecideToolCallsRequest(
            session_id=session.id,
            decisions=[
                pb.ToolCallDecision(
                    call_id=call_id,
                    verdict=(
                        pb.TOOL_CALL_VERDICT_APPROVE
                        if verdict == "approve"
                        else pb.TOOL_CALL_VERDICT_DENY
                    ),
                    comment=f"{verdict}d by investigate.py",
                )
                for call_id in pending
            ],
            idempotency_key=str(uuid.uuid4()),
        )
    )


def run_burst(stub, session_id: str, after_seq: int, verdict: str, drop_after: int = 0):
    """Watches a burst until it settles, deciding each hold for approval
    with `verdict` and watching on; returns the last seq and the session."""
    while True:
        after_seq = watch(stub, session_id, after_seq, drop_after)
        drop_after = 0
        session = settled(stub, session_id)
        if session.status != pb.SESSION_STATUS_AWAITING_APPROVAL:
            return after_seq, session
        decide_held(stub, session, verdict)


def settled(stub, session_id: str) -> pb.Session:
    session = stub.GetSession(pb.GetSessionRequest(session_id=session_id))
    reason = f", exit reason {session.exit_reason}" if session.exit_reason else ""
    print(f"-- session {status_name(session.status)}{reason}; head seq {session.head_seq}")
    return session


def main() -> int:
    parser = argparse.ArgumentParser(description="Run an Inquest investigation.")
    parser.add_argument("--target", default="127.0.0.1:50051", help="server host:port")
    parser.add_argument("--title", default="checkout-api: p99 latency above 2 s")
    parser.add_argument("--message", default="Why did checkout latency jump?")
    parser.add_argument("--follow-up", default="What should we roll back first?")
    parser.add_argument(
        "--drop-after",
        type=int,
        default=0,
        help="drop the first watch after N turns and reconnect (a demo of the cursor)",
    )
    parser.add_argument(
        "--decide",
        choices=["approve", "deny"],
        default="approve",
        help="what to answer tool calls held for approval (awaiting_approval)",
    )
    args = parser.parse_args()

    with grpc.insecure_channel(args.target) as channel:
        stub = rpc.InvestigationsStub(channel)
        incident = stub.CreateIncident(pb.CreateIncidentRequest(title=args.title))
        print(f"incident {incident.id}")
        # The key makes the call safe to retry: the same key, one session.
        session = stub.StartSession(
            pb.StartSessionRequest(
                incident_id=incident.id,
                message=args.message,
                idempotency_key=str(uuid.uuid4()),
            )
        )
        print(f"session {session.id}")

        print("== first burst")
        last, first = run_burst(stub, session.id, 0, args.decide, args.drop_after)
        if first.status in (
            pb.SESSION_STATUS_CANCELLED,
            pb.SESSION_STATUS_AWAITING_CONFIRMATION,
        ):
            return 1

        print("== follow-up")
        sent = stub.SendMessage(
            pb.SendMessageRequest(
                session_id=session.id,
                message=args.follow_up,
                idempotency_key=str(uuid.uuid4()),
            )
        )
        print(f"follow-up stored at seq {sent.seq}")
        _, final = run_burst(stub, session.id, min(last, sent.seq - 1), args.decide)

        report = stub.GetReport(pb.GetReportRequest(session_id=session.id))
        print(f"== report (burst {report.burst}, exit reason {report.exit_reason})")
        print(report.summary)
        # Named as the CLI and the console name them: the session's figures
        # (its stored model turns) and this burst's (its model calls, the
        # report's writing included and shown apart).
        print(
            f"-- session: {report.tool_calls} tool calls, session tokens "
            f"{report.input_tokens} in / {report.output_tokens} out, "
            f"active time {report.active_time_ms} ms"
        )
        print(
            f"-- this burst: {report.burst_model_calls} model calls, "
            f"{report.burst_tool_calls} tool calls, tokens {report.burst_input_tokens} in / "
            f"{report.burst_output_tokens} out (report writing "
            f"{report.author_input_tokens} in / {report.author_output_tokens} out)"
        )
        return 1 if final.status in (pb.SESSION_STATUS_FAILED, pb.SESSION_STATUS_CANCELLED) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except grpc.RpcError as e:
        print(f"error: {e.code().name}: {e.details()}", file=sys.stderr)
        sys.exit(1)
