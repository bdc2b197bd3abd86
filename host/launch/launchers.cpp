// launchers.cpp — see launchers.h: the registry (one table of makers) and what every launcher
// shares (the forwarded variables, the PATH probe, the store's default address, the roles' check).
#include "launch/launchers.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <stdexcept>

namespace dlhost {

namespace {

// The registration table: one line per launcher, in the order of the suite key's choices (the
// first is the key's default).
std::vector<std::unique_ptr<Launcher>> make_all() {
  std::vector<std::unique_ptr<Launcher>> all;
  all.push_back(make_mpirun_launcher());
  all.push_back(make_srun_launcher());
  all.push_back(make_local_launcher());
  return all;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

const std::vector<std::string>& forwarded_variables() {
  static const std::vector<std::string> kNames{"DLHOST_LOG_LEVEL", "DLHOST_PLUGIN_PATH",
                                               "DLHOST_DUMP_PARAMS_DIR", "OMP_WAIT_POLICY",
                                               "DLHOST_PROGRESS"};
  return kNames;
}

StoreEndpoint Launcher::store_endpoint(const char* override_address, bool other_hosts,
                                       const std::vector<std::string>& launcher_args) const {
  return choose_store_endpoint(override_address, other_hosts, launcher_args);
}

const std::vector<const Launcher*>& launchers() {
  static const std::vector<std::unique_ptr<Launcher>> kOwned = make_all();
  static const std::vector<const Launcher*> kAll = [] {
    std::vector<const Launcher*> all;
    std::set<std::string> seen;
    for (const auto& l : kOwned) {
      // A programming error in the table, caught by the registry's test before anyone runs it.
      if (!seen.insert(l->name()).second)
        throw std::logic_error("launcher '" + l->name() + "' is registered twice");
      all.push_back(l.get());
    }
    return all;
  }();
  return kAll;
}

std::vector<std::string> launcher_names() {
  std::vector<std::string> names;
  for (const Launcher* l : launchers()) names.push_back(l->name());
  return names;
}

const Launcher* find_launcher(const std::string& name) {
  for (const Launcher* l : launchers())
    if (l->name() == name) return l;
  return nullptr;
}

const Launcher& launcher_named(const std::string& name) {
  if (const Launcher* l = find_launcher(name)) return *l;
  throw std::invalid_argument("unknown launcher '" + name +
                              "' (known: " + joined(launcher_names()) + ")");
}

std::string program_unavailable(const std::string& program, const std::string& hint) {
  auto runnable = [](const std::string& path) { return access(path.c_str(), X_OK) == 0; };
  if (program.find('/') != std::string::npos) {
    if (runnable(program)) return "";
  } else if (const char* path = std::getenv("PATH")) {
    std::string dirs = path;
    for (size_t pos = 0; pos <= dirs.size();) {
      size_t end = dirs.find(':', pos);
      if (end == std::string::npos) end = dirs.size();
      std::string dir = dirs.substr(pos, end - pos);
      if (runnable((dir.empty() ? "." : dir) + "/" + program)) return "";
      pos = end + 1;
    }
  }
  return program + " is not on PATH" + (hint.empty() ? "" : " (" + hint + ")");
}

void check_roles(const LaunchPlan& plan) {
  std::set<std::string> seen;
  for (const RoleSpec& r : plan.extra_roles) {
    if (r.role.empty()) throw std::invalid_argument("an extra role of the launch has no name");
    if (r.role == kRankRole)
      throw std::invalid_argument(std::string("extra role '") + kRankRole +
                                  "': the ranks are the plan's own (spec.ranks, rank_command)");
    if (!seen.insert(r.role).second)
      throw std::invalid_argument("extra role '" + r.role + "' is given twice");
    if (r.count < 1)
      throw std::invalid_argument("extra role '" + r.role + "' has " + std::to_string(r.count) +
                                  " processes; it needs at least 1");
    if (r.command.empty())
      throw std::invalid_argument("extra role '" + r.role + "' has no command");
  }
}

}  // namespace dlhost
