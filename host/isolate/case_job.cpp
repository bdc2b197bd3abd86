// case_job.cpp — see case_job.h.
#include "isolate/case_job.h"

namespace dlhost {

using json = nlohmann::ordered_json;

namespace {

json unsafe_to_json(const std::vector<RefusedPlugin>& unsafe) {
  json out = json::array();
  for (const auto& r : unsafe) out.push_back({{"path", r.path}, {"reason", r.reason}});
  return out;
}

}  // namespace

json job_to_json(const CaseJob& job) {
  return json{{"id", job.input.id},
              {"params", job.input.params},
              {"source", job.input.source},
              {"skip_reason", job.input.skip_reason},
              {"backend_by_priority", job.input.backend_by_priority},
              {"suite_name", job.suite_name},
              {"suite_path", job.suite_path},
              {"plugin_folders", job.plugin_folders},
              {"unsafe_plugins", unsafe_to_json(job.unsafe_plugins)},
              {"plugin_files", job.plugin_files},
              {"record_file", job.record_file},
              {"runtime_cluster", job.runtime_cluster}};
}

CaseJob job_from_json(const nlohmann::json& j) {
  CaseJob job;
  job.input.id = j.at("id").get<std::string>();
  job.input.params = nlohmann::ordered_json::parse(j.at("params").dump());
  job.input.source = j.at("source").get<std::string>();
  job.input.skip_reason = j.at("skip_reason").get<std::string>();
  job.input.backend_by_priority = j.value("backend_by_priority", false);
  job.suite_name = j.at("suite_name").get<std::string>();
  job.suite_path = j.at("suite_path").get<std::string>();
  job.plugin_folders = j.at("plugin_folders").get<std::vector<std::string>>();
  for (const auto& r : j.value("unsafe_plugins", nlohmann::json::array()))
    job.unsafe_plugins.push_back(
        {r.at("path").get<std::string>(), r.at("reason").get<std::string>()});
  job.plugin_files = j.value("plugin_files", std::vector<std::string>());
  job.record_file = j.value("record_file", std::string());
  job.runtime_cluster = j.value("runtime_cluster", std::string());
  return job;
}

Interconnect case_interconnect(const CaseParams& params) {
  return link_profile(params.interconnect, params.link_gbit, params.link_latency_us);
}

int test_host_count(const CaseParams& params) {
  return test_host_count(params.ranks, params.ranks_per_node);
}

}  // namespace dlhost
