"""The chaos test's MCP server (official Python SDK, `mcp` 2.x), over stdio.

Tools:
    restart_service(service, seconds)  destructive (a mutating tool): takes
                                       `seconds`; every execution is logged
    read_status(service, seconds)      read-only: takes `seconds`; logged too

Environment:
    CHAOS_EXEC_LOG   each execution appends a `start` JSON line when it
                     begins (with the request's `inquest/idempotency_key`
                     from `_meta`, the call's arguments, this process's pid
                     and its parent's, the replica) and an `end` line when
                     it finishes or is cancelled.
    CHAOS_PID_LOG    this server appends its pid here when it starts, so
                     the test can end the servers it started.

Each line is one `os.write` to a file opened with O_APPEND, so lines from
the servers of several replicas never interleave.
"""

import json
import os
import time
import uuid

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

IDEMPOTENCY_KEY = "inquest/idempotency_key"

server = MCPServer("chaos-tools")


def append(path_var: str, line: str) -> None:
    path = os.environ.get(path_var)
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def log(event: dict) -> None:
    append("CHAOS_EXEC_LOG", json.dumps(event, sort_keys=True))


async def execute(ctx: Context, tool: str, mutating: bool, service: str, seconds: float) -> str:
    meta = ctx.request_context.meta or {}
    execution = uuid.uuid4().hex
    log(
        {
            "event": "start",
            "execution": execution,
            "key": meta.get(IDEMPOTENCY_KEY),
            "tool": tool,
            "mutating": mutating,
            "arguments": {"service": service, "seconds": seconds},
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "t": time.time(),
        }
    )
    outcome = "cancelled"
    try:
        await anyio.sleep(seconds)
        outcome = "done"
    finally:
        log({"event": "end", "execution": execution, "outcome": outcome, "t": time.time()})
    return f"{tool} {service}: ok after {seconds}s"


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False))
async def restart_service(service: str, seconds: float, ctx: Context) -> str:
    """Restarts a service (takes `seconds`). Destructive: never repeat it
    without a human's go-ahead."""
    return await execute(ctx, "restart_service", True, service, seconds)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def read_status(service: str, seconds: float, ctx: Context) -> str:
    """Reads a service's status (takes `seconds`). Read-only."""
    return await execute(ctx, "read_status", False, service, seconds)


if __name__ == "__main__":
    append("CHAOS_PID_LOG", str(os.getpid()))
    server.run()
