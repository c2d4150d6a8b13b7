# Sourced by the netlab tests (../shared/netlab, root): a lab of their own and waits.
#
#   netlab_up PREFIX OCTET HOSTS   hosts h1..hHOSTS on 10.OCTET.x (x from this shell's pid, as
#                                  is the prefix, so runs side by side never collide); sets
#                                  $netlab, $bin (the tools built for the test) and $work (the
#                                  daemons' files); removed on exit, the logs in $work kept in the
#                                  test's outputs
#   netlab_config I N [EXTRA]      daemon nI's YAML (below)
#   wait_until SECONDS COMMAND...  retries the command every 0.1 s until it succeeds
self=$(readlink -f "$0")
repo=$(cd "$(dirname "$self")/.." && pwd)
netlab=$repo/../shared/netlab/netlab
bin=$TEST_SRCDIR/$TEST_WORKSPACE/tools
work=$TEST_TMPDIR/lab

netlab_up() {
  [ -x "$netlab" ] || { echo "FAIL: netlab not found at $netlab"; exit 1; }
  [ "$(id -u)" = 0 ] || { echo "FAIL: needs root for network namespaces"; exit 1; }
  export NETLAB_PREFIX=$1$(( $$ % 10000 ))
  export NETLAB_NET=10.$2.$(( $$ % 200 + 20 ))
  export NETLAB_STATE=$TEST_TMPDIR/netlab
  mkdir -p "$work"
  trap netlab_cleanup EXIT
  # Its packages only when missing, one install at a time: the netlab tests run side by side,
  # and two `apt-get update`s at once fail on apt's lock (seen: "Could not get lock
  # /var/lib/apt/lists/lock").
  "$netlab" check >/dev/null 2>&1 || flock "$netlab" "$netlab" deps >/dev/null
  "$netlab" up "$3" >/dev/null
}

netlab_cleanup() {
  "$netlab" down --kill >/dev/null 2>&1 || true
  if [ -n "${TEST_UNDECLARED_OUTPUTS_DIR:-}" ]; then
    cp "$work"/*.log "$TEST_UNDECLARED_OUTPUTS_DIR"/ 2>/dev/null || true
  fi
}

wait_until() {
  local until=$(( SECONDS + $1 )); shift
  while [ "$SECONDS" -lt "$until" ]; do "$@" && return 0; sleep 0.1; done
  return 1
}

# netlab_config I N [EXTRA]: $work/nI.yaml for daemon nI on host hI, of N daemons on h1..hN
# (peers on port 7101, clients on 7201, plaintext), suspicion after 100 ms and exclusion after
# 1,500 ms, and one group `counter` of all N; EXTRA (more top-level YAML lines) appended.
netlab_config() {
  local i=$1 n=$2 extra=${3:-} members="" j
  {
    echo "node: n$i"
    echo "log_level: info"
    echo "listen: {peer: \"$NETLAB_NET.$i:7101\", client: \"$NETLAB_NET.$i:7201\"}"
    echo "peers:"
    for j in $(seq "$n"); do
      echo "  - {name: n$j, id: $j, address: \"$NETLAB_NET.$j:7101\"}"
      members="$members${members:+, }n$j"
    done
    echo "failure_detector: {suspect_timeout_ms: 100, exclude_timeout_ms: 1500}"
    echo "tls: {insecure: true}"
    echo "groups:"
    echo "  - {name: counter, members: [$members]}"
    [ -z "$extra" ] || echo "$extra"
  } > "$work/n$i.yaml"
}
