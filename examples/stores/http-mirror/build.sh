#!/usr/bin/env bash
# Builds http-mirror.wasm: a cdylib for wasm32-wasip2 is a component already.
# Needs: `rustup target add wasm32-wasip2`.
# Usage: build.sh [OUT_DIR]   (default: this directory)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here}"
target="$here/../../../target/example-stores-rust"
cargo build --quiet --manifest-path "$here/Cargo.toml" --profile guest --target wasm32-wasip2 \
    --target-dir "$target"
mkdir -p "$out"
cp "$target/wasm32-wasip2/guest/http_mirror.wasm" "$out/http-mirror.wasm"
