#!/usr/bin/env bash
# Membership across a real network partition (issue 4), with ../shared/netlab: three daemons in
# network namespaces; one host is cut off, the others exclude it after the exclusion timeout and
# go on; after the heal it rejoins with state transfer and serves the same state.
# Needs root (network namespaces). Leaves nothing behind: the lab is removed on exit.
set -euo pipefail

source "$(dirname "$(readlink -f "$0")")/netlab_lib.sh"
netlab_up cnl 79 3
for i in 1 2 3; do
  netlab_config "$i" 3
  "$netlab" exec h$i "$bin/cohortd" --config "$work/n$i.yaml" > "$work/n$i.log" 2>&1 &
done
sleep 1
for i in 1 2 3; do
  "$netlab" exec h$i "$bin/counter-servant" --daemon "$NETLAB_NET.$i:7201" > "$work/s$i.log" 2>&1 &
done

ctl() { local host=$1; shift; "$netlab" exec "$host" "$bin/cohortctl" --address "$NETLAB_NET.${host#h}:7201" "$@"; }
members() { ctl "$1" view counter | grep -c "node " || true; }
replies() { ctl "$1" invoke counter "$2" "$3" --mode all 2>/dev/null | grep -cE "^n[0-9]+: [0-9]+$" || true; }
all_reply() { [ "$(replies h1 get x)" = 3 ]; }
two_members() { [ "$(members h1)" = 2 ]; }
three_members() { [ "$(members h1)" = 3 ]; }

wait_until 20 all_reply || { echo "FAIL: the group did not form"; tail "$work"/n*.log; exit 1; }
ctl h1 invoke counter add 5 --mode all >/dev/null

"$netlab" cut h3
wait_until 20 two_members || { echo "FAIL: n3 not excluded after the cut"; tail "$work"/n1.log; exit 1; }
out=$(ctl h1 invoke counter add 10 --mode all)
echo "$out" | grep -qE "^n[0-9]+: 15$" || { echo "FAIL: the majority side did not go on: $out"; exit 1; }
[ "$(echo "$out" | grep -cE '^n[0-9]+: ')" = 2 ] || { echo "FAIL: expected 2 replies: $out"; exit 1; }
# The minority side fails fast with a clear status.
minority=$(ctl h3 invoke counter add 1 --mode majority 2>&1 || true)
echo "$minority" | grep -q "UNAVAILABLE" || { echo "FAIL: minority call: $minority"; exit 1; }

"$netlab" heal h3
wait_until 30 three_members || { echo "FAIL: n3 did not rejoin"; tail "$work"/n3.log; exit 1; }
wait_until 20 all_reply || { echo "FAIL: no full reply after the heal"; exit 1; }
out=$(ctl h1 invoke counter get x --mode all)
[ "$(echo "$out" | grep -cE '^n[0-9]+: 15$')" = 3 ] || { echo "FAIL: states differ after rejoin: $out"; exit 1; }
grep -q "state of view .* installed" "$work/n3.log" || { echo "FAIL: n3 got no state transfer"; exit 1; }
echo "PASS: cut, exclusion, minority fails fast, heal, rejoin with state transfer"
