"""hookhost as the OAuth client of upstreams that require MCP authorization. Made here on
127.0.0.1: an authorization server (metadata, a token endpoint for the client_credentials
and refresh_token grants, tokens that live LIFETIME seconds, refresh tokens rotated on each
use) and a resource server, an MCP server written with the official Python SDK that
accepts only the authorization server's live tokens for its own URL. hookhost (`serve`,
stdio, driven by the same SDK) fronts it three times, once per way to get a token:

- `secret`: client_credentials, the client authenticated by its secret;
- `jwt`: client_credentials, the client authenticated by a JWT signed with its EC key
  (private_key_jwt);
- `refresh`: the refresh_token grant, a public client with a refresh token from the config.

The resource server is restarted once on the way (its MCP sessions lost): hookhost goes on
with the tokens it holds — the config's refresh token was rotated away at its first use.

Every check is an assertion: each upstream gets its first token at the connection and
serves calls; tokens that expired are replaced before the call; tokens the server revoked
(a 401) are replaced and the call still succeeds; a revoked refresh token makes the call
fail with an error that says what to configure; hookhost's log (at debug) holds no secret,
no key, no refresh or access token. Run by host/tests/mcp.rs.

    protected.py HOOKHOST WORKDIR
"""

import asyncio
import base64
import json
import os
import secrets
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

LIFETIME = 2
SECRET_CLIENT, SECRET = "secret-client", "secret-" + secrets.token_hex(16)
JWT_CLIENT = "jwt-client"
REFRESH_CLIENT = "refresh-client"


def wait_for(port):
    """Until something listens on `port` (at most 10 s)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


def listener():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


class AuthorizationServer:
    """Issues opaque tokens; remembers every grant, every live token and refresh token."""

    def __init__(self, resource):
        self.resource = resource
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.lock = threading.Lock()
        self.access = {}  # token -> (client, expiry)
        self.refresh = {}  # refresh token -> client
        self.grants = []  # (client, grant_type, how the client authenticated)
        self.issued = []  # every token and refresh token, to look for in logs
        self.refresh_token = self._new_refresh(REFRESH_CLIENT)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def private_key_pem(self):
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()

    def _new_refresh(self, client):
        token = "rt-" + secrets.token_hex(16)
        self.refresh[token] = client
        self.issued.append(token)
        return token

    def revoke_access(self):
        with self.lock:
            self.access.clear()

    def revoke_refresh(self):
        with self.lock:
            self.refresh.clear()

    def grants_of(self, client):
        with self.lock:
            return [g for g in self.grants if g[0] == client]

    def live(self, token):
        with self.lock:
            found = self.access.get(token)
        if found and found[1] > time.time():
            return found[0]
        return None

    def token(self, form, headers):
        """The token endpoint: (status, body)."""
        grant = form.get("grant_type")
        if form.get("resource") != self.resource:
            return 400, {"error": "invalid_target"}
        client, how = None, None
        auth = headers.get("Authorization", "")
        if auth.startswith("Basic "):
            client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
            client_id = urllib.parse.unquote_plus(client_id)
            secret = urllib.parse.unquote_plus(secret)
            if (client_id, secret) == (SECRET_CLIENT, SECRET):
                client, how = client_id, "client_secret_basic"
        elif form.get("client_secret"):
            if (form.get("client_id"), form["client_secret"]) == (SECRET_CLIENT, SECRET):
                client, how = SECRET_CLIENT, "client_secret_post"
        elif form.get("client_assertion"):
            try:
                claims = jwt.decode(
                    form["client_assertion"],
                    self.key.public_key(),
                    algorithms=["ES256"],
                    audience=[self.url, self.url + "/"],
                )
            except jwt.PyJWTError:
                return 401, {"error": "invalid_client"}
            if claims.get("iss") == claims.get("sub") == JWT_CLIENT:
                client, how = JWT_CLIENT, "private_key_jwt"
        elif form.get("client_id") == REFRESH_CLIENT:
            client, how = REFRESH_CLIENT, "none"
        if client is None:
            return 401, {"error": "invalid_client"}
        with self.lock:
            if grant == "client_credentials" and client != REFRESH_CLIENT:
                refresh = None
            elif grant == "refresh_token" and client == REFRESH_CLIENT:
                if self.refresh.pop(form.get("refresh_token"), None) != client:
                    return 400, {"error": "invalid_grant", "error_description": "revoked"}
                refresh = self._new_refresh(client)
            else:
                return 400, {"error": "unauthorized_client"}
            token = "at-" + secrets.token_hex(16)
            self.issued.append(token)
            self.access[token] = (client, time.time() + LIFETIME)
            self.grants.append((client, grant, how))
        body = {"access_token": token, "token_type": "Bearer", "expires_in": LIFETIME}
        if refresh:
            body["refresh_token"] = refresh
        return 200, body

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path != "/.well-known/oauth-authorization-server":
                    return self.reply(404, {})
                self.reply(
                    200,
                    {
                        "issuer": server.url,
                        "authorization_endpoint": server.url + "/authorize",
                        "token_endpoint": server.url + "/token",
                        "grant_types_supported": ["client_credentials", "refresh_token"],
                        "token_endpoint_auth_methods_supported": [
                            "client_secret_basic",
                            "private_key_jwt",
                            "none",
                        ],
                        "token_endpoint_auth_signing_alg_values_supported": ["ES256"],
                        "response_types_supported": ["code"],
                        "code_challenge_methods_supported": ["S256"],
                    },
                )

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                if self.path != "/token":
                    return self.reply(404, {})
                self.reply(*server.token(form, self.headers))

        return Handler


class Verifier:
    """The resource server's check of a bearer token: live at the authorization server."""

    def __init__(self, authorization_server):
        self.authorization = authorization_server
        self.refused = 0

    async def verify_token(self, token):
        client = self.authorization.live(token)
        if client is None:
            self.refused += 1
            return None
        return AccessToken(
            token=token, client_id=client, scopes=[], resource=self.authorization.resource
        )


def resource_server(port, authorization, verifier):
    server = MCPServer(
        "protected",
        token_verifier=verifier,
        auth=AuthSettings(
            issuer_url=authorization.url,
            resource_server_url=authorization.resource,
            validate_token_resource=True,
        ),
    )

    @server.tool()
    def whoami() -> str:
        """The client the token was issued to."""
        return get_access_token().client_id

    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1
    )
    served = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(served.serve()), daemon=True)
    thread.start()
    return served, thread


def text(result):
    return "\n".join(b.text for b in result.content if getattr(b, "type", "") == "text")


async def call(session, upstream):
    result = await session.call_tool(f"{upstream}__whoami", {})
    return bool(result.is_error), text(result)


async def main(hookhost, work):
    sock = listener()
    port = sock.getsockname()[1]
    sock.close()
    resource = f"http://127.0.0.1:{port}/mcp"
    authorization = AuthorizationServer(resource)
    verifier = Verifier(authorization)
    served, thread = resource_server(port, authorization, verifier)
    wait_for(port)
    key = os.path.join(work, "jwt-client.pem")
    with open(key, "w") as f:
        f.write(authorization.private_key_pem())
    config = os.path.join(work, "hookhost.toml")
    with open(config, "w") as f:
        f.write(
            f"""
[upstreams.secret]
url = "{resource}"
[upstreams.secret.oauth]
client_id = "{SECRET_CLIENT}"
client_secret = "${{SECRET}}"

[upstreams.jwt]
url = "{resource}"
[upstreams.jwt.oauth]
client_id = "{JWT_CLIENT}"
private_key = "${{file:{key}}}"
signing_algorithm = "ES256"

[upstreams.refresh]
url = "{resource}"
[upstreams.refresh.oauth]
client_id = "{REFRESH_CLIENT}"
refresh_token = "${{REFRESH_TOKEN}}"
"""
        )
    env = dict(os.environ, SECRET=SECRET, REFRESH_TOKEN=authorization.refresh_token)
    env["HOOKHOST_LOG"] = "debug"
    log_path = os.path.join(work, "hookhost.log")
    params = StdioServerParameters(
        command=hookhost,
        args=["--data", os.path.join(work, "data"), "--config", config, "serve"],
        env=env,
    )
    upstreams = {"secret": SECRET_CLIENT, "jwt": JWT_CLIENT, "refresh": REFRESH_CLIENT}
    with open(log_path, "w") as log:
        async with stdio_client(params, errlog=log) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                names = {t.name for t in (await session.list_tools()).tools}
                for upstream in upstreams:
                    assert f"{upstream}__whoami" in names, names

                # Each got its token at the connection, by its grant.
                for client, grant in [
                    (SECRET_CLIENT, ("client_credentials", "client_secret_basic")),
                    (JWT_CLIENT, ("client_credentials", "private_key_jwt")),
                    (REFRESH_CLIENT, ("refresh_token", "none")),
                ]:
                    grants = [g[1:] for g in authorization.grants_of(client)]
                    assert grants == [grant], authorization.grants
                for upstream, client in upstreams.items():
                    assert await call(session, upstream) == (False, client)
                print("first tokens ok")

                # The tokens expire: each call gets a new one and succeeds.
                for round in range(2):
                    before = {c: len(authorization.grants_of(c)) for c in upstreams.values()}
                    await asyncio.sleep(LIFETIME + 0.5)
                    for upstream, client in upstreams.items():
                        assert await call(session, upstream) == (False, client)
                        assert len(authorization.grants_of(client)) > before[client], (
                            upstream,
                            authorization.grants,
                        )
                print("expiry ok")

                # The server revokes every token: the 401 makes hookhost get another.
                for upstream, client in upstreams.items():
                    authorization.revoke_access()
                    refused, before = verifier.refused, len(authorization.grants_of(client))
                    assert await call(session, upstream) == (False, client)
                    assert verifier.refused > refused, upstream
                    assert len(authorization.grants_of(client)) == before + 1, upstream
                print("revocation ok")

                # The resource server restarts: hookhost goes on with the tokens it holds
                # (the config's refresh token was rotated away at its first use).
                served.should_exit = True
                thread.join(timeout=15)
                assert not thread.is_alive(), "the resource server stopped"
                # A call while it is down fails, and says so; the connection stays.
                assert (await call(session, "refresh"))[0], "no server, no answer"
                authorization.revoke_access()
                served, thread = resource_server(port, authorization, verifier)
                wait_for(port)
                deadline = time.monotonic() + 30
                answer = (True, "")
                while time.monotonic() < deadline:
                    answer = await call(session, "refresh")
                    if answer == (False, REFRESH_CLIENT):
                        break
                    await asyncio.sleep(0.5)
                assert answer == (False, REFRESH_CLIENT), answer
                print("reconnection ok")

                # The refresh token is revoked too: a clear error, the other upstreams work.
                authorization.revoke_refresh()
                authorization.revoke_access()
                failed, message = await call(session, "refresh")
                assert failed, message
                assert "refresh token" in message and "oauth.refresh_token" in message, message
                assert await call(session, "secret") == (False, SECRET_CLIENT)
                print(f"revoked refresh token ok: {message}")
    served.should_exit = True
    with open(log_path) as f:
        logged = f.read()
    assert "whoami" in logged or "upstream" in logged, "hookhost logged at debug"
    for value in [SECRET, authorization.private_key_pem().splitlines()[1]] + authorization.issued:
        assert value not in logged, "a secret or a token is in hookhost's log"
    print(f"log ok: {len(logged)} bytes, {len(authorization.issued)} tokens, none in it")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
