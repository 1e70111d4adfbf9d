#!/usr/bin/env bash
# hookhost as the client of the conformance suite's test servers: the suite runs this with
# the server's URL as the last argument and the scenario in MCP_CONFORMANCE_SCENARIO.
# hookhost connects to the server as an upstream (`prefix = ""`), which is the handshake
# the `initialize` scenario checks; `tools_call` and `sse-retry` then call the server's
# tool through hookhost's CLI.
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
run() { "$HOOKHOST" --data "$work/data" --config "$work/hookhost.toml" "$@"; }
case "${MCP_CONFORMANCE_SCENARIO:-}" in
    tools_call) run call add_numbers '{"a": 5, "b": 3}' ;;
    sse-retry) run call test_reconnection ;;
    *) run tools ;;
esac
