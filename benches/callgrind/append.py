#!/usr/bin/env python3
"""PostgreSQL's instructions per turn append, counted by callgrind.

Counts, with `valgrind --tool=callgrind`, the instructions a PostgreSQL
backend spends executing the store's append statement (as
`crates/inquest-store/src/turns.rs` builds it, read from the checkout given)
and `inquest-bench append`'s bare INSERT ceiling (and, where the checkout has
`crates/inquest-store/src/group.rs`, its group-commit statement writing one
turn to each of 1 and of 8 sessions, or the sizes `--groups` names, printed
per turn, with and without tokens spent), on a schema made by the
checkout's own `migrations/`. Instruction counts do not depend on what else
the machine is doing, so two checkouts can be compared exactly where the
benchmarks' rates move by ±10% between runs.

How: a throwaway cluster is initialised and migrated, then for each
statement a single-user backend (`postgres --single`, no client, no
network) prepares it and runs it N times under callgrind, each EXECUTE its
own transaction, as autocommitted appends are. The figure printed per
statement is the inclusive count of the inner `PortalRun` (the statement's
executor start, run and end, its constraints and triggers) divided by N:
what the parse of the EXECUTE line and the commit add is the same for
every statement and left out.

Usage (as root it runs PostgreSQL as the `postgres` user):

    python3 benches/callgrind/append.py [--repo PATH] [--n 1000] [--groups 1,8]
        [--watched] [--sketches]

`--sketches` also counts statements the store does not run, to price
issue 14's "the lease holder assigns the seqs it owns" design before
building it: a bare INSERT into `turns` itself (its write-id index
included), and an append whose seq comes from the caller, fenced by a
`FOR SHARE` lock on the session row instead of rewriting it (the
counters would then be folded elsewhere). Then the whole append that
design would run, with and without tokens spent: that fence, the
`token_usage` upsert when tokens were spent, and the notification
decision from the locked row; once more with the seq read from `turns`
under the lock (`max(seq) + 1`) instead of the caller's; and the group
statement the same way (the caller's seqs, the rows share-locked).

`--watched` registers a watcher of another replica on every session first,
so each append also builds and sends its notification.

Needs valgrind and PostgreSQL's server binaries (`pg_config --bindir`, or
/usr/lib/postgresql/15/bin).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

SESSION = "00000000-0000-0000-0000-000000000002"
CEILING_SESSION = "00000000-0000-0000-0000-000000000003"
PAYLOAD = "'" + "x" * 1024 + "'"
APPEND_TYPES = (
    "uuid,text,text,jsonb,text,text,boolean,bigint,bigint,bigint,bigint,text,uuid,"
    "boolean,jsonb,bigint,bigint,bigint"
)


def bindir():
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        d = out.stdout.strip()
        if out.returncode == 0 and os.path.exists(os.path.join(d, "postgres")):
            return d
    except FileNotFoundError:
        pass
    d = "/usr/lib/postgresql/15/bin"
    if os.path.exists(os.path.join(d, "postgres")):
        return d
    sys.exit("PostgreSQL's server binaries not found (pg_config --bindir)")


def rust_literals(text):
    """The Rust string literals of `text`, with `\\` line continuations."""
    out = []
    for m in re.finditer(r'"((?:[^"\\]|\\.)*)"', text, re.S):
        s = re.sub(r"\\\n\s*", "", m.group(1))
        out.append(s.replace('\\"', '"'))
    return out


def append_statements(repo):
    """{name: sql} of the append statement(s) in the checkout's turns.rs."""
    src = open(os.path.join(repo, "crates/inquest-store/src/turns.rs")).read()
    m = re.search(r"macro_rules! append_sql \{(.*?)\n\}\n", src, re.S)
    if m:
        head, tail = rust_literals(m.group(1))
        used = re.search(r"const APPEND_SQL: &str = append_sql!\((.*?)\);", src, re.S)
        (used_cte,) = rust_literals(used.group(1))
        return {
            "append, tokens spent": head + used_cte + tail,
            "append, no tokens": head + tail,
        }
    # Before the statement had two variants: one constant.
    m = re.search(r'const APPEND_SQL: &str = ("(?:[^"\\]|\\.)*");', src, re.S)
    (sql,) = rust_literals(m.group(1))
    return {"append, tokens spent": sql, "append, no tokens": sql}


def group_statement(repo):
    """The group-commit statement of the checkout's group.rs, if it has one."""
    path = os.path.join(repo, "crates/inquest-store/src/group.rs")
    if not os.path.exists(path):
        return None
    src = open(path).read()
    m = re.search(r'const GROUP_SQL: &str = ("(?:[^"\\]|\\.)*");', src, re.S)
    (sql,) = rust_literals(m.group(1))
    return sql


def fenced_append():
    """The sketched append: the caller's seq ($19), the epoch fence as a
    share lock on the session row, which is not rewritten."""
    return (
        "WITH fence AS (SELECT cardinality(array_remove(watch_replicas, $12::text)) > 0 "
        "AS watched FROM sessions WHERE id = $1 AND ($11::bigint IS NULL OR lease_epoch = $11) "
        "FOR SHARE), "
        "ins AS (INSERT INTO turns (session_id, seq, role, content, tool_calls, tool_call_id, "
        "tool_name, is_error, input_tokens, output_tokens, write_id, escaped, recovery_plan, "
        "cache_read_input_tokens, cache_creation_input_tokens, cost_nano_usd, created_at) "
        "SELECT $1, $19, $2, $3, $4, $5, $6, $7, $9, $10, $13, $14, $15, $16, $17, $18, now() "
        "FROM fence) "
        "SELECT $19, now(), fence.watched, CASE WHEN fence.watched THEN "
        "(SELECT pg_notify('inquest_events', json_build_object('v', 1, 'o', $12::text, "
        "'k', 'turn', 's', $1, 'q', $19)::text)) END FROM fence"
    )


def whole_append(tokens, seq):
    """The whole append of the sketched design: what it must still do once
    the session row is no longer rewritten (see the module doc). `seq` is
    the SQL of the new turn's seq: the caller's (`$19`), or read from
    `turns` under the lock."""
    used = (
        "used AS (INSERT INTO token_usage (tenant, day, session_id, tokens) "
        "SELECT fence.tenant, (now() AT TIME ZONE 'UTC')::date, $1, $9 + $10 FROM fence "
        "WHERE $9 + $10 > 0 ON CONFLICT (tenant, day, session_id) "
        "DO UPDATE SET tokens = token_usage.tokens + EXCLUDED.tokens), "
        if tokens else ""
    )
    return (
        "WITH fence AS (SELECT tenant, "
        "cardinality(array_remove(watch_replicas, $12::text)) > 0 AS watched, "
        f"{seq} AS seq "
        "FROM sessions WHERE id = $1 AND ($11::bigint IS NULL OR lease_epoch = $11) "
        "FOR SHARE), "
        + used +
        "ins AS (INSERT INTO turns (session_id, seq, role, content, tool_calls, tool_call_id, "
        "tool_name, is_error, input_tokens, output_tokens, write_id, escaped, recovery_plan, "
        "cache_read_input_tokens, cache_creation_input_tokens, cost_nano_usd, created_at) "
        "SELECT $1, fence.seq, $2, $3, $4, $5, $6, $7, $9, $10, $13, $14, $15, $16, $17, $18, "
        "now() FROM fence) "
        "SELECT fence.seq, now(), fence.watched, CASE WHEN fence.watched THEN "
        "(SELECT pg_notify('inquest_events', json_build_object('v', 1, 'o', $12::text, "
        "'k', 'turn', 's', $1, 'q', fence.seq)::text)) END FROM fence"
    )


SEQ_READ = "coalesce((SELECT max(t.seq) FROM turns t WHERE t.session_id = $1), 0) + 1"

# The group statement of the sketched design: the caller's seqs ($19),
# the sessions' rows share-locked as the fence, nothing rewritten.
GROUP_SKETCH = (
    "WITH fence AS (SELECT s.id AS sid, v.seq, s.tenant, "
    "cardinality(array_remove(s.watch_replicas, $12::text)) > 0 AS watched, "
    "v.role, v.content, v.tc, v.ci, v.tn, v.e, v.it, v.ot, v.wid, v.x, v.rp, v.cr, v.cw, v.cu "
    "FROM unnest($1::uuid[], $2::text[], $3::text[], $4::jsonb[], $5::text[], "
    "$6::text[], $7::boolean[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], "
    "$13::uuid[], $14::boolean[], $15::jsonb[], $16::bigint[], $17::bigint[], "
    "$18::bigint[], $19::bigint[]) "
    "AS v(sid, role, content, tc, ci, tn, e, ntc, it, ot, epoch, wid, x, rp, cr, cw, cu, seq) "
    "JOIN sessions s ON s.id = v.sid AND (v.epoch IS NULL OR s.lease_epoch = v.epoch) "
    "FOR SHARE OF s), "
    "used AS (INSERT INTO token_usage (tenant, day, session_id, tokens) "
    "SELECT b.tenant, (now() AT TIME ZONE 'UTC')::date, b.sid, b.it + b.ot "
    "FROM fence b WHERE b.it + b.ot > 0 ON CONFLICT (tenant, day, session_id) "
    "DO UPDATE SET tokens = token_usage.tokens + EXCLUDED.tokens), "
    "ins AS (INSERT INTO turns (session_id, seq, role, content, tool_calls, tool_call_id, "
    "tool_name, is_error, input_tokens, output_tokens, write_id, escaped, recovery_plan, "
    "cache_read_input_tokens, cache_creation_input_tokens, cost_nano_usd, created_at) "
    "SELECT b.sid, b.seq, b.role, b.content, b.tc, b.ci, b.tn, b.e, b.it, b.ot, b.wid, "
    "b.x, b.rp, b.cr, b.cw, b.cu, now() FROM fence b) "
    "SELECT b.sid, b.seq, now(), b.watched, CASE WHEN b.watched THEN "
    "(SELECT pg_notify('inquest_events', json_build_object('v', 1, 'o', $12::text, "
    "'k', 'turn', 's', b.sid, 'q', b.seq)::text)) END FROM fence b"
)


GROUP = 8
OTHER_SESSIONS = 1000
GROUP_SESSIONS = [f"00000000-0000-0000-0000-0000000001{i:02d}" for i in range(GROUP)]


def as_postgres(cmd, **kw):
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--"] + cmd
    return subprocess.run(cmd, **kw)


def single_user(bin_dir, data, sql, out_file=None):
    cmd = [os.path.join(bin_dir, "postgres"), "--single", "-D", data,
           "-c", "fsync=off", "-c", "synchronous_commit=off", "bench"]
    if out_file:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}"] + cmd
    r = as_postgres(cmd, input=sql, capture_output=True, text=True)
    errors = [line for line in r.stdout.splitlines() + r.stderr.splitlines() if "ERROR" in line]
    if r.returncode != 0 or errors:
        sys.exit(f"single-user backend failed: {errors[:3] or r.stderr[-2000:]}")


def inner_portal_run(out_file):
    r = subprocess.run(["callgrind_annotate", "--inclusive=yes", out_file],
                       capture_output=True, text=True, check=True)
    for line in r.stdout.splitlines():
        m = re.match(r"\s*([\d,]+) .*:PortalRun'2 ", line)
        if m:
            return int(m.group(1).replace(",", ""))
    sys.exit(f"no inner PortalRun in {out_file}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--watched", action="store_true",
                    help="every session watched from another replica: the appends notify")
    ap.add_argument("--groups", default="1,8",
                    help="group-statement sizes to count (1 to 8, comma-separated)")
    ap.add_argument("--sketches", action="store_true",
                    help="also count statements the store does not run (see above)")
    args = ap.parse_args()
    args.groups = [int(g) for g in args.groups.split(",")]
    if any(not 1 <= g <= GROUP for g in args.groups):
        sys.exit(f"--groups: sizes from 1 to {GROUP}")
    repo = os.path.abspath(args.repo)
    bin_dir = bindir()
    work = tempfile.mkdtemp(prefix="inquest-callgrind-")
    os.chmod(work, 0o777)
    data = os.path.join(work, "data")
    try:
        as_postgres([os.path.join(bin_dir, "initdb"), "-D", data, "-A", "trust", "-U",
                     "postgres"], check=True, capture_output=True)
        migrations = sorted(
            (f for f in os.listdir(os.path.join(repo, "migrations")) if f.endswith(".sql")),
            key=lambda f: int(re.match(r"V(\d+)__", f).group(1)),
        )
        setup = ["CREATE DATABASE bench"]
        single = []
        for f in migrations:
            single.append(open(os.path.join(repo, "migrations", f)).read())
        single.append(
            "CREATE TABLE bench_ceiling (LIKE turns INCLUDING DEFAULTS INCLUDING CONSTRAINTS, "
            "PRIMARY KEY (session_id, seq));\n"
            "INSERT INTO incidents (id, title, tenant) VALUES "
            "('00000000-0000-0000-0000-000000000001', 't', 'default');\n"
            f"INSERT INTO sessions (id, incident_id, status, tenant) VALUES ('{SESSION}', "
            "'00000000-0000-0000-0000-000000000001', 'running', 'default');\n"
            + "".join(
                f"INSERT INTO sessions (id, incident_id, status, tenant) VALUES ('{g}', "
                "'00000000-0000-0000-0000-000000000001', 'running', 'default');\n"
                for g in GROUP_SESSIONS
            )
            # The statements' origin is 'r1': 'r2' is another replica.
            + ("UPDATE sessions SET watch_replicas = ARRAY['r2'];\n" if args.watched else "")
            # Other sessions, and statistics, so that the planner sees a
            # table of a served database's size: with only the nine rows
            # above it joins the group statement's `unnest` to `sessions`
            # by hashing the whole table, where a real one (the bench
            # databases' few hundred rows, or more) probes the primary key.
            + f"INSERT INTO sessions (id, incident_id, status, tenant) SELECT gen_random_uuid(), "
            f"'00000000-0000-0000-0000-000000000001', 'completed', 'default' "
            f"FROM generate_series(1, {OTHER_SESSIONS});\n"
            "ANALYZE;\n"
        )
        # The setup runs over a normal connection (multi-statement files).
        port = "25499"
        as_postgres([os.path.join(bin_dir, "pg_ctl"), "-D", data, "-l",
                     os.path.join(work, "log"), "-w", "-o",
                     f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={work}",
                     "start"], check=True, capture_output=True)
        try:
            psql = ["psql", "-h", "127.0.0.1", "-p", port, "-U", "postgres", "-q",
                    "-v", "ON_ERROR_STOP=1"]
            for s in setup:
                subprocess.run(psql + ["-c", s], check=True)
            for s in single:
                subprocess.run(psql + ["-d", "bench"], input=s, text=True, check=True)
        finally:
            as_postgres([os.path.join(bin_dir, "pg_ctl"), "-D", data, "-w", "stop"],
                        check=True, capture_output=True)

        # name: (prepare, execute(i), turns per execution)
        statements = {
            "bare INSERT (ceiling)": (
                "PREPARE s(uuid,bigint,text) AS INSERT INTO bench_ceiling "
                "(session_id, seq, role, content, tool_calls) "
                "VALUES ($1, $2, 'assistant', $3, '[]')",
                lambda i: f"EXECUTE s('{CEILING_SESSION}', {i + 1}, {PAYLOAD})",
                1,
            )
        }
        for name, sql in append_statements(repo).items():
            tokens = "100,50" if "tokens spent" in name else "0,0"
            statements[name] = (
                f"PREPARE s({APPEND_TYPES}) AS {sql}",
                lambda i, t=tokens: f"EXECUTE s('{SESSION}','assistant',{PAYLOAD},'[]',NULL,"
                f"NULL,false,0,{t},NULL,'r1',NULL,false,NULL,0,0,NULL)",
                1,
            )
        if args.sketches:
            statements["sketch: bare INSERT into turns"] = (
                "PREPARE s(uuid,bigint,text) AS INSERT INTO turns "
                "(session_id, seq, role, content, tool_calls) "
                "VALUES ($1, $2, 'assistant', $3, '[]')",
                lambda i: f"EXECUTE s('{SESSION}', {i + 1}, {PAYLOAD})",
                1,
            )
            statements["sketch: caller's seq, FOR SHARE fence"] = (
                f"PREPARE s({APPEND_TYPES},bigint) AS {fenced_append()}",
                lambda i: f"EXECUTE s('{SESSION}','assistant',{PAYLOAD},'[]',NULL,"
                f"NULL,false,0,0,0,NULL,'r1',NULL,false,NULL,0,0,NULL,{i + 1})",
                1,
            )
            for spent, t in (("no tokens", "0,0"), ("tokens spent", "100,50")):
                statements[f"sketch: whole, caller's seq, {spent}"] = (
                    f"PREPARE s({APPEND_TYPES},bigint) AS {whole_append(t != '0,0', '$19')}",
                    lambda i, t=t: f"EXECUTE s('{SESSION}','assistant',{PAYLOAD},'[]',NULL,"
                    f"NULL,false,0,{t},NULL,'r1',NULL,false,NULL,0,0,NULL,{i + 1})",
                    1,
                )
            statements["sketch: whole, seq read, no tokens"] = (
                f"PREPARE s({APPEND_TYPES}) AS {whole_append(False, SEQ_READ)}",
                lambda i: f"EXECUTE s('{SESSION}','assistant',{PAYLOAD},'[]',NULL,"
                f"NULL,false,0,0,0,NULL,'r1',NULL,false,NULL,0,0,NULL)",
                1,
            )
        group = group_statement(repo)
        for size, (it, ot) in [(n, t) for n in args.groups for t in ((0, 0), (100, 50))]:
            if not group:
                break
            def arr(v, t, size=size):
                return f"ARRAY[{','.join([v] * size)}]::{t}[]"
            ids = ",".join(f"'{g}'" for g in GROUP_SESSIONS[:size])
            ASSISTANT, EMPTY = "'assistant'", "'[]'"
            execute = (
                f"EXECUTE s(ARRAY[{ids}]::uuid[],{arr(ASSISTANT, 'text')},"
                f"{arr(PAYLOAD, 'text')},{arr(EMPTY, 'jsonb')},{arr('NULL', 'text')},"
                f"{arr('NULL', 'text')},{arr('false', 'boolean')},{arr('0', 'bigint')},"
                f"{arr(str(it), 'bigint')},{arr(str(ot), 'bigint')},{arr('NULL', 'bigint')},'r1',"
                f"{arr('NULL', 'uuid')},{arr('false', 'boolean')},{arr('NULL', 'jsonb')},"
                f"{arr('0', 'bigint')},{arr('0', 'bigint')},{arr('NULL', 'bigint')})"
            )
            spent = "tokens spent" if it + ot else "no tokens"
            statements[f"group of {size}, {spent}, per turn"] = (
                f"PREPARE s AS {group}", lambda i, e=execute: e, size)
            if args.sketches:
                statements[f"sketch: group of {size}, {spent}, per turn"] = (
                    f"PREPARE s AS {GROUP_SKETCH}",
                    lambda i, e=execute, a=arr: e[:-1] + f",{a(str(i + 1), 'bigint')})",
                    size)
        print(f"repo {repo}: PostgreSQL instructions per statement "
              f"(inner PortalRun, {args.n} executions, callgrind"
              f"{', sessions watched elsewhere' if args.watched else ''})")
        for name, (prepare, execute, turns) in statements.items():
            copy = os.path.join(work, "copy")
            shutil.copytree(data, copy, symlinks=True)
            if os.geteuid() == 0:
                subprocess.run(["chown", "-R", "postgres", copy], check=True)
            out = os.path.join(work, "callgrind.out")
            lines = [prepare] + [execute(i) for i in range(args.n)]
            single_user(bin_dir, copy, "\n".join(lines) + "\n", out)
            per = inner_portal_run(out) / args.n / turns
            print(f"  {name:40} {per / 1000:8.1f} k")
            shutil.rmtree(copy)
            os.remove(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
