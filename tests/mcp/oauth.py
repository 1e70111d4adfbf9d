"""Bearer JWTs naming tenants (`[auth]`), against `hookhost serve --http` started here,
with an identity provider made here on 127.0.0.1: its JWKS, its authorization-server
metadata and a token endpoint (client_credentials), signing with RSA keys it makes. Run by
host/tests/shell.rs; every check is an assertion.

    oauth.py HOOKHOST DATA CONFIG STATIC_TOKEN

- a 401 says where the protected-resource metadata (RFC 9728) is, and it names the
  provider;
- a valid token for tenant alpha opens an MCP session of alpha (the official Python SDK);
- tokens that are expired, for another audience or issuer, signed by another key, with
  `alg: none` or HS256 keyed with the public key, naming no tenant or an unknown one, or
  without a key id are refused;
- the tenant's own static token still works;
- a session opened with a JWT is its subject's (`sub`): another subject's token of the same
  tenant, or the tenant's own token, finds no such session (404), for an MCP session and a
  hookhost session named by an MCP 2026-07-28 request alike, and cannot end it; a token
  without a subject is refused;
- the provider rotates its key: a token signed with the new one is accepted;
- the SDK's own OAuth client (client_credentials) finds the provider from the 401 and
  the metadata, gets a token, and opens a session of tenant beta.
"""

import asyncio
import base64
import json
import os
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import ClientSession
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client

AUDIENCE = "hookhost-test"
CLIENT_ID, CLIENT_SECRET = "ci-client", "ci-client-secret-0123456789"


class Provider:
    """The identity provider: a key (rotated on demand) and an HTTP server."""

    def __init__(self):
        self.keys = {}
        self.current = None
        self.rotate()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/jwks.json":
                    self.answer(200, provider.jwks())
                elif self.path.startswith("/.well-known/oauth-authorization-server"):
                    self.answer(200, {
                        "issuer": provider.issuer,
                        "authorization_endpoint": provider.issuer + "/authorize",
                        "token_endpoint": provider.issuer + "/token",
                        "jwks_uri": provider.issuer + "/jwks.json",
                        "grant_types_supported": ["client_credentials"],
                        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
                        "response_types_supported": ["code"],
                    })
                else:
                    self.answer(404, {"error": "not_found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                self.rfile.read(length)
                expected = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
                if self.path != "/token" or self.headers.get("Authorization") != f"Basic {expected}":
                    self.answer(401, {"error": "invalid_client"})
                    return
                self.answer(200, {"access_token": provider.token("beta"), "token_type": "Bearer",
                                  "expires_in": 300})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def rotate(self):
        kid = f"k{len(self.keys) + 1}"
        self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.current = kid

    def jwks(self):
        """Only the current key: a rotation retires the old one."""
        public = self.keys[self.current].public_key()
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(public))
        jwk.update({"kid": self.current, "use": "sig", "alg": "RS256"})
        return {"keys": [jwk]}

    def token(self, tenant, **overrides):
        claims = {"iss": self.issuer, "aud": AUDIENCE, "sub": "agent",
                  "exp": int(time.time()) + 300, "iat": int(time.time())}
        if tenant is not None:
            claims["tenant"] = tenant
        claims.update(overrides.pop("claims", {}))
        claims = {name: value for name, value in claims.items() if value is not None}
        key = overrides.pop("key", self.keys[self.current])
        kid = overrides.pop("kid", self.current)
        headers = {"kid": kid} if kid else {}
        return jwt.encode(claims, key, algorithm="RS256", headers=headers)


def public_pem(key):
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(claims, kid):
    header = b64(json.dumps({"alg": "none", "typ": "JWT", "kid": kid}).encode())
    return f"{header}.{b64(json.dumps(claims).encode())}."


def hs256(claims, secret, kid):
    """The algorithm-confusion attack: HMAC keyed with what the server knows as public."""
    import hashlib
    import hmac
    signed = f'{b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())}.{b64(json.dumps(claims).encode())}'
    return f"{signed}.{b64(hmac.new(secret, signed.encode(), hashlib.sha256).digest())}"


def sessions_of(data, tenant):
    path = os.path.join(data, "tenants", tenant, "sessions")
    return set(os.listdir(path)) if os.path.isdir(path) else set()


async def session_of(url, http, data, tenant):
    """An MCP session through `http` runs a command, in a session of `tenant`."""
    before = sessions_of(data, tenant)
    async with streamable_http_client(url, http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            echoed = await session.call_tool("bash", {"command": "echo $PWD"})
            assert "".join(b.text for b in echoed.content).strip() == "/workspace", echoed
            # Its directories are made by its first call, under its tenant's.
            assert len(sessions_of(data, tenant) - before) == 1, (tenant, sessions_of(data, tenant))


async def status_of(url, token):
    """The status of an `initialize` presenting `token`."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "probe", "version": "0"}}}
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(timeout=30) as client:
        response = await client.post(url, json=body, headers=headers)
        return response.status_code


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "probe", "version": "0"}}}
MODERN = "2026-07-28"


async def post(http, url, token, body, headers=None):
    """`body` POSTed with `token` and `headers`."""
    sent = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}",
            **(headers or {})}
    return await http.post(url, json=body, headers=sent)


async def bound_to_subject(url, provider, static_token):
    """Sessions opened with a JWT are its subject's alone."""
    mine = provider.token("alpha")
    theirs = provider.token("alpha", claims={"sub": "someone-else"})
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    async with httpx2.AsyncClient(timeout=60) as http:
        # An MCP session (2025-06-18).
        opened = await post(http, url, mine, INITIALIZE)
        assert opened.status_code == 200, opened.text
        sid = opened.headers["mcp-session-id"]
        session = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await post(http, url, mine, initialized, session)).status_code == 202
        assert (await post(http, url, mine, listing, session)).status_code == 200
        for who, token in (("another subject", theirs), ("the tenant's token", static_token)):
            used = await post(http, url, token, listing, session)
            assert used.status_code == 404, f"{who} used the session: {used.status_code}"
        ended = await http.delete(url, headers={"Authorization": f"Bearer {theirs}", **session})
        assert ended.status_code == 404, ended.status_code
        assert (await post(http, url, mine, listing, session)).status_code == 200

        # A hookhost session named by MCP 2026-07-28 requests.
        modern = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "bash"}

        def call(named):
            return {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                "name": "bash", "arguments": {"command": "echo mine >> mine.txt; cat mine.txt"},
                "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                          "io.modelcontextprotocol/clientCapabilities": {},
                          "dev.hookhost/session": named}}}
        made = await post(http, url, mine, call("new"), modern)
        assert made.status_code == 200, made.text
        hookhost_session = made.headers["hookhost-session"]
        stolen = await post(http, url, theirs, call(hookhost_session), modern)
        assert stolen.status_code == 404, (stolen.status_code, stolen.text)
        again = await post(http, url, mine, call(hookhost_session), modern)
        assert again.status_code == 200 and "mine\\nmine" in again.text, again.text
        for token, status in ((theirs, 404), (mine, 200)):
            ended = await http.delete(url, headers={"Authorization": f"Bearer {token}",
                                                    "Hookhost-Session": hookhost_session})
            assert ended.status_code == status, (ended.status_code, ended.text)
        assert (await http.delete(url, headers={"Authorization": f"Bearer {mine}", **session})).status_code == 200


class Memory:
    """Token storage for the SDK's OAuth client."""

    def __init__(self):
        self.tokens = self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info):
        self.client = client_info


async def checks(url, provider, data, static_token):
    base = url.rsplit("/mcp", 1)[0]
    async with httpx2.AsyncClient(timeout=30) as client:
        refused = await client.post(url, json={})
        assert refused.status_code == 401, refused.status_code
        challenge = refused.headers["www-authenticate"]
        found = re.search(r'resource_metadata="([^"]+)"', challenge)
        assert found and found.group(1) == base + "/.well-known/oauth-protected-resource/mcp", challenge
        metadata = (await client.get(found.group(1))).json()
        assert metadata["resource"] == url, metadata
        assert metadata["authorization_servers"] == [provider.issuer], metadata

    headers = {"Authorization": f"Bearer {provider.token('alpha')}"}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
        await session_of(url, http, data, "alpha")

    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    kid = provider.current
    bad = {
        "expired": provider.token("alpha", claims={"exp": int(time.time()) - 3600}),
        "another audience": provider.token("alpha", claims={"aud": "someone-else"}),
        "another issuer": provider.token("alpha", claims={"iss": "http://127.0.0.1:1"}),
        "another key": provider.token("alpha", key=other),
        "alg none": unsigned({"iss": provider.issuer, "aud": AUDIENCE, "tenant": "alpha",
                              "exp": int(time.time()) + 300}, kid),
        "HS256 keyed with the public key": hs256(
            {"iss": provider.issuer, "aud": AUDIENCE, "tenant": "alpha", "exp": int(time.time()) + 300},
            public_pem(provider.keys[kid]), kid),
        "no tenant": provider.token(None),
        "an unknown tenant": provider.token("gamma"),
        "no key id": provider.token("alpha", kid=None),
        "no subject": provider.token("alpha", claims={"sub": None}),
        "not a JWT": "a.b.c",
    }
    for what, token in bad.items():
        status = await status_of(url, token)
        assert status == 401, f"{what}: {status}"

    assert await status_of(url, static_token) == 200

    await bound_to_subject(url, provider, static_token)

    # A new key is fetched when a token names it, at most every few seconds (hookhost's
    # JWKS_REFETCH_INTERVAL, 5 s): asked again once a fetch is due, since each refusal
    # counts against this address's 20 wrong tokens a minute, of which the tokens above
    # took ten.
    provider.rotate()
    deadline = time.monotonic() + 30
    while await status_of(url, provider.token("alpha")) != 200:
        assert time.monotonic() < deadline, "a token of the rotated key was never accepted"
        await asyncio.sleep(5.5)
    rotated = {"Authorization": f"Bearer {provider.token('alpha')}"}
    async with httpx2.AsyncClient(headers=rotated, timeout=120) as http:
        await session_of(url, http, data, "alpha")

    # The provider's token endpoint gives this client tokens naming beta.
    oauth = ClientCredentialsOAuthProvider(server_url=url, storage=Memory(), client_id=CLIENT_ID,
                                           client_secret=CLIENT_SECRET, issuer=provider.issuer)
    async with httpx2.AsyncClient(auth=oauth, timeout=120) as http:
        await session_of(url, http, data, "beta")


def main(hookhost, data, config, static_token):
    provider = Provider()
    with open(config, "a") as f:
        # The JWKS from the environment, as a secret may be.
        f.write(f'\n[auth]\njwks = "${{HOOKHOST_TEST_JWKS}}"\nissuer = "{provider.issuer}"\n'
                f'audience = "{AUDIENCE}"\n')
    server = subprocess.Popen([hookhost, "--data", data, "--config", config, "serve", "--http", "127.0.0.1:0"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "HOOKHOST_TEST_JWKS": f"{provider.issuer}/jwks.json"})
    try:
        url = None
        for line in server.stderr:
            if "serving MCP at " in line:
                url = line.split("serving MCP at ", 1)[1].strip()
                break
        assert url, "hookhost did not announce its address"
        threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()
        asyncio.run(checks(url, provider, data, static_token))
    finally:
        server.terminate()
        server.wait(timeout=30)
        provider.server.shutdown()
    print("oauth ok", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
