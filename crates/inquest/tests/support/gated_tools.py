"""The fault tests' MCP server (official Python SDK, `mcp` 2.x), over stdio.

Tools:
    gated_restart(service)   destructive (a mutating tool): records its
                             execution, then runs until the test opens its
                             gate, so a test can act while it runs (SIGTERM,
                             a PostgreSQL outage) without racing a timer
    read_log(service)        read-only, immediate

Environment:
    GATED_EXEC_LOG     each `gated_restart` execution appends one JSON line
                       here when it starts: the service, the request's
                       `inquest/idempotency_key` from `_meta`, this
                       server's pid. One `os.write` on an O_APPEND file per
                       line, so the servers of several replicas never
                       interleave.
    GATED_RELEASE_DIR  `gated_restart(service)` returns once the file
                       `<dir>/<service>` exists (or, as a hang guard, after
                       120 s with a result saying the gate never opened).
"""

import json
import os
import time

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

IDEMPOTENCY_KEY = "inquest/idempotency_key"

server = MCPServer("gated-tools")


def record(line: str) -> None:
    path = os.environ.get("GATED_EXEC_LOG")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
    finally:
        os.close(fd)


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False))
async def gated_restart(service: str, ctx: Context) -> str:
    """Restarts a service; takes as long as the operator needs. Destructive:
    never repeat it without a human's go-ahead."""
    meta = ctx.request_context.meta or {}
    record(json.dumps({"service": service, "key": meta.get(IDEMPOTENCY_KEY), "pid": os.getpid()}))
    gate = os.path.join(os.environ.get("GATED_RELEASE_DIR", "."), service)
    deadline = time.monotonic() + 120
    while not os.path.exists(gate):
        if time.monotonic() > deadline:
            return f"the gate of {service} never opened"
        await anyio.sleep(0.02)
    return f"restarted {service}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_log(service: str) -> str:
    """Returns the last log lines of a service."""
    return f"{service}: 12:00:01 ERROR connection refused"


if __name__ == "__main__":
    server.run()
