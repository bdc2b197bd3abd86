// records.h — reading what `dlhost run` and `dlhost comm-bench --json` wrote, as plain data: a
// results file is JSON lines (one case record per line), a comm-bench file one JSON document.
// Owns no state; everything here is safe to call from any thread.
//
// A results record is kept as its JSON (docs/results-schema.json is the contract); the accessors
// below read the fields the views need and give a default when a field is absent, because
// records that did not end OK carry no measurements.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlhost::report {

using json = nlohmann::json;

// Bad input, with where: "FILE:LINE: what".
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One case record and where it came from.
struct Record {
  json data;
  std::string file;
  int line = 0;
  std::string where() const { return file + ":" + std::to_string(line); }
};

// One `comm-bench --json` document (schema dlhost.comm-bench/1).
struct CommBenchRun {
  json data;
  std::string file;
};

struct Inputs {
  std::vector<Record> records;
  std::vector<CommBenchRun> comm_benches;
  std::vector<std::string> files;
  std::vector<std::string> warnings;  // e.g. a torn last line skipped
};

// The results schema this reader knows (docs/results-schema.json); a record of another is refused.
constexpr int kResultsSchemaVersion = 1;

// Reads one results file. Every line must be a results record of schema_version 1 (an object
// with case_id and a known status); anything else (not JSON, invalid UTF-8, a NUL byte, a number
// a double cannot hold, another schema_version) throws InputError naming FILE:LINE. The one
// exception is a torn line: the start of a record cut off by a run killed mid-write (the parser
// reaches the line's end before the record is whole), which is skipped with a warning. A torn
// line is the file's last, or one that a resumed run ended with a newline before appending.
// A directory is refused by name.
void read_results_file(const std::string& path, Inputs& into);
// The same on text already read; `path` only names it in messages (the fuzz target's entry).
void parse_results_text(const std::string& text, const std::string& path, Inputs& into);
// Reads a results file or a comm-bench JSON file (told apart by the comm-bench "schema").
void read_input_file(const std::string& path, Inputs& into);

// `text` safe to print on a terminal: every control character (C0, DEL, and C1 as UTF-8) made
// '?', so a record's string cannot move the cursor, retitle the window or fake an output line.
std::string printable(const std::string& text);

// --- accessors: the value at a JSON pointer ("/timing/step/median"), or a default ---------
double number_at(const json& j, const char* pointer, double fallback = 0.0);
long long integer_at(const json& j, const char* pointer, long long fallback = 0);
std::string text_at(const json& j, const char* pointer, const std::string& fallback = "");
std::vector<double> numbers_at(const json& j, const char* pointer);
bool has(const json& j, const char* pointer);

// The fields the views group and label by.
std::string case_id(const Record& r);
std::string status(const Record& r);
bool is_ok(const Record& r);
std::string network(const Record& r);
std::string backend(const Record& r);
int threads(const Record& r);  // used, else requested (0 = the backend's default)
int batch(const Record& r);    // per rank
int ranks(const Record& r);
double step_median_ms(const Record& r);
// The machine: CPU model and cores. Records of one machine are comparable when their library
// versions agree (see libraries_agree); the key leaves the libraries out because each record
// lists only its own backend's, and the tools of one run must land in one group.
std::string environment_key(const json& environment);
// The record's `environment.libraries` as name -> version text.
std::map<std::string, std::string> libraries_of(const json& environment);
// True when every library named in both maps has the same version in both.
bool libraries_agree(const std::map<std::string, std::string>& a,
                     const std::map<std::string, std::string>& b);

}  // namespace dlhost::report
