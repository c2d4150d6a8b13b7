#!/usr/bin/env bash
# Generates the Python stubs of proto/api.proto into OUT_DIR (default: clients/python/gen) with
# grpcio-tools (tools/install-deps installs it).   usage: clients/python/generate.sh [OUT_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$here/gen}"
python="${PYTHON:-python3}"
mkdir -p "$out"
"$python" -m grpc_tools.protoc -I"$root/proto" --python_out="$out" --grpc_python_out="$out" \
  "$root/proto/api.proto"
echo "$out/api_pb2.py $out/api_pb2_grpc.py"
