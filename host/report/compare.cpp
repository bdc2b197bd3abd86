// compare.cpp — see compare.h.
#include "report/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace dlhost::report {

namespace {

// The later record of a case id stands, as in a file extended by --resume.
std::map<std::string, const Record*> by_case(const std::vector<Record>& records,
                                             std::vector<std::string>& order) {
  std::map<std::string, const Record*> out;
  for (const auto& r : records) {
    if (!out.count(case_id(r))) order.push_back(case_id(r));
    out[case_id(r)] = &r;
  }
  return out;
}

// Every environment field's values over a file's records, as "field" -> {values}.
std::map<std::string, std::set<std::string>> environment_values(const std::vector<Record>& rs) {
  std::map<std::string, std::set<std::string>> out;
  for (const auto& r : rs) {
    if (!r.data.contains("environment") || !r.data["environment"].is_object()) continue;
    for (const auto& [k, v] : r.data["environment"].items()) {
      if (v.is_object()) {
        for (const auto& [sub, sv] : v.items())
          out[k + "." + sub].insert(sv.is_string() ? sv.get<std::string>() : sv.dump());
      } else {
        out[k].insert(v.is_string() ? v.get<std::string>() : v.dump());
      }
    }
  }
  return out;
}

std::string joined(const std::set<std::string>& values) {
  if (values.empty()) return "(absent)";
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : " / ") + v;
  return out;
}

CaseComparison compare_case(const Record& base, const Record& candidate, double alpha,
                            double threshold) {
  CaseComparison c;
  c.case_id = case_id(base);
  std::vector<double> x = numbers_at(base.data, "/timing/samples/step");
  std::vector<double> y = numbers_at(candidate.data, "/timing/samples/step");
  c.base_n = x.size();
  c.new_n = y.size();
  c.base_median = median(x);
  c.new_median = median(y);
  c.ratio = c.new_median / c.base_median;
  c.interval = bootstrap_ratio_of_medians(x, y, alpha);
  c.test = mann_whitney_u(x, y);
  c.significant = c.test.p < alpha;
  if (!c.significant)
    c.verdict = "same";
  else if (c.ratio > 1 + threshold)
    c.verdict = "REGRESSION";
  else if (c.ratio < 1 - threshold)
    c.verdict = "faster";
  else
    c.verdict = "within threshold";
  return c;
}

}  // namespace

std::vector<Record> cases_of_backend(const std::vector<Record>& records, const std::string& name,
                                     const std::string& file) {
  std::vector<Record> out;
  for (const auto& r : records) {
    if (backend(r) != name) continue;
    Record paired = r;
    std::string id, segment;
    const std::string whole = case_id(r) + ".";
    for (char ch : whole) {
      if (ch != '.') {
        segment += ch;
        continue;
      }
      if (segment != name) id += (id.empty() ? "" : ".") + segment;
      segment.clear();
    }
    paired.data["case_id"] = id;
    out.push_back(std::move(paired));
  }
  if (out.empty()) throw InputError(file + ": no record of backend " + name);
  return out;
}

Comparison compare_records(const std::vector<Record>& base, const std::vector<Record>& candidate,
                           double alpha, double threshold) {
  Comparison out;
  out.alpha = alpha;
  out.threshold = threshold;
  std::vector<std::string> base_order, new_order;
  auto b = by_case(base, base_order);
  auto n = by_case(candidate, new_order);
  std::vector<double> ratios;
  for (const auto& id : base_order) {
    if (!n.count(id)) {
      out.only_in_base.push_back(id);
      continue;
    }
    const Record& rb = *b[id];
    const Record& rn = *n[id];
    bool samples = !numbers_at(rb.data, "/timing/samples/step").empty() &&
                   !numbers_at(rn.data, "/timing/samples/step").empty();
    if (!is_ok(rb) || !is_ok(rn) || !samples) {
      out.not_compared.push_back(id + ": base " + status(rb) + ", new " + status(rn) +
                                 (is_ok(rn) || text_at(rn.data, "/reason").empty()
                                      ? ""
                                      : " (" + text_at(rn.data, "/reason") + ")"));
      continue;
    }
    out.cases.push_back(compare_case(rb, rn, alpha, threshold));
    const auto& c = out.cases.back();
    if (c.ratio > 0 && std::isfinite(c.ratio)) ratios.push_back(c.ratio);
    if (c.verdict == "REGRESSION") ++out.regressions;
    out.smallest_possible_p =
        std::max(out.smallest_possible_p, smallest_u_test_p(c.base_n, c.new_n));
  }
  for (const auto& id : new_order)
    if (!b.count(id)) out.only_in_new.push_back(id);
  out.geometric_mean_ratio = geometric_mean(ratios);
  auto eb = environment_values(base), en = environment_values(candidate);
  std::set<std::string> fields;
  for (const auto& [k, v] : eb) fields.insert(k);
  for (const auto& [k, v] : en) fields.insert(k);
  for (const auto& f : fields)
    if (eb[f] != en[f])
      out.environment_differences.push_back(f + ": base " + joined(eb[f]) + ", new " +
                                            joined(en[f]));
  return out;
}

void print_comparison(const Comparison& c, const std::string& base_name,
                      const std::string& new_name, std::ostream& out) {
  char line[512];
  int confidence = static_cast<int>(std::lround(100 * (1 - c.alpha)));
  out << "base: " << base_name << "\nnew:  " << new_name << "\n"
      << "ratio = median new / median base of the time per mini-batch (above 1: slower); "
      << confidence << "% interval: percentile bootstrap of the ratio of medians (2000 "
      << "resamples, fixed seed); p: two-sided Mann-Whitney U test on the per-iteration times "
      << "(exact without ties for a sample of <= 8, else normal approximation with tie "
      << "correction), significant when p < " << c.alpha << "; threshold " << 100 * c.threshold
      << "%\n\n";
  std::snprintf(line, sizeof(line), "%-44s %10s %10s %7s %19s %7s %7s %8s  %s\n", "case", "base ms",
                "new ms", "ratio", "interval", "n", "U", "p", "verdict");
  out << line;
  for (const auto& k : c.cases) {
    char interval[64], n[32];
    std::snprintf(interval, sizeof(interval), "[%.3f, %.3f]", k.interval.low, k.interval.high);
    std::snprintf(n, sizeof(n), "%zu/%zu", k.base_n, k.new_n);
    std::snprintf(line, sizeof(line), "%-44s %10.3f %10.3f %7.3f %19s %7s %7.1f %8.4f  %s\n",
                  k.case_id.c_str(), k.base_median, k.new_median, k.ratio, interval, n, k.test.u,
                  k.test.p, k.verdict.c_str());
    out << line;
  }
  if (c.cases.empty()) out << "(no case is OK in both files)\n";
  std::snprintf(line, sizeof(line), "\ngeometric mean of the ratios over %zu case(s): %.4f\n",
                c.cases.size(), c.geometric_mean_ratio);
  out << line;
  out << "significant regressions beyond " << 100 * c.threshold << "%: " << c.regressions << "\n";
  if (!c.cases.empty() && c.smallest_possible_p >= c.alpha)
    out << "note: with this few iterations the U test cannot reach p < " << c.alpha
        << " (the smallest possible p is " << c.smallest_possible_p
        << "); run more iterations (9 or more per case) to tell a change from noise\n";
  auto list = [&](const char* title, const std::vector<std::string>& items) {
    if (items.empty()) return;
    out << title << " (" << items.size() << "):\n";
    for (const auto& i : items) out << "  " << i << "\n";
  };
  list("only in base", c.only_in_base);
  list("only in new", c.only_in_new);
  list("in both, not compared (not OK in both, or no samples)", c.not_compared);
  list("environment differences", c.environment_differences);
}

int run_compare(const CompareOptions& o, std::ostream& out, std::ostream& err,
                const std::pair<std::string, std::string>& backends) {
  Inputs base, candidate;
  try {
    read_results_file(o.base, base);
    read_results_file(o.candidate, candidate);
  } catch (const InputError& e) {
    err << "dlhost compare: " << e.what() << "\n";
    return 2;
  }
  for (const auto& w : base.warnings) err << "dlhost compare: warning: " << w << "\n";
  for (const auto& w : candidate.warnings) err << "dlhost compare: warning: " << w << "\n";
  std::string base_name = o.base, new_name = o.candidate;
  if (!backends.first.empty()) {
    try {
      base.records = cases_of_backend(base.records, backends.first, o.base);
      candidate.records = cases_of_backend(candidate.records, backends.second, o.candidate);
    } catch (const InputError& e) {
      err << "dlhost compare: " << e.what() << "\n";
      return 2;
    }
    base_name += " (backend " + backends.first + ")";
    new_name += " (backend " + backends.second + ")";
  }
  Comparison c = compare_records(base.records, candidate.records, o.alpha, o.threshold);
  print_comparison(c, base_name, new_name, out);
  return o.fail_on_regression && c.regressions > 0 ? 1 : 0;
}

}  // namespace dlhost::report
