// cohortctl: operate a Cohort daemon from the shell.
//
//   cohortctl [--address HOST:PORT] [--timeout-ms N] COMMAND ...
//     status                       the daemon: name, cluster, health, groups, calls in flight,
//                                  attached clients,
//                                  its peers (address, connected or not)
//     health [SERVICE]             grpc.health.v1 check; exit 0 when SERVING, 1 otherwise
//     services                     the gRPC services the daemon offers (server reflection)
//     groups                       every group: view id, members (suspected ones marked), majority
//     view GROUP                   the current view of GROUP with each member's suspicion state
//     invoke GROUP METHOD PAYLOAD [--mode first|majority|all|one_way]
//            [--descriptor-set FILE [--json-type MESSAGE] [--reply-type MESSAGE]]
//     multicast GROUP PAYLOAD [--descriptor-set FILE --json-type MESSAGE]
//                                  totally ordered multicast to every servant of GROUP
//   Typed stubs (issue 5): with --json-type the PAYLOAD is JSON for that protobuf message, turned
//   into its binary form with the FileDescriptorSet of --descriptor-set (protoc --include_imports
//   --descriptor_set_out=FILE x.proto); with --reply-type replies are printed as JSON.
//     watch GROUP [--count N] [--seconds S]
//                                  prints the view now and on every change (view id or suspicion),
//                                  pushed by the daemon (Client::WatchGroup), through restarts
//                                  of the daemon
//     drain                        leave every group (view changes), then return; the daemon runs on
//     create-group NAME MEMBERS [ordering=O] [liveness=L] [style=S] [default_mode=M]
//                  [join=A,B] [invoke=A,B] [admin=A,B] [durable=true]
//                                  creates a group on every daemon at run time (dynamic_groups);
//                                  MEMBERS: node names, comma-separated; join/invoke/admin: its
//                                  acl (application names or "*"; none given: no acl); durable:
//                                  groups[].durable
//     delete-group NAME            deletes a group made by create-group on every daemon
//     join GROUP / leave GROUP     this daemon joins (leaves) GROUP's view, a view change the
//                                  members agree on (a joiner gets the state first); waits up to
//                                  --timeout-ms until the view has (lacks) the daemon
//   Security: --ca-file PEM (TLS), --server-name NAME, --cert-file/--key-file (client certificate),
//   --token T or --token-file F (or $COHORT_TOKEN): "authorization: Bearer T" on every call.
// Exit codes: 0 success, 1 the daemon answered with an error (printed), 2 bad command line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/descriptor_database.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "invocation/client.h"
#include "invocation/steady_time.h"
#include "proto/api.grpc.pb.h"
#include "tools/grpc_std_calls.h"

namespace {

constexpr char kUsage[] =
    "usage: cohortctl [--address HOST:PORT] [--timeout-ms N] COMMAND ...\n"
    "  status                        daemon name, cluster, health, groups, calls in flight, peers\n"
    "  health [SERVICE]              gRPC health check (exit 0 SERVING, 1 otherwise)\n"
    "  services                      gRPC services offered (server reflection, like grpcurl list)\n"
    "  groups                        every group: view, members, suspicion, majority\n"
    "  view GROUP                    the current view of GROUP and its members' suspicion state\n"
    "  invoke GROUP METHOD PAYLOAD [--mode first|majority|all|one_way]\n"
    "         [--descriptor-set FILE [--json-type MESSAGE] [--reply-type MESSAGE]]\n"
    "  multicast GROUP PAYLOAD [--descriptor-set FILE --json-type MESSAGE]\n"
    "                                totally ordered multicast to the group's servants\n"
    "  watch GROUP [--count N] [--seconds S]\n"
    "                                print the view now and whenever it or a suspicion changes\n"
    "                                (pushed by the daemon: WatchGroup; follows its restarts)\n"
    "  drain                         leave every group (others install views without it), return\n"
    "  create-group NAME MEMBERS [ordering=O] [liveness=L] [style=S] [default_mode=M]\n"
    "               [join=A,B] [invoke=A,B] [admin=A,B] [durable=true]\n"
    "                                a group on every daemon at run time (dynamic_groups);\n"
    "                                MEMBERS: node names, comma-separated; join/invoke/admin:\n"
    "                                its acl (application names or \"*\"); durable: the\n"
    "                                servants keep its state on disk (groups[].durable)\n"
    "  delete-group NAME             delete a group made by create-group, on every daemon\n"
    "  join GROUP | leave GROUP      this daemon joins (leaves) the group's view; waits until the\n"
    "                                view has (lacks) it, up to --timeout-ms\n"
    "--address defaults to $COHORT_ADDRESS or 127.0.0.1:7201.\n"
    "TLS: --ca-file PEM [--server-name NAME] [--cert-file PEM --key-file PEM].\n"
    "Token: --token T | --token-file FILE | $COHORT_TOKEN (sent as authorization: Bearer T).\n"
    "Typed stubs: --json-type MESSAGE makes PAYLOAD JSON for that protobuf message (sent in its\n"
    "binary form); --reply-type MESSAGE prints replies as JSON. Both need --descriptor-set FILE,\n"
    "from protoc --include_imports --descriptor_set_out=FILE x.proto. Example:\n"
    "  cohortctl invoke counter Add '{\"delta\": 5}' --descriptor-set counter.protoset \\\n"
    "      --json-type cohort.examples.AddRequest --reply-type cohort.examples.Value\n";

int Usage(const std::string& problem) {
  std::fprintf(stderr, "cohortctl: %s\n%s", problem.c_str(), kUsage);
  return 2;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "cohortctl: %s: %s\n", absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
  return 1;
}

int Fail(const grpc::Status& status) {
  return Fail(absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                           status.error_message()));
}

struct Options {
  std::string address = "127.0.0.1:7201";
  int timeout_ms = 5000;
  std::string mode = "all";
  bool mode_given = false;
  int count = 0;          // watch: stop after this many printed views (0 = no limit)
  double seconds = 0;     // watch: stop after this long (0 = no limit)
  cohort::ConnectOptions connect;  // TLS and token
  std::string descriptor_set;      // FileDescriptorSet for --json-type / --reply-type
  std::string json_type;           // full name of the request message: PAYLOAD is its JSON
  std::string reply_type;          // full name of the reply message: replies printed as JSON
  std::vector<std::string> args;
};

// Protobuf messages described by a FileDescriptorSet, built at run time (no generated code).
class Messages {
 public:
  // Exits with a usage error (2) when the file cannot be read or does not describe valid files.
  explicit Messages(const std::string& path) : pool_(&database_) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    if (!in) std::exit(Usage("--descriptor-set: cannot read " + path));
    google::protobuf::FileDescriptorSet set;
    if (!set.ParseFromString(bytes.str()) || set.file_size() == 0) {
      std::exit(Usage("--descriptor-set: " + path +
                      " is not a FileDescriptorSet (protoc --include_imports "
                      "--descriptor_set_out=FILE x.proto)"));
    }
    for (const google::protobuf::FileDescriptorProto& file : set.file()) {
      if (!database_.Add(file)) std::exit(Usage("--descriptor-set: bad file " + file.name()));
    }
  }

  // A new empty message of type `name` (full name, e.g. cohort.examples.AddRequest), or exit 2.
  std::unique_ptr<google::protobuf::Message> New(const std::string& flag, const std::string& name) {
    const google::protobuf::Descriptor* descriptor = pool_.FindMessageTypeByName(name);
    if (descriptor == nullptr) {
      std::exit(Usage(flag + ": no message " + name +
                      " in --descriptor-set (full name with the package, and did protoc get "
                      "--include_imports?)"));
    }
    return std::unique_ptr<google::protobuf::Message>(factory_.GetPrototype(descriptor)->New());
  }

 private:
  google::protobuf::SimpleDescriptorDatabase database_;
  google::protobuf::DescriptorPool pool_;
  google::protobuf::DynamicMessageFactory factory_;
};

// PAYLOAD as given, or with --json-type its JSON turned into the message's binary form (exit 2
// when it does not parse).
std::string PayloadOrExit(const Options& options, const std::string& text) {
  if (options.json_type.empty()) return text;
  Messages messages(options.descriptor_set);
  std::unique_ptr<google::protobuf::Message> message = messages.New("--json-type", options.json_type);
  auto parsed = google::protobuf::util::JsonStringToMessage(text, message.get());
  if (!parsed.ok()) {
    std::exit(Usage("PAYLOAD is not JSON for " + options.json_type + ": " +
                    std::string(parsed.message().data(), parsed.message().size())));
  }
  std::string bytes;
  if (!message->SerializeToString(&bytes)) std::exit(Usage("cannot serialise the payload"));
  return bytes;
}

// Usage problem with the typed-payload flags, or "".
std::string CheckTypedFlags(const Options& options) {
  if ((!options.json_type.empty() || !options.reply_type.empty()) &&
      options.descriptor_set.empty()) {
    return "--json-type and --reply-type need --descriptor-set FILE";
  }
  if (!options.descriptor_set.empty() && options.json_type.empty() && options.reply_type.empty()) {
    return "--descriptor-set is used with --json-type and/or --reply-type";
  }
  return "";
}

std::shared_ptr<grpc::Channel> ChannelOrExit(const Options& options) {
  auto channel = cohort::DaemonChannel(options.address, options.connect);
  if (!channel.ok()) std::exit(Fail(channel.status()));
  return *std::move(channel);
}

void SetDeadline(grpc::ClientContext* context, const Options& options) {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(options.timeout_ms));
  cohort::AddCallCredentials(context, options.connect);
}

std::string MemberList(const google::protobuf::RepeatedPtrField<cohort::api::Member>& members) {
  std::vector<std::string> names;
  for (const auto& m : members) names.push_back(m.suspected() ? m.name() + "(suspected)" : m.name());
  return absl::StrJoin(names, ",");
}

int Status(const Options& options) {
  auto stub = cohort::api::Admin::NewStub(ChannelOrExit(options));
  grpc::ClientContext context;
  SetDeadline(&context, options);
  cohort::api::StatusReply reply;
  grpc::Status status = stub->Status(&context, cohort::api::StatusRequest(), &reply);
  if (!status.ok()) return Fail(status);
  std::printf("node: %s (id %u)\ncluster: %s\nhealth: %s\n", reply.node_name().c_str(),
              reply.node(), reply.cluster().c_str(), reply.serving() ? "SERVING" : "NOT_SERVING");
  if (reply.minority_groups_size() > 0) {
    std::printf("minority_groups: %s\n", absl::StrJoin(reply.minority_groups(), ",").c_str());
  }
  std::printf("groups: %u\npending_calls: %llu\nclients: %llu\nqueue_depth: %llu\n"
              "uptime_s: %.1f\n",
              reply.groups(), static_cast<unsigned long long>(reply.pending_calls()),
              static_cast<unsigned long long>(reply.nsos()),
              static_cast<unsigned long long>(reply.queue_depth()), reply.uptime_ms() / 1000.0);
  // Which process this is: its restarts are told by it (incarnation_file).
  const std::string started =
      reply.previous_incarnation() == 0   ? "a first start, as far as it knows"
      : reply.previous_incarnation() == 1 ? "a restart of an unknown process (--replacing)"
                                          : absl::StrCat("a restart of ", reply.previous_incarnation());
  std::printf("incarnation: %llu (%s)\n", static_cast<unsigned long long>(reply.incarnation()),
              started.c_str());
  std::printf("listen.peer: %s\nlisten.client: %s\nmetrics.listen: %s\n",
              reply.listen_peer().c_str(), reply.listen_client().c_str(),
              reply.metrics_listen().empty() ? "off" : reply.metrics_listen().c_str());
  for (const cohort::api::PeerState& peer : reply.peers()) {
    std::printf("peer: %s (id %u) %s %s\n", peer.name().c_str(), peer.node(),
                peer.address().c_str(), peer.connected() ? "connected" : "not connected");
  }
  return 0;
}

int Health(const Options& options) {
  using cohort::grpcstd::HealthCheckResponse;
  HealthCheckResponse::ServingStatus serving = HealthCheckResponse::UNKNOWN;
  grpc::Status status =
      cohort::grpcstd::HealthCheck(ChannelOrExit(options).get(),
                                   options.args.empty() ? "" : options.args[0], &serving,
                                   options.timeout_ms);
  if (!status.ok()) return Fail(status);
  std::printf("%s\n", HealthCheckResponse::ServingStatus_Name(serving).c_str());
  return serving == HealthCheckResponse::SERVING ? 0 : 1;
}

int Services(const Options& options) {
  std::vector<std::string> services;
  grpc::Status status = cohort::grpcstd::ListServices(
      ChannelOrExit(options).get(), &services, options.timeout_ms);
  if (!status.ok()) return Fail(status);
  for (const std::string& service : services) std::printf("%s\n", service.c_str());
  return 0;
}

int Groups(const Options& options) {
  auto stub = cohort::api::Admin::NewStub(ChannelOrExit(options));
  grpc::ClientContext context;
  SetDeadline(&context, options);
  cohort::api::ListGroupsReply reply;
  grpc::Status status = stub->ListGroups(&context, cohort::api::StatusRequest(), &reply);
  if (!status.ok()) return Fail(status);
  std::printf("%-20s %-8s %-10s %-7s %-8s %-8s %-9s %s\n", "GROUP", "VIEW", "ORDERING", "MEMBER",
              "TRUSTED", "MAJORITY", "DURABLE", "MEMBERS");
  for (const auto& g : reply.groups()) {
    std::printf("%-20s %-8llu %-10s %-7s %-8s %-8s %-9s %s\n", g.group().c_str(),
                static_cast<unsigned long long>(g.view_id()), g.ordering().c_str(),
                g.is_member() ? "yes" : "no",
                absl::StrCat(g.trusted(), "/", g.configured_members()).c_str(),
                g.has_majority() ? "yes" : "NO",
                g.resuming() ? "resuming" : g.durable() ? "yes" : "no",
                MemberList(g.members()).c_str());
  }
  return 0;
}

std::unique_ptr<cohort::Client> ConnectOrExit(const Options& options) {
  cohort::ConnectOptions connect = options.connect;
  connect.client_name = "cohortctl";
  connect.timeout = absl::Milliseconds(options.timeout_ms);
  auto client = cohort::Client::Connect(options.address, connect);
  if (!client.ok()) std::exit(Fail(client.status()));
  return *std::move(client);
}

void PrintView(const cohort::View& view) {
  std::printf("group %s view %llu ordering %s\n", view.group.c_str(),
              static_cast<unsigned long long>(view.view_id), view.ordering.c_str());
  for (const cohort::ViewMember& m : view.members) {
    std::printf("  %-16s node %-5u %s\n", m.name.c_str(), m.node,
                m.suspected ? "suspected" : "trusted");
  }
  std::fflush(stdout);
}

int ViewCmd(const Options& options) {
  if (options.args.size() != 1) return Usage("view GROUP");
  auto client = ConnectOrExit(options);
  auto view = client->GroupDetails(options.args[0]);
  if (!view.ok()) return Fail(view.status());
  PrintView(*view);
  return 0;
}

int Invoke(const Options& options) {
  if (options.args.size() != 3) return Usage("invoke GROUP METHOD PAYLOAD");
  static const std::map<std::string, cohort::Mode> kModes = {
      {"one_way", cohort::Mode::kOneWay}, {"first", cohort::Mode::kFirst},
      {"majority", cohort::Mode::kMajority}, {"all", cohort::Mode::kAll}};
  auto mode = kModes.find(options.mode);
  if (mode == kModes.end()) return Usage("--mode must be first, majority, all or one_way");
  if (std::string problem = CheckTypedFlags(options); !problem.empty()) return Usage(problem);
  const std::string payload = PayloadOrExit(options, options.args[2]);
  std::unique_ptr<Messages> reply_messages;
  std::unique_ptr<google::protobuf::Message> reply_message;
  if (!options.reply_type.empty()) {
    reply_messages = std::make_unique<Messages>(options.descriptor_set);
    reply_message = reply_messages->New("--reply-type", options.reply_type);
  }
  auto client = ConnectOrExit(options);
  const std::string& group = options.args[0];
  if (mode->second == cohort::Mode::kOneWay) {
    absl::Status sent = client->Send(group, options.args[1], payload);
    if (!sent.ok()) return Fail(sent);
    std::printf("sent (one-way)\n");
    return 0;
  }
  absl::Duration deadline = absl::Milliseconds(options.timeout_ms);
  auto result = options.mode_given
                    ? client->Invoke(group, options.args[1], payload, mode->second, deadline)
                    : client->InvokeDefault(group, options.args[1], payload, deadline);
  if (!result.ok()) return Fail(result.status());
  std::printf("view %llu, %zu of %u wanted replies\n",
              static_cast<unsigned long long>(result->view_id), result->replies.size(),
              result->wanted);
  int code = 0;
  for (const cohort::Reply& reply : result->replies) {
    if (!reply.status.ok()) {
      std::printf("%s: error %s\n", reply.member.c_str(), reply.status.ToString().c_str());
    } else if (reply_message == nullptr) {
      std::printf("%s: %s\n", reply.member.c_str(), reply.payload.c_str());
    } else {
      // Default values printed too: {"value": "0"} rather than {}.
      google::protobuf::util::JsonPrintOptions print;
      print.always_print_primitive_fields = true;
      std::string json;
      reply_message->Clear();
      if (!reply_message->ParseFromString(reply.payload) ||
          !google::protobuf::util::MessageToJsonString(*reply_message, &json, print).ok()) {
        std::printf("%s: error the reply (%zu bytes) is not a %s\n", reply.member.c_str(),
                    reply.payload.size(), options.reply_type.c_str());
        code = 1;
        continue;
      }
      std::printf("%s: %s\n", reply.member.c_str(), json.c_str());
    }
  }
  return code;
}

int Multicast(const Options& options) {
  if (options.args.size() != 2) return Usage("multicast GROUP PAYLOAD");
  if (!options.reply_type.empty()) return Usage("multicast has no replies: no --reply-type");
  if (std::string problem = CheckTypedFlags(options); !problem.empty()) return Usage(problem);
  const std::string payload = PayloadOrExit(options, options.args[1]);
  auto client = ConnectOrExit(options);
  absl::Status sent = client->Multicast(options.args[0], payload);
  if (!sent.ok()) return Fail(sent);
  std::printf("multicast to %s\n", options.args[0].c_str());
  return 0;
}

int CreateGroupCmd(const Options& options) {
  constexpr char kUsage[] =
      "create-group NAME MEMBERS [ordering=O] [liveness=L] [style=S] [default_mode=M] "
      "[join=A,B] [invoke=A,B] [admin=A,B] [durable=true]";
  if (options.args.size() < 2) return Usage(kUsage);
  cohort::GroupSpec spec;
  spec.name = options.args[0];
  spec.members = absl::StrSplit(options.args[1], ',', absl::SkipEmpty());
  for (size_t i = 2; i < options.args.size(); ++i) {
    std::pair<std::string, std::string> kv = absl::StrSplit(options.args[i], absl::MaxSplits('=', 1));
    if (kv.first == "ordering") {
      spec.ordering = kv.second;
    } else if (kv.first == "liveness") {
      spec.liveness = kv.second;
    } else if (kv.first == "style") {
      spec.style = kv.second;
    } else if (kv.first == "default_mode") {
      spec.default_mode = kv.second;
    } else if (kv.first == "durable") {
      if (kv.second != "true" && kv.second != "false") {
        return Usage(absl::StrCat("durable must be true or false, not \"", kv.second, "\""));
      }
      spec.durable = kv.second == "true";
    } else if (kv.first == "join" || kv.first == "invoke" || kv.first == "admin") {
      if (!spec.acl) spec.acl.emplace();
      std::vector<std::string>& names = kv.first == "join"     ? spec.acl->join
                                        : kv.first == "invoke" ? spec.acl->invoke
                                                               : spec.acl->admin;
      for (absl::string_view name : absl::StrSplit(kv.second, ',', absl::SkipEmpty())) {
        names.emplace_back(name);
      }
    } else {
      return Usage(absl::StrCat("unknown group key \"", kv.first, "\": ", kUsage));
    }
  }
  auto client = ConnectOrExit(options);
  absl::Status created = client->CreateGroup(spec);
  if (!created.ok()) return Fail(created);
  std::printf("group %s created on [%s]\n", spec.name.c_str(),
              absl::StrJoin(spec.members, ", ").c_str());
  return 0;
}

int DeleteGroupCmd(const Options& options) {
  if (options.args.size() != 1) return Usage("delete-group NAME");
  auto client = ConnectOrExit(options);
  absl::Status deleted = client->DeleteGroup(options.args[0]);
  if (!deleted.ok()) return Fail(deleted);
  std::printf("group %s deleted\n", options.args[0].c_str());
  return 0;
}

// join / leave: asks, then reads the view until it has (lacks) this daemon.
int Membership(const Options& options, bool join) {
  const char* command = join ? "join" : "leave";
  if (options.args.size() != 1) return Usage(absl::StrCat(command, " GROUP"));
  const std::string& group = options.args[0];
  auto client = ConnectOrExit(options);
  absl::Status asked = join ? client->JoinGroup(group) : client->LeaveGroup(group);
  if (!asked.ok()) return Fail(asked);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.timeout_ms);
  while (true) {
    absl::StatusOr<cohort::View> view = client->GroupDetails(group);
    if (!view.ok()) return Fail(view.status());
    bool in = std::any_of(view->members.begin(), view->members.end(),
                          [&](const cohort::ViewMember& m) { return m.name == client->node_name(); });
    if (in == join) {
      std::printf("%s %s group %s: view %llu\n", client->node_name().c_str(),
                  join ? "joined" : "left", group.c_str(),
                  static_cast<unsigned long long>(view->view_id));
      return 0;
    }
    if (std::chrono::steady_clock::now() >= until) {
      std::printf("%s is %s the view of group %s after %d ms (view %llu)\n",
                  client->node_name().c_str(), join ? "not yet in" : "still in", group.c_str(),
                  options.timeout_ms, static_cast<unsigned long long>(view->view_id));
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Each change the daemon pushes (Client::WatchGroup), until --count changes, --seconds, or the
// watch ends (the group deleted: exit 1). A daemon that goes is said, and watched again.
int Watch(const Options& options) {
  if (options.args.size() != 1) return Usage("watch GROUP [--count N] [--seconds S]");
  auto client = ConnectOrExit(options);
  // (--seconds and the times printed are measured on the monotonic clock: invocation/steady_time.h.)
  const cohort::internal::SteadyTime start = cohort::internal::SteadyNow();
  cohort::internal::SteadyWake wake;  // signalled by the callbacks below
  absl::Mutex mu;
  int printed = 0;
  std::optional<absl::Status> ended;
  auto watch = client->WatchGroup(
      options.args[0],
      [&](const cohort::View& view) {
        absl::MutexLock lock(&mu);
        std::printf("[+%.2fs] ", absl::ToDoubleSeconds(cohort::internal::SteadySince(start)));
        PrintView(view);
        ++printed;
        wake.Signal();
      },
      [&](absl::Status status) {
        absl::MutexLock lock(&mu);
        ended = std::move(status);
        wake.Signal();
      },
      [&](const absl::Status& status) {
        absl::MutexLock lock(&mu);
        std::printf("[+%.2fs] lost the daemon (%s); watching again when it answers\n",
                    absl::ToDoubleSeconds(cohort::internal::SteadySince(start)),
                    status.ToString().c_str());
        std::fflush(stdout);
      });
  if (!watch.ok()) return Fail(watch.status());
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return ended.has_value() || (options.count > 0 && printed >= options.count);
  };
  const cohort::internal::SteadyTime until =
      options.seconds > 0
          ? start + std::chrono::duration_cast<cohort::internal::SteadyTime::duration>(
                        std::chrono::duration<double>(options.seconds))
          : cohort::internal::SteadyTime::max();
  while (cohort::internal::SteadyNow() < until) {
    {
      absl::MutexLock lock(&mu);
      if (done()) break;
    }
    wake.WaitUntil(until);  // a signal since the look above ends it at once
  }
  absl::MutexLock lock(&mu);
  if (ended.has_value()) return Fail(*ended);
  return 0;
}

int Drain(const Options& options) {
  if (!options.args.empty()) return Usage("drain takes no arguments");
  auto stub = cohort::api::Admin::NewStub(ChannelOrExit(options));
  grpc::ClientContext context;
  SetDeadline(&context, options);
  // The daemon waits up to --timeout-ms for the view changes; the call gets more.
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(options.timeout_ms + 5000));
  cohort::api::DrainRequest request;
  request.set_timeout_ms(static_cast<uint32_t>(options.timeout_ms));
  cohort::api::DrainReply reply;
  grpc::Status status = stub->Drain(&context, request, &reply);
  if (!status.ok()) return Fail(status);
  std::printf("drained: left %s\n",
              reply.left().empty() ? "no group" : absl::StrJoin(reply.left(), ",").c_str());
  if (!reply.still_member().empty()) {
    std::printf("still member of %s (timeout)\n",
                absl::StrJoin(reply.still_member(), ",").c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (const char* env = std::getenv("COHORT_ADDRESS"); env != nullptr && *env) {
    options.address = env;
  }
  if (const char* env = std::getenv("COHORT_TOKEN"); env != nullptr && *env) {
    options.connect.token = env;
  }
  std::string command;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const std::string& flag) -> std::string {
      if (i + 1 >= argc) std::exit(Usage(flag + " needs a value"));
      return argv[++i];
    };
    auto number = [&](const std::string& flag, double* out) {
      std::string text = value(flag);
      if (!absl::SimpleAtod(text, out) || *out < 0) std::exit(Usage(flag + ": not a number"));
    };
    double n = 0;
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else if (arg == "--address") {
      options.address = value(arg);
    } else if (arg == "--timeout-ms") {
      number(arg, &n);
      options.timeout_ms = static_cast<int>(n);
    } else if (arg == "--mode") {
      options.mode = value(arg);
      options.mode_given = true;
    } else if (arg == "--count") {
      number(arg, &n);
      options.count = static_cast<int>(n);
    } else if (arg == "--seconds") {
      number(arg, &options.seconds);
    } else if (arg == "--ca-file") {
      options.connect.ca_file = value(arg);
    } else if (arg == "--server-name") {
      options.connect.server_name = value(arg);
    } else if (arg == "--cert-file") {
      options.connect.cert_file = value(arg);
    } else if (arg == "--key-file") {
      options.connect.key_file = value(arg);
    } else if (arg == "--token") {
      options.connect.token = value(arg);
    } else if (arg == "--token-file") {
      std::string path = value(arg);
      std::ifstream in(path);
      std::stringstream text;
      text << in.rdbuf();
      if (!in) return Usage("--token-file: cannot read " + path);
      options.connect.token = std::string(absl::StripAsciiWhitespace(text.str()));
    } else if (arg == "--descriptor-set") {
      options.descriptor_set = value(arg);
    } else if (arg == "--json-type") {
      options.json_type = value(arg);
    } else if (arg == "--reply-type") {
      options.reply_type = value(arg);
    } else if (arg.rfind("--", 0) == 0) {
      return Usage("unknown flag " + arg);
    } else if (command.empty()) {
      command = arg;
    } else {
      options.args.push_back(arg);
    }
  }
  if (command == "status") return Status(options);
  if (command == "health") return Health(options);
  if (command == "groups") return Groups(options);
  if (command == "services") return Services(options);
  if (command == "view") return ViewCmd(options);
  if (command == "invoke") return Invoke(options);
  if (command == "multicast") return Multicast(options);
  if (command == "watch") return Watch(options);
  if (command == "drain") return Drain(options);
  if (command == "create-group") return CreateGroupCmd(options);
  if (command == "delete-group") return DeleteGroupCmd(options);
  if (command == "join") return Membership(options, /*join=*/true);
  if (command == "leave") return Membership(options, /*join=*/false);
  return Usage(command.empty() ? "a command is required" : "unknown command " + command);
}
