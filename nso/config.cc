// Loads the daemon's YAML configuration (config.h). yaml-cpp throws; exceptions are caught in
// ParseConfig and never leave this file. Reading walks the document key by key, remembering the
// line of every key path, so that the cross-checks at the end can point at the offending line.
#include "nso/config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "nso/config_yaml.h"

namespace cohort::nso {
namespace {

using config_yaml::ChildPath;
using config_yaml::Describe;
using config_yaml::EnumNames;
using config_yaml::ItemPath;
using config_yaml::LineOf;
using config_yaml::ListItems;
using config_yaml::MapView;
using config_yaml::ParseInt;
using config_yaml::ParseString;
using config_yaml::Presence;
using config_yaml::ReadBool;
using config_yaml::ReadEnum;
using config_yaml::ReadEnumString;
using config_yaml::Reader;
using config_yaml::ReadInt;
using config_yaml::ReadKey;
using config_yaml::ReadSection;
using config_yaml::Value;
using Ordering = GroupConfig::Ordering;
using Liveness = GroupConfig::Liveness;
using Style = GroupConfig::Style;
using DefaultMode = GroupConfig::DefaultMode;

constexpr int64_t kMaxDurationMs = 24 * 60 * 60 * 1000;  // one day: longer is a unit mistake
constexpr int64_t kMaxCount = std::numeric_limits<int32_t>::max();
constexpr size_t kMaxNameLength = 64;
constexpr size_t kMaxApplicationNameLength = 256;

// Keys allowed at each level, in schema order (listed in unknown-key errors).
const std::vector<absl::string_view> kTopKeys = {
    "node",       "cluster",          "listen",    "peers",  "log_level",
    "log_format", "failure_detector", "consensus", "limits", "groups", "metrics",
    "tls",        "auth",             "peer_transport", "dynamic_groups", "incarnation_file"};
const std::vector<absl::string_view> kDynamicGroupKeys = {"create", "state_file"};
const std::vector<absl::string_view> kTlsKeys = {"ca_file",     "cert_file", "key_file",
                                                 "server_name", "insecure",  "reload_seconds",
                                                 "crl_dir"};
const std::vector<absl::string_view> kAuthKeys = {"tokens", "client_certificates",
                                                   "client_ca_file", "certificate_name"};
const std::vector<absl::string_view> kTokenKeys = {"name", "token", "token_file"};
const std::vector<absl::string_view> kAclKeys = {"join", "invoke", "admin"};
const std::vector<absl::string_view> kListenKeys = {"peer", "client", "local"};
const std::vector<absl::string_view> kMetricsKeys = {"listen", "per_group"};
const std::vector<absl::string_view> kPeerKeys = {"name", "id", "address"};
const std::vector<absl::string_view> kFailureDetectorKeys = {
    "suspect_timeout_ms", "exclude_timeout_ms", "heartbeat_interval_ms", "fail_fast_after_ms",
    "suspect_on_disconnect"};
const std::vector<absl::string_view> kConsensusKeys = {
    "optimisation_1", "optimisation_2", "optimisation_3", "round_delay_ms", "batch_max_messages",
    "batch_max_bytes"};
const std::vector<absl::string_view> kLimitsKeys = {"max_payload_bytes", "default_deadline_ms",
                                                   "max_nsos", "nso_idle_ms",
                                                   "max_unordered_requests",
                                                   "max_unordered_bytes",
                                                   "servant_backlog_bytes", "servant_stall_ms",
                                                   "servant_cutoff_bytes"};
const std::vector<absl::string_view> kGroupKeys = {
    "name",         "members",           "ordering",          "liveness", "silence_ms", "style",
    "default_mode", "suspect_timeout_ms", "exclude_timeout_ms", "acl", "durable"};


const EnumNames<Ordering> kOrderingNames = {{"consensus", Ordering::kConsensus},
                                            {"sequencer", Ordering::kSequencer}};
const EnumNames<Liveness> kLivenessNames = {{"lively", Liveness::kLively},
                                            {"event", Liveness::kEvent}};
const EnumNames<Style> kStyleNames = {{"open", Style::kOpen}, {"closed", Style::kClosed}};
const EnumNames<DefaultMode> kDefaultModeNames = {{"one_way", DefaultMode::kOneWay},
                                                  {"first", DefaultMode::kFirst},
                                                  {"majority", DefaultMode::kMajority},
                                                  {"all", DefaultMode::kAll}};
const EnumNames<absl::string_view> kLogLevelNames = {
    {"trace", "trace"}, {"debug", "debug"}, {"info", "info"},
    {"warn", "warn"},   {"error", "error"}, {"off", "off"}};
const EnumNames<absl::string_view> kLogFormatNames = {{"text", "text"}, {"json", "json"}};
const EnumNames<CertificateNameField> kCertificateNameNames = {
    {"common_name", CertificateNameField::kCommonName},
    {"dns", CertificateNameField::kDns},
    {"uri", CertificateNameField::kUri}};
const EnumNames<absl::string_view> kPeerTransportNames = {
    {"auto", "auto"}, {"grpc", "grpc"}, {"tcp", "tcp"}};

bool IsValidName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

absl::Status ParseName(const Reader& reader, const Value& value, std::string* out) {
  CONFIG_RETURN_IF_ERROR(ParseString(reader, value, out));
  if (!IsValidName(*out)) {
    return reader.ErrorAtLine(value.line, value.path,
                              absl::StrCat("must match [A-Za-z0-9_.-]{1,64}, got \"", *out, "\""));
  }
  return absl::OkStatus();
}

// Empty when `address` is host:port (host non-empty, IPv6 in brackets, port 1..65535).
std::string AddressProblem(absl::string_view address) {
  absl::string_view host;
  absl::string_view port;
  if (!address.empty() && address.front() == '[') {
    size_t close = address.find(']');
    if (close == absl::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return "must be host:port, e.g. [::1]:7101";
    }
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) return "must be host:port, e.g. 127.0.0.1:7101";
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (host.find(':') != absl::string_view::npos) return "an IPv6 host must be in brackets";
  }
  if (host.empty()) return "must be host:port: the host is empty";
  if (std::any_of(host.begin(), host.end(), [](char c) { return absl::ascii_isspace(c); })) {
    return "must be host:port: the host contains a space";
  }
  int port_number = 0;
  bool digits = !port.empty() && std::all_of(port.begin(), port.end(), absl::ascii_isdigit);
  if (!digits || !absl::SimpleAtoi(port, &port_number) || port_number < 1 ||
      port_number > 65535) {
    return "must be host:port with a port in 1..65535";
  }
  return "";
}

absl::Status ParseAddress(const Reader& reader, const Value& value, std::string* out) {
  CONFIG_RETURN_IF_ERROR(ParseString(reader, value, out));
  std::string problem = AddressProblem(*out);
  if (!problem.empty()) {
    return reader.ErrorAtLine(value.line, value.path,
                              absl::StrCat(problem, ", got \"", *out, "\""));
  }
  return absl::OkStatus();
}

absl::Status ReadName(const MapView& map, absl::string_view key, Presence presence,
                      std::string* out) {
  return ReadKey(map, key, presence,
                 [out](const Reader& r, const Value& v) { return ParseName(r, v, out); });
}

absl::Status ReadAddress(const MapView& map, absl::string_view key, std::string* out) {
  return ReadKey(map, key, Presence::kRequired,
                 [out](const Reader& r, const Value& v) { return ParseAddress(r, v, out); });
}

absl::Status ReadDurationMs(const MapView& map, absl::string_view key, int64_t* out) {
  return ReadInt(map, key, 1, kMaxDurationMs, out);
}

// ---- Sections ---------------------------------------------------------------------------------

absl::Status ReadListen(const MapView& top, Config* config) {
  return ReadSection(top, "listen", Presence::kRequired, kListenKeys, [config](const MapView& m) {
    CONFIG_RETURN_IF_ERROR(ReadAddress(m, "peer", &config->listen_peer));
    CONFIG_RETURN_IF_ERROR(ReadAddress(m, "client", &config->listen_client));
    // local: auto | off | an absolute path for the Unix socket of the local fast path.
    return ReadKey(m, "local", Presence::kOptional, [config](const Reader& r, const Value& v) {
      std::string local;
      CONFIG_RETURN_IF_ERROR(ParseString(r, v, &local));
      if (local != "auto" && local != "off" && (local.empty() || local[0] != '/' ||
                                                local.size() > 100)) {
        return r.ErrorAtLine(v.line, v.path, absl::StrCat("must be auto, off or an absolute path of at most 100 "
                                         "characters for a Unix socket, got \"", local, "\""));
      }
      config->listen_local = local;
      return absl::OkStatus();
    });
  });
}

// metrics: {listen: host:port} (optional; absent = no metrics endpoint).
absl::Status ReadMetrics(const MapView& top, Config* config) {
  return ReadSection(top, "metrics", Presence::kOptional, kMetricsKeys, [config](const MapView& m) {
    CONFIG_RETURN_IF_ERROR(ReadAddress(m, "listen", &config->metrics_listen));
    return ReadBool(m, "per_group", &config->metrics_per_group);
  });
}

absl::Status ReadFailureDetectorKeys(const MapView& m, FailureDetectorConfig* fd) {
  CONFIG_RETURN_IF_ERROR(ReadDurationMs(m, "suspect_timeout_ms", &fd->suspect_timeout_ms));
  CONFIG_RETURN_IF_ERROR(ReadDurationMs(m, "exclude_timeout_ms", &fd->exclude_timeout_ms));
  CONFIG_RETURN_IF_ERROR(ReadDurationMs(m, "heartbeat_interval_ms", &fd->heartbeat_interval_ms));
  CONFIG_RETURN_IF_ERROR(ReadInt(m, "fail_fast_after_ms", 0, kMaxDurationMs, &fd->fail_fast_after_ms));
  return ReadBool(m, "suspect_on_disconnect", &fd->suspect_on_disconnect);
}

absl::Status ReadFailureDetector(const MapView& top, FailureDetectorConfig* fd) {
  return ReadSection(top, "failure_detector", Presence::kOptional, kFailureDetectorKeys,
                     [fd](const MapView& m) { return ReadFailureDetectorKeys(m, fd); });
}

absl::Status ReadConsensusKeys(const MapView& m, ConsensusConfig* consensus) {
  CONFIG_RETURN_IF_ERROR(ReadBool(m, "optimisation_1", &consensus->optimisation_1));
  CONFIG_RETURN_IF_ERROR(ReadBool(m, "optimisation_2", &consensus->optimisation_2));
  CONFIG_RETURN_IF_ERROR(ReadBool(m, "optimisation_3", &consensus->optimisation_3));
  CONFIG_RETURN_IF_ERROR(
      ReadInt(m, "round_delay_ms", 0, kMaxDurationMs, &consensus->round_delay_ms));
  CONFIG_RETURN_IF_ERROR(
      ReadInt(m, "batch_max_messages", 1, kMaxCount, &consensus->batch_max_messages));
  return ReadInt(m, "batch_max_bytes", 1, kMaxCount, &consensus->batch_max_bytes);
}

absl::Status ReadConsensus(const MapView& top, ConsensusConfig* consensus) {
  return ReadSection(top, "consensus", Presence::kOptional, kConsensusKeys,
                     [consensus](const MapView& m) { return ReadConsensusKeys(m, consensus); });
}

absl::Status ReadLimitsKeys(const MapView& m, LimitsConfig* limits) {
  CONFIG_RETURN_IF_ERROR(
      ReadInt(m, "max_payload_bytes", 1, kMaxPayloadBytes, &limits->max_payload_bytes));
  CONFIG_RETURN_IF_ERROR(ReadDurationMs(m, "default_deadline_ms", &limits->default_deadline_ms));
  CONFIG_RETURN_IF_ERROR(ReadInt(m, "max_nsos", 1, kMaxCount, &limits->max_nsos));
  CONFIG_RETURN_IF_ERROR(ReadInt(m, "nso_idle_ms", 0, kMaxCount, &limits->nso_idle_ms));
  CONFIG_RETURN_IF_ERROR(
      ReadInt(m, "max_unordered_requests", 1, kMaxCount, &limits->max_unordered_requests));
  CONFIG_RETURN_IF_ERROR(
      ReadInt(m, "max_unordered_bytes", 1, kMaxCount, &limits->max_unordered_bytes));
  CONFIG_RETURN_IF_ERROR(
      ReadInt(m, "servant_backlog_bytes", 0, kMaxCount, &limits->servant_backlog_bytes));
  CONFIG_RETURN_IF_ERROR(ReadDurationMs(m, "servant_stall_ms", &limits->servant_stall_ms));
  return ReadInt(m, "servant_cutoff_bytes", 1, kMaxCount, &limits->servant_cutoff_bytes);
}

absl::Status ReadLimits(const MapView& top, LimitsConfig* limits) {
  return ReadSection(top, "limits", Presence::kOptional, kLimitsKeys,
                     [limits](const MapView& m) { return ReadLimitsKeys(m, limits); });
}

// Reads the list at `key` (absent or null: empty unless required) item by item.
absl::Status ReadList(const MapView& map, absl::string_view key, Presence presence,
                      absl::string_view expected,
                      const std::function<absl::Status(const Value&)>& read_item) {
  absl::StatusOr<std::optional<Value>> value = map.Get(key, presence);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return absl::OkStatus();
  if ((*value)->node.IsNull() && presence == Presence::kOptional) return absl::OkStatus();
  absl::StatusOr<std::vector<Value>> items = ListItems(map.reader(), **value, expected);
  if (!items.ok()) return items.status();
  if (items->empty() && presence == Presence::kRequired) {
    return map.reader()->ErrorAtLine((*value)->line, (*value)->path,
                                     absl::StrCat("must be a non-empty list of ", expected));
  }
  for (const Value& item : *items) CONFIG_RETURN_IF_ERROR(read_item(item));
  return absl::OkStatus();
}

absl::Status ReadPeer(Reader* reader, const Value& item, PeerConfig* peer) {
  absl::StatusOr<MapView> m = MapView::Open(reader, item, kPeerKeys);
  if (!m.ok()) return m.status();
  CONFIG_RETURN_IF_ERROR(ReadName(*m, "name", Presence::kRequired, &peer->name));
  int64_t id = 0;
  CONFIG_RETURN_IF_ERROR(ReadKey(*m, "id", Presence::kRequired,
                                 [&id](const Reader& r, const Value& v) {
                                   return ParseInt(r, v, 1, 65535, &id);
                                 }));
  peer->id = static_cast<uint32_t>(id);
  return ReadAddress(*m, "address", &peer->address);
}

absl::Status ReadPeers(const MapView& top, std::vector<PeerConfig>* peers) {
  return ReadList(top, "peers", Presence::kRequired, "peers", [&](const Value& item) {
    PeerConfig peer;
    CONFIG_RETURN_IF_ERROR(ReadPeer(top.reader(), item, &peer));
    peers->push_back(std::move(peer));
    return absl::OkStatus();
  });
}

absl::Status ReadMembers(const MapView& m, std::vector<std::string>* members) {
  return ReadList(m, "members", Presence::kRequired, "peer names", [&](const Value& item) {
    std::string member;
    CONFIG_RETURN_IF_ERROR(ParseName(*m.reader(), item, &member));
    members->push_back(std::move(member));
    return absl::OkStatus();
  });
}

// An application's name in an acl: a token's name, or a client certificate's (a common name, a
// DNS name, a URI such as spiffe://cluster/ns/app): printable ASCII without spaces, 1..256.
absl::Status ParseApplicationName(const Reader& reader, const Value& value, std::string* out) {
  CONFIG_RETURN_IF_ERROR(ParseString(reader, value, out));
  bool printable = !out->empty() && out->size() <= kMaxApplicationNameLength &&
                   std::all_of(out->begin(), out->end(), [](char c) { return c > ' ' && c < 127; });
  if (!printable) {
    return reader.ErrorAtLine(value.line, value.path,
                              absl::StrCat("must be an application name (1..256 printable ASCII "
                                           "characters, no spaces), got \"",
                                           absl::CHexEscape(*out), "\""));
  }
  return absl::OkStatus();
}

// An acl list: application names or "*".
absl::Status ReadAclList(const MapView& m, absl::string_view key, std::vector<std::string>* out) {
  return ReadList(m, key, Presence::kOptional, "application names or \"*\"", [&](const Value& item) {
    std::string name;
    if (item.node.IsScalar() && item.node.Scalar() == "*") {
      name = "*";
    } else {
      CONFIG_RETURN_IF_ERROR(ParseApplicationName(*m.reader(), item, &name));
    }
    out->push_back(std::move(name));
    return absl::OkStatus();
  });
}

absl::Status ReadAcl(const MapView& m, AclConfig* acl) {
  return ReadSection(m, "acl", Presence::kOptional, kAclKeys, [acl](const MapView& a) {
    acl->present = true;
    CONFIG_RETURN_IF_ERROR(ReadAclList(a, "join", &acl->join));
    CONFIG_RETURN_IF_ERROR(ReadAclList(a, "invoke", &acl->invoke));
    return ReadAclList(a, "admin", &acl->admin);
  });
}

absl::Status ReadGroup(Reader* reader, const Value& item, const FailureDetectorConfig& fd,
                       GroupConfig* group) {
  absl::StatusOr<MapView> m = MapView::Open(reader, item, kGroupKeys);
  if (!m.ok()) return m.status();
  group->suspect_timeout_ms = fd.suspect_timeout_ms;
  group->exclude_timeout_ms = fd.exclude_timeout_ms;
  group->silence_ms = fd.heartbeat_interval_ms;
  CONFIG_RETURN_IF_ERROR(ReadName(*m, "name", Presence::kRequired, &group->name));
  CONFIG_RETURN_IF_ERROR(ReadMembers(*m, &group->members));
  CONFIG_RETURN_IF_ERROR(ReadEnum(*m, "ordering", kOrderingNames, &group->ordering));
  CONFIG_RETURN_IF_ERROR(ReadEnum(*m, "liveness", kLivenessNames, &group->liveness));
  CONFIG_RETURN_IF_ERROR(ReadDurationMs(*m, "silence_ms", &group->silence_ms));
  CONFIG_RETURN_IF_ERROR(ReadEnum(*m, "style", kStyleNames, &group->style));
  CONFIG_RETURN_IF_ERROR(ReadEnum(*m, "default_mode", kDefaultModeNames, &group->default_mode));
  CONFIG_RETURN_IF_ERROR(ReadDurationMs(*m, "suspect_timeout_ms", &group->suspect_timeout_ms));
  CONFIG_RETURN_IF_ERROR(ReadDurationMs(*m, "exclude_timeout_ms", &group->exclude_timeout_ms));
  CONFIG_RETURN_IF_ERROR(ReadBool(*m, "durable", &group->durable));
  AclConfig acl;
  CONFIG_RETURN_IF_ERROR(ReadAcl(*m, &acl));
  if (acl.present) group->acl = std::make_shared<const AclConfig>(std::move(acl));
  return absl::OkStatus();
}

// tls: {ca_file, cert_file, key_file[, server_name, reload_seconds, crl_dir]} or {insecure:
// true}. The files are read when the daemon starts and every reload_seconds after (cohortd --check
// validates a config without its secrets). The section is required; RequireTls refuses a file without it, after every other check.
absl::Status ReadTls(const MapView& top, TlsConfig* tls) {
  return ReadSection(top, "tls", Presence::kOptional, kTlsKeys, [tls](const MapView& m) {
    bool insecure = false;
    CONFIG_RETURN_IF_ERROR(ReadBool(m, "insecure", &insecure));
    auto read_string = [&m](absl::string_view key, Presence presence, std::string* out) {
      return ReadKey(m, key, presence,
                     [out](const Reader& r, const Value& v) { return ParseString(r, v, out); });
    };
    if (insecure) {
      for (absl::string_view key :
           {"ca_file", "cert_file", "key_file", "server_name", "reload_seconds", "crl_dir"}) {
        absl::StatusOr<std::optional<Value>> value = m.Get(key, Presence::kOptional);
        if (!value.ok()) return value.status();
        if (value->has_value()) {
          return m.reader()->ErrorAtLine((*value)->line, (*value)->path,
                                         "must not be set with tls.insecure: true");
        }
      }
      tls->explicit_insecure = true;
      return absl::OkStatus();
    }
    CONFIG_RETURN_IF_ERROR(read_string("ca_file", Presence::kRequired, &tls->ca_file));
    CONFIG_RETURN_IF_ERROR(read_string("cert_file", Presence::kRequired, &tls->cert_file));
    CONFIG_RETURN_IF_ERROR(read_string("key_file", Presence::kRequired, &tls->key_file));
    CONFIG_RETURN_IF_ERROR(read_string("server_name", Presence::kOptional, &tls->server_name));
    CONFIG_RETURN_IF_ERROR(read_string("crl_dir", Presence::kOptional, &tls->crl_dir));
    CONFIG_RETURN_IF_ERROR(ReadInt(m, "reload_seconds", 1, 86400, &tls->reload_seconds));
    tls->enabled = true;
    return absl::OkStatus();
  });
}

// Plaintext only when the file says so: a config with neither TLS files nor insecure: true (no tls
// section, or an empty one) is refused. Checked last so that other errors keep their lines.
absl::Status RequireTls(const Reader& reader, const TlsConfig& tls) {
  if (tls.enabled || tls.explicit_insecure) return absl::OkStatus();
  return reader.ErrorAtLine(
      0, "tls",
      "missing required section: add `tls: {ca_file: CA.pem, cert_file: NODE.pem, key_file: "
      "NODE.key}` (tools/make-test-ca makes test certificates), or `tls: {insecure: true}` to run "
      "plaintext and unauthenticated between daemons on purpose");
}

bool HasSpace(absl::string_view text) {
  return std::any_of(text.begin(), text.end(),
                     [](char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); });
}

// One auth.tokens[] entry: name and exactly one of token / token_file (read now, trimmed).
absl::Status ReadToken(Reader* reader, const Value& item, TokenConfig* token) {
  absl::StatusOr<MapView> m = MapView::Open(reader, item, kTokenKeys);
  if (!m.ok()) return m.status();
  CONFIG_RETURN_IF_ERROR(ReadName(*m, "name", Presence::kRequired, &token->name));
  absl::StatusOr<std::optional<Value>> inline_token = m->Get("token", Presence::kOptional);
  if (!inline_token.ok()) return inline_token.status();
  absl::StatusOr<std::optional<Value>> file = m->Get("token_file", Presence::kOptional);
  if (!file.ok()) return file.status();
  if (inline_token->has_value() == file->has_value()) {
    return reader->ErrorAtLine(item.line, item.path,
                               "needs exactly one of token and token_file");
  }
  if (inline_token->has_value()) {
    const Value& v = **inline_token;
    CONFIG_RETURN_IF_ERROR(ParseString(*reader, v, &token->token));
    if (HasSpace(token->token)) return reader->ErrorAtLine(v.line, v.path, "must not contain spaces");
    return absl::OkStatus();
  }
  const Value& v = **file;
  CONFIG_RETURN_IF_ERROR(ParseString(*reader, v, &token->token_file));
  std::ifstream in(token->token_file, std::ios::binary);
  if (!in) {
    return reader->ErrorAtLine(v.line, v.path,
                               absl::StrCat("cannot read \"", token->token_file, "\": ",
                                            std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  token->token = std::string(absl::StripAsciiWhitespace(text.str()));
  if (token->token.empty() || HasSpace(token->token)) {
    return reader->ErrorAtLine(v.line, v.path,
                               absl::StrCat("\"", token->token_file,
                                            "\" must hold one token without spaces"));
  }
  return absl::OkStatus();
}

absl::Status ReadAuth(const MapView& top, Config* config) {
  return ReadSection(top, "auth", Presence::kOptional, kAuthKeys, [config](const MapView& m) {
    CONFIG_RETURN_IF_ERROR(ReadBool(m, "client_certificates", &config->client_certificates));
    CONFIG_RETURN_IF_ERROR(ReadKey(m, "client_ca_file", Presence::kOptional,
                                   [config](const Reader& r, const Value& v) {
                                     return ParseString(r, v, &config->client_ca_file);
                                   }));
    CONFIG_RETURN_IF_ERROR(
        ReadEnum(m, "certificate_name", kCertificateNameNames, &config->certificate_name));
    // An auth section says how applications prove who they are: tokens, certificates or both.
    Presence tokens = config->client_certificates ? Presence::kOptional : Presence::kRequired;
    return ReadList(m, "tokens", tokens, "tokens", [&](const Value& item) {
      TokenConfig token;
      CONFIG_RETURN_IF_ERROR(ReadToken(m.reader(), item, &token));
      config->tokens.push_back(std::move(token));
      return absl::OkStatus();
    });
  });
}

absl::Status ReadGroups(const MapView& top, const FailureDetectorConfig& fd,
                        std::vector<GroupConfig>* groups) {
  absl::Status read =
      ReadList(top, "groups", Presence::kOptional, "groups", [&](const Value& item) {
        GroupConfig group;
        CONFIG_RETURN_IF_ERROR(ReadGroup(top.reader(), item, fd, &group));
        group.members.shrink_to_fit();
        groups->push_back(std::move(group));
        return absl::OkStatus();
      });
  groups->shrink_to_fit();  // kept for the daemon's life: no growth slack (memory, issue 7)
  return read;
}

// ---- Cross-checks -----------------------------------------------------------------------------

absl::Status CheckPeers(const Reader& reader, const std::vector<PeerConfig>& peers) {
  std::map<absl::string_view, size_t> by_name;
  std::map<uint32_t, size_t> by_id;
  std::map<absl::string_view, size_t> by_address;
  for (size_t i = 0; i < peers.size(); ++i) {
    const PeerConfig& peer = peers[i];
    std::string path = ItemPath("peers", i);
    if (auto [it, fresh] = by_name.emplace(peer.name, i); !fresh) {
      return reader.ErrorAt(ChildPath(path, "name"),
                            absl::StrCat("duplicate peer name \"", peer.name, "\" (also peers[",
                                         it->second, "])"));
    }
    if (auto [it, fresh] = by_id.emplace(peer.id, i); !fresh) {
      return reader.ErrorAt(ChildPath(path, "id"),
                            absl::StrCat("duplicate peer id ", peer.id, " (also peers[",
                                         it->second, "])"));
    }
    if (auto [it, fresh] = by_address.emplace(peer.address, i); !fresh) {
      return reader.ErrorAt(ChildPath(path, "address"),
                            absl::StrCat("duplicate peer address \"", peer.address,
                                         "\" (also peers[", it->second, "])"));
    }
  }
  return absl::OkStatus();
}

absl::Status ResolveNode(const Reader& reader, Config* config) {
  const PeerConfig* self = config->FindPeer(config->node);
  if (self == nullptr) {
    std::vector<absl::string_view> names;
    for (const PeerConfig& peer : config->peers) names.push_back(peer.name);
    return reader.ErrorAt("node", absl::StrCat("\"", config->node,
                                               "\" is not a peer; peers[].name are: ",
                                               absl::StrJoin(names, ", ")));
  }
  config->node_id = self->id;
  if (config->listen_peer == config->listen_client) {
    return reader.ErrorAt("listen.client",
                          absl::StrCat("must differ from listen.peer, both are \"",
                                       config->listen_client, "\""));
  }
  if (!config->metrics_listen.empty() && (config->metrics_listen == config->listen_peer ||
                                          config->metrics_listen == config->listen_client)) {
    return reader.ErrorAt("metrics.listen",
                          absl::StrCat("must differ from listen.peer and listen.client, got \"",
                                       config->metrics_listen, "\""));
  }
  return absl::OkStatus();
}

// suspect < exclude, and the heartbeat comes more often than the suspicion. `prefix` is the path
// of the map that sets the timeouts; a message points at whichever key that map sets.
absl::Status CheckTimeouts(const Reader& reader, const std::string& prefix, int64_t suspect_ms,
                           int64_t exclude_ms, int64_t heartbeat_ms) {
  std::string suspect_path = ChildPath(prefix, "suspect_timeout_ms");
  std::string exclude_path = ChildPath(prefix, "exclude_timeout_ms");
  if (suspect_ms >= exclude_ms) {
    if (reader.WasRead(suspect_path) || !reader.WasRead(exclude_path)) {
      return reader.ErrorAt(suspect_path, absl::StrCat("must be less than exclude_timeout_ms (",
                                                       exclude_ms, "), got ", suspect_ms));
    }
    return reader.ErrorAt(exclude_path, absl::StrCat("must be greater than suspect_timeout_ms (",
                                                     suspect_ms, "), got ", exclude_ms));
  }
  if (heartbeat_ms >= suspect_ms) {
    bool blame_heartbeat = prefix == "failure_detector" && !reader.WasRead(suspect_path);
    return reader.ErrorAt(
        blame_heartbeat ? ChildPath(prefix, "heartbeat_interval_ms") : suspect_path,
        absl::StrCat("suspect_timeout_ms (", suspect_ms,
                     ") must be greater than failure_detector.heartbeat_interval_ms (",
                     heartbeat_ms, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckTokens(const Reader& reader, const std::vector<TokenConfig>& tokens) {
  std::map<absl::string_view, size_t> by_name;
  std::map<absl::string_view, size_t> by_token;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string path = ItemPath("auth.tokens", i);
    if (auto [it, fresh] = by_name.emplace(tokens[i].name, i); !fresh) {
      return reader.ErrorAt(ChildPath(path, "name"),
                            absl::StrCat("duplicate token name \"", tokens[i].name,
                                         "\" (also auth.tokens[", it->second, "])"));
    }
    if (auto [it, fresh] = by_token.emplace(tokens[i].token, i); !fresh) {
      return reader.ErrorAt(path, absl::StrCat("the same token as auth.tokens[", it->second, "]"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckAclNames(const Reader& reader, const Config& config, const AclConfig& acl,
                           const std::string& group_path) {
  const std::pair<const char*, const std::vector<std::string>*> rights[] = {
      {"join", &acl.join}, {"invoke", &acl.invoke}, {"admin", &acl.admin}};
  for (const auto& [right, names] : rights) {
    for (size_t i = 0; i < names->size(); ++i) {
      const std::string& name = (*names)[i];
      if (name == "*") continue;
      // With client certificates a name may be a certificate's common name, unknown here.
      if (config.client_certificates) continue;
      bool known = std::any_of(config.tokens.begin(), config.tokens.end(),
                               [&](const TokenConfig& t) { return t.name == name; });
      if (!known) {
        return reader.ErrorAt(ItemPath(ChildPath(ChildPath(group_path, "acl"), right), i),
                              absl::StrCat("\"", name,
                                           "\" is not an auth.tokens[].name (or \"*\"; names of "
                                           "client certificates need auth.client_certificates)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckGroup(const Reader& reader, const Config& config, size_t index) {
  const GroupConfig& group = config.groups[index];
  std::string path = ItemPath("groups", index);
  bool added_by_loader = config.dynamic_groups && index + 1 == config.groups.size();
  if (IsDaemonsOwnGroup(group.name) && !added_by_loader) {
    return reader.ErrorAt(ChildPath(path, "name"),
                          absl::StrCat("\"", group.name,
                                       "\": names starting with \"cohort.\" are the daemons' own"));
  }
  if (group.acl) CONFIG_RETURN_IF_ERROR(CheckAclNames(reader, config, *group.acl, path));
  std::set<absl::string_view> seen;
  for (size_t i = 0; i < group.members.size(); ++i) {
    std::string member_path = ItemPath(ChildPath(path, "members"), i);
    if (config.FindPeer(group.members[i]) == nullptr) {
      return reader.ErrorAt(member_path,
                            absl::StrCat("\"", group.members[i], "\" is not a peer name"));
    }
    if (!seen.insert(group.members[i]).second) {
      return reader.ErrorAt(member_path,
                            absl::StrCat("\"", group.members[i], "\" is listed twice"));
    }
  }
  CONFIG_RETURN_IF_ERROR(CheckTimeouts(reader, path, group.suspect_timeout_ms,
                                       group.exclude_timeout_ms,
                                       config.failure_detector.heartbeat_interval_ms));
  // 003 section 3: a member that sent nothing for silence_ms says "I am alive"; the period must be
  // shorter than the suspicion timeout or idle members of a lively group would be suspected.
  if (group.silence_ms >= group.suspect_timeout_ms) {
    return reader.ErrorAt(ChildPath(path, "silence_ms"),
                          absl::StrCat("(", group.silence_ms,
                                       ") must be less than the group's suspect_timeout_ms (",
                                       group.suspect_timeout_ms, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckGroups(const Reader& reader, const Config& config) {
  std::map<absl::string_view, size_t> by_name;
  for (size_t i = 0; i < config.groups.size(); ++i) {
    const std::string& name = config.groups[i].name;
    if (auto [it, fresh] = by_name.emplace(name, i); !fresh) {
      return reader.ErrorAt(ChildPath(ItemPath("groups", i), "name"),
                            absl::StrCat("duplicate group name \"", name, "\" (also groups[",
                                         it->second, "])"));
    }
    CONFIG_RETURN_IF_ERROR(CheckGroup(reader, config, i));
  }
  return absl::OkStatus();
}

// Flow control must engage before the cut-off: else a servant slower than its group would be cut
// off before the group waits for it.
absl::Status CheckServantLimits(const Reader& reader, const LimitsConfig& limits) {
  if (limits.servant_backlog_bytes == 0 ||
      limits.servant_cutoff_bytes > limits.servant_backlog_bytes) {
    return absl::OkStatus();
  }
  const bool blame_backlog = reader.WasRead("limits.servant_backlog_bytes") &&
                             !reader.WasRead("limits.servant_cutoff_bytes");
  return reader.ErrorAt(
      blame_backlog ? "limits.servant_backlog_bytes" : "limits.servant_cutoff_bytes",
      absl::StrCat("servant_cutoff_bytes (", limits.servant_cutoff_bytes,
                   ") must be greater than servant_backlog_bytes (", limits.servant_backlog_bytes,
                   "; 0 turns flow control off): a servant slower than its group would be cut "
                   "off before the group waits for it"));
}

absl::Status CheckConfig(const Reader& reader, Config* config) {
  CONFIG_RETURN_IF_ERROR(CheckPeers(reader, config->peers));
  CONFIG_RETURN_IF_ERROR(CheckTokens(reader, config->tokens));
  if (config->client_certificates && !config->tls.enabled) {
    return reader.ErrorAt("auth.client_certificates",
                          "needs TLS (tls: {ca_file, cert_file, key_file}), not tls.insecure: "
                          "a client certificate is presented in the TLS handshake");
  }
  if (!config->client_ca_file.empty() && !config->client_certificates) {
    return reader.ErrorAt("auth.client_ca_file",
                          "needs auth.client_certificates: true (the CA of the applications' "
                          "certificates is used only to check them)");
  }
  if (config->certificate_name != CertificateNameField::kCommonName &&
      !config->client_certificates) {
    return reader.ErrorAt("auth.certificate_name",
                          "needs auth.client_certificates: true (it says which name of an "
                          "application's certificate names it)");
  }
  CONFIG_RETURN_IF_ERROR(ResolveNode(reader, config));
  const FailureDetectorConfig& fd = config->failure_detector;
  CONFIG_RETURN_IF_ERROR(CheckTimeouts(reader, "failure_detector", fd.suspect_timeout_ms,
                                       fd.exclude_timeout_ms, fd.heartbeat_interval_ms));
  CONFIG_RETURN_IF_ERROR(CheckServantLimits(reader, config->limits));
  return CheckGroups(reader, *config);
}

// A durable group tells a restart of every member by the daemons' incarnation files: without
// one, a restarted daemon would take the configured view for a first start and deliver there
// from nothing, beside members that resume from their kept state.
absl::Status CheckDurable(const Reader& reader, const Config& config) {
  if (!config.incarnation_file.empty()) return absl::OkStatus();
  for (size_t i = 0; i < config.groups.size(); ++i) {
    if (!config.groups[i].durable) continue;
    return reader.ErrorAt(ChildPath(ItemPath("groups", i), "durable"),
                          absl::StrCat("group \"", config.groups[i].name,
                                       "\" is durable: set incarnation_file (a restart of every "
                                       "member is told by it, and resumes from the kept state)"));
  }
  return absl::OkStatus();
}

// ---- The document -----------------------------------------------------------------------------

// dynamic_groups: {create: [names or "*"], state_file: PATH} (the section alone: anyone may
// create, nothing kept on disk). Adds the system group after the file's groups.
absl::Status ReadDynamicGroups(const MapView& top, Config* config) {
  bool present = false;
  CONFIG_RETURN_IF_ERROR(
      ReadSection(top, "dynamic_groups", Presence::kOptional, kDynamicGroupKeys,
                  [&](const MapView& m) {
                    present = true;
                    CONFIG_RETURN_IF_ERROR(
                        ReadAclList(m, "create", &config->dynamic_group_creators));
                    return ReadKey(m, "state_file", Presence::kOptional,
                                   [config](const Reader& r, const Value& v) {
                                     return ParseString(r, v, &config->dynamic_groups_state_file);
                                   });
                  }));
  if (!present) return absl::OkStatus();
  config->dynamic_groups = true;
  if (config->dynamic_group_creators.empty()) config->dynamic_group_creators = {"*"};
  GroupConfig system;
  system.name = kSystemGroup;
  for (const PeerConfig& peer : config->peers) system.members.push_back(peer.name);
  system.ordering = GroupConfig::Ordering::kConsensus;
  system.liveness = GroupConfig::Liveness::kEvent;
  system.style = GroupConfig::Style::kClosed;
  system.default_mode = GroupConfig::DefaultMode::kMajority;
  system.silence_ms = config->failure_detector.heartbeat_interval_ms;
  system.suspect_timeout_ms = config->failure_detector.suspect_timeout_ms;
  system.exclude_timeout_ms = config->failure_detector.exclude_timeout_ms;
  config->groups.push_back(std::move(system));
  return absl::OkStatus();
}

absl::Status ReadTop(const MapView& top, Config* config) {
  CONFIG_RETURN_IF_ERROR(ReadName(top, "node", Presence::kRequired, &config->node));
  CONFIG_RETURN_IF_ERROR(ReadName(top, "cluster", Presence::kOptional, &config->cluster));
  CONFIG_RETURN_IF_ERROR(ReadListen(top, config));
  CONFIG_RETURN_IF_ERROR(ReadPeers(top, &config->peers));
  CONFIG_RETURN_IF_ERROR(ReadEnumString(top, "log_level", kLogLevelNames, &config->log_level));
  CONFIG_RETURN_IF_ERROR(ReadEnumString(top, "log_format", kLogFormatNames, &config->log_format));
  CONFIG_RETURN_IF_ERROR(ReadFailureDetector(top, &config->failure_detector));
  CONFIG_RETURN_IF_ERROR(ReadConsensus(top, &config->consensus));
  CONFIG_RETURN_IF_ERROR(ReadLimits(top, &config->limits));
  CONFIG_RETURN_IF_ERROR(ReadMetrics(top, config));
  CONFIG_RETURN_IF_ERROR(ReadTls(top, &config->tls));
  CONFIG_RETURN_IF_ERROR(ReadAuth(top, config));
  CONFIG_RETURN_IF_ERROR(
      ReadEnumString(top, "peer_transport", kPeerTransportNames, &config->peer_transport));
  if (config->peer_transport == "auto") {
    // The raw TCP transport resolves peer addresses on the protocol thread: only numeric IPv4
    // addresses keep a DNS look-up from stalling it, so DNS names (Kubernetes) keep gRPC.
    bool numeric = true;
    for (const PeerConfig& peer : config->peers) {
      std::string host = peer.address.substr(0, peer.address.rfind(':'));
      in_addr parsed{};
      numeric = numeric && inet_pton(AF_INET, host.c_str(), &parsed) == 1;
    }
    config->peer_transport = numeric ? "tcp" : "grpc";
  }
  CONFIG_RETURN_IF_ERROR(ReadGroups(top, config->failure_detector, &config->groups));
  CONFIG_RETURN_IF_ERROR(ReadKey(top, "incarnation_file", Presence::kOptional,
                                 [config](const Reader& r, const Value& v) {
                                   return ParseString(r, v, &config->incarnation_file);
                                 }));
  return ReadDynamicGroups(top, config);
}

absl::StatusOr<Config> ReadDocument(Reader* reader, const YAML::Node& root) {
  if (!root.IsDefined() || root.IsNull()) {
    return reader->ErrorAtLine(1, "", "the file is empty; required keys: node, listen, peers");
  }
  int line = std::max(LineOf(root.Mark()), 1);
  reader->Record("", line);
  if (!root.IsMap()) {
    return reader->ErrorAtLine(line, "", absl::StrCat("the top level must be a map of keys, got ",
                                                      Describe(root)));
  }
  absl::StatusOr<MapView> top = MapView::Open(reader, Value{"", line, root}, kTopKeys);
  if (!top.ok()) return top.status();
  Config config;
  CONFIG_RETURN_IF_ERROR(ReadTop(*top, &config));
  CONFIG_RETURN_IF_ERROR(CheckConfig(*reader, &config));
  CONFIG_RETURN_IF_ERROR(CheckDurable(*reader, config));
  CONFIG_RETURN_IF_ERROR(RequireTls(*reader, config.tls));
  return config;
}

// The 1-based line of a second YAML document ("---" after content), or 0. Scanned by hand:
// yaml-cpp 0.7's LoadAll loops forever on some inputs (a lone "," at block level, found by
// fuzzing), so the loader parses one document with YAML::Load.
int SecondDocumentLine(const std::string& text) {
  bool content = false;
  int line_number = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    ++line_number;
    bool marker = line.rfind("---", 0) == 0 && (line.size() == 3 || line[3] == ' ' || line[3] == '\r');
    if (marker && content) return line_number;
    size_t first = line.find_first_not_of(" \t\r");
    if (!marker && first != std::string::npos && line[first] != '#' && line.rfind("%", 0) != 0) {
      content = true;
    }
    start = end + 1;
  }
  return 0;
}

// Parses YAML text; syntax errors become InvalidArgument with the line.
absl::StatusOr<YAML::Node> LoadYaml(const Reader& reader, const std::string& text) {
  if (int line = SecondDocumentLine(text); line != 0) {
    return reader.ErrorAtLine(line, "", "more than one YAML document; the config is one document");
  }
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return reader.ErrorAtLine(LineOf(e.mark), "", absl::StrCat("YAML syntax error: ", e.msg));
  }
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::error_code error;
  std::filesystem::file_status status = std::filesystem::status(path, error);
  if (status.type() == std::filesystem::file_type::not_found) {
    return absl::NotFoundError(absl::StrCat(path, ": config file not found"));
  }
  if (status.type() == std::filesystem::file_type::directory) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a config file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int code = errno;
    std::string message = absl::StrCat(path, ": cannot open config file: ", std::strerror(code));
    if (code == EACCES) return absl::PermissionDeniedError(message);
    return absl::InvalidArgumentError(message);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

template <typename E>
std::string_view NameOf(const EnumNames<E>& names, E value) {
  for (const auto& [name, enumerator] : names) {
    if (enumerator == value) return std::string_view(name.data(), name.size());
  }
  return "?";
}

}  // namespace

const PeerConfig* FindPeerIn(const std::vector<PeerConfig>& peers, std::string_view name) {
  for (const PeerConfig& peer : peers) {
    if (peer.name == name) return &peer;
  }
  return nullptr;
}

const PeerConfig* FindPeerByIdIn(const std::vector<PeerConfig>& peers, uint32_t id) {
  for (const PeerConfig& peer : peers) {
    if (peer.id == id) return &peer;
  }
  return nullptr;
}

const PeerConfig* Config::FindPeer(std::string_view name) const { return FindPeerIn(peers, name); }

const PeerConfig* Config::FindPeerById(uint32_t id) const { return FindPeerByIdIn(peers, id); }

const GroupConfig* Config::FindGroup(std::string_view name) const {
  for (const GroupConfig& group : groups) {
    if (group.name == name) return &group;
  }
  return nullptr;
}

absl::StatusOr<Config> ParseConfig(const std::string& yaml_text,
                                   const std::string& file_name_for_errors) {
  Reader reader(file_name_for_errors);
  absl::StatusOr<YAML::Node> root = LoadYaml(reader, yaml_text);
  if (!root.ok()) return root.status();
  try {
    return ReadDocument(&reader, *root);
  } catch (const std::exception& e) {  // yaml-cpp should not throw here; never let it escape
    return absl::InvalidArgumentError(absl::StrCat(file_name_for_errors, ": ", e.what()));
  }
}

absl::StatusOr<Config> LoadConfigFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseConfig(*text, path);
}

absl::StatusOr<GroupConfig> ParseGroupDefinition(const std::string& yaml, const Config& running) {
  Reader reader("group definition");
  absl::StatusOr<YAML::Node> root = LoadYaml(reader, yaml);
  if (!root.ok()) return root.status();
  try {
    if (!root->IsMap()) {
      return reader.ErrorAtLine(1, "", absl::StrCat("must be a map of a group's keys, got ",
                                                    Describe(*root)));
    }
    // What CheckGroup reads, not a copy of every group of the running configuration.
    Config check;
    check.peers = running.peers;
    check.failure_detector = running.failure_detector;
    check.dynamic_groups = false;       // so that the reserved names are refused
    check.client_certificates = true;  // acl names: any application name
    GroupConfig group;
    CONFIG_RETURN_IF_ERROR(ReadGroup(&reader, Value{"groups[0]", 1, *root}, running.failure_detector,
                                     &group));
    check.groups.push_back(group);
    CONFIG_RETURN_IF_ERROR(CheckGroup(reader, check, 0));
    return group;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("group definition: ", e.what()));
  }
}

std::string GroupDefinitionYaml(const std::string& name, const std::vector<std::string>& members,
                                const std::string& ordering, const std::string& liveness,
                                const std::string& style, const std::string& default_mode,
                                const AclConfig* acl, bool durable) {
  YAML::Emitter out;
  out << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << name;
  out << YAML::Key << "members" << YAML::Value << YAML::BeginSeq;
  for (const std::string& member : members) out << YAML::DoubleQuoted << member;
  out << YAML::EndSeq;
  const std::pair<const char*, const std::string*> optional[] = {
      {"ordering", &ordering}, {"liveness", &liveness}, {"style", &style},
      {"default_mode", &default_mode}};
  for (const auto& [key, value] : optional) {
    if (!value->empty()) out << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << *value;
  }
  if (acl != nullptr) {
    out << YAML::Key << "acl" << YAML::Value << YAML::BeginMap;
    const std::pair<const char*, const std::vector<std::string>*> rights[] = {
        {"join", &acl->join}, {"invoke", &acl->invoke}, {"admin", &acl->admin}};
    for (const auto& [right, names] : rights) {
      out << YAML::Key << right << YAML::Value << YAML::BeginSeq;
      for (const std::string& name : *names) out << YAML::DoubleQuoted << name;
      out << YAML::EndSeq;
    }
    out << YAML::EndMap;
  }
  if (durable) out << YAML::Key << "durable" << YAML::Value << true;
  out << YAML::EndMap;
  return out.c_str();
}

std::string_view ToString(GroupConfig::Ordering ordering) {
  return NameOf(kOrderingNames, ordering);
}
std::string_view ToString(GroupConfig::Liveness liveness) {
  return NameOf(kLivenessNames, liveness);
}
std::string_view ToString(GroupConfig::Style style) { return NameOf(kStyleNames, style); }
std::string_view ToString(GroupConfig::DefaultMode mode) {
  return NameOf(kDefaultModeNames, mode);
}

}  // namespace cohort::nso

#undef CONFIG_RETURN_IF_ERROR
