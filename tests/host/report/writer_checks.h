// writer_checks.h — checks, written apart from the writers they check, of what `dlhost report`
// hands to gnuplot and to spreadsheets. Used by the unit tests (test_hostile_inputs.cpp) and the
// fuzz target (tests/fuzz/fuzz_report.cpp). Header-only, pure functions.
//
// gnuplot_script_problem: a script is inert when every line is either one of the report's own
// commands (set, unset, plot, replot) whose text outside single-quoted literals uses no
// character or word that could run anything (backquotes, macros, `!`, pipes, system, load, ...),
// or a data-block line holding numbers only. Inside a single-quoted literal gnuplot substitutes
// nothing, so what a record holds can only live there.
// markdown_problem: report.md holds no structure of a record's making: exactly the headings the
// report wrote, every table row with its table's cell count, no line that opens another block
// (HTML, quote, list, code, fence), no HTML tag or entity of the text's own (`<` and `&` only as
// &lt; &gt; &amp; outside code spans), and every link or image the report's own: a `](` whose
// target is a plain file name.
// csv_problem: the CSV text reads back (RFC 4180) as exactly the rows given, each cell as given
// or with one leading apostrophe, and no cell read back starts like a formula unless it is a
// plain number.
#pragma once

#include <cctype>
#include <string>
#include <vector>

namespace dlhost::report::checks {

// [+-] digits [. digits] [e [+-] digits], with a digit before or after the point.
inline bool plain_number_text(const std::string& s) {
  size_t i = 0;
  auto digits = [&] {
    size_t from = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return i > from;
  };
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  bool whole = digits(), fraction = false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    fraction = digits();
  }
  if (!whole && !fraction) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// Empty when inert; else the first line that is not, and why.
inline std::string gnuplot_script_problem(const std::string& script) {
  for (unsigned char c : script)
    if ((c < 0x20 && c != '\n') || c == 0x7F) return "a control character in the script";
  std::string marker;  // inside a data block: the line that ends it
  const std::vector<std::string> lines = split_lines(script);
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string& line = lines[n];
    const std::string at = "line " + std::to_string(n + 1) + " (" + line.substr(0, 80) + "): ";
    if (!marker.empty()) {
      if (line == marker) {
        marker.clear();
        continue;
      }
      size_t start = 0;
      while (start <= line.size()) {
        size_t end = line.find(' ', start);
        if (end == std::string::npos) end = line.size();
        if (!plain_number_text(line.substr(start, end - start)))
          return at + "a data-block line that is not numbers";
        start = end + 1;
      }
      continue;
    }
    if (line.empty()) continue;
    // The code outside literals, each literal replaced by L; the literals kept.
    std::string code;
    std::vector<std::string> literals;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] != '\'') {
        code += line[i];
        continue;
      }
      std::string text;
      bool closed = false;
      for (++i; i < line.size(); ++i) {
        if (line[i] == '\'' && i + 1 < line.size() && line[i + 1] == '\'') {
          text += '\'';
          ++i;
        } else if (line[i] == '\'') {
          closed = true;
          break;
        } else {
          text += line[i];
        }
      }
      if (!closed) return at + "a literal not closed on its line";
      literals.push_back(text);
      code += 'L';
    }
    if (code.rfind("$", 0) == 0) {  // "$name << MARKER"
      size_t sep = code.find(" << ");
      if (sep == std::string::npos || !literals.empty()) return at + "a bad data-block header";
      for (char c : code.substr(1, sep - 1))
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return at + "a bad block";
      marker = code.substr(sep + 4);
      for (char c : marker)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return at + "a bad marker";
      if (marker.empty()) return at + "an empty marker";
      continue;
    }
    for (char c : code)
      if (!(std::isalnum(static_cast<unsigned char>(c)) ||
            std::string(" _,.:$()[]#+-*/=").find(c) != std::string::npos))
        return at + "a character outside literals that gnuplot could act on: " + std::string(1, c);
    const std::string first = code.substr(0, code.find(' '));
    if (first != "set" && first != "unset" && first != "plot" && first != "replot")
      return at + "a command the report does not write: " + first;
    for (const char* word : {"system", "load", "call", "eval", "print", "shell", "cd", "exit",
                             "save", "pause", "reread", "import", "fit", "do", "while", "if"}) {
      const std::string w(word);
      for (size_t p = code.find(w); p != std::string::npos; p = code.find(w, p + 1)) {
        bool starts = p == 0 || !std::isalnum(static_cast<unsigned char>(code[p - 1]));
        bool ends = p + w.size() == code.size() ||
                    !std::isalnum(static_cast<unsigned char>(code[p + w.size()]));
        if (starts && ends) return at + "the word " + w + " outside literals";
      }
    }
    if (code.rfind("set output", 0) == 0 && code != "set output") {
      if (literals.size() != 1 || code != "set output L")
        return at + "an output that is not a name";
      const std::string& name = literals[0];
      if (name.empty() || name[0] == '.' || name[0] == '-') return at + "a bad output name";
      for (char c : name)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
          return at + "an output name that is not a plain file name: " + name;
    }
    if (first == "plot") {  // every data source is a block or '' (the same block again)
      size_t start = 5, used = 0;
      std::vector<size_t> literal_at;  // which literal each L of the code is
      for (size_t i = 0; i < code.size(); ++i)
        if (code[i] == 'L' && (i == 0 || !std::isalnum(static_cast<unsigned char>(code[i - 1]))) &&
            (i + 1 == code.size() || !std::isalnum(static_cast<unsigned char>(code[i + 1]))))
          literal_at.push_back(i);
      while (start < code.size()) {
        size_t end = code.find(',', start);
        if (end == std::string::npos) end = code.size();
        std::string element = code.substr(start, end - start);
        size_t lead = element.find_first_not_of(' ');
        if (lead == std::string::npos) return at + "an empty plot element";
        size_t pos = start + lead;
        if (code[pos] != '$') {
          while (used < literal_at.size() && literal_at[used] < pos) ++used;
          if (used >= literal_at.size() || literal_at[used] != pos || !literals[used].empty())
            return at + "a plot source that is not a data block";
        }
        start = end + 1;
      }
    }
  }
  if (!marker.empty()) return "a data block that does not end";
  return "";
}

inline bool markdown_punctuation(char c) {
  return c > 0x20 && c < 0x7F && !std::isalnum(static_cast<unsigned char>(c));
}

// Empty when `md` passes (see the top of the file); `headings`: how many the report wrote.
inline std::string markdown_problem(const std::string& md, size_t headings) {
  size_t seen_headings = 0;
  long table_pipes = -1;  // the unescaped '|' of each row of the table being read
  const std::vector<std::string> lines = split_lines(md);
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string& line = lines[n];
    const std::string at = "line " + std::to_string(n + 1) + " (" + line.substr(0, 80) + "): ";
    for (unsigned char c : line)
      if (c < 0x20 || c == 0x7F) return at + "a control character";
    if (line.empty()) {
      table_pipes = -1;
      continue;
    }
    if (line.rfind("# ", 0) == 0 || line.rfind("## ", 0) == 0) ++seen_headings;
    const char first = line[0];
    if (first == ' ' || first == '\t' || first == '>' || first == '<' || first == '=' ||
        first == '[' || line.rfind("~~~", 0) == 0 || line.rfind("```", 0) == 0 ||
        ((first == '-' || first == '+') && line.rfind("---", 0) != 0))
      return at + "a line that opens a block";
    if (first == '#' && line.rfind("# ", 0) != 0 && line.rfind("## ", 0) != 0)
      return at + "a heading the report did not write";
    size_t digits = line.find_first_not_of("0123456789");
    if (digits > 0 && digits != std::string::npos && (line[digits] == '.' || line[digits] == ')'))
      return at + "an ordered list";
    bool code = false;
    long pipes = 0;
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (!code && c == '\\' && i + 1 < line.size() && markdown_punctuation(line[i + 1])) {
        ++i;  // an escaped character is literal
        continue;
      }
      if (c == '`' && first != '|') {
        code = !code;
        continue;
      }
      if (code) continue;
      if (c == '`') return at + "a backtick in a table row";
      if (c == '|') ++pipes;
      if (c == '<' || c == '>') return at + "a raw angle bracket (HTML or an autolink)";
      if (c == '&' && line.compare(i, 4, "&lt;") != 0 && line.compare(i, 4, "&gt;") != 0 &&
          line.compare(i, 5, "&amp;") != 0)
        return at + "an entity of the text's own";
      if (c == ']' && i + 1 < line.size() && line[i + 1] == '(') {
        size_t end = line.find(')', i + 2);
        if (end == std::string::npos) return at + "a link without its end";
        for (size_t j = i + 2; j < end; ++j) {
          const char t = line[j];
          if (!std::isalnum(static_cast<unsigned char>(t)) && t != '_' && t != '-' && t != '.')
            return at + "a link whose target is not a plain file name";
        }
      }
      if (c == '[' && i + 1 < line.size() && line[i + 1] == '^') return at + "a footnote";
    }
    if (code) return at + "a code span that does not end";
    if (first == '|') {
      if (table_pipes >= 0 && pipes != table_pipes) return at + "a table row of another width";
      table_pipes = pipes;
    } else {
      table_pipes = -1;
    }
  }
  if (seen_headings != headings)
    return std::to_string(seen_headings) + " headings where the report wrote " +
           std::to_string(headings);
  return "";
}

// RFC 4180 rows of `text` (every row ended by '\n').
inline std::vector<std::vector<std::string>> read_csv(const std::string& text, bool& ok) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string cell;
  bool quoted = false, was_quoted = false;
  ok = true;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell += c;
      }
    } else if (c == '"') {
      if (!cell.empty() || was_quoted) ok = false;
      quoted = was_quoted = true;
    } else if (c == ',' || c == '\n') {
      row.push_back(cell);
      cell.clear();
      was_quoted = false;
      if (c == '\n') {
        rows.push_back(row);
        row.clear();
      }
    } else {
      if (was_quoted) ok = false;
      cell += c;
    }
  }
  if (quoted || !cell.empty() || !row.empty()) ok = false;
  return rows;
}

inline bool formula_like(const std::string& cell) {
  return !cell.empty() && std::string("=+-@\t\r").find(cell[0]) != std::string::npos &&
         !plain_number_text(cell);
}

// Empty when the CSV text holds exactly `rows` (a cell may gain one leading apostrophe) and no
// cell that reads back looks like a formula.
inline std::string csv_problem(const std::vector<std::vector<std::string>>& rows,
                               const std::string& text) {
  bool ok = false;
  auto back = read_csv(text, ok);
  if (!ok) return "the CSV does not parse";
  if (back.size() != rows.size()) return "the CSV has another number of rows";
  for (size_t r = 0; r < rows.size(); ++r) {
    if (back[r].size() != rows[r].size()) return "row " + std::to_string(r) + ": other cell count";
    for (size_t c = 0; c < rows[r].size(); ++c) {
      const std::string& given = rows[r][c];
      const std::string& read = back[r][c];
      if (read != given && read != "'" + given)
        return "row " + std::to_string(r) + ": a cell changed beyond the apostrophe";
      if (formula_like(read)) return "row " + std::to_string(r) + ": a formula-like cell: " + read;
      if (read != given && !formula_like(given))
        return "row " + std::to_string(r) + ": a harmless cell was changed: " + given;
    }
  }
  return "";
}

}  // namespace dlhost::report::checks
