// A third floor for --tls runs: the TCP ping-pong of floors.h over mutual TLS, with the same
// OpenSSL channel as the daemons' raw TCP peer transport (nso/tls_channel.h) and the run's test
// CA. Beside tcp_pingpong it shows what TLS alone adds to a round trip on this machine.
#ifndef COHORT_TOOLS_BENCH_TLS_FLOOR_H_
#define COHORT_TOOLS_BENCH_TLS_FLOOR_H_

#include <string>

#include "tools/bench/workload.h"

namespace cohort::bench {

// --role tls-server --port P --ca-dir D (tools/make-test-ca's directory); returns only on error.
int RunTlsEchoServer(int port, const std::string& ca_dir);
// Each caller owns a blocking TLS connection (daemon.pem, checked as 127.0.0.1 both ways).
CallFactory TlsEchoCalls(int port, std::string payload, std::string ca_dir);

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_TLS_FLOOR_H_
