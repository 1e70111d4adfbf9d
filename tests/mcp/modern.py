"""The official Python SDK pinned to MCP 2026-07-28 (no initialize, no MCP session: each
request names its version in `_meta`), driving `hookhost serve --http`; then a 2025-era
client against the same server. Every check is an assertion, so a failure exits non-zero
with the reason; success prints one JSON line of what was seen.

    modern.py URL [TOKEN] [--other-token OTHER] [--data DATA]
    modern.py URL [TOKEN] --fleet URL2
    modern.py URL TOKEN --asks --other-token OTHER --data DATA

TOKEN is a tenant's bearer token (none for `--unauthenticated-bash`); OTHER, another
tenant's, which must not reach TOKEN's sessions; with DATA, the server's data directory,
the ephemeral session's files are also looked for on disk.

What it checks:
  discover  the pinned client lists the tools, `bash` and `read_file` among them;
  new       `bash seq 1 5000` naming the session `new` in `_meta`: an offload reference,
            the new session's id in the result's `_meta` and the `hookhost-session` header;
  read      read_file of that reference in that session (named in `_meta`, then in the
            `Hookhost-Session` header) pages from the middle of the file ("2500");
  ephemeral a call naming no session: the ephemeral note, no session named back, and its
            file gone (a named session cannot read it; with DATA, not on disk either);
  unknown   a session id the tenant does not have is refused (HTTP 404), and so is
            another tenant naming this one's session (with OTHER);
  conflict  the header and `_meta` naming different sessions is refused (HTTP 400);
  delete    DELETE with the header ends the session; naming it then is refused (404);
  listen    `subscriptions/listen` is acknowledged with the filter accepted, tagged with
            the request's id;
  fleet     (alone, with --fleet) a session made on one host read on the other, requests
            alternating, then ended on the second and unknown on the first;
  legacy    a 2025-era client (mode="legacy": initialize, Mcp-Session-Id) still works,
            and mode="auto" negotiates 2026-07-28.

With --asks (alone; hookhost fronting tests/mcp/everything.py as `everything`, a 2025-era
server, and tests/mcp/modern_upstream.cjs as `modern`, of 2026-07-28), the questions of
upstreams asked in the answer, as MCP 2026-07-28 asks (`input_required`):
  sdk       the SDK's own multi-round-trip driver, with its elicitation and sampling
            callbacks: everything's test_elicitation and test_sampling (asked as requests
            by the upstream, in the answer by hookhost) and modern's confirm (asked in its
            answer by the upstream) complete, in a named session and in an ephemeral one;
  once      the tenant's audit log (DATA) has one call per call made: the hooks saw one,
            not one per round;
  bound     by hand: the requestState hookhost gives is refused (-32602) to another tenant
            (OTHER), to the owner naming another tool, tampered with, and once used; the
            owner's retry completes;
  missing   a retry without the asked key is asked again, under a new state;
  twice     a call that asks twice (everything's ask_twice) is asked the second question
            after the first retry, and completes with both answers; while another tenant's
            call runs on the same stdio upstream, whose questions name no request, the
            question is asked of neither;
  slow      an answer given after the upstream's timeout (3 s here) still completes the
            call: the client's time is not the upstream's;
  ended     a call held in a session that is then deleted: its retry is refused;
  undeclared a client that did not declare sampling gets -32021 (HTTP 400) when the
            upstream asks for it;
  follows   `subscriptions/listen` naming test://watched-resource is told its update
            (everything's touch_watched, called meanwhile), tagged with the request's id.
"""

import argparse
import asyncio
import glob
import json
import os
import sys
import time
import uuid

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

MODERN = "2026-07-28"
SESSION_META = "dev.hookhost/session"
SESSION_HEADER = "Hookhost-Session"
EPHEMERAL_NOTE = "[hookhost: this request named no hookhost session"
SEQ = "".join(f"{i}\n" for i in range(1, 5001))


class Failed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failed(message)


def text(result):
    return "".join(getattr(block, "text", "") for block in result.content)


def offloaded_path(reference):
    for line in reference.splitlines():
        if line.startswith("Full output: "):
            return line[len("Full output: "):]
    raise Failed(f"not an offload reference: {reference[:200]!r}")


class Http:
    """An httpx client for the SDK that records each response's status and
    `hookhost-session` header (the SDK does not show them)."""

    def __init__(self, token, headers=None):
        self.seen = []
        all_headers = dict(headers or {})
        if token:
            all_headers["Authorization"] = f"Bearer {token}"
        self.headers = all_headers

    def client(self):
        async def record(response):
            self.seen.append((response.request.method, response.status_code,
                              response.headers.get("hookhost-session")))
        return httpx2.AsyncClient(headers=self.headers, timeout=60,
                                  event_hooks={"response": [record]})


def pinned(url, http):
    return Client(streamable_http_client(url, http_client=http.client()), mode=MODERN)


async def refused(call, status, http, what):
    """Awaits `call`, which must fail with an MCP error after an HTTP `status`."""
    before = len(http.seen)
    try:
        result = await call
    except MCPError as e:
        statuses = [s for _, s, _ in http.seen[before:]]
        check(status in statuses, f"{what}: refused ({e}) but with HTTP {statuses}, not {status}")
        return {"status": status, "code": e.error.code, "message": e.error.message}
    raise Failed(f"{what}: not refused: {text(result)[:300]!r}")


async def modern(url, token, other_token, data):
    results = {}
    http = Http(token)
    async with pinned(url, http) as client:
        check(client.protocol_version == MODERN, f"protocol version {client.protocol_version}")

        # (a) The tools, without any session.
        tools = {tool.name for tool in (await client.list_tools()).tools}
        check({"bash", "read_file"} <= tools, f"tools: {sorted(tools)}")
        results["discover"] = sorted(tools)

        # (b) A new lasting session, named back in the result's _meta and the header.
        before = len(http.seen)
        result = await client.call_tool("bash", {"command": "seq 1 5000"}, meta={SESSION_META: "new"})
        check(not result.is_error, f"bash in a new session failed: {text(result)}")
        reference = text(result)
        check(reference.startswith("[Output offloaded: 23893 characters"), f"not offloaded: {reference[:200]!r}")
        check(EPHEMERAL_NOTE not in reference, f"a named session got the ephemeral note: {reference}")
        path = offloaded_path(reference)
        check(path.startswith("/artifacts/tool-results/bash/"), path)
        session = (result.meta or {}).get(SESSION_META)
        check(session and session != "new", f"no session in the result's _meta: {result.meta}")
        headers = [h for _, _, h in http.seen[before:] if h]
        check(session in headers, f"the answer's hookhost-session headers {headers} lack {session}")
        results["new"] = {"session": session, "path": path}

        # (c) The reference read back in that session, from the middle of the file.
        offset = SEQ.index("2500\n")
        page = await client.call_tool("read_file", {"path": path, "offset": offset, "limit": 50},
                                      meta={SESSION_META: session})
        check(not page.is_error, f"read_file in session {session}: {text(page)}")
        check(text(page).startswith("2500\n2501\n"), f"read_file at {offset}: {text(page)[:200]!r}")
        check((page.meta or {}).get(SESSION_META) == session, f"read_file _meta: {page.meta}")
        results["read"] = {"offset": offset, "first": text(page).split("\n", 1)[0]}

    # The same session named in the header instead, by a client that knows nothing of it.
    by_header = Http(token, {SESSION_HEADER: session})
    async with pinned(url, by_header) as client:
        page = await client.call_tool("read_file", {"path": path, "offset": offset, "limit": 10})
        check(not page.is_error and text(page).startswith("2500\n"),
              f"read_file with the header: {text(page)[:200]!r}")
        results["read"]["header"] = True

    http = Http(token)
    async with pinned(url, http) as client:
        # (d) No session named: an ephemeral one, whose files are gone once answered.
        sessions_before = session_dirs(data)
        before = len(http.seen)
        result = await client.call_tool("bash", {"command": "seq 1 5000"})
        check(not result.is_error, f"ephemeral bash failed: {text(result)}")
        blocks = [getattr(block, "text", "") for block in result.content]
        check(any(b.startswith(EPHEMERAL_NOTE) for b in blocks[1:]), f"no ephemeral note: {blocks}")
        gone = offloaded_path(blocks[0])
        check(SESSION_META not in (result.meta or {}), f"an ephemeral call named a session: {result.meta}")
        named = [h for _, _, h in http.seen[before:] if h]
        check(not named, f"an ephemeral answer named sessions in the header: {named}")
        read = await client.call_tool("read_file", {"path": gone}, meta={SESSION_META: session})
        check(read.is_error, f"the ephemeral file read in session {session}: {text(read)[:200]!r}")
        results["ephemeral"] = {"path": gone, "read_elsewhere": text(read)[:120]}
        if data:
            # The same search finds the lasting session's file: it would see the other.
            kept = glob.glob(os.path.join(data, "tenants", "*", "sessions", "*", "artifacts", "**",
                                          os.path.basename(path)), recursive=True)
            check(len(kept) == 1, f"the lasting session's file is not found on disk: {kept}")
            name = os.path.basename(gone)
            deadline = time.monotonic() + 5
            while True:
                left = glob.glob(os.path.join(data, "tenants", "*", "sessions", "*", "artifacts", "**", name),
                                 recursive=True)
                new_dirs = session_dirs(data) - sessions_before
                if not left and not new_dirs:
                    break
                check(time.monotonic() < deadline,
                      f"after 5 s the ephemeral file is still on disk: {left}; new session dirs: {sorted(new_dirs)}")
                await asyncio.sleep(0.1)
            results["ephemeral"]["on_disk"] = "gone"

        # (e) A session the tenant does not have.
        results["unknown"] = await refused(
            client.call_tool("bash", {"command": "true"}, meta={SESSION_META: str(uuid.uuid4())}),
            404, http, "an unknown session")

    if other_token:
        other = Http(other_token)
        async with pinned(url, other) as client:
            results["unknown"]["other_tenant"] = await refused(
                client.call_tool("read_file", {"path": path}, meta={SESSION_META: session}),
                404, other, "another tenant's session")

    # The header and _meta naming different sessions.
    conflict = Http(token, {SESSION_HEADER: str(uuid.uuid4())})
    async with pinned(url, conflict) as client:
        results["conflict"] = await refused(
            client.call_tool("bash", {"command": "true"}, meta={SESSION_META: session}),
            400, conflict, "the header and _meta naming different sessions")

    # DELETE ends the session; naming it is refused from then on.
    async with httpx2.AsyncClient(timeout=30) as raw:
        headers = {SESSION_HEADER: session}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        response = await raw.delete(url, headers=headers)
        check(response.status_code == 200, f"DELETE: {response.status_code} {response.text}")
        again = await raw.delete(url, headers=headers)
        check(again.status_code == 404, f"a second DELETE: {again.status_code} {again.text}")
    http = Http(token)
    async with pinned(url, http) as client:
        results["delete"] = await refused(
            client.call_tool("read_file", {"path": path}, meta={SESSION_META: session}),
            404, http, "a deleted session")
    return results


def session_dirs(data):
    if not data:
        return set()
    return set(glob.glob(os.path.join(data, "tenants", "*", "sessions", "*")))


async def legacy(url, token):
    http = Http(token)
    async with Client(streamable_http_client(url, http_client=http.client()), mode="legacy") as client:
        check(client.protocol_version < MODERN, f"legacy negotiated {client.protocol_version}")
        check(client.server_info and client.server_info.name == "hookhost", f"server info {client.server_info}")
        tools = {tool.name for tool in (await client.list_tools()).tools}
        check("bash" in tools, sorted(tools))
        result = await client.call_tool("bash", {"command": "seq 1 5000"})
        check(not result.is_error, text(result))
        path = offloaded_path(text(result))
        check(EPHEMERAL_NOTE not in text(result), f"a 2025 session got the ephemeral note: {text(result)}")
        check(SESSION_META not in (result.meta or {}), f"a 2025 result named a session: {result.meta}")
        page = await client.call_tool("read_file", {"path": path, "offset": SEQ.index("2500\n"), "limit": 10})
        check(text(page).startswith("2500\n"), f"legacy read_file: {text(page)[:200]!r}")
        found = {"protocol_version": client.protocol_version, "read": True}
    async with Client(streamable_http_client(url, http_client=Http(token).client()), mode="auto") as client:
        found["auto"] = client.protocol_version
        check(client.protocol_version == MODERN, f"mode=auto negotiated {client.protocol_version}")
    return found


async def listen(url, token):
    """`subscriptions/listen` for the tools' list changes, as the wire has it: the stream's
    first message is the acknowledgement, naming the filter hookhost accepted (tools, not
    the prompts no upstream serves here) and tagged with the request's id."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": MODERN, "Mcp-Method": "subscriptions/listen"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = {"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": True, "promptsListChanged": True},
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                  "io.modelcontextprotocol/clientCapabilities": {}}}}
    async with httpx2.AsyncClient(timeout=30) as http:
        async with http.stream("POST", url, headers=headers, json=request) as response:
            check(response.status_code == 200, f"subscriptions/listen: HTTP {response.status_code}")
            async for line in response.aiter_lines():
                if not line.startswith("data:") or not line[5:].strip():
                    continue
                message = json.loads(line[5:])
                check(message.get("method") == "notifications/subscriptions/acknowledged",
                      f"the first message is not the acknowledgement: {message}")
                params = message.get("params", {})
                accepted = params.get("notifications", params)
                check(accepted.get("toolsListChanged") is True and not accepted.get("promptsListChanged"),
                      f"accepted {params}")
                tagged = params.get("_meta", {}).get("io.modelcontextprotocol/subscriptionId")
                check(tagged == "listen-1", f"the acknowledgement is tagged {tagged!r}: {message}")
                return {"accepted": accepted}
    raise Failed("subscriptions/listen: the stream ended without an acknowledgement")


async def fleet(urls, token):
    """Two hosts on one session table, every request to the other host than the last (a
    balancer without affinity): a session made on one is used, and ended, on the other."""
    clients = [pinned(url, Http(token)) for url in urls]
    async with clients[0] as first, clients[1] as second:
        hosts = [first, second]
        # A file written in a new session on one host (no bash needed: the fleet's hosts
        # serve none without tokens) …
        path = "/workspace/count.txt"
        result = await first.call_tool("write_file", {"path": path, "content": SEQ},
                                       meta={SESSION_META: "new"})
        check(not result.is_error, f"write_file: {text(result)}")
        session = (result.meta or {}).get(SESSION_META)
        check(session and session != "new", f"no session named: {result.meta}")
        # … read back in pages, each request to the other host.
        for turn in range(1, 7):
            page = await hosts[turn % 2].call_tool(
                "read_file", {"path": path, "offset": SEQ.index(f"{turn * 500}\n"), "limit": 6},
                meta={SESSION_META: session})
            check(text(page).startswith(f"{turn * 500}\n"), f"host {turn % 2}: {text(page)[:200]!r}")
    headers = {SESSION_HEADER: session, **({"Authorization": f"Bearer {token}"} if token else {})}
    async with httpx2.AsyncClient(timeout=30) as http:
        ended = await http.delete(urls[1], headers=headers)
        check(ended.status_code == 200, f"DELETE on the second host: HTTP {ended.status_code}")
        gone = await http.delete(urls[0], headers=headers)
        check(gone.status_code == 404, f"the first host still has it: HTTP {gone.status_code}")
    return {"session": session, "reads": 6}


def raw_headers(token, method, name=None):
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name:
        headers["Mcp-Name"] = name
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


async def raw_call(http, url, token, name, arguments, capabilities, _meta_session=None, **extra):
    """A 2026 `tools/call` by hand: its HTTP status and JSON-RPC message (with the session
    the answer names as `_session` in its result, when `_meta_session` names one)."""
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": capabilities}
    if _meta_session:
        meta[SESSION_META] = _meta_session
    request = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": "tools/call",
               "params": {"name": name, "arguments": arguments, "_meta": meta, **extra}}
    response = await http.post(url, headers=raw_headers(token, "tools/call", name), json=request)
    body = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        body = next(line[5:] for line in body.splitlines() if line.startswith("data:") and line[5:].strip())
    message = json.loads(body)
    if _meta_session and "result" in message:
        message["result"]["_session"] = response.headers.get("hookhost-session")
    return response.status_code, message


async def asks(url, token, other_token, data):
    from mcp_types import CreateMessageResult, ElicitResult, TextContent

    asked = []

    async def elicit(context, params):
        asked.append(("elicitation", params.message))
        return ElicitResult(action="accept", content={"response": "yes", "confirm": True})

    async def sample(context, params):
        asked.append(("sampling", params.messages[0].content.text))
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text="Paris"),
                                   model="scripted", stop_reason="endTurn")

    results = {}
    calls = {}
    http = Http(token)
    client = Client(streamable_http_client(url, http_client=http.client()), mode=MODERN,
                    elicitation_callback=elicit, sampling_callback=sample)
    async with client:
        for named in ("new", None):
            meta = {SESSION_META: named} if named else None
            said = text(await client.call_tool("everything__test_elicitation", {"message": "Deploy?"}, meta=meta))
            check(said.startswith('User response: action=accept, content={"response":"yes"'), said)
            said = text(await client.call_tool("everything__test_sampling", {"prompt": "Capital of France?"}, meta=meta))
            check(said == "LLM response: Paris", said)
            said = text(await client.call_tool("modern__confirm", {"action": "deploy"}, meta=meta))
            check(said == "confirmed deploy", said)
            for tool in ("everything__test_elicitation", "everything__test_sampling", "modern__confirm"):
                calls[tool] = calls.get(tool, 0) + 1
        check(asked == [("elicitation", "Deploy?"), ("sampling", "Capital of France?"),
                        ("elicitation", "Really deploy?")] * 2, f"asked {asked}")
        results["sdk"] = asked[:3]

    async with httpx2.AsyncClient(timeout=60) as raw:
        declared = {"elicitation": {}, "sampling": {}}
        tool = "everything__test_elicitation"
        status, first = await raw_call(raw, url, token, tool, {"message": "Stop?"}, declared)
        result = first.get("result", {})
        check(status == 200 and result.get("resultType") == "input_required", f"{status} {first}")
        requests = result.get("inputRequests", {})
        check(list(requests) == ["elicitation"] and requests["elicitation"]["method"] == "elicitation/create"
              and requests["elicitation"]["params"]["message"] == "Stop?", f"asked {requests}")
        state = result.get("requestState")
        check(isinstance(state, str) and state, f"no requestState: {result}")
        answer = {"elicitation": {"action": "accept", "content": {"response": "no"}}}
        refusals = {}
        for who, (as_token, name, sent) in {
            "other tenant": (other_token, tool, state),
            "other tool": (token, "everything__test_sampling", state),
            "tampered": (token, tool, state[:-1] + ("0" if state[-1] != "0" else "1")),
        }.items():
            status, refused = await raw_call(raw, url, as_token, name, {"message": "Stop?"}, declared,
                                             inputResponses=answer, requestState=sent)
            check(refused.get("error", {}).get("code") == -32602, f"{who}: {status} {refused}")
            refusals[who] = refused["error"]["code"]
        # Missing the key: asked again, under a new state.
        status, again = await raw_call(raw, url, token, tool, {"message": "Stop?"}, declared,
                                       inputResponses={"other": answer["elicitation"]}, requestState=state)
        again = again.get("result", {})
        check(again.get("resultType") == "input_required" and list(again.get("inputRequests", {})) == ["elicitation"]
              and again.get("requestState") not in (None, state), f"a retry without the key: {again}")
        status, done = await raw_call(raw, url, token, tool, {"message": "Stop?"}, declared,
                                      inputResponses=answer, requestState=again["requestState"])
        said = "".join(block.get("text", "") for block in done.get("result", {}).get("content", []))
        check(said.startswith('User response: action=accept, content={"response":"no"}'), f"{status} {done}")
        status, used = await raw_call(raw, url, token, tool, {"message": "Stop?"}, declared,
                                      inputResponses=answer, requestState=again["requestState"])
        check(used.get("error", {}).get("code") == -32602, f"a used state: {status} {used}")
        refusals["used"] = used["error"]["code"]
        calls[tool] += 1
        results["bound"] = refusals

        # Two questions in one call: the second asked after the first retry.
        status, first = await raw_call(raw, url, token, "everything__ask_twice", {"message": "m"}, declared)
        asked_first = first["result"]["inputRequests"]["elicitation"]["params"]["message"]
        one = {"elicitation": {"action": "accept", "content": {"response": "r1"}}}
        status, second = await raw_call(raw, url, token, "everything__ask_twice", {"message": "m"}, declared,
                                        inputResponses=one, requestState=first["result"]["requestState"])
        second = second.get("result", {})
        check(second.get("resultType") == "input_required", f"the second question: {second}")
        asked_second = second["inputRequests"]["elicitation"]["params"]["message"]
        two = {"elicitation": {"action": "accept", "content": {"response": "r2"}}}
        status, done = await raw_call(raw, url, token, "everything__ask_twice", {"message": "m"}, declared,
                                      inputResponses=two, requestState=second["requestState"])
        said = "".join(block.get("text", "") for block in done.get("result", {}).get("content", []))
        check((asked_first, asked_second) == ("first:m", "second:m") and '"r1"' in said and '"r2"' in said,
              f"asked {asked_first!r}, {asked_second!r}: {said}")
        # Another tenant's call running on the same (shared, stdio) upstream, whose
        # questions carry no request of their own: the question is asked of nobody.
        other = asyncio.create_task(raw_call(raw, url, other_token, "everything__wait", {"secs": 2}, declared))
        await asyncio.sleep(0.5)
        status, mixed = await raw_call(raw, url, token, "everything__ask_twice", {"message": "x"}, declared)
        said_mixed = "".join(block.get("text", "") for block in mixed.get("result", {}).get("content", []))
        check(mixed.get("result", {}).get("resultType") == "complete" and "cannot tell which" in said_mixed,
              f"a question among two tenants' calls: {mixed}")
        status, waited = await other
        check(waited.get("result", {}).get("resultType") == "complete", f"the other tenant was asked: {waited}")
        calls["everything__ask_twice"] = 2
        results["twice"] = said

        # An answer slower than the upstream's timeout (3 s).
        status, slow = await raw_call(raw, url, token, tool, {"message": "Slow?"}, declared)
        await asyncio.sleep(4)
        status, done = await raw_call(raw, url, token, tool, {"message": "Slow?"}, declared,
                                      inputResponses=answer, requestState=slow["result"]["requestState"])
        said = "".join(block.get("text", "") for block in done.get("result", {}).get("content", []))
        check(said.startswith("User response: action=accept"), f"a slow answer: {status} {done}")
        calls[tool] += 1
        results["slow"] = said

        # A call held in a session that ends: its retry is refused.
        status, held = await raw_call(raw, url, token, tool, {"message": "Ended?"}, declared,
                                      _meta_session="new")
        session = held["result"]["_session"]
        ended = await raw.delete(url, headers={**raw_headers(token, "DELETE"), SESSION_HEADER: session})
        check(ended.status_code == 200, f"DELETE: {ended.status_code}")
        status, refused = await raw_call(raw, url, token, tool, {"message": "Ended?"}, declared,
                                         inputResponses=answer, requestState=held["result"]["requestState"])
        check(refused.get("error", {}).get("code") == -32602 and "ended" in refused["error"]["message"],
              f"a retry in an ended session: {status} {refused}")
        calls[tool] += 1
        results["ended"] = refused["error"]["code"]

        # A client that did not declare sampling: the call fails with -32021, HTTP 400.
        status, undeclared = await raw_call(raw, url, token, "everything__test_sampling", {"prompt": "Hi"},
                                            {"elicitation": {}})
        error = undeclared.get("error", {})
        check(status == 400 and error.get("code") == -32021
              and "sampling" in (error.get("data") or {}).get("requiredCapabilities", {}),
              f"undeclared sampling: {status} {undeclared}")
        calls["everything__test_sampling"] += 1
        results["undeclared"] = {"status": status, "code": error["code"]}

    results["follows"] = await follows(url, token)
    calls["everything__touch_watched"] = 1

    # The hooks saw each call once, whatever its rounds (the audit hook's log).
    tenant_dirs = glob.glob(f"{data}/tenants/*/audit/audit.jsonl")
    audit = [json.loads(line) for path in tenant_dirs for line in open(path)]
    started = {}
    for line in audit:
        if line.get("event") == "start" and line.get("tool") in calls:
            started[line["tool"]] = started.get(line["tool"], 0) + 1
    check(started == calls, f"audited starts {started}, calls made {calls}")
    results["once"] = started
    return results


async def follows(url, token):
    """A listener that names a resource is told of its update."""
    uri = "test://watched-resource"
    request = {"jsonrpc": "2.0", "id": "follow-1", "method": "subscriptions/listen", "params": {
        "notifications": {"resourceSubscriptions": [uri]},
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                  "io.modelcontextprotocol/clientCapabilities": {}}}}
    async with httpx2.AsyncClient(timeout=30) as http:
        async with http.stream("POST", url, headers=raw_headers(token, "subscriptions/listen"),
                               json=request) as response:
            check(response.status_code == 200, f"subscriptions/listen: HTTP {response.status_code}")
            lines = response.aiter_lines()
            async for line in lines:
                if line.startswith("data:") and line[5:].strip():
                    acknowledged = json.loads(line[5:])
                    break
            accepted = acknowledged.get("params", {}).get("notifications", {})
            check(accepted.get("resourceSubscriptions") == [uri], f"accepted {acknowledged}")
            status, touched = await raw_call(http, url, token, "everything__touch_watched", {}, {})
            check(status == 200 and "result" in touched, f"touch_watched: {status} {touched}")
            async for line in lines:
                if not line.startswith("data:") or not line[5:].strip():
                    continue
                message = json.loads(line[5:])
                if message.get("method") == "notifications/resources/updated":
                    check(message["params"]["uri"] == uri, f"updated {message}")
                    tagged = message["params"].get("_meta", {}).get("io.modelcontextprotocol/subscriptionId")
                    check(tagged == "follow-1", f"the update is tagged {tagged!r}")
                    return {"uri": uri, "tagged": tagged}
    raise Failed("the listener was not told of the resource's update")


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("token", nargs="?")
    parser.add_argument("--other-token", help="another tenant's token, refused this tenant's sessions")
    parser.add_argument("--data", help="the server's data directory, to look for ephemeral files on disk")
    parser.add_argument("--asks", action="store_true", help="run the checks of upstreams' questions alone")
    parser.add_argument("--fleet", metavar="URL", help="a second host on the same session table: "
                        "run the fleet checks alone, alternating hosts per request")
    args = parser.parse_args()
    started = time.monotonic()
    if args.asks:
        results = await asks(args.url, args.token, args.other_token, args.data)
        print(json.dumps(results), flush=True)
        return
    if args.fleet:
        results = await fleet([args.url, args.fleet], args.token)
        print(json.dumps(results), flush=True)
        return
    results = await modern(args.url, args.token, args.other_token, args.data)
    results["listen"] = await listen(args.url, args.token)
    results["legacy"] = await legacy(args.url, args.token)
    results["seconds"] = round(time.monotonic() - started, 2)
    results["ok"] = True
    print(json.dumps(results), flush=True)


def leaves(error):
    """The exceptions inside `error`, which anyio's task groups wrap in groups."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


if __name__ == "__main__":
    try:
        asyncio.run(asyncio.wait_for(main(), timeout=120))
    except (Exception, BaseExceptionGroup) as error:
        for leaf in leaves(error):
            what = "" if isinstance(leaf, Failed) else f"{type(leaf).__name__}: "
            print(f"modern.py: FAILED: {what}{leaf}", file=sys.stderr)
        sys.exit(1)
