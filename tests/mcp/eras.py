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
  unasked   a 2025 client that did not declare elicitation: the upstream, sent that
            client's capabilities, refuses with -32021 naming it, and nobody is asked;
  2026      the pinned client, which declared elicitation, is asked the upstream's question
            in the answer to its request (`input_required`, through hookhost's requestState)
            and its retry completes the call: "confirmed deploy"; one that did not declare
            it gets -32021 naming the capability;
  grown     PREFIXgrow adds a tool without telling anyone (a 2026 upstream's list changes
            reach no one hookhost does not listen to): hookhost lists the tools again when
            the list's ttlMs (0, the SDK's default, held to UPSTREAM_RELIST_MIN) is over,
            and PREFIXgrown is listed within 30 s.
"""

import asyncio
import contextlib
import sys
import time

import httpx2
import mcp_types as types
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

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
        # The upstream was told the client cannot answer, and says so (MCP's -32021).
        assert "-32021" in text(unasked) and "elicitation" in text(unasked), text(unasked)
    assert len(asked) == 2, asked

    async with httpx2.AsyncClient(timeout=120) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=MODERN) as c:
            assert c.protocol_version == MODERN, c.protocol_version
            tools = {t.name for t in (await c.list_tools()).tools}
            assert {prefix + "echo", prefix + "confirm"} <= tools, sorted(tools)
            echoed = await c.call_tool(prefix + "echo", {"text": "hello, 2026"})
            assert text(echoed) == "hello, 2026", text(echoed)
            try:
                refused = await c.call_tool(prefix + "confirm", {"action": "deploy"})
                raise AssertionError(f"an undeclared elicitation was not refused: {text(refused)}")
            except MCPError as e:
                assert e.error.code == -32021, e.error
                assert "elicitation" in (e.error.data or {}).get("requiredCapabilities", {}), e.error
        async with Client(streamable_http_client(url, http_client=http), mode=MODERN,
                          elicitation_callback=on_elicit) as c:
            confirmed = await c.call_tool(prefix + "confirm", {"action": "deploy"})
            assert not confirmed.is_error and text(confirmed) == "confirmed deploy", text(confirmed)
            assert asked == ["Really deploy?", "Really stop?", "Really deploy?"], asked

            grew = await c.call_tool(prefix + "grow", {})
            assert text(grew) == "grown", text(grew)
            deadline = time.monotonic() + 30
            while prefix + "grown" not in {t.name for t in (await c.list_tools()).tools}:
                assert time.monotonic() < deadline, f"{prefix}grown never listed"
                await asyncio.sleep(0.5)
    print(f"{prefix}: listed, echo, elicit, unasked, 2026, grown ok", flush=True)


async def main():
    url, prefixes = sys.argv[1], sys.argv[2:]
    for prefix in prefixes:
        await through(url, prefix)


asyncio.run(main())
