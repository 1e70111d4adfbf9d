#!/usr/bin/env bash
# Builds c-guard.wasm: clang for wasm32-wasi (a WASI preview1 reactor), then a component.
# Needs: Debian's clang lld wasi-libc libclang-rt-dev-wasm32, and guest-kit
# (`cargo build --release -p guest-kit` in the hookhost repository).
# Usage: build.sh [OUT_DIR]   (default: this directory)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../../.."
out="${1:-$here}"
kit="${GUEST_KIT:-$root/target/release/guest-kit}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$kit" c-bindings "$root/wit/hooks@0.1.0" --world hook --out "$work"
clang --target=wasm32-wasi -mexec-model=reactor -Os -Wall -Werror \
    -I "$work" -I "$root/sdk/c" \
    "$here/guard.c" "$work/hook.c" "$work/hook_component_type.o" \
    -Wl,--strip-debug -o "$work/guard.core.wasm"
mkdir -p "$out"
"$kit" componentize "$work/guard.core.wasm" -o "$out/c-guard.wasm"
