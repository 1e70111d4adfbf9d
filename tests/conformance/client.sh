#!/usr/bin/env bash
# hookhost as the client of the conformance suite's test servers: the suite runs this with
# the server's URL as the last argument and the scenario in MCP_CONFORMANCE_SCENARIO.
# hookhost connects to the server as an upstream (`prefix = ""`), which is the handshake
# the `initialize` scenario checks; `tools_call` and `sse-retry` then call the server's
# tool through hookhost's CLI. The `auth/client-credentials-*` scenarios give a client id
# and secret in MCP_CONFORMANCE_CONTEXT (JSON): hookhost gets its token with them
# (`[upstreams.suite.oauth]`) and calls the server's tool.
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
TOML
if [[ "${MCP_CONFORMANCE_SCENARIO:-}" == auth/client-credentials-* ]]; then
    field() { sed -n "s/.*\"$1\" *: *\"\([^\"]*\)\".*/\1/p" <<< "$MCP_CONFORMANCE_CONTEXT"; }
    CLIENT_ID=$(field client_id) CLIENT_SECRET=$(field client_secret)
    export CLIENT_ID CLIENT_SECRET
    cat >> "$work/hookhost.toml" <<'TOML'

[upstreams.suite.oauth]
client_id = "${CLIENT_ID}"
client_secret = "${CLIENT_SECRET}"
TOML
fi
run() { "$HOOKHOST" --data "$work/data" --config "$work/hookhost.toml" "$@"; }
case "${MCP_CONFORMANCE_SCENARIO:-}" in
    tools_call) run call add_numbers '{"a": 5, "b": 3}' ;;
    sse-retry) run call test_reconnection ;;
    auth/*) run call test-tool ;;
    *) run tools ;;
esac
