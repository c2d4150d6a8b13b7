// The file a servant of a durable group keeps its state in (invocation/kept_state.h).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>

#include "invocation/kept_state.h"

namespace cohort::invocation {
namespace {

std::string TempPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
}

void WriteRaw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// `bytes` written to `path` are refused as group counter's kept state: why.
std::string Refused(const std::string& path, const std::string& bytes) {
  WriteRaw(path, bytes);
  auto read = ReadKeptState(path, "counter");
  REQUIRE_FALSE(read.ok());
  return std::string(read.status().message());
}

}  // namespace

TEST_CASE("kept state: none before the first write, then what was written, binary state "
          "included", "[durable]") {
  const std::string path = TempPath("first.kept");
  auto none = ReadKeptState(path, "counter");
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  const std::string state("a\nline\0and a zero\n", 18);
  REQUIRE(WriteKeptState(path, "counter", {42, state}).ok());
  auto read = ReadKeptState(path, "counter");
  REQUIRE(read.ok());
  REQUIRE(read->has_value());
  CHECK((*read)->position == 42);
  CHECK((*read)->state == state);
  REQUIRE(WriteKeptState(path, "counter", {43, ""}).ok());  // replaced whole
  read = ReadKeptState(path, "counter");
  REQUIRE(read.ok());
  CHECK((*read)->position == 43);
  CHECK((*read)->state.empty());
}

TEST_CASE("kept state: another group's file, another file, and one cut short are named, not "
          "read", "[durable]") {
  const std::string path = TempPath("bad.kept");
  REQUIRE(WriteKeptState(path, "orders", {7, "x"}).ok());
  auto other_group = ReadKeptState(path, "counter");
  REQUIRE_FALSE(other_group.ok());
  CHECK(other_group.status().code() == absl::StatusCode::kDataLoss);
  CHECK(other_group.status().message().find(path) != std::string::npos);
  CHECK(other_group.status().message().find("\"orders\", not \"counter\"") != std::string::npos);

  CHECK(Refused(path, "key=value\n").find("not a servant's kept state") != std::string::npos);
  CHECK(Refused(path, "cohort-kept-state 1\ngroup counter\nposition 9\nsize 10\nabc")
            .find("holds 3 bytes of state and calls, its header says 10 and 0") !=
        std::string::npos);
  CHECK(Refused(path, "cohort-kept-state 2\ngroup counter\nposition 9\nsize 1\ncalls 5\nabc")
            .find("holds 3 bytes of state and calls, its header says 1 and 5") !=
        std::string::npos);
  CHECK(Refused(path, "cohort-kept-state 2\ngroup counter\nposition 9\nsize 0\n")
            .find("header is damaged") != std::string::npos);
  CHECK(Refused(path, "cohort-kept-state 1\ngroup counter\nposition nine\nsize 0\n")
            .find("header is damaged") != std::string::npos);
  CHECK(Refused(path, "cohort-kept-state 3\ngroup counter\nposition 9\nview x\nsize 0\ncalls 0\n")
            .find("header is damaged") != std::string::npos);
}

TEST_CASE("kept state: the calls kept with the state come back as written, after the state",
          "[durable]") {
  const std::string path = TempPath("calls.kept");
  const std::string state("st\nate", 6);
  const std::string calls("\x0a\x03\x0a\x01x\nmore\0", 11);
  REQUIRE(WriteKeptState(path, "counter", {5, state, calls, 17}).ok());
  auto read = ReadKeptState(path, "counter");
  REQUIRE(read.ok());
  REQUIRE(read->has_value());
  CHECK((*read)->position == 5);
  CHECK((*read)->state == state);
  CHECK((*read)->calls == calls);
  CHECK((*read)->view == 17);
}

TEST_CASE("kept state: a file of version 2 (no view) is still read", "[durable]") {
  const std::string path = TempPath("v2.kept");
  WriteRaw(path, std::string("cohort-kept-state 2\ngroup counter\nposition 9\nsize 4\ncalls 2\n"
                             "12\n4ab"));
  auto read = ReadKeptState(path, "counter");
  REQUIRE(read.ok());
  REQUIRE(read->has_value());
  CHECK((*read)->position == 9);
  CHECK((*read)->state == "12\n4");
  CHECK((*read)->calls == "ab");
  CHECK((*read)->view == 0);
  CHECK(Refused(path, "cohort-kept-state 3\ngroup counter\nposition 9\nsize 4\ncalls 2\n12\n4ab")
            .find("header is damaged (group, position, view, size and calls lines expected)") !=
        std::string::npos);
}

TEST_CASE("kept state: a file of version 1 (no calls) is still read", "[durable]") {
  const std::string path = TempPath("v1.kept");
  WriteRaw(path, std::string("cohort-kept-state 1\ngroup counter\nposition 9\nsize 4\n12\n4"));
  auto read = ReadKeptState(path, "counter");
  REQUIRE(read.ok());
  REQUIRE(read->has_value());
  CHECK((*read)->position == 9);
  CHECK((*read)->state == "12\n4");
  CHECK((*read)->calls.empty());
}

TEST_CASE("kept state: a directory that cannot be written is an error naming the file",
          "[durable]") {
  auto written = WriteKeptState("/proc/no-such-dir/x.kept", "counter", {1, "1"});
  REQUIRE_FALSE(written.ok());
  CHECK(written.message().find("/proc/no-such-dir/x.kept") != std::string::npos);
}

}  // namespace cohort::invocation
