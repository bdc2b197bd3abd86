// export.cpp — see export.h. Every column is a field of the record named by its JSON pointer, so
// adding one is one line; an absent field is an empty cell.
#include "report/export.h"

#include <sstream>

namespace dlhost::report {

namespace {

struct Column {
  const char* name;
  const char* pointer;  // into the record; nullptr: where the record came from
};

const Column kColumns[] = {
    {"case_id", "/case_id"},
    {"status", "/status"},
    {"reason", "/reason"},
    {"suite", "/suite/name"},
    {"started_at", "/started_at"},
    {"duration_s", "/duration_s"},
    {"network", "/params/network"},
    {"backend", "/params/backend"},
    {"backend_library", "/backend/device/library"},
    {"device_model", "/backend/device/model"},
    {"batch", "/params/batch"},
    {"per_rank_batch", "/resolved/batch"},
    {"threads_requested", "/resolved/threads_requested"},
    {"threads_used", "/resolved/threads_used"},
    {"ranks", "/params/ranks"},
    {"comm", "/params/comm"},
    {"scaling", "/params/scaling"},
    {"overlap", "/params/overlap"},
    {"warmup", "/timing/warmup"},
    {"iterations", "/timing/iterations"},
    {"step_median_ms", "/timing/step/median"},
    {"step_mean_ms", "/timing/step/mean"},
    {"step_min_ms", "/timing/step/min"},
    {"step_max_ms", "/timing/step/max"},
    {"step_p5_ms", "/timing/step/p5"},
    {"step_p95_ms", "/timing/step/p95"},
    {"step_stddev_ms", "/timing/step/stddev"},
    {"forward_median_ms", "/timing/forward/median"},
    {"backward_median_ms", "/timing/backward/median"},
    {"update_median_ms", "/timing/update/median"},
    {"compile_ms", "/timing/compile_ms"},
    {"samples_per_second", "/timing/samples_per_second"},
    {"samples_per_second_mean", "/timing/samples_per_second_mean"},
    {"train_gflops_per_second_est", "/timing/train_gflops_per_second_est"},
    {"forward_flops_per_sample", "/network/forward_flops_per_sample"},
    {"network_params", "/network/params"},
    {"compute_median_ms", "/distributed/compute/median"},
    {"allreduce_median_ms", "/distributed/allreduce/median"},
    {"exposed_comm_median_ms", "/distributed/exposed_comm/median"},
    {"allreduce_bytes_per_step", "/distributed/allreduce_bytes_per_step"},
    {"speedup_vs_1_rank", "/distributed/vs_1_rank/speedup"},
    {"efficiency_vs_1_rank", "/distributed/vs_1_rank/efficiency"},
    {"loss_first", "/loss/first"},
    {"loss_last", "/loss/last"},
    {"peak_rss_bytes", "/memory/peak_rss_bytes"},
    {"host", "/environment/host"},
    {"cpu_model", "/environment/cpu_model"},
    {"cores", "/environment/cores"},
    {"build_type", "/environment/build_type"},
    {"dlhost_version", "/environment/dlhost_version"},
    {"git_revision", "/environment/git_revision"},
    {"params_hash", "/params_hash"},
    {"file", nullptr},
};

std::string cell(const json& j, const char* pointer) {
  json::json_pointer p(pointer);
  if (!j.contains(p)) return "";
  const json& v = j.at(p);
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    std::ostringstream s;
    s.precision(10);
    s << v.get<double>();
    return s.str();
  }
  return v.dump();
}

}  // namespace

std::vector<std::string> export_columns() {
  std::vector<std::string> names;
  for (const auto& c : kColumns) names.push_back(c.name);
  return names;
}

std::vector<std::vector<std::string>> export_rows(const std::vector<Record>& records) {
  std::vector<std::vector<std::string>> rows{export_columns()};
  for (const auto& r : records) {
    rows.emplace_back();
    for (const auto& c : kColumns)
      rows.back().push_back(c.pointer ? cell(r.data, c.pointer) : r.where());
  }
  return rows;
}

}  // namespace dlhost::report
