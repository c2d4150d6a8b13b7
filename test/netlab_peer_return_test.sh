#!/usr/bin/env bash
# A peer that vanishes without a word and comes back as a new process (../shared/netlab cuts its
# host; the daemon is killed while cut, so no reset reaches the other side, and restarted before
# the heal, as after a power cut): the daemon that dials it must notice that its old connection
# is dead and dial again soon after the heal. Each peer connection of the raw TCP transport
# bounds how long data may wait unacknowledged (TCP_USER_TIMEOUT) and probes when idle
# (SO_KEEPALIVE) at 15 s (nso/tcp_transport.cc); until session 52 the old connection lived on
# until TCP's own backed-off retransmission met the new host's reset: after a 40 s outage it was
# closed 14 s after the heal and n2 answered after 16 s (twice); now in about 2 s.
# Needs root (network namespaces). Leaves nothing behind: the lab is removed on exit.
set -euo pipefail

source "$(dirname "$(readlink -f "$0")")/netlab_lib.sh"
netlab_up cpr 83 2
OUTAGE_S=${OUTAGE_S:-40}

for i in 1 2; do netlab_config "$i" 2 "incarnation_file: \"$work/n$i.incarnation\""; done
start_daemon() {
  "$netlab" exec "h$1" "$bin/cohortd" --config "$work/n$1.yaml" >> "$work/n$1.log" 2>&1 &
  echo $! > "$work/n$1.pid"
}
start_servant() {
  "$netlab" exec "h$1" "$bin/counter-servant" --daemon "$NETLAB_NET.$1:7201" >> "$work/s$1.log" 2>&1 &
  echo $! > "$work/s$1.pid"
}
ctl() {
  local host=$1; shift
  "$netlab" exec "$host" "$bin/cohortctl" --timeout-ms 2000 --address "$NETLAB_NET.${host#h}:7201" "$@"
}
replies() { ctl h1 invoke counter get x --mode all 2>/dev/null | grep -cE "^n[0-9]+: [0-9]+$" || true; }
both_reply() { [ "$(replies)" = 2 ]; }

start_daemon 1; start_daemon 2
sleep 1
start_servant 1; start_servant 2
wait_until 20 both_reply || { echo "FAIL: the group did not form"; tail "$work"/n*.log; exit 1; }

# n2's host vanishes: cut, and its processes killed while cut (their FIN and RST are dropped).
"$netlab" cut h2
# (`netlab exec` execs the command in place: the pids are the processes'. Not pkill: the hosts
# share the machine's process table.)
kill -9 "$(cat "$work/s2.pid")" "$(cat "$work/n2.pid")" 2>/dev/null || true
sleep "$OUTAGE_S"
# It comes back: a new daemon and servant, then the network.
start_daemon 2
sleep 1
start_servant 2
"$netlab" heal h2
healed=$(date +%s%N)
wait_until 60 both_reply || { echo "FAIL: n2 not back 60 s after the heal"; tail "$work"/n1.log; exit 1; }
took_ms=$(( ($(date +%s%N) - healed) / 1000000 ))
echo "n2 answered again $took_ms ms after the heal (outage $OUTAGE_S s)"
[ "$took_ms" -le 8000 ] || { echo "FAIL: n2 took $took_ms ms to come back (over 8 s)"; exit 1; }
echo "PASS: a peer back from a silent outage is dialled again within $took_ms ms"
