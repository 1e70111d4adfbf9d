#!/usr/bin/env bash
# hookhost as the client of the conformance suite's test servers: the suite runs this with
# the server's URL as the last argument and the scenario in MCP_CONFORMANCE_SCENARIO.
# hookhost connects to the server as an upstream (`prefix = ""`), which is the handshake
# the `initialize` scenario checks; `tools_call` and `sse-retry` then call the server's
# tool through hookhost's CLI, and MCP 2026-07-28's scenarios the tools they name
# (HOOKHOST_UPSTREAM_PROTOCOL pins the upstream's protocol: `2026-07-28` for them). The `auth/client-credentials-*` scenarios give a client id
# and a secret or a private key in MCP_CONFORMANCE_CONTEXT (JSON): hookhost gets its token
# with them (`[upstreams.suite.oauth]`) and calls the server's tool.
#
#     HOOKHOST=target/release/hookhost client.sh URL
set -euo pipefail
url="${!#}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/hookhost.toml" <<TOML
[upstreams.suite]
url = "$url"
prefix = ""
timeout_secs = 20
protocol = "${HOOKHOST_UPSTREAM_PROTOCOL:-auto}"
TOML
if [[ "${MCP_CONFORMANCE_SCENARIO:-}" == auth/client-credentials-* ]]; then
    field() { python3 -c 'import json, os, sys; print(json.loads(os.environ["MCP_CONFORMANCE_CONTEXT"]).get(sys.argv[1], ""))' "$1"; }
    CLIENT_ID=$(field client_id) CLIENT_SECRET=$(field client_secret)
    export CLIENT_ID CLIENT_SECRET
    printf '\n[upstreams.suite.oauth]\nclient_id = "${CLIENT_ID}"\n' >> "$work/hookhost.toml"
    if [[ -n "$CLIENT_SECRET" ]]; then
        echo 'client_secret = "${CLIENT_SECRET}"' >> "$work/hookhost.toml"
    else
        field private_key_pem > "$work/client-key.pem"
        printf 'private_key = "${file:%s}"\nsigning_algorithm = "%s"\n' \
            "$work/client-key.pem" "$(field signing_algorithm)" >> "$work/hookhost.toml"
    fi
fi
run() { "$HOOKHOST" --data "$work/data" --config "$work/hookhost.toml" "$@"; }
# The tool calls a scenario's context asks for (MCP 2026-07-28's header scenarios), one
# `hookhost call` each.
calls() {
    python3 -c 'import json, os
for call in json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}").get("toolCalls", []):
    print(call["name"]); print(json.dumps(call.get("arguments", {})))'
}
case "${MCP_CONFORMANCE_SCENARIO:-}" in
    tools_call) run call add_numbers '{"a": 5, "b": 3}' ;;
    http-custom-headers)
        calls | while read -r name && read -r arguments; do run call "$name" "$arguments"; done ;;
    http-invalid-tool-headers) run call valid_tool '{}' ;;
    json-schema-2020-12-preservation)
        # The focal tool's input schema, as hookhost lists it, echoed back whole.
        schema=$(run tools --json | python3 -c 'import json, sys
for line in sys.stdin:
    tool = json.loads(line)
    if tool["name"] == "json_schema_2020_12_tool":
        print(json.dumps({"schema": tool["inputSchema"]}))')
        run call json_schema_echo "$schema" ;;
    sse-retry) run call test_reconnection ;;
    auth/*) run call test-tool ;;
    *) run tools ;;
esac
