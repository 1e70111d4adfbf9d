#!/usr/bin/env bash
# Builds python-redactor.wasm with componentize-py (PyPI componentize-py 0.25.1).
# Usage: build.sh [OUT_DIR]   (default: this directory); COMPONENTIZE_PY names the CLI.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../../.."
out="${1:-$here}"
mkdir -p "$out"
"${COMPONENTIZE_PY:-componentize-py}" -d "$root/wit/hooks@0.2.0" -w hook \
    componentize -p "$here" -p "$root/sdk/python" redactor -o "$out/python-redactor.wasm"
