#include "nso/config_yaml.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

namespace cohort::nso::config_yaml {

absl::Status Reader::ErrorAtLine(int line, absl::string_view path, absl::string_view what) const {
  std::string where = line > 0 ? absl::StrCat(file_, ":", line, ": ") : absl::StrCat(file_, ": ");
  if (!path.empty()) absl::StrAppend(&where, path, ": ");
  return absl::InvalidArgumentError(absl::StrCat(where, what));
}

int Reader::FindLine(absl::string_view path) const {
  while (!path.empty()) {
    auto it = lines_.find(path);
    if (it != lines_.end()) return it->second;
    size_t cut = path.find_last_of(".[");
    path = path.substr(0, cut == absl::string_view::npos ? 0 : cut);
  }
  auto root = lines_.find("");
  return root != lines_.end() ? root->second : 1;
}

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null: return "null";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Scalar: return absl::StrCat("\"", node.Scalar(), "\"");
    default: return "nothing";
  }
}

std::string ChildPath(absl::string_view parent, absl::string_view key) {
  return parent.empty() ? std::string(key) : absl::StrCat(parent, ".", key);
}

std::string ItemPath(absl::string_view parent, size_t index) {
  return absl::StrCat(parent, "[", index, "]");
}

namespace {

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string UnknownKeyMessage(absl::string_view key, const std::vector<absl::string_view>& keys) {
  std::string message = absl::StrCat("unknown key \"", key, "\"");
  for (absl::string_view known : keys) {
    if (EditDistance(key, known) <= 2) {
      absl::StrAppend(&message, " (did you mean \"", known, "\"?)");
      break;
    }
  }
  absl::StrAppend(&message, "; valid keys here: ", absl::StrJoin(keys, ", "));
  return message;
}

absl::StatusOr<MapView> MapView::Open(Reader* reader, const Value& value,
                                      const std::vector<absl::string_view>& keys) {
  if (!value.node.IsMap()) {
    return reader->ErrorAtLine(value.line, value.path,
                               absl::StrCat("must be a map, got ", Describe(value.node)));
  }
  MapView view(reader, value);
  CONFIG_RETURN_IF_ERROR(view.Index(keys));
  return view;
}

absl::StatusOr<std::optional<Value>> MapView::Get(absl::string_view key,
                                                  Presence presence) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (presence == Presence::kOptional) return std::optional<Value>();
    return reader_->ErrorAtLine(self_.line, ChildPath(self_.path, key), "missing required key");
  }
  return std::optional<Value>(it->second);
}

absl::Status MapView::Index(const std::vector<absl::string_view>& keys) {
  for (const auto& entry : self_.node) {  // by value: it-> returns a temporary proxy
    const YAML::Node key = entry.first;
    int line = LineOf(key.Mark());
    if (!key.IsScalar()) {
      return reader_->ErrorAtLine(line, self_.path,
                                  absl::StrCat("keys must be names, got ", Describe(key)));
    }
    std::string path = ChildPath(self_.path, key.Scalar());
    if (std::find(keys.begin(), keys.end(), key.Scalar()) == keys.end()) {
      return reader_->ErrorAtLine(line, path, UnknownKeyMessage(key.Scalar(), keys));
    }
    auto [previous, inserted] = entries_.emplace(key.Scalar(), Value{path, line, entry.second});
    if (!inserted) {
      return reader_->ErrorAtLine(line, path,
                                  absl::StrCat("duplicate key \"", key.Scalar(),
                                               "\" (first at line ", previous->second.line, ")"));
    }
    reader_->Record(path, line);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Value>> ListItems(Reader* reader, const Value& value,
                                             absl::string_view expected) {
  if (!value.node.IsSequence()) {
    return reader->ErrorAtLine(value.line, value.path,
                               absl::StrCat("must be a list of ", expected, ", got ",
                                            Describe(value.node)));
  }
  std::vector<Value> items;
  for (size_t i = 0; i < value.node.size(); ++i) {
    const YAML::Node& item = value.node[i];
    int line = LineOf(item.Mark());
    Value entry{ItemPath(value.path, i), line > 0 ? line : value.line, item};
    reader->Record(entry.path, entry.line);
    items.push_back(std::move(entry));
  }
  return items;
}

absl::Status ParseString(const Reader& reader, const Value& value, std::string* out) {
  if (!value.node.IsScalar()) {
    return reader.ErrorAtLine(value.line, value.path,
                              absl::StrCat("must be a string, got ", Describe(value.node)));
  }
  if (value.node.Scalar().empty()) {
    return reader.ErrorAtLine(value.line, value.path, "must not be empty");
  }
  *out = value.node.Scalar();
  return absl::OkStatus();
}

bool IsPlainScalar(const YAML::Node& node) {
  return node.IsScalar() && node.Tag() != "!";  // "!" marks a quoted scalar: a string
}

absl::Status ParseInt(const Reader& reader, const Value& value, int64_t min, int64_t max,
                      int64_t* out) {
  int64_t parsed = 0;
  if (!IsPlainScalar(value.node) || !absl::SimpleAtoi(value.node.Scalar(), &parsed)) {
    return reader.ErrorAtLine(value.line, value.path,
                              absl::StrCat("must be an integer, got ", Describe(value.node)));
  }
  if (parsed < min || parsed > max) {
    return reader.ErrorAtLine(value.line, value.path,
                              absl::StrCat("must be in ", min, "..", max, ", got ", parsed));
  }
  *out = parsed;
  return absl::OkStatus();
}

absl::Status ParseBool(const Reader& reader, const Value& value, bool* out) {
  std::string text = IsPlainScalar(value.node) ? absl::AsciiStrToLower(value.node.Scalar()) : "";
  if (text == "true" || text == "yes" || text == "on") {
    *out = true;
  } else if (text == "false" || text == "no" || text == "off") {
    *out = false;
  } else {
    return reader.ErrorAtLine(value.line, value.path,
                              absl::StrCat("must be true or false, got ", Describe(value.node)));
  }
  return absl::OkStatus();
}

absl::Status ReadKey(const MapView& map, absl::string_view key, Presence presence,
                     const ValueParser& parse) {
  absl::StatusOr<std::optional<Value>> value = map.Get(key, presence);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return absl::OkStatus();
  return parse(*map.reader(), **value);
}

absl::Status ReadInt(const MapView& map, absl::string_view key, int64_t min, int64_t max,
                     int64_t* out) {
  return ReadKey(map, key, Presence::kOptional, [=](const Reader& r, const Value& v) {
    return ParseInt(r, v, min, max, out);
  });
}

absl::Status ReadBool(const MapView& map, absl::string_view key, bool* out) {
  return ReadKey(map, key, Presence::kOptional,
                 [out](const Reader& r, const Value& v) { return ParseBool(r, v, out); });
}

absl::Status ReadEnumString(const MapView& map, absl::string_view key,
                            const EnumNames<absl::string_view>& names, std::string* out) {
  absl::string_view chosen = *out;
  CONFIG_RETURN_IF_ERROR(ReadEnum(map, key, names, &chosen));
  *out = std::string(chosen);
  return absl::OkStatus();
}

absl::Status ReadSection(const MapView& map, absl::string_view key, Presence presence,
                         const std::vector<absl::string_view>& keys,
                         const std::function<absl::Status(const MapView&)>& read) {
  absl::StatusOr<std::optional<Value>> value = map.Get(key, presence);
  if (!value.ok()) return value.status();
  if (!value->has_value() || ((*value)->node.IsNull() && presence == Presence::kOptional)) {
    return absl::OkStatus();
  }
  absl::StatusOr<MapView> section = MapView::Open(map.reader(), **value, keys);
  if (!section.ok()) return section.status();
  return read(*section);
}

}  // namespace cohort::nso::config_yaml
