// resume.cpp — see resume.h.
#include "run/resume.h"

#include <fstream>
#include <stdexcept>

#include "record/results_file.h"
#include "run/record.h"

namespace dlhost {

namespace {

// The record's case id, params hash and suite name; throws nlohmann::json::exception for a
// record with a field of the wrong type.
void add_record(const nlohmann::json& rec, int line, ResumeFile& out) {
  RecordSummary seen = RecordSummary::of(rec);
  if (seen.case_id.empty() || seen.params_hash.empty())
    throw std::runtime_error("no case_id or params_hash");
  if (auto s = rec.find("suite"); s != rec.end() && s->is_object())
    out.line_by_suite.emplace(s->value("name", std::string()), line);
  if (out.line_by_case.emplace(seen.case_id, line).second)
    out.params_hash_by_case[seen.case_id] = seen.params_hash;
}

std::string not_a_record(int line, const std::string& why) {
  return std::to_string(line) + ": not a record (" + why + ")";
}

}  // namespace

std::string shell_quote(const std::string& arg) {
  if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789_-./=:,+@%") == std::string::npos)
    return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The record module's reader and rules (record/results_file.h), with a line that is not a record
// skipped rather than refused: resuming keeps what it can trust and runs the rest again.
ResumeFile read_resume_file(const std::string& path) {
  if (!std::ifstream(path)) throw std::runtime_error("cannot open results file " + path);
  record::ResultsLines lines = record::read_results(path, record::BadLines::skip);
  // "LINE: why" in line order, as the run's notes list them.
  std::map<int, std::string> skipped;
  for (const record::LineProblem& torn : lines.torn)
    skipped[torn.line] = std::to_string(torn.line) + ": torn (not whole JSON)";
  for (const record::LineProblem& bad : lines.bad)
    skipped[bad.line] = not_a_record(bad.line, bad.what);
  ResumeFile out;
  for (const record::Record& rec : lines.records) {
    try {
      add_record(rec.data, rec.line, out);
    } catch (const std::exception& e) {
      skipped[rec.line] = not_a_record(rec.line, e.what());
    }
  }
  for (auto& [line, why] : skipped) out.skipped.push_back(std::move(why));
  return out;
}

std::string resume_conflict(const ResumeFile& file, const std::string& path,
                            const std::string& suite_name) {
  for (const auto& [name, line] : file.line_by_suite) {
    if (name == suite_name) continue;
    return path + ":" + std::to_string(line) + ": a record of suite '" + name + "', not of '" +
           suite_name + "'; a results file holds one suite: write this one to a new file (-o)";
  }
  return "";
}

std::string resume_conflict(const ResumeFile& file, const std::string& path,
                            const std::string& case_id, const std::string& params_hash) {
  auto it = file.params_hash_by_case.find(case_id);
  if (it == file.params_hash_by_case.end() || it->second == params_hash) return "";
  return path + ":" + std::to_string(file.line_by_case.at(case_id)) + ": case '" + case_id +
         "' was recorded with other parameters; resume with the interrupted run's own options "
         "(--set...), or write to a new file (-o)";
}

std::string resume_command(const std::vector<std::string>& command_line,
                           const std::string& results_path) {
  std::string out;
  for (size_t i = 0; i < command_line.size(); ++i) {
    const std::string& arg = command_line[i];
    if (arg == "-o" || arg == "--output" || arg == "--resume") {
      ++i;  // its value is replaced below
      continue;
    }
    if (arg.rfind("--output=", 0) == 0 || arg.rfind("--resume=", 0) == 0 ||
        (arg.rfind("-o", 0) == 0 && arg.size() > 2))
      continue;
    out += (out.empty() ? "" : " ") + shell_quote(arg);
  }
  return out + " --resume " + shell_quote(results_path);
}

}  // namespace dlhost
