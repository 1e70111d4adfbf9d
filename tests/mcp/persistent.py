"""Persistent directories as MCP clients meet them: sessions of the official Python SDK
against `hookhost serve --http`, each working in its own checkout of /persistent/notes and
publishing it with `hookhost/commit` (what an agent's harness sends at the end of a turn).
Run by host/tests/mcp.rs; every check is an assertion.

    persistent.py URL BACKING
    persistent.py fleet URL_A URL_B BACKING COUNT

- what session A writes, B does not read until A commits; then B's next call reads it;
- A and B change one file: A's commit wins, B's fails naming the file, and B still reads
  its own text;
- /persistent/docs is read-only: write_file is refused though granted read-write;
- 16 sessions write and commit at once: every file lands, whole, in BACKING;
- (fleet) COUNT sessions spread over two hosts sharing a PostgreSQL session table commit
  at once: every commit lands, and the store counts COUNT commits.
"""

import asyncio
import contextlib
import os
import sys
from typing import Any, Literal

import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter


class CommitRequest(types.Request[dict[str, Any] | None, Literal["hookhost/commit"]]):
    method: Literal["hookhost/commit"] = "hookhost/commit"
    params: dict[str, Any] | None = None


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


async def commit(s):
    return await s.send_request(CommitRequest(), TypeAdapter(dict))


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
        assert "from b" in await read(b, "/persistent/notes/n.md")
        with open(os.path.join(backing, "n.md")) as f:
            assert f.read() == "from a"
        print("conflict ok")

        refused = await write(a, "/persistent/docs/x.md", "no")
        assert "permission denied" in refused, refused
        print("read-only ok")

    async def one(n):
        async with session(url) as s:
            assert "Wrote" in await write(s, f"/persistent/notes/many/{n}.md", f"session {n}\n" * 100)
            await commit(s)

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
