"""Persistent directories as MCP clients meet them: sessions of the official Python SDK
against `hookhost serve --http`, each working in its own checkout of /persistent/notes and
publishing it with `hookhost/commit` (what an agent's harness sends at the end of a turn).
Run by host/tests/mcp.rs; every check is an assertion.

    persistent.py URL BACKING
    persistent.py fleet URL_A URL_B BACKING COUNT

- what session A writes, B does not read until A commits; then B's next call reads it;
- A and B change one file: A's commit wins, B's fails naming the file (-32040, the files
  in `data`), and B still reads its own text, and A's at .hookhost/theirs/; B merges the
  two and settles it with `resolve`;
- a raw client's DELETE whose commit conflicts is answered 409 naming the file, and the
  session goes on; settled, the DELETE ends it; another ends by discarding
  (`Hookhost-Discard: true`);
- /persistent/docs is read-only: write_file is refused though granted read-write;
- 16 sessions write and commit at once: every file lands, whole, in BACKING;
- (fleet) COUNT sessions spread over two hosts sharing a PostgreSQL session table commit
  at once: every commit lands, and the store counts COUNT commits.
"""

import asyncio
import contextlib
import os
import sys

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from client import commit, open_session, raw_post, sse_result


@contextlib.asynccontextmanager
async def session(url):
    async with httpx2.AsyncClient(timeout=120) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                yield s


def text(result):
    return "\n".join(b.text for b in result.content if getattr(b, "type", "") == "text")


async def read(s, path):
    return text(await s.call_tool("read_file", {"path": path}))


async def write(s, path, content):
    out = text(await s.call_tool("write_file", {"path": path, "content": content}))
    return out


async def conflicted_delete(url, backing):
    """A raw client's session whose DELETE conflicts: 409 with the files, the session
    still serves; `hookhost/commit` with resolve settles it and the DELETE ends it; another
    in conflict is ended by a DELETE that discards."""
    async with httpx2.AsyncClient(timeout=60) as raw:
        async def rpc(session_id, id, method, params):
            body = {"jsonrpc": "2.0", "id": id, "method": method, "params": params}
            return sse_result(await raw_post(raw, url, None, body, session_id))

        def delete(session_id, discard=False):
            headers = {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
            if discard:
                headers["Hookhost-Discard"] = "true"
            return raw.delete(url, headers=headers)

        async def write(session_id, content):
            return await rpc(session_id, 2, "tools/call", {"name": "write_file", "arguments": {
                "path": "/persistent/notes/d.md", "content": content}})

        first, second, third = [await open_session(raw, url, None) for _ in range(3)]
        for session_id in (first, second, third):
            await write(session_id, f"from {session_id}")
        assert (await delete(first)).status_code == 200
        with open(os.path.join(backing, "d.md")) as f:
            assert f.read() == f"from {first}"
        answer = await delete(second)
        assert answer.status_code == 409, (answer.status_code, answer.text)
        # The commits of the ends are counted (and traced) as any commit.
        metrics = (await raw.get(url.rsplit("/mcp", 1)[0] + "/metrics")).text
        assert 'hookhost_persistent_commits_total{tenant="default",outcome="conflict"}' in metrics, metrics
        error = answer.json()["error"]
        assert error["code"] == -32040, error
        assert error["data"] == {"mount": "/persistent/notes", "files": ["d.md"]}, error
        read = await rpc(second, 3, "tools/call", {"name": "read_file", "arguments": {
            "path": "/persistent/notes/d.md"}})
        assert f"from {second}" in read["result"]["content"][0]["text"], read
        settled = await rpc(second, 4, "hookhost/commit", {"resolve": "ours"})
        assert settled["result"]["committed"][0]["updated"] == ["d.md"], settled
        assert (await delete(second)).status_code == 200
        answer = await raw_post(raw, url, None, {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}, second)
        assert answer.status_code == 404, answer.status_code
        with open(os.path.join(backing, "d.md")) as f:
            assert f.read() == f"from {second}"
        assert (await delete(third)).status_code == 409
        assert (await delete(third, discard=True)).status_code == 200
        with open(os.path.join(backing, "d.md")) as f:
            assert f.read() == f"from {second}", "the discarded session published nothing"
    print("conflicted delete ok")


async def main(url, backing):
    async with session(url) as a, session(url) as b:
        assert "Wrote" in await write(a, "/persistent/notes/a.md", "from a")
        assert "no such file" in await read(b, "/persistent/notes/a.md")
        done = await commit(a)
        assert done["committed"][0]["mount"] == "/persistent/notes", done
        assert done["committed"][0]["created"] == ["a.md"], done
        assert "from a" in await read(b, "/persistent/notes/a.md")
        print("commit ok")

        assert "Wrote" in await write(a, "/persistent/notes/n.md", "from a")
        assert "Wrote" in await write(b, "/persistent/notes/n.md", "from b")
        await commit(a)
        try:
            await commit(b)
            raise AssertionError("b's commit should have failed")
        except MCPError as e:
            assert "conflict" in str(e) and "n.md" in str(e), str(e)
            assert e.error.code == -32040, e.error
            assert e.error.data == {"mount": "/persistent/notes", "files": ["n.md"]}, e.error
        assert "from b" in await read(b, "/persistent/notes/n.md")
        with open(os.path.join(backing, "n.md")) as f:
            assert f.read() == "from a"
        # The store's version, beside the session's, to merge from.
        assert "from a" in await read(b, "/persistent/notes/.hookhost/theirs/n.md")
        assert "Wrote" in await write(b, "/persistent/notes/n.md", "from a, then from b")
        try:
            await commit(b, resolve="mine")
            raise AssertionError("resolve takes ours or theirs")
        except MCPError as e:
            assert e.error.code == -32602, e.error
        done = await commit(b, resolve="theirs")
        assert done["committed"][0]["keptTheirs"] == ["n.md"], done
        with open(os.path.join(backing, "n.md")) as f:
            assert f.read() == "from a"
        assert "no such file" in await read(b, "/persistent/notes/.hookhost/theirs/n.md")
        done = await commit(b, resolve="ours")
        assert done["committed"][0]["updated"] == ["n.md"], done
        with open(os.path.join(backing, "n.md")) as f:
            assert f.read() == "from a, then from b"
        print("conflict ok")

        refused = await write(a, "/persistent/docs/x.md", "no")
        assert "permission denied" in refused, refused
        print("read-only ok")

    async def one(n):
        async with session(url) as s:
            assert "Wrote" in await write(s, f"/persistent/notes/many/{n}.md", f"session {n}\n" * 100)
            await commit(s)

    await conflicted_delete(url, backing)
    await asyncio.gather(*(one(n) for n in range(16)))
    for n in range(16):
        with open(os.path.join(backing, "many", f"{n}.md")) as f:
            assert f.read() == f"session {n}\n" * 100, n
    print("16 concurrent commits ok")


async def fleet(url_a, url_b, backing, count):
    """`count` sessions, every other one on each host of a fleet, write and commit at once:
    every commit lands whole, and the store counted each once (its generation)."""

    async def one(n):
        async with session(url_a if n % 2 else url_b) as s:
            assert "Wrote" in await write(s, f"/persistent/notes/fleet/{n}.md", f"session {n}\n" * 100)
            done = await commit(s)
            assert done["committed"][0]["created"] == [f"fleet/{n}.md"], done

    await asyncio.gather(*(one(n) for n in range(count)))
    for n in range(count):
        with open(os.path.join(backing, "fleet", f"{n}.md")) as f:
            assert f.read() == f"session {n}\n" * 100, n
    with open(os.path.join(backing, ".hookhost", "generation")) as f:
        assert int(f.read()) == count, "a commit was counted twice or lost"
    print(f"{count} commits through two hosts ok")


if __name__ == "__main__":
    if sys.argv[1] == "fleet":
        asyncio.run(fleet(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
    else:
        asyncio.run(main(sys.argv[1], sys.argv[2]))
