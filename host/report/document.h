// document.h — a report as data: sections of paragraphs, tables and plots, rendered to Markdown
// and to one self-contained HTML page (plots inlined as base64 PNG, no network). The views
// (views.h) fill a Document; they never format Markdown or HTML themselves.
#pragma once

#include <string>
#include <vector>

namespace dlhost::report {

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  // Columns at or after this index are numbers (right-aligned).
  size_t first_numeric_column = 1;
};

// A plot's files, relative to the report folder. png/svg are empty when it was not rendered.
struct PlotFiles {
  std::string title;
  std::string csv, png, svg;
};

struct Block {
  enum Kind { kParagraph, kTable, kPlot } kind = kParagraph;
  std::string text;  // kParagraph (plain text; `code` spans allowed)
  Table table;
  PlotFiles plot;
};

struct Section {
  std::string title;
  std::vector<Block> blocks;
  void paragraph(std::string text) {
    blocks.push_back(Block{Block::kParagraph, std::move(text), {}, {}});
  }
  void add(Table t) { blocks.push_back(Block{Block::kTable, {}, std::move(t), {}}); }
  void add(PlotFiles p) { blocks.push_back(Block{Block::kPlot, {}, {}, std::move(p)}); }
};

struct Document {
  std::string title;
  std::vector<Section> sections;
};

std::string to_markdown(const Document& doc);
// `folder` is where the plot files are; their PNGs are read and inlined.
std::string to_html(const Document& doc, const std::string& folder);

std::string base64(const std::string& bytes);

// `text` if it has at most `max_bytes` bytes; else its start, cut on a UTF-8 character boundary,
// and a note: " [cut: N bytes in all; the whole text is in WHERE]" (WHERE: FILE:LINE of the
// record, left out when empty). A record's 50 MB reason must not be copied into every report.
std::string cut_text(const std::string& text, size_t max_bytes, const std::string& where = "");
// The most of one table cell or paragraph the renderers copy (the rest is cut with a note).
constexpr size_t kMaxCellBytes = 4096;

}  // namespace dlhost::report
