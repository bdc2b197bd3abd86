// resume.cpp — see resume.h.
#include "run/resume.h"

#include <fstream>
#include <stdexcept>

#include "run/record.h"

namespace dlhost {

namespace {

// The record's case id, params hash and suite name; throws nlohmann::json::exception for a line
// that is JSON but not a record (wrong types).
void add_record(const nlohmann::ordered_json& rec, int line, ResumeFile& out) {
  if (!rec.is_object()) throw std::runtime_error("not a JSON object");
  RecordSummary seen = RecordSummary::of(rec);
  if (seen.case_id.empty() || seen.params_hash.empty())
    throw std::runtime_error("no case_id or params_hash");
  if (auto s = rec.find("suite"); s != rec.end() && s->is_object())
    out.line_by_suite.emplace(s->value("name", std::string()), line);
  if (out.line_by_case.emplace(seen.case_id, line).second)
    out.params_hash_by_case[seen.case_id] = seen.params_hash;
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

ResumeFile read_resume_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open results file " + path);
  ResumeFile out;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    if (text.empty()) continue;
    try {
      add_record(nlohmann::ordered_json::parse(text), line, out);
    } catch (const nlohmann::json::parse_error&) {
      out.skipped.push_back(std::to_string(line) + ": torn (not whole JSON)");
    } catch (const std::exception& e) {
      out.skipped.push_back(std::to_string(line) + ": not a record (" + e.what() + ")");
    }
  }
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
