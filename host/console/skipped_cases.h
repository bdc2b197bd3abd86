// skipped_cases.h — what `dlhost run` says about the cases it knows it will skip before any of
// them runs (threads above this machine's cores, a backend not built here, real data missing):
// one line per reason instead of one per case, so that a newcomer's first run of
// suites/paper_repro.yaml on 2 cores is not four SKIPPED lines per network and tool. The results
// file keeps every case's record; this is the console's view only.
//
// Reasons that differ only in their numbers fold into one ("needs 4 threads; ..." and "needs 32
// threads; ..." -> "needs 4..32 threads; ..."); the line then names what the folded cases vary
// in. Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dlhost {

struct KnownSkip {
  std::string name;               // the case's display name (suite/case_names.h)
  nlohmann::ordered_json params;  // its keys
  std::string reason;             // its skip reason
};

// "needs # threads; this machine has # cores" and its numbers {4}, {2}: the reason with every
// whole number that stands alone (not part of a name such as cpu_libtorch2, nor of 1.13) taken
// out, which is what folds.
struct ReasonShape {
  std::string text;                // with "#" for each number taken out
  std::vector<long long> numbers;  // in order
};
ReasonShape reason_shape(const std::string& reason);

// One line per reason shape, in order of first appearance:
// "SKIPPED 96 cases: needs 4..32 threads; this machine has 2 cores (network: fcn5, fcn8, alexnet,
// resnet50, lstm32, ... 10 in all; backend: cpu_onednn, cpu_tensorflow; threads: 4, 8, 16, 32)";
// one case alone: "SKIPPED 1 case: REASON (NAME)".
std::vector<std::string> folded_skip_lines(const std::vector<KnownSkip>& skips);

}  // namespace dlhost
