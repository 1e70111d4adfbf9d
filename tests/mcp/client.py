"""An MCP client that hookhost did not write (the official Python SDK), driving
`hookhost serve` over stdio or Streamable HTTP. Run by tests/all/mcp.rs; every check is an
assertion, so a failure exits non-zero with the reason.

    client.py stdio HOOKHOST DATA [CONFIG]
    client.py http URL TOKEN OTHER_TOKEN [UPSTREAM_TOOL]
"""

import asyncio
import json
import re
import sys

import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

CONTINUE = re.compile(r"\n\n\[bytes \d+-(\d+) of \d+; to continue reading use offset=\d+\]$")


def text(result):
    assert result.content, result
    return "".join(block.text for block in result.content)


def is_error(result):
    return bool(getattr(result, "is_error", None) or getattr(result, "isError", None))


async def page_back(session, path):
    """Reads `path` with read_file a page at a time and returns the pages joined."""
    whole, offset = "", 0
    while True:
        page = await session.call_tool("read_file", {"path": path, "offset": offset, "limit": 8192})
        assert not is_error(page), text(page)
        body = text(page)
        match = CONTINUE.search(body)
        if not match:
            return whole + body
        whole += body[: match.start()]
        offset = int(match.group(1))


def offloaded_path(reference):
    for line in reference.splitlines():
        if line.startswith("Full output: "):
            return line[len("Full output: "):]
    raise AssertionError(f"not offloaded:\n{reference}")


async def main_job(session, upstream_tool=None):
    init = session.initialize_result if hasattr(session, "initialize_result") else None
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    for name in ["bash", "read_file", "write_file", "edit_file", "todo_write"]:
        assert name in tools, sorted(tools)
    assert tools["read_file"].input_schema["required"] == ["path"], tools["read_file"].input_schema

    result = await session.call_tool("bash", {"command": "seq 1 5000"})
    assert not is_error(result), text(result)
    reference = text(result)
    assert reference.startswith("[Output offloaded: 23893 characters"), reference
    path = offloaded_path(reference)
    assert path.startswith("/artifacts/tool-results/bash/") and path.endswith(".txt"), path
    expected = "".join(f"{i}\n" for i in range(1, 5001))
    assert await page_back(session, path) == expected

    todos = {"todos": [{"id": "1", "content": "Page the output", "status": "completed"},
                       {"id": "2", "content": "Write the plan", "status": "in_progress"}]}
    result = await session.call_tool("todo_write", todos)
    assert not is_error(result), text(result)
    assert json.loads(text(result)) == todos

    failed = await session.call_tool("bash", {"command": "exit 3"})
    assert is_error(failed) and "[exit code: 3]" in text(failed), text(failed)

    if upstream_tool:
        assert upstream_tool in tools, sorted(tools)
        message = "upstream says " + "y" * 20000
        result = await session.call_tool(upstream_tool, {"message": message})
        assert not is_error(result), text(result)
        path = offloaded_path(text(result))
        assert path.startswith("/artifacts/tool-results/" + upstream_tool + "/"), path
        assert message in await page_back(session, path)
    print("main job ok", flush=True)


async def stdio(hookhost, data, config=None):
    args = ["--data", data] + (["--config", config] if config else []) + ["serve"]
    params = StdioServerParameters(command=hookhost, args=args)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert "read_file" in (init.instructions or ""), init.instructions
            assert init.server_info.name == "hookhost"
            await main_job(session)


async def raw_post(client, url, token, body, session_id=None):
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if session_id:
        headers["Mcp-Session-Id"] = session_id
        headers["MCP-Protocol-Version"] = "2025-11-25"
    return await client.post(url, headers=headers, content=json.dumps(body))


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"}}}


async def http(url, token, other_token, upstream_tool=None):
    async with httpx2.AsyncClient(timeout=30) as raw:
        for bad in [None, "wrong-token-0123456789"]:
            response = await raw_post(raw, url, bad, INITIALIZE)
            assert response.status_code == 401, (bad, response.status_code, response.text)

        # Tenant A opens a session; tenant B may not use it.
        response = await raw_post(raw, url, token, INITIALIZE)
        assert response.status_code == 200, response.text
        session_id = response.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        response = await raw_post(raw, url, other_token, listing, session_id)
        assert response.status_code == 404, (response.status_code, response.text)
        call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "write_file", "arguments": {"path": "b.txt", "content": "b"}}}
        response = await raw_post(raw, url, other_token, call, session_id)
        assert response.status_code == 404, (response.status_code, response.text)
        headers = {"Authorization": f"Bearer {token}", "Mcp-Session-Id": session_id}
        response = await raw.delete(url, headers=headers)
        assert response.status_code in (200, 202, 204), response.status_code

    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                assert "read_file" in (init.instructions or ""), init.instructions
                await main_job(session, upstream_tool)
    print("http ok", flush=True)


if __name__ == "__main__":
    mode, rest = sys.argv[1], sys.argv[2:]
    asyncio.run(stdio(*rest) if mode == "stdio" else http(*rest))
