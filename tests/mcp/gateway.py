"""hookhost as an MCP gateway, driven by the official Python SDK: an upstream written with
the same SDK (tests/mcp/everything.py) serves resources, prompts, completions, logging,
elicitation and sampling, and everything reaches the client through hookhost. Run by
host/tests/mcp.rs; every check is an assertion.

    gateway.py URL TOKEN_A TOKEN_B AUDIT_DIR_A WORKDIR_A

Tenant A has the default chain (audit, offload); tenant B's allow-lists hide some
resources and prompts. The upstream may ask for roots (`roots = true`): A's sessions work
in WORKDIR_A, B's in none.
"""

import asyncio
import contextlib
import glob
import json
import sys
import time

import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

P = "everything__"


def text(result):
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


@contextlib.asynccontextmanager
async def session(url, token, **callbacks):
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, **callbacks) as s:
                yield s, await s.initialize()


async def within(seconds, what, check):
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        await asyncio.sleep(0.02)


async def resources_and_prompts(url, token_a, token_b, audit_dir):
    updates, logs = [], []

    async def on_message(message):
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(message.params.uri)

    async def on_log(params):
        logs.append(params.data)

    async with session(url, token_a, message_handler=on_message, logging_callback=on_log) as (a, init):
        caps = init.capabilities
        # Declared because the upstream serves them.
        assert caps.resources and caps.resources.subscribe, caps
        assert caps.prompts and caps.completions is not None and caps.logging is not None, caps

        listed = {r.uri for r in (await a.list_resources()).resources}
        assert {"test://static-text", "test://static-binary", "test://big"} <= listed, listed
        templates = [t.uri_template for t in (await a.list_resource_templates()).resource_templates]
        assert templates == ["test://template/{id}/data"], templates

        read = await a.read_resource("test://static-text")
        assert read.contents[0].text == "This is the content of the static text resource.", read
        binary = await a.read_resource("test://static-binary")
        assert binary.contents[0].blob.startswith("iVBOR"), binary
        made = await a.read_resource("test://template/42/data")
        assert json.loads(made.contents[0].text)["id"] == "42", made
        with_error = None
        try:
            await a.read_resource("test://nowhere")
        except MCPError as e:
            with_error = e
        assert with_error is not None and "not found" in str(with_error).lower(), with_error

        # A 2 MB resource goes through tenant A's chain: offloaded, and audited.
        big = (await a.read_resource("test://big")).contents[0].text
        assert big.startswith("[Output offloaded") and len(big) < 10_000, big[:300]
        audited = "".join(open(f).read() for f in glob.glob(f"{audit_dir}/**/*", recursive=True) if f.endswith((".jsonl", ".log")))
        # The audit hook records calls by name and sizes, not arguments.
        assert '"tool":"resources.read"' in audited and '"output_bytes":2097152' in audited, audited[-2000:]

        # Subscribed, a change reaches this session; unsubscribed, no more.
        await a.subscribe_resource("test://watched-resource")
        told = await a.call_tool(P + "touch_watched", {})
        assert text(told) == "told 1 subscribers", text(told)
        await within(10, "the update", lambda: updates == ["test://watched-resource"])
        await a.unsubscribe_resource("test://watched-resource")
        told = await a.call_tool(P + "touch_watched", {})
        assert text(told) == "told 0 subscribers", text(told)
        # A client that goes without unsubscribing is unsubscribed for it.
        async with session(url, token_a) as (other, _):
            await other.subscribe_resource("test://watched-resource")
            told = await a.call_tool(P + "touch_watched", {})
            assert text(told) == "told 1 subscribers", text(told)
        for _ in range(100):
            told = await a.call_tool(P + "touch_watched", {})
            if text(told) == "told 0 subscribers":
                break
            await asyncio.sleep(0.05)
        assert text(told) == "told 0 subscribers", text(told)

        prompts = {p.name for p in (await a.list_prompts()).prompts}
        assert P + "test_simple_prompt" in prompts and P + "test_prompt_with_arguments" in prompts, prompts
        got = await a.get_prompt(P + "test_prompt_with_arguments", {"arg1": "x", "arg2": "y"})
        assert got.messages[0].content.text == "Prompt with arguments: arg1='x', arg2='y'", got
        done = await a.complete(
            types.PromptReference(type="ref/prompt", name=P + "test_prompt_with_arguments"), {"name": "arg1", "value": "al"}
        )
        assert done.completion.values == ["alpha", "alpine"], done
        done = await a.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="test://template/{id}/data"), {"name": "id", "value": "12"}
        )
        assert done.completion.values == ["12", "123"], done

        # The upstream's log lines reach the session that caused them.
        await a.set_logging_level("info")
        await within(10, "the log line of setLevel", lambda: "Log level set to: info" in logs)
        logged = await a.call_tool(P + "test_tool_with_logging", {})
        assert text(logged) == "Tool with logging executed successfully", text(logged)
        await within(10, "the tool's log lines", lambda: "Tool execution completed" in logs)
        assert logs[-3:] == ["Tool execution started", "Tool processing data", "Tool execution completed"], logs

    # Tenant B's allow-lists: `resources = ["test://static-*"]`, `prompts = ["*simple*"]`.
    async with session(url, token_b) as (b, _):
        listed = {r.uri for r in (await b.list_resources()).resources}
        assert listed == {"test://static-text", "test://static-binary"}, listed
        hidden = None
        try:
            await b.read_resource("test://big")
        except MCPError as e:
            hidden = e
        assert hidden is not None, "tenant B read a resource its allow-list hides"
        prompts = {p.name for p in (await b.list_prompts()).prompts}
        assert prompts == {P + "test_simple_prompt"}, prompts
        refused = None
        try:
            await b.get_prompt(P + "test_prompt_with_image")
        except MCPError as e:
            refused = e
        assert refused is not None, "tenant B got a prompt its allow-list hides"
    print("resources and prompts ok", flush=True)


async def server_requests(url, token, token_b, workdir):
    asked = []

    async def on_elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"response": "yes, go"})

    async def on_sample(context, params):
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="four"), model="scripted"
        )

    # A client that declared elicitation and sampling is asked, and its answers are the
    # upstream's.
    async with session(url, token, elicitation_callback=on_elicit, sampling_callback=on_sample) as (s, _):
        answer = await s.call_tool(P + "test_elicitation", {"message": "Proceed?"})
        assert text(answer) == 'User response: action=accept, content={"response":"yes, go"}', text(answer)
        assert asked == ["Proceed?"], asked
        sampled = await s.call_tool(P + "test_sampling", {"prompt": "2+2?"})
        assert text(sampled) == "LLM response: four", text(sampled)

    # One that did not is never asked: the upstream gets MCP's error, not an answer made up.
    async with session(url, token) as (s, _):
        answer = await s.call_tool(P + "test_elicitation", {"message": "Proceed?"})
        assert text(answer).startswith("Elicitation not supported or error:"), text(answer)
        assert "did not declare the elicitation capability" in text(answer), text(answer)
        sampled = await s.call_tool(P + "test_sampling", {"prompt": "2+2?"})
        assert "did not declare the sampling capability" in text(sampled), text(sampled)
    # Over stdio nothing says which client an upstream's request is for: while a request of
    # another tenant runs on the upstream too, hookhost refuses rather than guess.
    async with session(url, token, elicitation_callback=on_elicit) as (s, _), session(url, token_b) as (b, _):
        other = asyncio.create_task(b.call_tool(P + "wait", {"secs": 2}))
        await asyncio.sleep(0.5)
        answer = await s.call_tool(P + "test_elicitation", {"message": "Whose?"})
        assert "several tenants run on this server at once" in text(answer), text(answer)
        assert "Whose?" not in asked, asked
        assert text(await other) == "waited"

    # Roots: the session's working directory, the only one it has.
    async with session(url, token) as (s, _):
        roots = json.loads(text(await s.call_tool(P + "roots", {})))
        assert roots == [f"file://{workdir}/"], (roots, workdir)
    async with session(url, token_b) as (s, _):
        roots = json.loads(text(await s.call_tool(P + "roots", {})))
        assert roots == [], roots
    print("server requests ok", flush=True)


async def progress_in_order(url, token, calls):
    """`calls` calls whose upstream reports progress 1 to 5 back to back then answers, over
    raw HTTP: each response stream holds the five notifications, in order, then the
    result."""
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    init = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "loop", "version": "1"}},
    }
    deadline = time.monotonic() + 240
    async with httpx2.AsyncClient(timeout=60) as http:
        response = await http.post(url, headers=headers, json=init)
        assert response.status_code == 200, response.text
        headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
        headers["MCP-Protocol-Version"] = "2025-11-25"
        await http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        for i in range(calls):
            assert time.monotonic() < deadline, f"{i} calls in 240 s"
            call = {
                "jsonrpc": "2.0", "id": i + 10, "method": "tools/call",
                "params": {"name": P + "progress_burst", "arguments": {}, "_meta": {"progressToken": f"p{i}"}},
            }
            response = await http.post(url, headers=headers, json=call)
            messages = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]
            seen = [m["params"]["progress"] if "method" in m else "result" for m in messages]
            assert seen == [1, 2, 3, 4, 5, "result"], (i, seen)
            assert all(m["params"]["progressToken"] == f"p{i}" for m in messages if "method" in m), messages
    print(f"progress ok: {calls} calls", flush=True)


async def modern_logs(url, token):
    """Requests of MCP 2026-07-28 (no MCP session) calling the upstream's tool that logs
    three `info` lines: a request whose `_meta` names no `logLevel` gets none of them, one
    that asks for `info` gets the three on its response stream before the result, one that
    asks for `error` none."""
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": P + "test_tool_with_logging",
    }
    async with httpx2.AsyncClient(timeout=60) as http:
        for n, (level, expected) in enumerate([(None, 0), ("info", 3), ("error", 0)]):
            meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}}
            if level:
                meta["io.modelcontextprotocol/logLevel"] = level
            call = {"jsonrpc": "2.0", "id": n + 1, "method": "tools/call",
                    "params": {"name": P + "test_tool_with_logging", "arguments": {}, "_meta": meta}}
            response = await http.post(url, headers=headers, json=call)
            assert response.status_code == 200, response.text
            messages = [json.loads(line[5:]) for line in response.text.splitlines()
                        if line.startswith("data:") and line[5:].strip()]
            if not messages:
                messages = [response.json()]
            logs = [m for m in messages if m.get("method") == "notifications/message"]
            assert len(logs) == expected, (level, messages)
            assert messages[-1].get("result", {}).get("content"), messages
    print("2026 logs ok", flush=True)


if __name__ == "__main__":
    url, token_a, token_b, audit_dir, workdir = sys.argv[1:6]
    asyncio.run(resources_and_prompts(url, token_a, token_b, audit_dir))
    asyncio.run(server_requests(url, token_a, token_b, workdir))
    asyncio.run(progress_in_order(url, token_a, 300))
    asyncio.run(modern_logs(url, token_a))
