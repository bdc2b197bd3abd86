// fields.h — the fields of a results record that its readers use (report, export, compare,
// project), read from the record's JSON in one place: the value at a JSON pointer with a default
// (records that did not end OK carry no measurements), and the typed fields the views group,
// label and compute by. Adding a field a reader needs is one function here. Pure; thread-safe.
#pragma once

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "record/blocks.h"
#include "record/results_file.h"

namespace dlhost::record {

// --- accessors: the value at a JSON pointer ("/timing/step/median"), or a default ---------
double number_at(const json& j, const char* pointer, double fallback = 0.0);
long long integer_at(const json& j, const char* pointer, long long fallback = 0);
std::string text_at(const json& j, const char* pointer, const std::string& fallback = "");
std::vector<double> numbers_at(const json& j, const char* pointer);
bool has(const json& j, const char* pointer);

// --- the typed fields the readers group, label and compute by ------------------------------
std::string case_id(const Record& r);
std::string status(const Record& r);
bool is_ok(const Record& r);
std::string network(const Record& r);
std::string backend(const Record& r);
int threads(const Record& r);  // used, else requested (0 = the backend's default)
int batch(const Record& r);    // per rank
int ranks(const Record& r);
double step_median_ms(const Record& r);
int per_rank_batch(const Record& r);  // the distributed block's, else batch()
// The medians of the step's parts (timing.forward/backward/update); 0 where absent.
struct StepParts {
  double forward_ms = 0, backward_ms = 0, update_ms = 0;
};
StepParts step_parts(const Record& r);
// How the step was timed: the timer ("" in records before it was written) and whether the
// backend fused the step into one call (then forward/backward/update are no breakdown).
std::string timer(const Record& r);
bool fused_step(const Record& r);
// The step times of every timed step (timing.samples.step); empty without them.
std::vector<double> step_samples(const Record& r);
// Real data: the median wait for a mini-batch (timing.data); absent for synthetic data.
std::optional<double> data_wait_ms(const Record& r);
// The distributed block's figures (the data-parallel views, the projection): "" and 0 where
// absent (a 1-rank case has no block), the speedup NaN without a 1-rank baseline.
struct DistributedFigures {
  std::string comm, scaling;
  long long global_batch = 0;
  double compute_ms = 0, allreduce_ms = 0, exposed_comm_ms = 0;  // medians
  double speedup_vs_1_rank = NAN;
  // A tool's own runtime (issue 41; "" for dlhost's comms): its name, mode (sync/async), what its
  // communication time measures, or why it has none (then there is no allreduce: never a 0).
  std::string runtime, mode, comm_time, comm_time_absent;
  bool has_allreduce = false;  // the block has an allreduce summary
};
DistributedFigures distributed_of(const Record& r);
// The link the ranks ran over: the record's interconnect block's profile, else its
// `interconnect` parameter, else "loopback" (every rank on one host).
std::string interconnect_of(const Record& r);
// The machine: CPU model and cores. Records of one machine are comparable when their library
// versions agree (see libraries_agree); the key leaves the libraries out because each record
// lists only its own backend's, and the tools of one run must land in one group.
std::string environment_key(const json& environment);
// The record's `environment.libraries` as name -> version text.
std::map<std::string, std::string> libraries_of(const json& environment);
// True when every library named in both maps has the same version in both.
bool libraries_agree(const std::map<std::string, std::string>& a,
                     const std::map<std::string, std::string>& b);

}  // namespace dlhost::record
