// kv-nemesis's command line (tools/kv_nemesis_options.h).
#include "tools/kv_nemesis_options.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace cohort::kv_nemesis {

bool ParseOptions(int argc, char** argv, Options* options) {
  Options& o = *options;
  o.seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  std::string self = argv[0];
  size_t slash = self.rfind('/');
  const std::string self_dir =
      slash == std::string::npos ? std::string(".") : self.substr(0, slash);
  o.cohortd = self_dir + "/cohortd";
  o.kv_servant = self_dir + "/kv-servant";
  for (int i = 1; i < argc; i += 2) {
    std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "kv-nemesis: %s needs a value\n", flag.c_str());
      return false;
    }
    std::string value = argv[i + 1];
    if (flag == "--nodes") o.nodes = std::atoi(value.c_str());
    else if (flag == "--seconds") o.seconds = std::atoi(value.c_str());
    else if (flag == "--clients") o.clients = std::atoi(value.c_str());
    else if (flag == "--keys") o.keys = std::atoi(value.c_str());
    else if (flag == "--deadline-ms") o.deadline_ms = std::atoi(value.c_str());
    else if (flag == "--seed") o.seed = std::strtoull(value.c_str(), nullptr, 10);
    else if (flag == "--dir") o.dir = value;
    else if (flag == "--cohortd") o.cohortd = value;
    else if (flag == "--log-level") o.log_level = value;
    else if (flag == "--ordering") o.ordering = value;
    else if (flag == "--netlab") o.netlab = value;
    else if (flag == "--kv-servant") o.kv_servant = value;
    else if (flag == "--outside-clients") o.outside_clients = std::atoi(value.c_str());
    else if (flag == "--api") o.api = value;
    else if (flag == "--calls") o.calls = value;
    else if (flag == "--peer-transport") o.peer_transport = value;
    else if (flag == "--tls-ca") o.tls_ca = value;
    else if (flag == "--servants") o.servants = value;
    else if (flag == "--durable") o.durable = value;
    else {
      std::fprintf(stderr, "kv-nemesis: unknown flag %s\n", flag.c_str());
      return false;
    }
  }
  if (o.dir.empty() || o.nodes < 3 || o.clients < 1 || o.keys < 1 || o.seconds < 1 ||
      o.outside_clients < 0 || o.outside_clients > o.clients ||
      (o.ordering != "consensus" && o.ordering != "sequencer") ||
      (o.api != "local" && o.api != "grpc") ||
      (o.calls != "sync" && o.calls != "async" && o.calls != "async-into") ||
      (o.peer_transport != "tcp" && o.peer_transport != "grpc") ||
      (o.servants != "fresh" && o.servants != "rejoin") ||
      (o.durable != "off" && o.durable != "on")) {
    std::fprintf(stderr,
                 "usage: kv-nemesis --dir DIR [--nodes 3] [--seconds 10] [--clients 4] [--keys 4]"
                 " [--seed S] [--deadline-ms 1000] [--cohortd PATH] [--log-level warn]\n"
                 "       [--ordering consensus|sequencer] [--outside-clients K] [--api local|grpc]\n"
                 "       [--calls sync|async|async-into] [--servants fresh|rejoin] [--durable on|off]\n"
                 "       [--peer-transport tcp|grpc] [--tls-ca DIR (tools/make-test-ca)]\n"
                 "       [--netlab PATH/netlab [--kv-servant PATH]]   (root)\n");
    return false;
  }
  if (!o.netlab.empty() && geteuid() != 0) {
    std::fprintf(stderr, "kv-nemesis: --netlab needs root (network namespaces)\n");
    return false;
  }
  return true;
}

}  // namespace cohort::kv_nemesis
