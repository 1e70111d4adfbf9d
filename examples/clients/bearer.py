"""A tenant's MCP client for `hookhost serve --http`, with the official Python SDK (`pip
install mcp`): its bearer token names the tenant. Run: `HOOKHOST_TOKEN=… python bearer.py
http://127.0.0.1:8080/mcp`."""

import asyncio
import os
import sys

import httpx2  # what the SDK's HTTP transport is built on (mcp >= 2)
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main(url: str) -> None:
    headers = {"Authorization": f"Bearer {os.environ['HOOKHOST_TOKEN']}"}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http, \
            streamable_http_client(url, http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = [tool.name for tool in (await session.list_tools()).tools]
            print("tools:", ", ".join(tools))
            result = await session.call_tool("bash", {"command": "echo hello from $PWD"})
            print(result.content[0].text.strip())


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
