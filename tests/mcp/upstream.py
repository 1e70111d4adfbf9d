"""A small MCP server for the upstream tests, written with the official Python SDK: run on
stdio by hookhost as `[upstreams.test]`.

    upstream.py COUNTER_FILE

Each start bumps the number in COUNTER_FILE; from the second start on it also lists the
tool `added_after_restart`, so a restart changes the tools hookhost serves.
"""

import asyncio
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

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


if starts > 0:

    @server.tool()
    def added_after_restart() -> str:
        """Only listed after a restart."""
        return "new"


server.run()
