// compare.cpp — see compare.h.
#include "report/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "report/document.h"

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

std::string fixed(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

bool no_spread(const std::vector<double>& xs) {
  return std::adjacent_find(xs.begin(), xs.end(), std::not_equal_to<>()) == xs.end();
}

// What differs between two records' params: "lr 0.01 -> 0.1, seed 1 -> 2"; or the two hashes
// when the params shown agree (the hash covers what the params block leaves out).
std::string params_difference(const Record& base, const Record& candidate) {
  const json empty = json::object();
  const json& a =
      base.data.contains("params") && base.data["params"].is_object() ? base.data["params"] : empty;
  const json& b = candidate.data.contains("params") && candidate.data["params"].is_object()
                      ? candidate.data["params"]
                      : empty;
  std::set<std::string> keys;
  for (const auto& [k, v] : a.items()) keys.insert(k);
  for (const auto& [k, v] : b.items()) keys.insert(k);
  std::string out;
  for (const auto& k : keys) {
    std::string va = a.contains(k) ? a[k].dump() : "(absent)";
    std::string vb = b.contains(k) ? b[k].dump() : "(absent)";
    if (va != vb) out += (out.empty() ? "" : ", ") + k + " " + va + " -> " + vb;
  }
  if (out.empty())
    out = "params_hash " + text_at(base.data, "/params_hash", "(absent)") + " -> " +
          text_at(candidate.data, "/params_hash", "(absent)");
  return cut_text(out, 300);
}

// The verdict of one row from its samples. A row the U test cannot decide is "inconclusive",
// with the reason, rather than "same": "same" claims the change is within the threshold.
CaseComparison compare_case(const Record& base, const Record& candidate, double alpha,
                            double threshold) {
  CaseComparison c;
  c.case_id = case_id(base);
  std::vector<double> x = record::step_samples(base);
  std::vector<double> y = record::step_samples(candidate);
  c.base_n = x.size();
  c.new_n = y.size();
  c.base_median = median(x);
  c.new_median = median(y);
  c.interval = bootstrap_ratio_of_medians(x, y, alpha);
  c.test = mann_whitney_u(x, y);
  if (!(c.base_median > 0) || !(c.new_median > 0)) {
    // A median of 0 ms is a timer that measured nothing: no ratio to judge or average.
    c.ratio = std::numeric_limits<double>::quiet_NaN();
    c.verdict = "inconclusive";
    c.reason = std::string("median of 0 ms in ") +
               (c.base_median > 0  ? "new"
                : c.new_median > 0 ? "base"
                                   : "both") +
               ": no ratio";
    return c;
  }
  c.ratio = c.new_median / c.base_median;
  const double floor_p = smallest_u_test_p(c.base_n, c.new_n);
  if (floor_p >= alpha) {
    // The exact test cannot reach alpha at these n; the normal approximation (used with ties)
    // could still say p < alpha, wrongly.
    c.verdict = "inconclusive";
    c.reason = "n = " + std::to_string(c.base_n) + "/" + std::to_string(c.new_n) +
               ": the U test cannot reach p < " + fixed("%g", alpha) +
               " (the smallest possible p is " + fixed("%.3g", floor_p) +
               "); run more iterations (9 or more per case)";
  } else if ((c.significant = c.test.p < alpha)) {
    c.verdict = c.ratio > 1 + threshold   ? "REGRESSION"
                : c.ratio < 1 - threshold ? "faster"
                                          : "within threshold";
    return c;
  } else if (c.interval.low >= 1 - threshold && c.interval.high <= 1 + threshold) {
    c.verdict = "same";
    return c;
  } else {
    c.verdict = "inconclusive";
    c.reason = "p = " + fixed("%.3g", c.test.p) + " >= " + fixed("%g", alpha) +
               ", but the interval reaches beyond the threshold of " +
               fixed("%g", 100 * threshold) + "%";
  }
  // Every time equal: ties the rank test can only weigh as ties (one value has no spread to show).
  const bool flat_x = x.size() > 1 && no_spread(x), flat_y = y.size() > 1 && no_spread(y);
  if (flat_x && flat_y)
    c.reason += "; neither sample has any spread";
  else if (flat_x || flat_y)
    c.reason += flat_x ? "; the base sample has no spread" : "; the new sample has no spread";
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
    // The backend is what is compared here, so it is not a parameter that differs: the pair's
    // params are compared without it (a canonical dump stands in for the hash on both sides).
    if (paired.data.contains("params") && paired.data["params"].is_object()) {
      paired.data["params"].erase("backend");
      paired.data["params_hash"] = "without-backend:" + paired.data["params"].dump();
    }
    out.push_back(std::move(paired));
  }
  if (out.empty()) throw InputError(file + ": no record of backend " + name);
  return out;
}

Comparison compare_records(const std::vector<Record>& base, const std::vector<Record>& candidate,
                           double alpha, double threshold, bool include_changed_params) {
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
    const bool base_samples = !record::step_samples(rb).empty();
    const bool new_samples = !record::step_samples(rn).empty();
    if (!is_ok(rb) || !is_ok(rn) || !base_samples || !new_samples) {
      const std::string why =
          id + ": base " + status(rb) + (is_ok(rb) && !base_samples ? " (no samples)" : "") +
          ", new " + status(rn) + (is_ok(rn) && !new_samples ? " (no samples)" : "") +
          (is_ok(rn) || text_at(rn.data, "/reason").empty()
               ? ""
               : " (" + cut_text(text_at(rn.data, "/reason"), 300, rn.where()) + ")");
      (is_ok(rb) && base_samples ? out.broken : out.not_compared).push_back(why);
      continue;
    }
    CaseComparison c = compare_case(rb, rn, alpha, threshold);
    if (text_at(rb.data, "/params_hash") != text_at(rn.data, "/params_hash")) {
      c.params_differ = true;
      ++out.params_differ;
      const std::string what = params_difference(rb, rn);
      if (include_changed_params) {
        c.reason = "params differ: " + what + (c.reason.empty() ? "" : "; " + c.reason);
      } else {
        c.judged = false;
        c.verdict = "params differ";
        c.reason = what + "; not judged (--include-changed-params judges it)";
      }
    }
    if (c.judged) {
      ++out.judged;
      if (c.ratio > 0 && std::isfinite(c.ratio)) ratios.push_back(c.ratio);
      if (c.verdict == "REGRESSION") ++out.regressions;
      if (c.verdict == "inconclusive") ++out.inconclusive;
    }
    out.cases.push_back(c);
  }
  for (const auto& id : new_order)
    if (!b.count(id)) out.only_in_new.push_back(id);
  out.geometric_mean_ratio = geometric_mean(ratios);
  out.geometric_mean_cases = ratios.size();
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

std::vector<std::string> gate_failures(const Comparison& c) {
  std::vector<std::string> out;
  if (c.regressions > 0) out.push_back(std::to_string(c.regressions) + " regression(s)");
  if (!c.broken.empty())
    out.push_back(std::to_string(c.broken.size()) + " case(s) OK in base and not in new");
  if (c.judged == 0) out.push_back("no case of new is comparable with base");
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
      << "%; \"same\": not significant and the whole interval within the threshold; "
      << "\"inconclusive\": the test cannot decide (the reason follows)\n\n";
  std::snprintf(line, sizeof(line), "%-44s %10s %10s %7s %19s %7s %7s %8s  %s\n", "case", "base ms",
                "new ms", "ratio", "interval", "n", "U", "p", "verdict");
  out << line;
  for (const auto& k : c.cases) {
    char interval[64] = "-", ratio[32] = "-", n[32];
    if (std::isfinite(k.ratio)) {  // no ratio (a median of 0): no interval either
      std::snprintf(interval, sizeof(interval), "[%.3f, %.3f]", k.interval.low, k.interval.high);
      std::snprintf(ratio, sizeof(ratio), "%.3f", k.ratio);
    }
    std::snprintf(n, sizeof(n), "%zu/%zu", k.base_n, k.new_n);
    std::snprintf(line, sizeof(line), "%-44s %10.3f %10.3f %7s %19s %7s %7.1f %8.4f  ",
                  printable(k.case_id).c_str(), k.base_median, k.new_median, ratio, interval, n,
                  k.test.u, k.test.p);
    out << line << k.verdict << (k.reason.empty() ? "" : " (" + printable(k.reason) + ")") << "\n";
  }
  if (c.cases.empty()) out << "(no case is OK in both files)\n";
  out << "\n";
  if (c.geometric_mean_cases == 0) {
    out << "geometric mean of the ratios: none (no judged case has a ratio)\n";
  } else {
    std::snprintf(line, sizeof(line), "geometric mean of the ratios over %zu case(s): %.4f",
                  c.geometric_mean_cases, c.geometric_mean_ratio);
    out << line;
    if (c.geometric_mean_cases < c.cases.size())
      out << " (" << c.cases.size() - c.geometric_mean_cases
          << " row(s) left out: not judged, or no ratio)";
    out << "\n";
  }
  out << "significant regressions beyond " << 100 * c.threshold << "%: " << c.regressions << "\n";
  if (c.inconclusive > 0)
    out << "inconclusive: " << c.inconclusive << " (the test could not decide; see each row)\n";
  if (c.params_differ > 0)
    out << "params differ: " << c.params_differ << " row(s) whose case ran with other parameters"
        << (c.judged < c.cases.size() ? " (not judged)" : " (judged: --include-changed-params)")
        << "\n";
  auto list = [&](const char* title, const std::vector<std::string>& items) {
    if (items.empty()) return;
    out << title << " (" << items.size() << "):\n";
    for (const auto& i : items) out << "  " << printable(i) << "\n";
  };
  list("OK in base, not OK in new", c.broken);
  list("only in base", c.only_in_base);
  list("only in new", c.only_in_new);
  list("in both, not compared (not OK in base, or no samples)", c.not_compared);
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
  Comparison c = compare_records(base.records, candidate.records, o.alpha, o.threshold,
                                 o.include_changed_params);
  print_comparison(c, base_name, new_name, out);
  if (!o.fail_on_regression) return 0;
  std::vector<std::string> failures = gate_failures(c);
  if (failures.empty()) {
    out << "fail-on-regression: pass";
    if (c.inconclusive > 0)
      out << " (" << c.inconclusive << " inconclusive row(s) it could not judge)";
    out << "\n";
    return 0;
  }
  out << "fail-on-regression: FAIL:";
  for (size_t i = 0; i < failures.size(); ++i) out << (i ? "; " : " ") << failures[i];
  out << "\n";
  return 1;
}

}  // namespace dlhost::report
