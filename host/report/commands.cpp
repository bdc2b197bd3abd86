// commands.cpp — see commands.h. Options live in shared_ptrs owned by the run functions, which
// CLI11 fills while parsing.
#include "report/commands.h"

#include <fstream>
#include <iostream>

#include "report/compare.h"
#include "report/export.h"
#include "report/plots.h"
#include "report/report.h"

namespace dlhost::report {

namespace {

Command add_report(CLI::App& app) {
  auto o = std::make_shared<ReportOptions>();
  auto no_plots = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand(
      "report",
      "Tables and plots of results files (and comm-bench JSON files): report.md and a "
      "self-contained report.html");
  sub->add_option("inputs", o->inputs, "Results files (JSON lines) and comm-bench --json files")
      ->required();
  sub->add_option("-o,--output", o->folder, "Folder to write the report into")->required();
  sub->add_option("--gnuplot", o->gnuplot, "gnuplot program (name on PATH or path)")
      ->capture_default_str();
  sub->add_flag("--no-plots", *no_plots, "Tables only, no gnuplot");
  return {sub, {}, [o, no_plots] {
            if (*no_plots) o->gnuplot.clear();
            try {
              Document doc = write_report(*o);
              std::cout << "report: " << o->folder << "/report.md, " << o->folder
                        << "/report.html\n";
              return 0;
            } catch (const std::exception& e) {
              std::cerr << "dlhost report: " << e.what() << "\n";
              return 2;
            }
          }};
}

Command add_export(CLI::App& app) {
  auto input = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  auto csv = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("export", "A results file as CSV: one row per case, flat columns");
  sub->add_option("results", *input, "Results file (JSON lines)")->required();
  sub->add_flag("--csv", *csv, "CSV (the only format for now)")->required();
  sub->add_option("-o,--output", *output, "Write here instead of standard output");
  return {sub, {}, [input, output, csv] {  // csv kept alive: --csv writes it while parsing
            Inputs in;
            try {
              read_results_file(*input, in);
            } catch (const InputError& e) {
              std::cerr << "dlhost export: " << e.what() << "\n";
              return 2;
            }
            for (const auto& w : in.warnings) std::cerr << "dlhost export: warning: " << w << "\n";
            auto rows = export_rows(in.records);
            try {
              write_csv(output->empty() ? "/dev/stdout" : *output, rows);
            } catch (const std::exception& e) {
              std::cerr << "dlhost export: " << e.what() << "\n";
              return 2;
            }
            return 0;
          }};
}

Command add_compare(CLI::App& app) {
  auto o = std::make_shared<CompareOptions>();
  auto* sub = app.add_subcommand(
      "compare",
      "Compare two results files case by case: ratio of medians with an interval, "
      "Mann-Whitney U test, geometric mean, regressions");
  sub->add_option("base", o->base, "Baseline results file")->required();
  sub->add_option("new", o->candidate, "Results file to judge against it")->required();
  sub->add_option("--alpha", o->alpha, "Significance level of the U test")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--threshold", o->threshold,
                  "Relative slow-down that counts as a regression (0.05 = 5%)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10.0));
  sub->add_flag("--fail-on-regression", o->fail_on_regression,
                "Exit 1 (for CI) when a case is significantly slower beyond the threshold, when a "
                "case OK in BASE is not OK in NEW, or when NEW holds no case comparable with BASE");
  sub->add_flag("--include-changed-params", o->include_changed_params,
                "Judge cases whose parameters differ between the files (params_hash) too; by "
                "default their rows say so and they are left out of the verdict");
  auto pair = std::make_shared<std::string>();
  sub->add_option("--backends", *pair,
                  "BASE,NEW: compare backend BASE's cases in the base file with backend NEW's in "
                  "the new one (the same file may be given twice), paired by network, batch and "
                  "threads")
      ->check([](const std::string& v) {
        const auto comma = v.find(',');
        return comma == std::string::npos || comma == 0 || comma + 1 == v.size()
                   ? "expected BASE,NEW (two backend names), got '" + v + "'"
                   : std::string();
      });
  return {sub, {}, [o, pair] {
            std::pair<std::string, std::string> backends;
            if (!pair->empty()) {
              const auto comma = pair->find(',');
              backends = {pair->substr(0, comma), pair->substr(comma + 1)};
            }
            return run_compare(*o, std::cout, std::cerr, backends);
          }};
}

}  // namespace

Commands add_commands(CLI::App& app) {
  Commands c;
  c.add(add_report(app));
  c.add(add_export(app));
  c.add(add_compare(app));
  return c;
}

}  // namespace dlhost::report
