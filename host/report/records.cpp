// records.cpp — see records.h.
#include "report/records.h"

namespace dlhost::report {

void parse_results_text(const std::string& text, const std::string& path, Inputs& into) {
  into.files.push_back(path);
  record::ResultsLines lines = record::parse_results(text, path, record::BadLines::refuse);
  for (record::LineProblem& torn : lines.torn)
    into.warnings.push_back(path + ":" + std::to_string(torn.line) + ": " + torn.what);
  for (Record& r : lines.records) into.records.push_back(std::move(r));
}

void read_results_file(const std::string& path, Inputs& into) {
  parse_results_text(record::contents_of(path), path, into);
}

void read_input_file(const std::string& path, Inputs& into) {
  std::string text = record::contents_of(path);
  // A comm-bench document may span lines; a results file is one object per line.
  json whole = json::parse(text, nullptr, false);
  if (whole.is_object() && whole.value("schema", "").rfind("dlhost.comm-bench/", 0) == 0) {
    if (!whole.contains("results") || !whole["results"].is_array())
      throw InputError(path + ": comm-bench JSON without a results array");
    into.comm_benches.push_back(CommBenchRun{std::move(whole), path});
    into.files.push_back(path);
    return;
  }
  parse_results_text(text, path, into);
}

}  // namespace dlhost::report
