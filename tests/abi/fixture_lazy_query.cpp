// fixture_lazy_query.cpp — a test fixture on the backend kit: the backend "lazy_query", which
// exists only to prove that the host queries a plugin lazily (ABI 1.2). Its query() counts its
// calls (read through the exported fixture_query_calls()), appends the calling process's command
// (argv[0]'s file name and argv[1]) to the file named by FIXTURE_QUERY_LOG when set, and refuses:
// no case can run on it, so nothing else of it is ever called.
#include <dlhost/backend_kit.hpp>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

namespace {

namespace sdk = dlhost::sdk;

std::atomic<int> g_calls{0};

// "dlhost run" or "dlhost case-worker".
std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string argv0, argv1;
  std::getline(in, argv0, '\0');
  std::getline(in, argv1, '\0');
  return argv0.substr(argv0.find_last_of('/') + 1) + " " + argv1;
}

class LazyBackend final : public sdk::Backend<int> {
 public:
  sdk::Device device(int32_t) const override { return sdk::cpu_device("generic"); }
  std::string library() const override { return "none"; }
  int32_t query() const override {
    ++g_calls;
    if (const char* log = std::getenv("FIXTURE_QUERY_LOG"))
      std::ofstream(log, std::ios::app) << command_line() << "\n";
    sdk::fail(DLHOST_CODE_UNAVAILABLE, "lazy_query refuses every machine");
  }
  std::unique_ptr<int> open(int32_t, const sdk::Options&) override {
    sdk::unimplemented("lazy_query opens nothing");
  }
  std::unique_ptr<sdk::Model> compile(int&, const dlhost_graph&, const dlhost_optimizer_desc&,
                                      const sdk::Options&) override {
    sdk::unimplemented("lazy_query compiles nothing");
  }
};

}  // namespace

extern "C" DLHOST_EXPORT int fixture_query_calls() { return g_calls.load(); }

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return sdk::backend_plugin<LazyBackend>(host, {"lazy_query", "0", "test fixture: lazy query"});
}
