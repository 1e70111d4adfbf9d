"""The yardstick of the bench's end-to-end rows: a minimal MCP server written with the
official Python SDK (PyPI `mcp`, its `MCPServer`), exposing what the rows call of hookhost —
`read_file` and `bash` — with no hooks, no sandbox and no trace; and the upstream of the
`gateway` rows, with `echo` and `big` (200 KB).

    python_server.py stdio
    python_server.py http PORT
"""

import subprocess
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("yardstick")


@server.tool()
def read_file(path: str) -> str:
    """The text of the file at `path`."""
    with open(path) as f:
        return f.read()


@server.tool()
def bash(command: str) -> str:
    """Runs `command` with bash; its stdout and stderr."""
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True)
    return done.stdout + done.stderr


@server.tool()
def echo(text: str) -> str:
    """Returns `text`."""
    return text


@server.tool()
def big() -> str:
    """200 KB of text."""
    return "0123456789abcdef\n" * (200_000 // 17)


if sys.argv[1] == "stdio":
    server.run("stdio")
else:
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
