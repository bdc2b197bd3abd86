// resume.h — what `dlhost run --resume FILE` may trust in FILE: which cases it has records of,
// and whether they belong to this run at all. A record of another suite, or of one of this
// suite's case ids under other parameters, is refused (resuming would mix them silently); a line
// that is not a record is skipped with its line number, like a torn one. Pure; thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dlhost {

struct ResumeFile {
  std::map<std::string, std::string> params_hash_by_case;  // case id -> hash of its parameters
  std::map<std::string, int> line_by_case;                 // where its (first) record is
  std::map<std::string, int> line_by_suite;                // suite name -> first record of it
  std::vector<std::string> skipped;  // "LINE: why" for each line that is not a record
};

// Reads FILE. Throws std::runtime_error when it cannot be opened.
ResumeFile read_resume_file(const std::string& path);

// "" when the case (id, params hash) may be looked up in `file` for a resume of suite
// `suite_name`; else the reason it must not, starting with "PATH:LINE: ".
std::string resume_conflict(const ResumeFile& file, const std::string& path,
                            const std::string& suite_name);
std::string resume_conflict(const ResumeFile& file, const std::string& path,
                            const std::string& case_id, const std::string& params_hash);

// `arg` as one word of a POSIX shell: as it is when it holds only safe characters, else in
// single quotes, each quote written '\''.
std::string shell_quote(const std::string& arg);

// The command that finishes an interrupted run: `command_line` (the run's own argv) with its
// -o/--output FILE turned into --resume FILE, each argument quoted for a POSIX shell.
std::string resume_command(const std::vector<std::string>& command_line,
                           const std::string& results_path);

}  // namespace dlhost
