#!/usr/bin/env python3
"""Inquest's append path against LangGraph's PostgreSQL checkpointer.

One synthetic investigation, written once through LangGraph's `PostgresSaver`
(a `StateGraph` over a messages state, one checkpoint per step, as LangGraph
apps run; no model: the nodes append the prepared messages) and once through
Inquest's append path (`inquest-bench peer`: `TurnLog::start_session`, then
the burst's `BurstLog::append`, the agent's real leased append), into two
scratch databases of the same PostgreSQL cluster, in one run.

The investigation: turn 1 a user message; then an assistant turn with one
`read_file` call, that call's result, and so on. Sizes are the flags below;
text comes from the 64-bit LCG `inquest-bench` uses (`bench_peer.rs`), so
both sides store the same bytes.

Reported at turn 10, 100 and 1,000 (over the window of the 9 turns ending
there): time per turn (median), WAL bytes per turn (`pg_current_wal_lsn()`
read before and after each turn on a separate connection, outside the timed
part; mean), table growth per turn (`pg_total_relation_size` of every table
in `public`, with indexes and TOAST, across the window); then the time to
load the finished session's state for a resume (LangGraph:
`graph.get_state`, and `checkpointer.get_tuple` alone; Inquest:
`Store::resume_turns` + `rebuild_messages`), median of runs after a warm-up.

Usage (from anywhere; creates ./.venv beside this file with the pinned
packages of requirements.txt on first use, and builds `inquest-bench` in
release mode unless --inquest-bench names a binary):

    python3 benches/peers/langgraph/run.py \
        --database-url postgres://postgres@127.0.0.1:55432/postgres

The URL is an administrative connection: the script creates (and at the end
drops) its two scratch databases there. Not part of CI.
"""

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv"
REQUIREMENTS = HERE / "requirements.txt"
REPO = HERE.parents[2]
MASK = (1 << 64) - 1


def ensure_venv():
    """Re-runs this script inside ./.venv, installing the pins when they
    changed since the last install."""
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    marker = VENV / ".installed"
    python = VENV / "bin" / "python"
    if not (marker.exists() and marker.read_text() == digest and python.exists()):
        print(f"installing {REQUIREMENTS.name} into {VENV}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)],
            check=True,
        )
        marker.write_text(digest)
    os.execv(str(python), [str(python), str(Path(__file__).resolve()), *sys.argv[1:]])


# --- the synthetic investigation (same generator as bench_peer.rs) ---------


def synthetic_text(seed, length):
    alphabet = b"abcdefghijklmnopqrstuvwxyz      "
    x = ((seed * 0x9E3779B97F4A7C15) & MASK) ^ 0x2545F4914F6CDD1D
    out = bytearray(length)
    for i in range(length):
        x = (x * 6364136223846793005 + 1442695040888963407) & MASK
        out[i] = alphabet[(x >> 33) % len(alphabet)]
    return out.decode()


def call_id(n):
    return f"call_{n:06}"


def arguments(n, args_bytes):
    """`{"pad":…,"path":…}` of `args_bytes` JSON bytes (serde_json's key
    order and compact form)."""
    path = f"logs/app-{n}.log"
    bare = len(json.dumps({"pad": "", "path": path}, separators=(",", ":")))
    return {"pad": synthetic_text(n ^ 0xA5A5, max(0, args_bytes - bare)), "path": path}


def messages(args):
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    out = {1: HumanMessage(content=synthetic_text(1, args.user_bytes))}
    for n in range(2, args.turns + 1):
        if n % 2 == 0:
            out[n] = AIMessage(
                content=synthetic_text(n, args.assistant_bytes),
                tool_calls=[
                    {
                        "name": "read_file",
                        "args": arguments(n, args.args_bytes),
                        "id": call_id(n),
                        "type": "tool_call",
                    }
                ],
            )
        else:
            out[n] = ToolMessage(
                content=synthetic_text(n, args.tool_bytes),
                tool_call_id=call_id(n - 1),
                name="read_file",
            )
    return out


# --- measuring -------------------------------------------------------------


class Probe:
    """A side connection for the WAL position and table sizes."""

    def __init__(self, url):
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)

    def wal(self):
        return self.conn.execute(
            "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint"
        ).fetchone()[0]

    def table_bytes(self):
        return self.conn.execute(
            "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)::bigint "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')"
        ).fetchone()[0]

    def close(self):
        self.conn.close()


def window_start(mark, window):
    """Where a mark's table growth is measured from: `window` turns back,
    or before turn 1 (LangGraph's input, inside its first step)."""
    return mark - window if mark > window + 1 else 0


def summarise(args, measured, tables):
    at = {}
    for k in args.checkpoints:
        if k > args.turns:
            continue
        rows = [measured[n] for n in range(k - min(args.window, k) + 1, k + 1) if n in measured]
        start = window_start(k, args.window)
        grown = None
        if k in tables and start in tables:
            grown = (tables[k] - tables[start]) / (k - start)
        at[str(k)] = {
            "ms_per_turn": statistics.median(r[0] for r in rows),
            "wal_bytes_per_turn": statistics.fmean(r[1] for r in rows),
            "table_bytes_per_turn": grown,
            "table_bytes": tables.get(k),
            "samples": len(rows),
        }
    return at


def langgraph_run(args, url):
    import langgraph
    from importlib.metadata import version
    from typing import Annotated, TypedDict

    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    msgs = messages(args)
    turns = args.turns

    class State(TypedDict):
        messages: Annotated[list, add_messages]

    def next_message(state):
        return {"messages": [msgs[len(state["messages"]) + 1]]}

    def route(node):
        def pick(state):
            return END if len(state["messages"]) >= turns else node

        return pick

    builder = StateGraph(State)
    builder.add_node("agent", next_message)  # the model's turn
    builder.add_node("tools", next_message)  # the tool's result
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route("tools"), ["tools", END])
    builder.add_conditional_edges("tools", route("agent"), ["agent", END])

    windows = lambda n: any(n <= k < n + args.window for k in args.checkpoints)
    edges = lambda n: any(n in (k, window_start(k, args.window)) for k in args.checkpoints)
    probe = Probe(url)
    measured, tables = {}, {}
    config = {"configurable": {"thread_id": "peer-bench"}, "recursion_limit": turns + 10}
    with PostgresSaver.from_conn_string(url) as checkpointer:
        checkpointer.setup()
        graph = builder.compile(checkpointer=checkpointer)
        if edges(0):
            tables[0] = probe.table_bytes()
        # Turn 1 is the input; every update after it is one node's message,
        # committed (durability "sync") before the next step starts. The WAL
        # between two probes is one step's; the time excludes the probes.
        n = 1
        wal_prev = probe.wal()
        t_prev = time.perf_counter()
        for _update in graph.stream(
            {"messages": [msgs[1]]},
            config,
            stream_mode="updates",
            durability="sync",
        ):
            now = time.perf_counter()
            n += 1
            if windows(n) or windows(n + 1):
                wal = probe.wal()
                if windows(n):
                    measured[n] = ((now - t_prev) * 1000.0, wal - wal_prev)
                wal_prev = wal
            if edges(n):
                tables[n] = probe.table_bytes()
            t_prev = time.perf_counter()
        if n != turns:
            raise SystemExit(f"LangGraph wrote {n} turns, expected {turns}")
        checkpoints = probe.conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
    probe.close()

    # The load a resume does: the thread's latest state.
    loads, tuples = [], []
    with PostgresSaver.from_conn_string(url) as checkpointer:
        graph = builder.compile(checkpointer=checkpointer)
        cfg = {"configurable": {"thread_id": "peer-bench"}}
        for run in range(args.resume_runs + 1):
            t = time.perf_counter()
            state = graph.get_state(cfg)
            loaded = len(state.values["messages"])
            elapsed = (time.perf_counter() - t) * 1000.0
            t = time.perf_counter()
            checkpointer.get_tuple(cfg)
            tuple_ms = (time.perf_counter() - t) * 1000.0
            if run > 0:
                loads.append(elapsed)
                tuples.append(tuple_ms)
    return {
        "system": "langgraph",
        "path": "StateGraph(messages, add_messages) + PostgresSaver, durability=sync",
        "versions": {
            p: version(p)
            for p in ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-postgres", "langchain-core", "psycopg")
        },
        "turns": turns,
        "checkpoints_stored": checkpoints,
        "window": args.window,
        "at": summarise(args, measured, tables),
        "resume_ms": statistics.median(loads),
        "resume_what": "graph.get_state",
        "get_tuple_ms": statistics.median(tuples),
        "resume_messages": loaded,
        "resume_runs": args.resume_runs,
    }


def inquest_run(args, url):
    binary = args.inquest_bench
    if binary is None:
        subprocess.run(
            ["cargo", "build", "--release", "-q", "-p", "inquest-bench"],
            cwd=REPO,
            check=True,
            env={**os.environ, "CARGO_INCREMENTAL": "0"},
        )
        binary = REPO / "target" / "release" / "inquest-bench"
    out = subprocess.run(
        [
            str(binary),
            "peer",
            "--database-url",
            url,
            "--turns",
            str(args.turns),
            "--checkpoints",
            ",".join(map(str, args.checkpoints)),
            "--window",
            str(args.window),
            "--user-bytes",
            str(args.user_bytes),
            "--assistant-bytes",
            str(args.assistant_bytes),
            "--args-bytes",
            str(args.args_bytes),
            "--tool-bytes",
            str(args.tool_bytes),
            "--resume-runs",
            str(args.resume_runs),
        ],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def with_database(url, name):
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def table(peer, ours, checkpoints):
    def fmt(v, unit=""):
        return "-" if v is None else f"{v:,.2f}{unit}" if unit == " ms" else f"{v:,.0f}"

    print()
    print("per turn, over the window of turns ending at each mark")
    print(
        f"{'turn':>6} | {'LangGraph ms':>12} {'WAL B':>9} {'table B':>9} |"
        f" {'Inquest ms':>10} {'WAL B':>9} {'table B':>9} |"
        f" {'ms ratio':>8} {'WAL ratio':>9}"
    )
    for k in map(str, checkpoints):
        if k not in peer["at"] or k not in ours["at"]:
            continue
        p, o = peer["at"][k], ours["at"][k]
        print(
            f"{k:>6} | {p['ms_per_turn']:>12.2f} {fmt(p['wal_bytes_per_turn']):>9}"
            f" {fmt(p['table_bytes_per_turn']):>9} |"
            f" {o['ms_per_turn']:>10.2f} {fmt(o['wal_bytes_per_turn']):>9}"
            f" {fmt(o['table_bytes_per_turn']):>9} |"
            f" {o['ms_per_turn'] / p['ms_per_turn']:>8.3f}"
            f" {o['wal_bytes_per_turn'] / p['wal_bytes_per_turn']:>9.3f}"
        )
    print()
    print(
        f"resume load of the {peer['turns']}-turn session: LangGraph get_state "
        f"{peer['resume_ms']:.2f} ms (get_tuple {peer['get_tuple_ms']:.2f} ms, "
        f"{peer['resume_messages']} messages); Inquest resume_turns + rebuild_messages "
        f"{ours['resume_ms']:.2f} ms ({ours['resume_messages']} messages); "
        f"ratio {ours['resume_ms'] / peer['resume_ms']:.3f}"
    )
    print(f"LangGraph stored {peer['checkpoints_stored']} checkpoints; versions: {peer['versions']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--checkpoints", default="10,100,1000")
    parser.add_argument("--window", type=int, default=9)
    parser.add_argument("--user-bytes", type=int, default=200)
    parser.add_argument("--assistant-bytes", type=int, default=300)
    parser.add_argument("--args-bytes", type=int, default=100)
    parser.add_argument("--tool-bytes", type=int, default=2048)
    parser.add_argument("--resume-runs", type=int, default=10)
    parser.add_argument("--inquest-bench", type=Path, help="a built inquest-bench binary")
    parser.add_argument("--json", type=Path, help="also write both results here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch databases")
    args = parser.parse_args()
    if not args.database_url:
        parser.error("--database-url (or DATABASE_URL) is required")
    args.checkpoints = [int(k) for k in args.checkpoints.split(",")]
    ensure_venv()

    import psycopg

    names = [f"peer_langgraph_{os.getpid()}", f"peer_inquest_{os.getpid()}"]
    with psycopg.connect(args.database_url, autocommit=True) as admin:
        for name in names:
            admin.execute(f"DROP DATABASE IF EXISTS {name}")
            admin.execute(f"CREATE DATABASE {name}")
    try:
        print(f"Inquest: {args.turns} turns through inquest-bench peer", file=sys.stderr)
        ours = inquest_run(args, with_database(args.database_url, names[1]))
        print(f"LangGraph: {args.turns} turns through PostgresSaver", file=sys.stderr)
        peer = langgraph_run(args, with_database(args.database_url, names[0]))
    finally:
        if not args.keep:
            with psycopg.connect(args.database_url, autocommit=True) as admin:
                for name in names:
                    admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    print(
        f"{args.turns} turns: user {args.user_bytes} B, assistant {args.assistant_bytes} B + "
        f"one call of {args.args_bytes} B arguments, tool result {args.tool_bytes} B"
    )
    table(peer, ours, args.checkpoints)
    if args.json:
        args.json.write_text(json.dumps({"langgraph": peer, "inquest": ours}, indent=2) + "\n")


if __name__ == "__main__":
    main()
