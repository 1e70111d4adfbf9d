"""hookhost fronting upstreams that speak only MCP 2026-07-28 (tests/mcp/modern_upstream.cjs,
made with the TypeScript SDK v2 and `legacy: 'reject'`), driven by the official Python SDK
as a 2025-era client (initialize, an MCP session) and as a client pinned to 2026-07-28.
Run by host/tests/mcp.rs; every check is an assertion, and success prints one line per
upstream.

    eras.py URL PREFIX [PREFIX ...]

For each PREFIX (what an upstream's tools are served with in front):
  listed    both clients list PREFIXecho and PREFIXconfirm;
  echo      both call PREFIXecho and get their text back;
  elicit    the 2025 client, which declared elicitation, is asked the upstream's question
            ("Really deploy?", from its `input_required` answer) and the answer reaches the
            upstream with its requestState: "confirmed deploy"; declining: "declined stop";
  unasked   a 2025 client that did not declare elicitation: an error naming the
            capability, and nobody asked;
  2026      the pinned client's PREFIXconfirm is an error saying why (its request has no
            stream for the upstream's question).
"""

import asyncio
import contextlib
import sys

import httpx2
import mcp_types as types
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client

MODERN = "2026-07-28"


def text(result):
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


@contextlib.asynccontextmanager
async def legacy(url, **callbacks):
    async with httpx2.AsyncClient(timeout=120) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, **callbacks) as s:
                init = await s.initialize()
                assert init.protocol_version < MODERN, init.protocol_version
                yield s


async def through(url, prefix):
    asked = []

    async def on_elicit(context, params):
        asked.append(params.message)
        action = "accept" if "deploy" in params.message else "decline"
        content = {"confirm": True} if action == "accept" else None
        return types.ElicitResult(action=action, content=content)

    async with legacy(url, elicitation_callback=on_elicit) as s:
        tools = {t.name for t in (await s.list_tools()).tools}
        assert {prefix + "echo", prefix + "confirm"} <= tools, sorted(tools)
        echoed = await s.call_tool(prefix + "echo", {"text": "hello, 2025"})
        assert text(echoed) == "hello, 2025", text(echoed)
        confirmed = await s.call_tool(prefix + "confirm", {"action": "deploy"})
        assert not confirmed.is_error and text(confirmed) == "confirmed deploy", text(confirmed)
        declined = await s.call_tool(prefix + "confirm", {"action": "stop"})
        assert text(declined) == "declined stop", text(declined)
        assert asked == ["Really deploy?", "Really stop?"], asked

    async with legacy(url) as s:
        unasked = await s.call_tool(prefix + "confirm", {"action": "deploy"})
        assert unasked.is_error, text(unasked)
        assert "did not declare the elicitation capability" in text(unasked), text(unasked)
    assert len(asked) == 2, asked

    async with httpx2.AsyncClient(timeout=120) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=MODERN) as c:
            assert c.protocol_version == MODERN, c.protocol_version
            tools = {t.name for t in (await c.list_tools()).tools}
            assert {prefix + "echo", prefix + "confirm"} <= tools, sorted(tools)
            echoed = await c.call_tool(prefix + "echo", {"text": "hello, 2026"})
            assert text(echoed) == "hello, 2026", text(echoed)
            refused = await c.call_tool(prefix + "confirm", {"action": "deploy"})
            assert refused.is_error, text(refused)
            assert "no stream for a server's requests" in text(refused), text(refused)
    print(f"{prefix}: listed, echo, elicit, unasked, 2026 ok", flush=True)


async def main():
    url, prefixes = sys.argv[1], sys.argv[2:]
    for prefix in prefixes:
        await through(url, prefix)


asyncio.run(main())
