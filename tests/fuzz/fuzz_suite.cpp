// fuzz_suite.cpp — libFuzzer target: suite parsing and matrix expansion on arbitrary text.
// The loader's contract is that bad input yields one SuiteError; any other exception, a crash,
// a hang or a sanitizer report is a bug. Expanded cases are checked for unique, well-formed ids.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "suite/suite.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const dlhost::SuiteCatalog catalog{
      {"lenet", "fcn5", "resnet56"}, {"cpu_onednn", "cpu_reference"}, {"mpi"}};
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    dlhost::Suite suite = dlhost::load_suite_text(text, "fuzz.yaml", catalog, 2);
    std::set<std::string> ids;
    for (const auto& c : suite.cases) {
      if (c.id.empty() || !ids.insert(c.id).second) __builtin_trap();
      for (char ch : c.id)
        if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '=' ||
              ch == '-'))
          __builtin_trap();
      if (!c.params.contains("network")) __builtin_trap();
    }
  } catch (const dlhost::SuiteError&) {
  }
  return 0;
}
