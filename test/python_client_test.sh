#!/usr/bin/env bash
# Runs test/python_client_test.py: generates the Python stubs of proto/api.proto with grpcio-tools
# into the test's temporary directory, then tests clients/python against real daemons, then runs
# clients/python/bench.py briefly.
# The Python used: $COHORT_PYTHON, the venv tools/install-deps makes, or python3 on PATH — the
# first that has grpcio and grpcio-tools.
set -euo pipefail
runfiles="${TEST_SRCDIR:-$PWD/..}/${TEST_WORKSPACE:-cohort}"
[ -d "$runfiles" ] || runfiles="$PWD"
python=""
for candidate in "${COHORT_PYTHON:-}" /var/tmp/cohort-python/bin/python3 python3 /usr/bin/python3; do
  [ -n "$candidate" ] || continue
  if "$candidate" -c 'import grpc, grpc_tools' 2>/dev/null; then python="$candidate"; break; fi
done
if [ -z "$python" ]; then
  echo "FAIL: no python3 with grpcio and grpcio-tools; run tools/install-deps" >&2
  exit 1
fi
out="${TEST_TMPDIR:-$(mktemp -d)}/gen"
mkdir -p "$out"
"$python" -m grpc_tools.protoc -I"$runfiles/proto" --python_out="$out" --grpc_python_out="$out" \
  "$runfiles/proto/api.proto"
PYTHONPATH="$out:$runfiles/clients/python" "$python" "$runfiles/test/python_client_test.py" \
  "$runfiles/tools/cohortd" "$runfiles/tools/make-test-ca"
# The Python bench (clients/python/bench.py) still runs: a few calls of each kind, each row with
# a p50 and its ratio to the Python echo (how fast is not asserted).
TMPDIR="${TEST_TMPDIR:-/tmp}" "$python" "$runfiles/clients/python/bench.py" \
  --cohortd "$runfiles/tools/cohortd" --bench "$runfiles/tools/bench/cohort-bench" --calls 20 \
  > "$out/bench.txt"
cat "$out/bench.txt"
rows=$(grep -cE '^(grpc_echo|cohort closed (first|majority|all)).* [0-9]+ +[0-9]+ +[0-9]+\.[0-9]+$' "$out/bench.txt")
[ "$rows" -eq 4 ] || { echo "FAIL: clients/python/bench.py printed $rows of its 4 rows"; exit 1; }
