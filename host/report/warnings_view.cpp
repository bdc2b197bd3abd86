// warnings_view.cpp — the report's "Warnings" section: every warning `dlhost run` stored in a
// record (spread, CPU governor, build type, threads against cores, other load; docs/report.md),
// one row per warning with its case and FILE:LINE. Records written before warnings existed have
// no `warnings` array and are counted, not guessed at.
#include "report/views.h"

namespace dlhost::report {

Section warnings_view(const std::vector<Record>& records) {
  Section s{"Warnings", {}};
  Table t{{"case", "warning", "message", "record"}, {}, 99};
  int without = 0;
  for (const auto& r : records) {
    const std::optional<record::Warnings> warnings = record::read_warnings(r.data);
    if (!warnings) {
      ++without;
      continue;
    }
    for (const record::Warning& w : *warnings)
      t.rows.push_back({case_id(r), w.code.empty() ? "?" : w.code, w.message, r.where()});
  }
  if (t.rows.empty()) {
    s.paragraph("No record carries a warning.");
  } else {
    s.paragraph(std::to_string(t.rows.size()) +
                " warning(s): measurements that may not mean what they seem.");
    s.add(t);
  }
  if (without > 0)
    s.paragraph(std::to_string(without) +
                " record(s) have no warnings field (written by a dlhost before warnings).");
  return s;
}

}  // namespace dlhost::report
