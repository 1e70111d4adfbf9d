"""A small MCP server for the upstream tests, written with the official Python SDK: run on
stdio by hookhost as `[upstreams.test]`.

    upstream.py COUNTER_FILE

Each start bumps the number in COUNTER_FILE; from the second start on it also lists the
tool `added_after_restart`, so a restart changes the tools hookhost serves. Its tools return
what the SDK makes of a function's value by default: structured content beside the text
(`letters`, `record`, `weather`), an image (`chart`), an embedded resource (`report`).
"""

import asyncio
import os
import sys
from typing_extensions import TypedDict

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp_types import EmbeddedResource, TextResourceContents, ToolAnnotations

counter = sys.argv[1]
starts = int(open(counter).read()) if os.path.exists(counter) else 0
with open(counter, "w") as f:
    f.write(str(starts + 1))

server = MCPServer("test-upstream")


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool(title="Count steps", annotations=ToolAnnotations(read_only_hint=True))
async def count(steps: int, ctx: Context) -> str:
    """Counts to `steps`, reporting progress at each step."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return f"counted to {steps}"


@server.tool()
async def wait(secs: float) -> str:
    """Answers after `secs` seconds."""
    await asyncio.sleep(secs)
    return "waited"


@server.tool()
def letters(count: int) -> str:
    """`count` letters a."""
    return "a" * count


class Row(TypedDict):
    n: int
    name: str


class Table(TypedDict):
    rows: list[Row]


class Weather(TypedDict):
    city: str
    celsius: int


@server.tool()
def record(rows: int) -> Table:
    """A table of `rows` rows, as structured content."""
    return {"rows": [{"n": n, "name": f"row {n}"} for n in range(rows)]}


@server.tool()
def weather() -> Weather:
    """A small structured result."""
    return {"city": "Lyon", "celsius": 7}


@server.tool()
def chart(size: int) -> Image:
    """A PNG-typed image of `size` bytes."""
    return Image(data=b"\x89PNG" + b"\0" * max(size - 4, 0), format="png")


@server.tool()
def report(chars: int) -> EmbeddedResource:
    """An embedded text resource of `chars` characters."""
    text = "r" * chars
    return EmbeddedResource(type="resource", resource=TextResourceContents(uri="test://report", mime_type="text/plain", text=text))


if starts > 0:

    @server.tool()
    def added_after_restart() -> str:
        """Only listed after a restart."""
        return "new"


server.run()
