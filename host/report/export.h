// export.h — `dlhost export --csv`: one row per case record, flat named columns, for
// spreadsheets and pandas. Raw per-iteration samples are left out (they stay in the JSON).
#pragma once

#include <string>
#include <vector>

#include "report/records.h"

namespace dlhost::report {

std::vector<std::string> export_columns();
// The header row, then one row per record, in input order.
std::vector<std::vector<std::string>> export_rows(const std::vector<Record>& records);

}  // namespace dlhost::report
