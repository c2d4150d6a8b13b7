#!/usr/bin/env bash
# A client and a servant whose machine vanishes without a word (../shared/netlab cuts its host:
# packets dropped, no reset): their daemon finds their connections dead by gRPC keepalive
# (nso/keepalive.h: a ping after 10 s of silence, 5 s to answer) and closes them, so the group's
# servant slot is free for another. Until session 52 no side pinged: the daemon kept such a
# connection, and the streams on it, until TCP gave up (never, with nothing to send).
# Needs root (network namespaces). Leaves nothing behind: the lab is removed on exit.
set -euo pipefail

source "$(dirname "$(readlink -f "$0")")/netlab_lib.sh"
netlab_up cka 81 2
daemon=$NETLAB_NET.1:7201
netlab_config 1 1
"$netlab" exec h1 "$bin/cohortd" --config "$work/n1.yaml" > "$work/n1.log" 2>&1 &

ctl() { "$netlab" exec h1 "$bin/cohortctl" --address "$daemon" "$@"; }
# Connections the daemon holds from host h2.
# (The peer is the last column, IPv4-mapped when the daemon listens dual-stack: [::ffff:a.b.c.d].)
from_h2() {
  "$netlab" exec h1 ss -Htn state established "( sport = :7201 )" | awk '{print $NF}' |
    sed 's/^\[::ffff://; s/\]//' | grep -c "^$NETLAB_NET\.2:" || true
}
served() { ctl invoke counter get x --mode all 2>/dev/null | grep -qE "^n1: [0-9]+$"; }

wait_until 20 ctl health >/dev/null || { echo "FAIL: the daemon did not start"; cat "$work/n1.log"; exit 1; }
# From h2: a watch of the group (a quiet stream) and the group's servant.
"$netlab" exec h2 "$bin/cohortctl" --address "$daemon" watch counter --seconds 600 \
  > "$work/watch.log" 2>&1 &
"$netlab" exec h2 "$bin/counter-servant" --daemon "$daemon" > "$work/s2.log" 2>&1 &
wait_until 20 served || { echo "FAIL: the servant on h2 did not serve"; tail "$work"/*.log; exit 1; }
two_from_h2() { [ "$(from_h2)" -ge 2 ]; }
wait_until 10 two_from_h2 || {
  echo "FAIL: expected 2 connections from h2, got $(from_h2):"
  "$netlab" exec h1 ss -Htn
  exit 1
}
ctl invoke counter add 5 --mode all >/dev/null

"$netlab" cut h2
start=$(date +%s)
gone() { [ "$(from_h2)" = 0 ]; }
wait_until 45 gone || { echo "FAIL: the daemon still holds $(from_h2) connections from h2 45 s after the cut"; exit 1; }
echo "the daemon closed h2's connections $(( $(date +%s) - start )) s after the cut"
# The servant slot is free: one on h1 registers and serves (a fresh state: counter 0).
"$netlab" exec h1 "$bin/counter-servant" --daemon "$daemon" > "$work/s1.log" 2>&1 &
wait_until 20 served || { echo "FAIL: a servant on h1 did not serve after h2 vanished"; tail "$work"/*.log; exit 1; }
"$netlab" heal h2
echo "PASS: connections of a vanished host closed by keepalive; its servant replaced"
