// results_file.cpp — see results_file.h.
#include "record/results_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string_view>

namespace dlhost::record {

namespace {

bool blank(std::string_view line) { return line.find_first_not_of(" \t\r") == line.npos; }

// The start of a record that a killed run did not finish: an object's opening, no byte a writer
// never writes (a control character, NUL), and a parser that failed only on reaching the end.
// Garbage, binary data or a bad byte inside the line fail earlier and are errors instead.
bool torn(std::string_view line, const json::parse_error& e) {
  if (line.empty() || line.front() != '{') return false;
  for (unsigned char c : line)
    if (c < 0x20) return false;
  return e.byte > line.size();
}

// A value from the file inside a message: short and printable.
std::string shown(const std::string& value) {
  return printable(value.size() > 40 ? value.substr(0, 40) + "..." : value);
}

const char* const kStatuses[] = {kStatusOk,      kStatusSkipped, kStatusFailed,
                                 kStatusTimeout, kStatusCrashed, kStatusOom};

// What is wrong with a parsed line as a record ("" when nothing): the checks every reader relies
// on, what a record is and which schema it follows.
std::string record_problem(const json& record) {
  if (!record.is_object()) return "not a dlhost result record (not an object)";
  auto version = record.find("schema_version");
  if (version == record.end()) return "no schema_version (not a dlhost results record)";
  if (!version->is_number_integer() || version->get<long long>() != kSchemaVersion)
    return "schema_version " + shown(version->dump()) +
           " is not one this dlhost "
           "reads (the integer " +
           std::to_string(kSchemaVersion) + "; docs/results-schema.json)";
  if (!record.contains("case_id") || !record.contains("status") || !record["case_id"].is_string() ||
      !record["status"].is_string())
    return "not a dlhost result record (no case_id and status)";
  const std::string st = record["status"].get<std::string>();
  if (std::find(std::begin(kStatuses), std::end(kStatuses), st) == std::end(kStatuses))
    return "status \"" + shown(st) + "\" is not one of OK, SKIPPED, FAILED, TIMEOUT, CRASHED, OOM";
  return "";
}

}  // namespace

std::string contents_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw InputError(path + ": cannot open (" + std::strerror(errno) + ")");
  if (S_ISDIR(st.st_mode))
    throw InputError(path + ": is a directory, not a results file (name a .jsonl file in it)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open (missing or unreadable)");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw InputError(path + ": cannot read");
  return text;
}

std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (c == 0xC2 && next >= 0x80 && next <= 0x9F) {  // U+0080..U+009F
      out += '?';
      ++i;
    } else {
      out += c < 0x20 || c == 0x7F ? '?' : text[i];
    }
  }
  return out;
}

ResultsLines parse_results(const std::string& text, const std::string& path, BadLines bad_lines) {
  ResultsLines out;
  auto bad = [&](int number, std::string what) {
    if (bad_lines == BadLines::refuse)
      throw InputError(path + ":" + std::to_string(number) + ": " + what);
    out.bad.push_back(LineProblem{number, std::move(what)});
  };
  size_t start = 0;
  for (int number = 1; start < text.size(); ++number) {
    size_t end = text.find('\n', start);
    const bool ended = end != std::string::npos;
    if (!ended) end = text.size();
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    if (blank(line)) continue;
    json record;
    try {
      record = json::parse(line);
    } catch (const json::parse_error& e) {
      if (torn(line, e)) {
        out.torn.push_back(LineProblem{
            number, ended ? "skipped a torn line (a run killed while writing it, then resumed)"
                          : "skipped a torn last line (a run interrupted while writing it)"});
      } else {
        bad(number, "not a JSON record (" + printable(e.what()) + ")");
      }
      continue;
    } catch (const json::exception& e) {  // out_of_range: a number no double holds (1e999)
      bad(number, "not a valid record (" + printable(e.what()) + ")");
      continue;
    }
    if (std::string problem = record_problem(record); !problem.empty()) {
      bad(number, std::move(problem));
      continue;
    }
    out.records.push_back(Record{std::move(record), path, number});
  }
  return out;
}

ResultsLines read_results(const std::string& path, BadLines bad_lines) {
  return parse_results(contents_of(path), path, bad_lines);
}

}  // namespace dlhost::record
