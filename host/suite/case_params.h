// case_params.h — a case's keys as the host reads them: one struct with a typed field per key
// that the runner, the case processes, the skip rules and the console read, resolved once from a
// case's params (CaseSpec::params, which stay the record's and the job's form) with the key
// table's defaults and unset values filled in (schema.h), and its types checked there, so that no
// reader looks a key up by its name or meets a value of the wrong type.
//
// Where it is resolved: by the suite loader once a case is expanded (a value of the wrong type is
// a SuiteError at the case's FILE:LINE:COL, as every value of a suite), and at each process's
// entry from a case's params (run_case, the case worker, `dlhost run`'s per-case steps), from
// params the loader checked. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlhost {

// A key of the wrong type ("'threads' must be an integer, got \"8\""), prefixed with the case's
// source ("suite.yaml:12: ") when the caller gave one.
class CaseParamError : public std::invalid_argument {
 public:
  using invalid_argument::invalid_argument;
};

// Every field is the case's value, else the key's default, else its unset value (schema.cpp);
// std::optional where a key has neither (the network's own value, the host's choice).
struct CaseParams {
  // What runs: "" when the case names none (a hand-made case; the loader always sets both).
  std::string network, backend;
  std::optional<int64_t> batch;  // the global mini-batch; unset: the network's for the device
  int64_t threads = 0;
  int64_t iterations = 0, warmup = 0;
  double timeout = 0;          // seconds
  double startup_timeout = 0;  // seconds, multi-rank cases
  int64_t memory_limit_mb = 0;
  int64_t seed = 0;
  std::optional<int64_t> device;  // unset: the rank's local rank modulo the device count
  // How the ranks run and talk.
  std::string comm;
  int64_t ranks = 1;
  int64_t ranks_per_node = 1;  // the test hosts' ranks per host
  // As the case set it, else nullopt: only a set value places the ranks under mpirun or srun.
  std::optional<int64_t> ranks_per_node_given;
  std::string launcher, scaling;
  bool overlap = false;
  double bucket_mb = 0;
  std::string comm_memory;
  bool oversubscribe = false;
  std::vector<std::string> launcher_args;
  std::string interconnect;
  double link_gbit = 0, link_latency_us = 0;
  // The update: unset, the network's own.
  std::optional<std::string> optimizer;
  std::optional<float> lr, momentum, weight_decay, clip_norm, beta1, beta2, adam_epsilon;
  // Arithmetic and the step.
  std::string precision;
  std::string fused_step;
  int64_t matmul_peak = 0;
  // The process's runtime (run/runtime_settings.h).
  std::string allocator, openblas_coretype, omp_wait_policy;
  // Input and data.
  std::string input;
  std::string data;
  int64_t epochs = 0, epoch_size = 0;
  bool evaluate = false;
};

// `params` resolved; throws CaseParamError for a key of the wrong type, its message prefixed with
// "<source>: " when `source` is not empty.
CaseParams case_params(const nlohmann::ordered_json& params, const std::string& source = "");

}  // namespace dlhost
