// The memory target of issue 7: what one idle attached NSO costs a daemon, by RSS delta.
//
// In this code an attached NSO is what Attach creates (Node::Attach): an entry in the node's NSO
// table (id -> client name). It belongs to no group until its application registers a servant,
// and groups are declared in the YAML, each with its own total order and failure detector. So the
// bench measures the two separately and adds them up for "an NSO in a group of its own":
//   bytes/NSO   = RSS growth of one daemon while 100,000 NSOs attach (after a warm-up of 1,000)
//   bytes/group = (RSS of a daemon with G single-member, event-driven groups (silent when idle)
//                  - RSS of the same daemon with 1 group) / (G - 1)
#ifndef COHORT_TOOLS_BENCH_MEMORY_H_
#define COHORT_TOOLS_BENCH_MEMORY_H_

#include <cstdint>
#include <string>

namespace cohort::bench {

struct MemoryResult {
  bool measured = false;
  int64_t nsos = 0;             // attached after the warm-up
  double nso_rss_before_kib = 0, nso_rss_after_kib = 0;
  double bytes_per_nso = 0;
  int64_t groups = 0;           // G
  double one_group_rss_kib = 0, many_groups_rss_kib = 0;
  double bytes_per_group = 0;
  double attach_seconds = 0;
  std::string note;
};

MemoryResult MeasureMemory(const std::string& cohortd, const std::string& dir, int64_t nsos,
                           int64_t groups);

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_MEMORY_H_
