#!/usr/bin/env bash
# Builds the five example hooks into OUT_DIR (default: target/example-hooks), each with its
# own build script. Where the toolchains are, when not on PATH:
#   GUEST_KIT        guest-kit (default: target/release/guest-kit, built when missing)
#   COMPONENTIZE_PY  componentize-py
#   NODE_BIN         the directory holding componentize-js and rolldown
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../.."
out="${1:-$root/target/example-hooks}"
export GUEST_KIT="${GUEST_KIT:-$root/target/release/guest-kit}"
if [ ! -x "$GUEST_KIT" ]; then
    cargo build --quiet --release --manifest-path "$root/Cargo.toml" -p guest-kit
fi
for hook in rust-budget rust-audit-shipper c-guard python-redactor js-footer; do
    "$here/$hook/build.sh" "$out"
done
