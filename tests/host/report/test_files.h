// test_files.h — the report tests' scratch files: a fresh folder under the build's test output,
// a whole file read back. Header-only.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace dlhost::report::test {

// DLHOST_REPORT_TEST_OUT/name, emptied and created.
inline std::string fresh_folder(const std::string& name) {
  std::string folder = std::string(DLHOST_REPORT_TEST_OUT) + "/" + name;
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  return folder;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace dlhost::report::test
