// records.cpp — see records.h.
#include "report/records.h"

#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

namespace dlhost::report {

namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open (missing or unreadable)");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// The last line that is not blank: only it may be torn.
size_t last_content_line(const std::vector<std::string>& lines) {
  for (size_t i = lines.size(); i > 0; --i)
    if (lines[i - 1].find_first_not_of(" \t\r") != std::string::npos) return i;
  return 0;
}

}  // namespace

void read_results_file(const std::string& path, Inputs& into) {
  std::vector<std::string> lines = lines_of(path);
  size_t last = last_content_line(lines);
  into.files.push_back(path);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& text = lines[i];
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string where = path + ":" + std::to_string(i + 1);
    json record;
    try {
      record = json::parse(text);
    } catch (const json::parse_error& e) {
      if (i + 1 == last) {
        into.warnings.push_back(where +
                                ": skipped a torn last line (a run interrupted while "
                                "writing it)");
        continue;
      }
      throw InputError(where + ": not a JSON record (" + std::string(e.what()) + ")");
    }
    if (!record.is_object() || !record.contains("case_id") || !record.contains("status") ||
        !record["case_id"].is_string() || !record["status"].is_string())
      throw InputError(where + ": not a dlhost result record (no case_id and status)");
    into.records.push_back(Record{std::move(record), path, static_cast<int>(i + 1)});
  }
}

void read_input_file(const std::string& path, Inputs& into) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open (missing or unreadable)");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A comm-bench document may span lines; a results file is one object per line.
  json whole = json::parse(text, nullptr, false);
  if (whole.is_object() && whole.value("schema", "").rfind("dlhost.comm-bench/", 0) == 0) {
    if (!whole.contains("results") || !whole["results"].is_array())
      throw InputError(path + ": comm-bench JSON without a results array");
    into.comm_benches.push_back(CommBenchRun{std::move(whole), path});
    into.files.push_back(path);
    return;
  }
  read_results_file(path, into);
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
  return v && v->is_number() ? v->get<long long>() : fallback;
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
