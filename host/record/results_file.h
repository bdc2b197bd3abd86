// results_file.h — the one reader of results files: JSON lines, one case record per line, as
// `dlhost run` writes them (run/results.h). One set of rules for every reader (--resume, report,
// export, compare, project): a line is a record (an object of schema_version 1 with a string
// case_id and a known status, docs/results-schema.json), a torn line (the start of a record cut
// off by a run killed mid-write: skipped with a warning), or a bad line (anything else: an error
// naming FILE:LINE). What a caller does with a bad line is its own: the report refuses the file,
// --resume skips the line and says so. Owns no state; safe to call from any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "record/record.h"

namespace dlhost::record {

using json = nlohmann::json;

// Bad input, with where: "FILE:LINE: what".
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One case record, kept whole as its JSON (every field, known or not), and where it came from.
struct Record {
  json data;
  std::string file;
  int line = 0;
  std::string where() const { return file + ":" + std::to_string(line); }
};

// A line that is not a record: its number and what is wrong, without "FILE:LINE: ".
struct LineProblem {
  int line = 0;
  std::string what;
};

struct ResultsLines {
  std::vector<Record> records;
  std::vector<LineProblem> torn;  // "skipped a torn last line (...)", "skipped a torn line (...)"
  std::vector<LineProblem> bad;   // only with BadLines::skip
};

enum class BadLines {
  refuse,  // throw InputError "FILE:LINE: what" at the first bad line
  skip,    // list it in ResultsLines::bad and go on
};

// The whole file; throws InputError for one that cannot be opened or read, and for a directory
// (which an ifstream opens and reads as empty), by name.
std::string contents_of(const std::string& path);

// The records of results text; `path` only names it in messages. A line is torn when it is an
// object's opening with no control byte and the parser failed only on reaching its end: the
// file's last line, or one that a resumed run ended with a newline before appending.
// Not JSON, invalid UTF-8, a NUL byte, a number a double cannot hold, another schema_version,
// no case_id and status, an unknown status: bad.
ResultsLines parse_results(const std::string& text, const std::string& path, BadLines bad_lines);
ResultsLines read_results(const std::string& path, BadLines bad_lines);

// `text` safe to print on a terminal: every control character (C0, DEL, and C1 as UTF-8) made
// '?', so a record's string cannot move the cursor, retitle the window or fake an output line.
std::string printable(const std::string& text);

}  // namespace dlhost::record
