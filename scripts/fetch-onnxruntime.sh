#!/usr/bin/env bash
# Installs the ONNX Runtime library into optc's cache: a thin caller of
# `optc runtime install` (package ort/install), which fetches the npm
# package onnxruntime-node's tarball and checks the tarball's and the
# library's sha256 against the digests built into optc. Arguments go to
# it (e.g. --platform linux/arm64). Prefer `optc runtime install` itself.
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./cmd/optc runtime install "$@"
