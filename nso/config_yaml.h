// Reading a YAML document for the daemon's configuration (nso/config.cc): every value with its
// key path and line, maps whose keys are checked (an unknown key is named with the nearest valid
// one, a duplicate with the line of the first), and scalar parsers whose errors read
// "<file>:<line>: <path>: <what>". What the keys mean stays in config.cc. yaml-cpp throws;
// config.cc's ParseConfig catches.
#ifndef COHORT_NSO_CONFIG_YAML_H_
#define COHORT_NSO_CONFIG_YAML_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

// Local twin of COHORT_RETURN_IF_ERROR (nso/status.h), which would pull gRPC into the config.
#define CONFIG_RETURN_IF_ERROR(expr)                  \
  do {                                                \
    ::absl::Status config_status_ = (expr);           \
    if (!config_status_.ok()) return config_status_;  \
  } while (0)

namespace cohort::nso::config_yaml {

// An enum's names in the file, in the order error messages list them.
template <typename E>
using EnumNames = std::vector<std::pair<absl::string_view, E>>;

enum class Presence { kRequired, kOptional };

// 1-based line of a yaml-cpp mark, 0 when unknown.
inline int LineOf(const YAML::Mark& mark) { return mark.line >= 0 ? mark.line + 1 : 0; }

// Builds errors "<file>:<line>: <path>: <what>" and remembers the line of every key path read.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  absl::Status ErrorAtLine(int line, absl::string_view path, absl::string_view what) const;
  // An error at the recorded line of `path`, or of its nearest recorded ancestor.
  absl::Status ErrorAt(absl::string_view path, absl::string_view what) const {
    return ErrorAtLine(FindLine(path), path, what);
  }

  void Record(const std::string& path, int line) { lines_.emplace(path, line); }
  bool WasRead(absl::string_view path) const { return lines_.find(path) != lines_.end(); }

 private:
  int FindLine(absl::string_view path) const;

  std::string file_;
  std::map<std::string, int, std::less<>> lines_;
};

// A YAML value with its key path and the line of its key (or list item).
struct Value {
  std::string path;
  int line = 0;
  YAML::Node node;
};

// How a value reads in an error: "null", "a list", "a map", or the quoted scalar.
std::string Describe(const YAML::Node& node);
std::string ChildPath(absl::string_view parent, absl::string_view key);  // "parent.key"
std::string ItemPath(absl::string_view parent, size_t index);           // "parent[index]"
// "unknown key ...", with the valid key nearest to it (at most 2 edits) and every valid key.
std::string UnknownKeyMessage(absl::string_view key, const std::vector<absl::string_view>& keys);

// A YAML map whose keys are checked: strings, distinct, all in the allowed list.
class MapView {
 public:
  static absl::StatusOr<MapView> Open(Reader* reader, const Value& value,
                                      const std::vector<absl::string_view>& keys);

  // The value of `key`; nullopt when absent and optional.
  absl::StatusOr<std::optional<Value>> Get(absl::string_view key, Presence presence) const;

  Reader* reader() const { return reader_; }

 private:
  MapView(Reader* reader, Value self) : reader_(reader), self_(std::move(self)) {}
  absl::Status Index(const std::vector<absl::string_view>& keys);

  Reader* reader_;
  Value self_;
  std::map<std::string, Value, std::less<>> entries_;
};

// The items of a YAML list, each with its path "parent[i]" and line.
absl::StatusOr<std::vector<Value>> ListItems(Reader* reader, const Value& value,
                                             absl::string_view expected);

// ---- Scalars ----------------------------------------------------------------------------------

absl::Status ParseString(const Reader& reader, const Value& value, std::string* out);  // non-empty
// A scalar not quoted ("!" marks a quoted scalar: a string).
bool IsPlainScalar(const YAML::Node& node);
absl::Status ParseInt(const Reader& reader, const Value& value, int64_t min, int64_t max,
                      int64_t* out);
absl::Status ParseBool(const Reader& reader, const Value& value, bool* out);

template <typename E>
std::string EnumChoices(const EnumNames<E>& names) {
  std::vector<std::string> quoted;
  for (const auto& [name, unused] : names) quoted.push_back(absl::StrCat("\"", name, "\""));
  if (quoted.size() == 2) return absl::StrCat(quoted[0], " or ", quoted[1]);
  return absl::StrCat("one of ", absl::StrJoin(quoted, ", "));
}

template <typename E>
absl::Status ParseEnum(const Reader& reader, const Value& value, const EnumNames<E>& names,
                       E* out) {
  if (value.node.IsScalar()) {
    for (const auto& [name, enumerator] : names) {
      if (value.node.Scalar() == name) {
        *out = enumerator;
        return absl::OkStatus();
      }
    }
  }
  return reader.ErrorAtLine(
      value.line, value.path,
      absl::StrCat("must be ", EnumChoices(names), ", got ", Describe(value.node)));
}

// ---- Keys of a map: absent optional keys leave *out (the default) untouched --------------------

using ValueParser = std::function<absl::Status(const Reader&, const Value&)>;

absl::Status ReadKey(const MapView& map, absl::string_view key, Presence presence,
                     const ValueParser& parse);
absl::Status ReadInt(const MapView& map, absl::string_view key, int64_t min, int64_t max,
                     int64_t* out);
absl::Status ReadBool(const MapView& map, absl::string_view key, bool* out);

template <typename E>
absl::Status ReadEnum(const MapView& map, absl::string_view key, const EnumNames<E>& names,
                      E* out) {
  return ReadKey(map, key, Presence::kOptional,
                 [&names, out](const Reader& r, const Value& v) {
                   return ParseEnum(r, v, names, out);
                 });
}

absl::Status ReadEnumString(const MapView& map, absl::string_view key,
                            const EnumNames<absl::string_view>& names, std::string* out);

// Opens the sub-map at `key` (optional unless `presence` says otherwise) and reads it with `read`.
absl::Status ReadSection(const MapView& map, absl::string_view key, Presence presence,
                         const std::vector<absl::string_view>& keys,
                         const std::function<absl::Status(const MapView&)>& read);

}  // namespace cohort::nso::config_yaml

#endif  // COHORT_NSO_CONFIG_YAML_H_
