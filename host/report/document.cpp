// document.cpp — see document.h.
#include "report/document.h"

#include <boost/archive/iterators/base64_from_binary.hpp>
#include <boost/archive/iterators/transform_width.hpp>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

namespace dlhost::report {

std::string base64(const std::string& bytes) {
  using namespace boost::archive::iterators;
  using encoder = base64_from_binary<transform_width<std::string::const_iterator, 6, 8>>;
  std::string out(encoder(bytes.begin()), encoder(bytes.end()));
  out.append((3 - bytes.size() % 3) % 3, '=');
  return out;
}

std::string cut_text(const std::string& text, size_t max_bytes, const std::string& where) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;  // mid-char
  return text.substr(0, end) + " [cut: " + std::to_string(text.size()) + " bytes in all" +
         (where.empty() ? "" : "; the whole text is in " + where) + "]";
}

namespace {

bool alphanumeric(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// Every control character a space: the text stays on its line.
std::string one_line(const std::string& s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    out += u < 0x20 || u == 0x7F ? ' ' : c;
  }
  return out;
}

// Text as Markdown that renders as that text, nothing more: one line (a newline would end a
// table row or start a heading, a list or a table of the record's making), and every character
// that Markdown or the HTML inside it acts on made literal: `\ ` * [ ] # | ~ ^` and a `_` at a
// word's edge backslash-escaped (no emphasis, code span, link, image, reference or footnote: GFM
// reads `[^x]` as one), `< > &` as entities
// (no HTML, autolink or entity of the text's own). `opens_block`: the text starts a paragraph or
// a heading, where leading spaces (code), `-`, `+`, `=` or `1.` (lists, rules) would act too.
std::string markdown_text(const std::string& s, bool opens_block) {
  const std::string flat = one_line(s);
  size_t i = 0, list_mark = std::string::npos;
  std::string out;
  if (opens_block) {
    i = flat.find_first_not_of(' ');
    if (i == std::string::npos) return "";
    if (std::string("-+=").find(flat[i]) != std::string::npos) out += '\\';
    const size_t digits = flat.find_first_not_of("0123456789", i);
    if (digits != std::string::npos && digits > i && (flat[digits] == '.' || flat[digits] == ')'))
      list_mark = digits;  // "1." or "1)": an ordered list
  }
  for (; i < flat.size(); ++i) {
    const char c = flat[i];
    const bool inside_word =
        i > 0 && i + 1 < flat.size() && alphanumeric(flat[i - 1]) && alphanumeric(flat[i + 1]);
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (std::string("\\`*[]#|~^").find(c) != std::string::npos || (c == '_' && !inside_word) ||
             i == list_mark)
      out += std::string("\\") + c;
    else
      out += c;
  }
  return out;
}

// A paragraph's text with its `code` spans (split as html_text splits them): a span's content
// is literal between backticks (it holds none, so it cannot end early), the rest markdown_text.
std::string markdown_paragraph(const std::string& s) {
  std::string out;
  size_t start = 0;
  bool code = false;
  while (start <= s.size()) {
    size_t tick = s.find('`', start);
    if (tick == std::string::npos) tick = s.size();
    const std::string part = one_line(s.substr(start, tick - start));
    if (!code)
      out += markdown_text(part, out.empty());
    else if (part.find_first_not_of(' ') != std::string::npos)  // "``" or "` `" is no span
      out += "`" + part + "`";
    code = !code;
    start = tick + 1;
  }
  return out;
}

// A link target the report made (a plot file in the report folder): every byte outside
// [A-Za-z0-9_.-/] percent-encoded, so no scheme, space, parenthesis or angle bracket can act.
std::string markdown_link(const std::string& target) {
  std::string out;
  for (char c : target) {
    if (alphanumeric(c) || std::string("_.-/").find(c) != std::string::npos) {
      out += c;
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", static_cast<unsigned char>(c));
      out += hex;
    }
  }
  return out;
}

// One table row per line, every cell literal text.
std::string markdown_cell(const std::string& s) {
  return markdown_text(cut_text(s, kMaxCellBytes), false);
}

void markdown_table(std::ostringstream& md, const Table& t) {
  md << "|";
  for (const auto& h : t.header) md << " " << markdown_cell(h) << " |";
  md << "\n|";
  for (size_t c = 0; c < t.header.size(); ++c)
    md << (c >= t.first_numeric_column ? "---:|" : "---|");
  md << "\n";
  for (const auto& row : t.rows) {
    md << "|";
    for (const auto& cell : row) md << " " << markdown_cell(cell) << " |";
    md << "\n";
  }
  md << "\n";
}

std::string escape_html(const std::string& s) {
  std::string out;
  for (char c : s) switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  return out;
}

// Paragraph text with `code` spans, as HTML.
std::string html_text(const std::string& s) {
  std::string out;
  bool code = false;
  for (char c : s) {
    if (c == '`') {
      out += code ? "</code>" : "<code>";
      code = !code;
    } else {
      out += escape_html(std::string(1, c));
    }
  }
  if (code) out += "</code>";
  return out;
}

void html_table(std::ostringstream& html, const Table& t) {
  html << "<table>\n<tr>";
  for (const auto& h : t.header) html << "<th>" << escape_html(h) << "</th>";
  html << "</tr>\n";
  for (const auto& row : t.rows) {
    html << "<tr>";
    for (size_t c = 0; c < row.size(); ++c)
      html << (c >= t.first_numeric_column ? "<td class=\"n\">" : "<td>")
           << escape_html(cut_text(row[c], kMaxCellBytes)) << "</td>";
    html << "</tr>\n";
  }
  html << "</table>\n";
}

void html_plot(std::ostringstream& html, const PlotFiles& p, const std::string& folder) {
  html << "<figure>";
  std::ifstream png(folder + "/" + p.png, std::ios::binary);
  if (!p.png.empty() && png) {
    std::string bytes((std::istreambuf_iterator<char>(png)), std::istreambuf_iterator<char>());
    html << "<img alt=\"" << escape_html(p.title) << "\" src=\"data:image/png;base64,"
         << base64(bytes) << "\">";
  }
  html << "<figcaption>" << escape_html(p.title) << " (data: " << escape_html(p.csv)
       << (p.svg.empty() ? "" : ", vector: " + escape_html(p.svg)) << ")</figcaption></figure>\n";
}

const char* kStyle =
    "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em}"
    "th,td{border:1px solid #bbb;padding:.2em .5em}th{background:#eee}td.n{text-align:right;"
    "font-variant-numeric:tabular-nums}code{background:#f3f3f3}figure{margin:1em 0}"
    "img{max-width:100%}figcaption{font-size:.85em;color:#555}";

}  // namespace

std::string to_markdown(const Document& doc) {
  std::ostringstream md;
  md << "# " << markdown_text(doc.title, true) << "\n\n";
  for (const auto& s : doc.sections) {
    md << "## " << markdown_text(s.title, true) << "\n\n";
    for (const auto& b : s.blocks) {
      if (b.kind == Block::kParagraph)
        md << markdown_paragraph(cut_text(b.text, kMaxCellBytes)) << "\n\n";
      if (b.kind == Block::kTable) markdown_table(md, b.table);
      if (b.kind == Block::kPlot) {
        const std::string title = markdown_text(cut_text(b.plot.title, kMaxCellBytes), false);
        if (!b.plot.png.empty())
          md << "![" << title << "](" << markdown_link(b.plot.png) << ")\n\n";
        md << "*" << title << "* — data: [" << markdown_text(b.plot.csv, false) << "]("
           << markdown_link(b.plot.csv) << ")";
        if (!b.plot.svg.empty())
          md << ", vector: [" << markdown_text(b.plot.svg, false) << "]("
             << markdown_link(b.plot.svg) << ")";
        md << "\n\n";
      }
    }
  }
  return md.str();
}

std::string to_html(const Document& doc, const std::string& folder) {
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>"
       << escape_html(doc.title) << "</title><style>" << kStyle << "</style></head><body>\n<h1>"
       << escape_html(doc.title) << "</h1>\n";
  for (const auto& s : doc.sections) {
    html << "<h2>" << escape_html(s.title) << "</h2>\n";
    for (const auto& b : s.blocks) {
      if (b.kind == Block::kParagraph)
        html << "<p>" << html_text(cut_text(b.text, kMaxCellBytes)) << "</p>\n";
      if (b.kind == Block::kTable) html_table(html, b.table);
      if (b.kind == Block::kPlot) html_plot(html, b.plot, folder);
    }
  }
  html << "</body></html>\n";
  return html.str();
}

}  // namespace dlhost::report
