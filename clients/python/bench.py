#!/usr/bin/env python3
"""How fast a Python caller is, as ratios from one run (BENCHMARKS.md, "Python callers").

Starts cohort-bench's C++ gRPC echo server and three cohortd daemons on 127.0.0.1 with a closed
group `bench` of n = 3 and C++ echo servants, then measures sequential calls from this Python
process: the plain gRPC unary echo (the floor, as in cohort-bench) and CohortClient.invoke over
the daemon's gRPC API in each waiting mode. Prints p50 / p99 and each p50 over the echo's.

    clients/python/bench.py --cohortd bazel-bin/tools/cohortd \\
        --bench bazel-bin/tools/bench/cohort-bench [--calls 3000]

Needs grpcio and grpcio-tools (tools/install-deps puts them in /var/tmp/cohort-python); the
stubs of proto/api.proto and tools/bench/echo.proto are generated into a temporary directory.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PAYLOAD = b"x" * 100  # as cohort-bench (003 section 5.2)


def generate_stubs(out):
    from grpc_tools import protoc
    for include, proto in ((os.path.join(ROOT, "proto"), "api.proto"),
                           (os.path.join(ROOT, "tools", "bench"), "echo.proto")):
        if protoc.main(["protoc", "-I" + include, "--python_out=" + out,
                        "--grpc_python_out=" + out, os.path.join(include, proto)]) != 0:
            raise RuntimeError("grpc_tools.protoc failed on " + proto)
    sys.path[:0] = [out, HERE]


def percentile(sorted_us, q):
    return sorted_us[min(len(sorted_us) - 1, int(q * len(sorted_us)))]


def measure(call, calls):
    """Sequential latency of `call` in microseconds: (p50, p99), after 10% warm-up calls."""
    for _ in range(max(1, calls // 10)):
        call()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e6)
    times.sort()
    return percentile(times, 0.5), percentile(times, 0.99)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cohortd", required=True)
    parser.add_argument("--bench", required=True, help="the cohort-bench binary (its roles)")
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="cohort-pybench-")
    procs = []
    cluster = None
    try:
        generate_stubs(work)
        import grpc
        import echo_pb2
        import echo_pb2_grpc
        from cohort_client import CohortClient

        from local_cluster import LocalCluster, free_port, wait_port

        echo_port = free_port()
        procs.append(subprocess.Popen([args.bench, "--role", "echo-server", "--port",
                                       str(echo_port)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        if not wait_port(echo_port):
            raise RuntimeError("the echo server did not start")
        cluster = LocalCluster(args.cohortd, "bench", work)
        for address in cluster.client_addresses:
            procs.append(subprocess.Popen(
                [args.bench, "--role", "echo-servant", "--address", address, "--group", "bench"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

        channel = grpc.insecure_channel("127.0.0.1:%d" % echo_port)
        grpc.channel_ready_future(channel).result(timeout=10)
        echo = echo_pb2_grpc.EchoStub(channel)
        cohort = CohortClient(cluster.client_addresses[1], "python-bench")
        until = time.time() + 20  # every servant attached: a wait-for-all call gets 3 replies
        while len(cohort.invoke("bench", "echo", PAYLOAD, mode="all").replies) < 3:
            if time.time() > until:
                raise RuntimeError("the echo servants did not attach")
            time.sleep(0.1)

        rows = [("grpc_echo (Python client, C++ server)",
                 lambda: echo.Echo(echo_pb2.EchoMessage(payload=PAYLOAD), timeout=5))]
        for mode in ("first", "majority", "all"):
            rows.append(("cohort closed %s, consensus, n=3" % mode,
                         lambda mode=mode: cohort.invoke("bench", "echo", PAYLOAD, mode=mode)))
        echo_p50 = None
        print("Python %s, %d sequential calls each, payload %d B, 127.0.0.1"
              % (sys.version.split()[0], args.calls, len(PAYLOAD)))
        print("%-40s %8s %8s %9s" % ("call", "p50_us", "p99_us", "p50/echo"))
        for name, call in rows:
            p50, p99 = measure(call, args.calls)
            echo_p50 = echo_p50 or p50
            print("%-40s %8.0f %8.0f %9.2f" % (name, p50, p99, p50 / echo_p50))
        cohort.close()
        channel.close()
    finally:
        for proc in reversed(procs):
            proc.kill()
            proc.wait()
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
