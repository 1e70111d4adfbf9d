"""The admin page in a real headless browser (Debian's Chromium, driven by Playwright for
Python), against `hookhost serve --http` with `[serve] admin_token`. Run by
host/tests/shell.rs; every check is an assertion, so a failure exits non-zero with the
reason.

    browser.py URL ADMIN_TOKEN TENANT TENANT_TOKEN DATA CHROMIUM

An MCP client (the official Python SDK) makes a session of TENANT that writes a file, one
of them named like HTML; then the page: a wrong token is refused; with the admin token the
session is listed, its timeline shows the call and the file's diff (the HTML-like name as
text, no element made of it); the session is deleted from the page and is gone on disk;
the config is reloaded from the page.
"""

import asyncio
import os
import sys

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from playwright.async_api import async_playwright, expect

HOSTILE_NAME = "<img src=x onerror=alert(1)>.txt"


def text(result):
    return "".join(block.text for block in result.content)


async def browse(url, admin_token, session_id, session_dir, chromium):
    base = url.rsplit("/mcp", 1)[0]
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        page = await browser.new_page()
        dialogs = []

        async def on_dialog(dialog):
            dialogs.append(dialog.message)
            await dialog.accept()

        page.on("dialog", on_dialog)
        response = await page.goto(base + "/admin")
        assert response.status == 200, response.status
        policy = response.headers.get("content-security-policy", "")
        assert "script-src 'self'" in policy, policy

        # A wrong token is refused.
        await page.fill("#token", "not-the-admin-token-0123456789")
        await page.click("#login-form button[type=submit]")
        await expect(page.locator("#login-error")).to_contain_text("refused")
        await expect(page.locator("#main")).to_be_hidden()

        # The admin token lists the session.
        await page.fill("#token", admin_token)
        await page.click("#login-form button[type=submit]")
        row = page.locator(f'tr[data-session="{session_id}"]')
        await expect(row).to_be_visible()

        # Its timeline: the call, and the file it created with its diff.
        await row.get_by_role("button", name="Timeline").click()
        timeline = page.locator("#timeline")
        await expect(timeline).to_be_visible()
        await expect(timeline.locator(".call h3").first).to_contain_text("bash")
        created = timeline.locator('li[data-kind="file.created"]', has_text="/workspace/notes.txt")
        await expect(created).to_be_visible()
        await expect(created.locator("pre.diff")).to_contain_text("+hello")
        hostile = timeline.locator('li[data-kind="file.created"]', has_text=HOSTILE_NAME)
        await expect(hostile).to_be_visible()
        assert await page.locator("#calls img").count() == 0, "a file name was drawn as HTML"
        assert not dialogs, dialogs

        # Deleted from the page: gone from the list and from the disk.
        await row.get_by_role("button", name="Delete").click()
        await expect(row).to_have_count(0)
        assert dialogs and session_id in dialogs[-1], dialogs
        await expect(page.locator("#status")).to_contain_text("deleted")
        for _ in range(50):
            if not os.path.exists(session_dir):
                break
            await asyncio.sleep(0.1)
        assert not os.path.exists(session_dir), session_dir

        # The config reloaded from the page.
        await page.click("#reload")
        await expect(page.locator("#status")).to_contain_text("Config reloaded: nothing changed")
        await browser.close()


async def main(url, admin_token, tenant, tenant_token, data, chromium):
    headers = {"Authorization": f"Bearer {tenant_token}"}
    browsed = False
    try:
        async with httpx2.AsyncClient(headers=headers, timeout=120) as http, \
                streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                wrote = await session.call_tool("bash", {
                    "command": f"printf 'hello\\nworld\\n' > notes.txt && echo x > '{HOSTILE_NAME}' && echo wrote"})
                assert text(wrote).strip() == "wrote", text(wrote)
                sessions_dir = os.path.join(data, "tenants", tenant, "sessions")
                [session_id] = os.listdir(sessions_dir)
                await browse(url, admin_token, session_id, os.path.join(sessions_dir, session_id), chromium)
                browsed = True
    except Exception:
        # The session was deleted from the page, so the client's own end of it fails;
        # anything that failed before that is the test's failure.
        if not browsed:
            raise
    print("admin page ok", flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
