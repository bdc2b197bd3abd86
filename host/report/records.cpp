// records.cpp — see records.h.
#include "report/records.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string_view>

namespace dlhost::report {

namespace {

// The whole file. A directory (which an ifstream opens and reads as empty) is refused by name.
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

const char* const kStatuses[] = {"OK", "SKIPPED", "FAILED", "TIMEOUT", "CRASHED", "OOM"};

// The checks every view relies on: what a record is, and which schema it follows.
void check_record(const json& record, const std::string& where) {
  if (!record.is_object()) throw InputError(where + ": not a dlhost result record (not an object)");
  auto version = record.find("schema_version");
  if (version == record.end())
    throw InputError(where + ": no schema_version (not a dlhost results record)");
  if (!version->is_number_integer() || version->get<long long>() != kResultsSchemaVersion)
    throw InputError(where + ": schema_version " + shown(version->dump()) +
                     " is not one this dlhost "
                     "reads (the integer " +
                     std::to_string(kResultsSchemaVersion) + "; docs/results-schema.json)");
  if (!record.contains("case_id") || !record.contains("status") || !record["case_id"].is_string() ||
      !record["status"].is_string())
    throw InputError(where + ": not a dlhost result record (no case_id and status)");
  const std::string st = record["status"].get<std::string>();
  if (std::find(std::begin(kStatuses), std::end(kStatuses), st) == std::end(kStatuses))
    throw InputError(where + ": status \"" + shown(st) +
                     "\" is not one of OK, SKIPPED, FAILED, TIMEOUT, CRASHED, OOM");
}

}  // namespace

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

void parse_results_text(const std::string& text, const std::string& path, Inputs& into) {
  into.files.push_back(path);
  size_t start = 0;
  for (int number = 1; start < text.size(); ++number) {
    size_t end = text.find('\n', start);
    const bool ended = end != std::string::npos;
    if (!ended) end = text.size();
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    if (blank(line)) continue;
    std::string where = path + ":" + std::to_string(number);
    json record;
    try {
      record = json::parse(line);
    } catch (const json::parse_error& e) {
      if (torn(line, e)) {
        into.warnings.push_back(where + ": skipped a torn " +
                                (ended ? std::string("line (a run killed while writing it, then "
                                                     "resumed)")
                                       : std::string("last line (a run interrupted while "
                                                     "writing it)")));
        continue;
      }
      throw InputError(where + ": not a JSON record (" + printable(e.what()) + ")");
    } catch (const json::exception& e) {  // out_of_range: a number no double holds (1e999)
      throw InputError(where + ": not a valid record (" + printable(e.what()) + ")");
    }
    check_record(record, where);
    into.records.push_back(Record{std::move(record), path, number});
  }
}

void read_results_file(const std::string& path, Inputs& into) {
  parse_results_text(contents_of(path), path, into);
}

void read_input_file(const std::string& path, Inputs& into) {
  std::string text = contents_of(path);
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

// --- accessors -------------------------------------------------------------------------------

namespace {
const json* at(const json& j, const char* pointer) {
  json::json_pointer p(pointer);
  if (!j.contains(p)) return nullptr;
  return &j.at(p);
}
}  // namespace

bool has(const json& j, const char* pointer) { return at(j, pointer) != nullptr; }

double number_at(const json& j, const char* pointer, double fallback) {
  const json* v = at(j, pointer);
  return v && v->is_number() ? v->get<double>() : fallback;
}

long long integer_at(const json& j, const char* pointer, long long fallback) {
  const json* v = at(j, pointer);
  if (!v || !v->is_number()) return fallback;
  if (v->is_number_integer()) return v->get<long long>();  // an unsigned above 2^63 wraps
  // A float outside long long's range (1e300) would be undefined behaviour to convert.
  double d = v->get<double>();
  return std::isfinite(d) && std::abs(d) < 9.2e18 ? static_cast<long long>(d) : fallback;
}

std::string text_at(const json& j, const char* pointer, const std::string& fallback) {
  const json* v = at(j, pointer);
  if (!v || v->is_null()) return fallback;
  return v->is_string() ? v->get<std::string>() : v->dump();
}

std::vector<double> numbers_at(const json& j, const char* pointer) {
  std::vector<double> out;
  const json* v = at(j, pointer);
  if (v && v->is_array())
    for (const auto& x : *v)
      if (x.is_number()) out.push_back(x.get<double>());
  return out;
}

std::string case_id(const Record& r) { return r.data["case_id"].get<std::string>(); }
std::string status(const Record& r) { return r.data["status"].get<std::string>(); }
bool is_ok(const Record& r) { return status(r) == "OK"; }

std::string network(const Record& r) {
  return text_at(r.data, "/network/name", text_at(r.data, "/params/network", "?"));
}

std::string backend(const Record& r) {
  return text_at(r.data, "/backend/name", text_at(r.data, "/params/backend", "?"));
}

int threads(const Record& r) {
  long long used = integer_at(r.data, "/resolved/threads_used", -1);
  if (used > 0) return static_cast<int>(used);
  return static_cast<int>(integer_at(r.data, "/params/threads", 0));
}

int batch(const Record& r) {
  long long b = integer_at(r.data, "/resolved/batch", 0);
  return static_cast<int>(b > 0 ? b : integer_at(r.data, "/params/batch", 0));
}

int ranks(const Record& r) {
  return static_cast<int>(
      integer_at(r.data, "/distributed/ranks", integer_at(r.data, "/params/ranks", 1)));
}

double step_median_ms(const Record& r) { return number_at(r.data, "/timing/step/median"); }

std::string environment_key(const json& environment) {
  std::ostringstream key;
  key << text_at(environment, "/cpu_model") << " | " << integer_at(environment, "/cores")
      << " cores";
  return key.str();
}

std::map<std::string, std::string> libraries_of(const json& environment) {
  std::map<std::string, std::string> libs;
  if (environment.contains("libraries") && environment["libraries"].is_object())
    for (const auto& [name, version] : environment["libraries"].items())
      libs[name] = version.is_string() ? version.get<std::string>() : version.dump();
  return libs;
}

bool libraries_agree(const std::map<std::string, std::string>& a,
                     const std::map<std::string, std::string>& b) {
  for (const auto& [name, version] : a) {
    auto other = b.find(name);
    if (other != b.end() && other->second != version) return false;
  }
  return true;
}

}  // namespace dlhost::report
