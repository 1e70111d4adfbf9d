#!/usr/bin/env bash
# Builds js-footer.wasm: rolldown bundles footer.js with the SDK helper into one module,
# then componentize-js (npm @bytecodealliance/componentize-js 0.23.0, which brings
# rolldown) makes the component. `-d http -d fetch-event` leaves out wasi:http, which
# this hook does not use (hookhost provides it to hooks granted a `network`).
# Usage: build.sh [OUT_DIR]   (default: this directory); NODE_BIN is the directory
# holding componentize-js and rolldown (default: on PATH).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../../.."
out="${1:-$here}"
bin="${NODE_BIN:+$NODE_BIN/}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"${bin}rolldown" "$here/footer.js" --format esm --external 'wasi:config/store@0.2.0-rc.1' --file "$work/footer.js" \
    > /dev/null
mkdir -p "$out"
"${bin}componentize-js" "$work/footer.js" --wit "$root/wit/hooks@0.2.0" --world-name hook \
    -d http -d fetch-event -o "$out/js-footer.wasm"
