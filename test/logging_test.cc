// log_format json writes one JSON object per line whatever a message holds (nso/logging.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <spdlog/sinks/ostream_sink.h>

#include "absl/strings/str_split.h"
#include "nso/logging.h"

namespace cohort {

TEST_CASE("JsonEscaped: quotes, backslashes and control characters escaped; UTF-8 kept; other "
          "bytes replaced",
          "[logging]") {
  using nso::JsonEscaped;
  CHECK(JsonEscaped("plain text") == "plain text");
  CHECK(JsonEscaped("group \"g\": C:\\dir") == "group \\\"g\\\": C:\\\\dir");
  CHECK(JsonEscaped("a\nb\rc\td") == "a\\nb\\rc\\td");
  CHECK(JsonEscaped(std::string("\x01\x1f\x7f", 3)) == "\\u0001\\u001f\\u007f");
  CHECK(JsonEscaped(std::string("nul\0x", 5)) == "nul\\u0000x");
  CHECK(JsonEscaped("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  CHECK(JsonEscaped("\xff") == "\\ufffd");
  CHECK(JsonEscaped("cut \xc3") == "cut \\ufffd");                  // truncated
  CHECK(JsonEscaped("\xc0\xaf") == "\\ufffd\\ufffd");               // overlong
  CHECK(JsonEscaped("\xed\xa0\x80") == "\\ufffd\\ufffd\\ufffd");    // a surrogate
  CHECK(JsonEscaped("\xf4\x90\x80\x80") == "\\ufffd\\ufffd\\ufffd\\ufffd");  // above U+10FFFF
}

TEST_CASE("log_format json: every line parses as a JSON object with the message as it was "
          "logged",
          "[logging]") {
  std::ostringstream text;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text);
  nso::Log("peer")->sinks().push_back(sink);
  nso::ConfigureLogging("info", "json", "n\"1%v");
  const std::string messages[] = {
      "envelope from node 2 for unknown group \"dyn2\" dropped",
      "a path C:\\tmp\\x and a tab\there",
      "two\nlines",
      "a peer's bytes \xff\xfe and \x01",
      "100% done {}",
  };
  for (const std::string& message : messages) nso::Log("peer")->warn("{}", message);
  nso::Log("peer")->info("formatted: group \"{}\" of {}", "g\\1", 3);
  auto& sinks = nso::Log("peer")->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  nso::ConfigureLogging("off", "text", "");

  std::vector<std::string> lines = absl::StrSplit(text.str(), '\n', absl::SkipEmpty());
  REQUIRE(lines.size() == 6);
  const std::string expected[] = {
      messages[0], messages[1], messages[2],
      "a peer's bytes \xef\xbf\xbd\xef\xbf\xbd and \x01", messages[4],
      "formatted: group \"g\\1\" of 3",
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    INFO(lines[i]);
    google::protobuf::Struct object;
    REQUIRE(google::protobuf::util::JsonStringToMessage(lines[i], &object).ok());
    CHECK(object.fields().at("msg").string_value() == expected[i]);
    CHECK(object.fields().at("node").string_value() == "n\"1%v");
    CHECK(object.fields().at("component").string_value() == "peer");
    CHECK(object.fields().at("level").string_value() == (i < 5 ? "warning" : "info"));
  }
}

}  // namespace cohort
