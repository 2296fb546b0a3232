"""An MCP server (official Python SDK) with one tool, `environment`, that
returns the names and values of the variables it was started with, so a
test can check what a stdio server inherits from Inquest."""

import json
import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("env-tools")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def environment() -> str:
    """Returns this process's environment as a JSON object."""
    return json.dumps(dict(os.environ), sort_keys=True)


if __name__ == "__main__":
    server.run()
