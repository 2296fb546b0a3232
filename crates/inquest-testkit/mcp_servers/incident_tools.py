"""A small MCP server for Inquest's MCP tests, written with the official
Python SDK (PyPI `mcp`, 2.x: `MCPServer`, formerly `FastMCP`).

    python3 incident_tools.py                    # stdio
    python3 incident_tools.py --http PORT        # streamable HTTP on 127.0.0.1:PORT/mcp

Environment:
    INQUEST_MCP_COUNT_FILE   `restart_service` appends one line per execution
                             here, so tests (and later crash-recovery tests)
                             can count how often a mutating tool really ran.
"""

import json
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import ToolAnnotations

server = MCPServer("incident-tools")

IDEMPOTENCY_KEY = "inquest/idempotency_key"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_log(service: str) -> str:
    """Returns the last log lines of a service."""
    return f"{service}: 12:00:01 ERROR connection refused\n{service}: 12:00:02 WARN retrying"


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True))
def scale_service(service: str, replicas: int) -> str:
    """Sets a service's replica count (idempotent)."""
    return f"{service} scaled to {replicas}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False))
def restart_service(service: str) -> str:
    """Restarts a service. Counts its executions in $INQUEST_MCP_COUNT_FILE."""
    path = os.environ.get("INQUEST_MCP_COUNT_FILE")
    executions = 0
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(service + "\n")
        with open(path, encoding="utf-8") as f:
            executions = sum(1 for _ in f)
    return f"restarted {service} (execution {executions})"


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False))
async def slow_restart(service: str, seconds: float) -> str:
    """Restarts a service slowly: counts the execution in
    $INQUEST_MCP_COUNT_FILE when it starts, then takes `seconds`."""
    import anyio

    path = os.environ.get("INQUEST_MCP_COUNT_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(service + "\n")
    await anyio.sleep(seconds)
    return f"restarted {service} slowly"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def slow_read(service: str, seconds: float) -> str:
    """Reads a service's status slowly (read-only)."""
    import anyio

    await anyio.sleep(seconds)
    return f"{service}: healthy"


@server.tool()
def page_oncall(message: str) -> str:
    """Pages the on-call engineer. No annotations at all."""
    return f"paged: {message}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo_meta(ctx: Context) -> str:
    """Returns the request's `_meta` as JSON."""
    meta = ctx.request_context.meta or {}
    return json.dumps({"meta": dict(meta), "idempotency_key": meta.get(IDEMPOTENCY_KEY)})


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def fail(reason: str) -> str:
    """Always fails with the given reason (an isError result)."""
    raise ToolError(f"query failed: {reason}")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def big_output(size: int) -> str:
    """Returns `size` bytes of text."""
    return "x" * size


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def nul_output() -> str:
    """Returns text with NUL characters in it (a NUL-padded log)."""
    return "before\x00\x00\x00after"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def stderr_flood(size: int) -> str:
    """Writes one stderr line of `size` bytes, then answers."""
    sys.stderr.write("E" * size + "\n")
    sys.stderr.flush()
    return f"wrote {size} bytes to stderr"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def dashboard() -> list:
    """A text block and an image."""
    return ["CPU at 97%", Image(data=b"\x89PNG\r\n\x1a\n" + b"\0" * 8, format="png")]


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def server_pid() -> str:
    """The server process's pid."""
    return str(os.getpid())


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def sleep(seconds: float) -> str:
    """Sleeps, for timeout tests."""
    import anyio

    await anyio.sleep(seconds)
    return "slept"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
