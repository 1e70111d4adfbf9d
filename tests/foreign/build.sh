#!/usr/bin/env bash
# Test fixtures built the way authors of other languages build hooks, into OUT_DIR:
#   js-with-http.wasm  the js-footer example built without `-d http -d fetch-event`, as
#                      componentize-js does by default: it imports wasi:http, which
#                      hookhost provides (each request checked against a `network` grant)
# Needs what examples/hooks/build.sh needs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../.."
out="${1:-$root/target/example-hooks}"
bin="${NODE_BIN:+$NODE_BIN/}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

"${bin}rolldown" "$root/examples/hooks/js-footer/footer.js" --format esm \
    --external 'wasi:config/store@0.2.0-rc.1' --file "$work/footer.js" > /dev/null
"${bin}componentize-js" "$work/footer.js" --wit "$root/wit/hooks@0.2.0" --world-name hook \
    -o "$out/js-with-http.wasm"

#   py-refuser.wasm    a 0.2.0 Python hook overriding only before_execute (the SDK's
#                      PassThrough answers after_execute)
"${COMPONENTIZE_PY:-componentize-py}" -d "$root/wit/hooks@0.2.0" -w hook \
    componentize -p "$here/py-refuser" -p "$root/sdk/python" refuser -o "$out/py-refuser.wasm"

#   js-wrong-replace.wasm  a 0.2.0 JavaScript hook whose replace has the wrong shape,
#                          kept for ordinary outputs: `component check` must catch it
"${bin}componentize-js" "$here/js-wrong-replace/hook.js" --wit "$root/wit/hooks@0.2.0" \
    --world-name hook -d http -d fetch-event -o "$out/js-wrong-replace.wasm"

#   c-v2.wasm          a 0.2.0 C hook using sdk/c/hookhost.h's keep and replace, built
#                      with -Wall -Werror
kit="${GUEST_KIT:-$root/target/release/guest-kit}"
"$kit" c-bindings "$root/wit/hooks@0.2.0" --world hook --out "$work/c-v2"
clang --target=wasm32-wasi -mexec-model=reactor -Os -Wall -Werror \
    -I "$work/c-v2" -I "$root/sdk/c" \
    "$here/c-v2/hook.c" "$work/c-v2/hook.c" "$work/c-v2/hook_component_type.o" \
    -Wl,--strip-debug -o "$work/c-v2.core.wasm"
"$kit" componentize "$work/c-v2.core.wasm" -o "$out/c-v2.wasm"
