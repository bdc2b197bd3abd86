// plugin_trust.cpp — see plugin_trust.h.
#include "core/plugin_trust.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "output/output_file.h"

namespace dlhost {

namespace {

namespace fs = std::filesystem;

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Why `what` (the plugin file, or the folder it is in) could hold code another user wrote, or "".
std::string writable_by_others(const std::string& what, const struct stat& st) {
  const uid_t me = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != me)
    return what + " is owned by " + output::user_text(st.st_uid) +
           ", neither root nor you: its owner can put code in it";
  if ((st.st_mode & S_IWOTH) != 0)
    return what + " is world-writable (mode " + mode_text(st.st_mode) +
           "): anyone can put code in it";
  if ((st.st_mode & S_IWGRP) != 0)
    return what + " is group-writable (mode " + mode_text(st.st_mode) + ", group " +
           std::to_string(st.st_gid) + "): any member of the group can put code in it";
  return "";
}

}  // namespace

std::string plugin_trust_refusal(const std::string& path) {
  if (const char* allow = std::getenv(kAllowUnsafePluginPathsEnv);
      allow != nullptr && std::strcmp(allow, "1") == 0)
    return "";
  struct stat file {};
  if (::stat(path.c_str(), &file) != 0) return "";
  std::error_code ec;
  const fs::path named(path);
  std::vector<std::pair<std::string, fs::path>> folders{
      {"its folder", named.has_parent_path() ? named.parent_path() : fs::path(".")}};
  const fs::path real = fs::canonical(named, ec);
  if (!ec && real.parent_path() != fs::weakly_canonical(folders[0].second, ec))
    folders.push_back({"the folder it links into", real.parent_path()});
  std::string why = writable_by_others("the file", file);
  for (const auto& [what, folder] : folders) {
    if (!why.empty()) break;
    struct stat st {};
    if (::stat(folder.c_str(), &st) == 0)
      why = writable_by_others(what + " " + folder.string(), st);
  }
  if (why.empty()) return "";
  return "not loaded: " + why +
         ", and loading a plugin runs its code. Make it writable only by root or you (chmod "
         "go-w; chown), or set " +
         kAllowUnsafePluginPathsEnv + "=1 (--allow-unsafe-plugin-paths) to load it anyway";
}

}  // namespace dlhost
