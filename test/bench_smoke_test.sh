#!/usr/bin/env bash
# cohort-bench still works end to end (issue 7's deliverable; not a timed test: it asserts what
# the run produced, never how fast). A short run at n = 3 (floors, every daemon row, the embedded
# and application-process rows) must give both floors, every ordering x style x mode row with a
# positive p50 and its ratio to the echo, no error in any sequential run of a call with replies,
# and the issue 7 targets table; and leave no process behind.
set -euo pipefail
root="${TEST_SRCDIR:?}/${TEST_WORKSPACE:-cohort}"
tmp="${TEST_TMPDIR:?}"
export TMPDIR="$tmp"
# Run from a copy in this run's own directory: every process the bench starts (its roles run its
# own binary, its daemons read YAML from $TMPDIR) then names $tmp on its command line.
cp "$root/tools/bench/cohort-bench" "$tmp/cohort-bench"
"$tmp/cohort-bench" --cohortd "$root/tools/cohortd" --quick --sizes 3 --callers 1,4 \
  --seq-calls 300 --seq-ms 300 --window-ms 200 --skip failover,memory,etcd,jgroups \
  --json "$tmp/run.json" > "$tmp/run.txt" 2> "$tmp/run.err" || {
  echo "cohort-bench failed:"; tail -n 30 "$tmp/run.err"; exit 1; }
python3 - "$tmp/run.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
problems = []
for floor in ("grpc_echo", "tcp_pingpong"):
    p50 = run["floors"].get(floor, {}).get("sequential", {}).get("p50_us", 0)
    if not p50 > 0:
        problems.append("floor %s has no p50" % floor)
rows = {(g["ordering"], g["style"], g["mode"]): g for g in run["groups"] if g["n"] == 3}
for ordering in ("consensus", "sequencer"):
    for style in ("closed", "closed-out", "open", "embed", "app-closed", "app-open"):
        modes = ("first", "majority", "all") if style == "embed" else ("first", "majority", "all", "one_way")
        for mode in modes:
            row = rows.get((ordering, style, mode))
            if row is None:
                problems.append("no row %s %s %s" % (ordering, style, mode))
                continue
            seq = row["results"]["sequential"]
            if not seq["p50_us"] > 0 or not row["results"].get("p50_over_grpc_echo_p50", 0) > 0:
                problems.append("row %s %s %s: no p50 or ratio" % (ordering, style, mode))
            if mode != "one_way" and seq["errors"] != 0:
                problems.append("row %s %s %s: %d errors (%s)" % (ordering, style, mode,
                                seq["errors"], seq["first_error"]))
    if (ordering, "closed-spread", "all") not in rows:
        problems.append("no row %s closed-spread all" % ordering)
    async_row = rows.get((ordering, "closed-async", "all"))
    if async_row is None:
        problems.append("no row %s closed-async all" % ordering)
    elif not (async_row["results"]["sequential"]["p50_us"] > 0 and
              async_row["results"]["sequential"]["errors"] == 0):
        problems.append("row %s closed-async all: no p50, or errors" % ordering)
# Heap allocations per call: measured for each ordering and path (closed all, open first), from
# every daemon (n1..n4) and this
# process; the daemons count (a Status read allocates, and is subtracted), and this process's
# client allocates something per call with Invoke (a result made anew), not less than with
# InvokeInto, and with InvokeAsync more than with InvokeAsyncInto (16 calls in flight).
allocations = {(a["ordering"], a["path"]): a for a in run.get("allocations", []) if a["n"] == 3}
for key in [(o, p) for o in ("consensus", "sequencer") for p in ("closed all", "open first")]:
    a = allocations.get(key)
    if a is None or a["note"]:
        problems.append("allocations %s not measured: %r" % (key, a))
    elif not (a["calls"] == 2000 and len(a["per_daemon"]) == 4 and
              all(x >= 0 for x in a["per_daemon"]) and a["status_read"] > 0 and
              a["client_and_servants"] >= 0 and
              a["invoke_by_value"] > a["client_and_servants"] and
              a["pipelined_into"] >= 0 and
              a["pipelined_by_value"] > a["pipelined_into"] and
              abs(sum(a["per_daemon"]) - a["daemons"]) < 0.1):
        problems.append("allocations %s: %r" % (key, a))
# This run has no etcd, no 64 callers, no n = 7, no failover or memory: those targets say "not
# measured (why)"; the 8 latency targets at n = 3 (daemons, embedded, application processes)
# have a verdict.
verdicts = [t["verdict"] for t in run.get("targets", [])]
# The latency targets at n = 3 also have a paired ratio (the row and the echo measured one right
# after the other), with a verdict.
paired = [t for t in run.get("targets", []) if "paired" in t]
if len(paired) < 8 or any(not float(t["paired"]) > 0 or t["paired_verdict"] not in ("met", "NOT MET")
                          for t in paired):
    problems.append("paired ratios: %r" % paired)
judged = [v for v in verdicts if v in ("met", "NOT MET")]
if len(judged) < 8 or any(v not in ("met", "NOT MET") and not v.startswith("not measured")
                          for v in verdicts):
    problems.append("targets table: %r" % verdicts)
print("rows: %d, targets: %d" % (len(rows), len(verdicts)))
for problem in problems:
    print("FAIL:", problem)
sys.exit(1 if problems else 0)
PY
grep -q "== issue 7 targets" "$tmp/run.txt" || { echo "FAIL: no targets table in the printed report"; exit 1; }
# --tls adds a third floor, the ping-pong over mutual TLS (tools/make-test-ca is found from the
# runfiles root, where the test starts).
"$tmp/cohort-bench" --cohortd "$root/tools/cohortd" --quick --tls --callers 1 --seq-calls 300 \
  --seq-ms 300 --window-ms 200 --skip groups,failover,memory,etcd,jgroups \
  --json "$tmp/tls.json" > "$tmp/tls.txt" 2> "$tmp/tls.err" || {
  echo "cohort-bench --tls failed:"; tail -n 30 "$tmp/tls.err"; exit 1; }
python3 - "$tmp/tls.json" <<'PY'
import json, sys
floors = json.load(open(sys.argv[1]))["floors"]
for floor in ("grpc_echo", "tcp_pingpong", "tls_pingpong"):
    if not floors.get(floor, {}).get("sequential", {}).get("p50_us", 0) > 0:
        print("FAIL: --tls run: floor %s has no p50" % floor)
        sys.exit(1)
PY
grep -q "^tls_pingpong " "$tmp/tls.txt" || { echo "FAIL: no tls_pingpong row in the --tls report"; exit 1; }
# --orderings and --modes keep only those group rows; an unknown value is refused, named.
"$tmp/cohort-bench" --cohortd "$root/tools/cohortd" --quick --sizes 3 --callers 1 --seq-calls 300 \
  --seq-ms 300 --skip floors,failover,memory,etcd,jgroups --orderings sequencer --modes one_way,all \
  --json "$tmp/some.json" > "$tmp/some.txt" 2> "$tmp/some.err" || {
  echo "cohort-bench --orderings --modes failed:"; tail -n 30 "$tmp/some.err"; exit 1; }
python3 - "$tmp/some.json" <<'PY'
import json, sys
rows = {(g["ordering"], g["style"], g["mode"]) for g in json.load(open(sys.argv[1]))["groups"]}
wanted = {("sequencer", style, mode) for style in ("closed", "closed-out", "open", "app-closed", "app-open")
          for mode in ("all", "one_way")}
wanted |= {("sequencer", "closed-async", "all"), ("sequencer", "closed-spread", "all"),
           ("sequencer", "embed", "all")}
if rows != wanted:
    print("FAIL: --orderings sequencer --modes one_way,all: extra %r, missing %r"
          % (sorted(rows - wanted), sorted(wanted - rows)))
    sys.exit(1)
PY
if "$tmp/cohort-bench" --modes first,fastest > /dev/null 2> "$tmp/bad.err"; then
  echo "FAIL: --modes fastest accepted"; exit 1
fi
grep -q 'unknown "fastest"' "$tmp/bad.err" || { echo "FAIL: --modes fastest:"; cat "$tmp/bad.err"; exit 1; }
# Everything the bench started is gone (another run's processes name their own directory).
sleep 1
if pgrep -f -- "$tmp/" > /dev/null; then
  echo "FAIL: bench processes left behind:"; pgrep -af -- "$tmp/" || true
  exit 1
fi
echo "bench smoke: ok"
