// nso/incarnation_file.h: a daemon's incarnation kept on disk across its starts.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "nso/incarnation_file.h"

namespace cohort {
namespace {

std::string TempDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(root != nullptr ? root : "/tmp") + "/" + name;
  mkdir(dir.c_str(), 0700);
  return dir;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("the incarnation file: a first start, restarts, a clock set back", "[config]") {
  const std::string path = TempDir("incarnations") + "/n1.incarnation";
  unlink(path.c_str());

  absl::StatusOr<nso::Incarnations> first = nso::NextIncarnation(path, 1000);
  REQUIRE(first.ok());
  CHECK(first->current == 1000);
  CHECK(first->previous == 0);  // no file: a first start
  CHECK(Read(path) == "1000\n");

  absl::StatusOr<nso::Incarnations> second = nso::NextIncarnation(path, 5000);
  REQUIRE(second.ok());
  CHECK(second->current == 5000);
  CHECK(second->previous == 1000);

  // The wall clock behind the last start: one more, so incarnations still grow.
  absl::StatusOr<nso::Incarnations> third = nso::NextIncarnation(path, 4000);
  REQUIRE(third.ok());
  CHECK(third->current == 5001);
  CHECK(third->previous == 5000);
  CHECK(Read(path) == "5001\n");
}

TEST_CASE("the incarnation file: another file's content is refused, not overwritten",
          "[config]") {
  const std::string path = TempDir("incarnations-bad") + "/n1.incarnation";
  for (const std::string content : {"hello\n", "0\n", "12 13\n", "-4\n", ""}) {
    INFO(content);
    { std::ofstream(path, std::ios::trunc) << content; }
    absl::StatusOr<nso::Incarnations> next = nso::NextIncarnation(path, 1000);
    REQUIRE_FALSE(next.ok());
    CHECK_THAT(std::string(next.status().message()),
               Catch::Contains("incarnation_file \"" + path + "\": not an incarnation file"));
    CHECK(Read(path) == content);
  }
}

TEST_CASE("the incarnation file: a directory that cannot be written is an error naming it",
          "[config]") {
  absl::StatusOr<nso::Incarnations> next =
      nso::NextIncarnation(TempDir("incarnations-missing") + "/no/such/dir/n1", 1000);
  REQUIRE_FALSE(next.ok());
  CHECK_THAT(std::string(next.status().message()), Catch::Contains("/no/such/dir/n1.tmp"));
}

}  // namespace cohort
