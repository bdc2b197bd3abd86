// records.h — reading what `dlhost run` and `dlhost comm-bench --json` wrote, as plain data: a
// results file is JSON lines (one case record per line), a comm-bench file one JSON document.
// Owns no state; everything here is safe to call from any thread.
//
// A results record is kept as its JSON (docs/results-schema.json is the contract); the record
// module's accessors (record/fields.h) read the fields the views need.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "record/fields.h"
#include "record/results_file.h"

namespace dlhost::report {

using json = nlohmann::json;

// Bad input, with where: "FILE:LINE: what". One case record and where it came from. Both are the
// record module's (record/results_file.h): every reader of results files reads through it.
using InputError = record::InputError;
using Record = record::Record;

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
constexpr int kResultsSchemaVersion = record::kSchemaVersion;

// Reads one results file by the record module's rules (record/results_file.h) with a bad line
// refused: every line must be a results record of schema_version 1; anything else throws
// InputError naming FILE:LINE, but for a torn line, which is skipped with a warning.
// A directory is refused by name.
void read_results_file(const std::string& path, Inputs& into);
// The same on text already read; `path` only names it in messages (the fuzz target's entry).
void parse_results_text(const std::string& text, const std::string& path, Inputs& into);
// Reads a results file or a comm-bench JSON file (told apart by the comm-bench "schema").
void read_input_file(const std::string& path, Inputs& into);

// `text` safe to print on a terminal (record/results_file.h).
using record::printable;

// The fields of a record, read in one place: the record module's (record/fields.h).
using record::backend;
using record::batch;
using record::case_id;
using record::environment_key;
using record::has;
using record::integer_at;
using record::is_ok;
using record::libraries_agree;
using record::libraries_of;
using record::network;
using record::number_at;
using record::numbers_at;
using record::ranks;
using record::status;
using record::step_median_ms;
using record::text_at;
using record::threads;

}  // namespace dlhost::report
