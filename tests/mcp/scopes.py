"""Upstream servers with an instance per tenant or per session, driven by the official
Python SDK over HTTP. Run by host/tests/mcp.rs; every check is an assertion.

    scopes.py URL TOKEN_ALPHA TOKEN_BETA DATA

`memory` is npm `@modelcontextprotocol/server-memory` with `scope = "tenant"` (its file
under {data}/tenants/{tenant}); `mine` is tests/mcp/everything.py with `scope = "session"`
and `max_instances = 2`.
"""

import asyncio
import contextlib
import json
import os
import sys
import time

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def text(result):
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


@contextlib.asynccontextmanager
async def session(url, token):
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                yield s


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def main(url, alpha, beta, data):
    # Tenant scope: alpha's memory is alpha's; beta, with an instance of its own, sees none
    # of it; two sessions of alpha share one.
    secret = {"name": "alpha-secret", "entityType": "note", "observations": ["only alpha knows"]}
    async with session(url, alpha) as a1, session(url, alpha) as a2, session(url, beta) as b:
        made = await a1.call_tool("memory__create_entities", {"entities": [secret]})
        assert not made.is_error, text(made)
        assert "alpha-secret" in text(await a2.call_tool("memory__read_graph", {}))
        assert "alpha-secret" not in text(await b.call_tool("memory__read_graph", {}))
        made = await b.call_tool("memory__create_entities", {"entities": [dict(secret, name="beta-note")]})
        assert not made.is_error, text(made)
        assert "beta-note" not in text(await a1.call_tool("memory__read_graph", {}))
    with open(f"{data}/tenants/alpha/memory.jsonl") as f:
        kept = f.read()
    assert "alpha-secret" in kept and "beta-note" not in kept, kept

    # Session scope: each session its own process and memory; a session's instance stops
    # when the session ends; a third at once is over `max_instances = 2`.
    async with session(url, alpha) as s1:
        async with session(url, alpha) as s2:
            pid1 = int(text(await s1.call_tool("mine__whoami", {})))
            pid2 = int(text(await s2.call_tool("mine__whoami", {})))
            assert pid1 != pid2, (pid1, pid2)
            await s1.call_tool("mine__remember", {"fact": "one"})
            assert json.loads(text(await s2.call_tool("mine__recall", {}))) == []
            assert json.loads(text(await s1.call_tool("mine__recall", {}))) == ["one"]
            # The probe and the metrics count the instances, naming no tenant or session.
            base = url.rsplit("/mcp", 1)[0]
            async with httpx2.AsyncClient(timeout=30) as probe:
                health = (await probe.get(base + "/healthz")).json()
                assert health["instances"]["mine"] == {"up": 2}, health
                metrics = (await probe.get(base + "/metrics")).text
                assert 'hookhost_upstream_instances{upstream="mine",state="up"} 2' in metrics, metrics
                ready = (await probe.get(base + "/readyz")).json()
                assert ready["status"] == "ready" and ready["degraded"] == [], ready
            async with session(url, beta) as s3:
                over = await s3.call_tool("mine__whoami", {})
                assert over.is_error and "maximum of 2 instances" in text(over), text(over)
        deadline = time.monotonic() + 20
        while alive(pid2):
            assert time.monotonic() < deadline, f"session 2's instance {pid2} still runs"
            await asyncio.sleep(0.1)
        assert alive(pid1), "session 1's instance stopped with session 2"
    print("scopes ok", flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
