// Runs a fuzz target's LLVMFuzzerTestOneInput over every file of the directories given (its seed
// corpus in test/fuzz/corpus/TARGET), without libFuzzer: the //test:*_fuzz_replay tests build
// every target with the normal toolchain, so a target cannot stop compiling unnoticed (the local
// target did not link for a day), and replay the seeds as regression inputs. Fuzzing itself is
// tools/fuzz (clang, libFuzzer, sanitizers).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  size_t inputs = 0;
  for (int i = 1; i < argc; ++i) {
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(argv[i])) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    for (const auto& file : files) {
      std::ifstream in(file, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++inputs;
    }
  }
  std::printf("replayed %zu inputs\n", inputs);
  if (inputs == 0) {
    std::fprintf(stderr, "no inputs found: give the corpus directories\n");
    return 1;
  }
  return 0;
}
