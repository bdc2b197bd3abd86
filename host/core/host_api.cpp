// host_api.cpp — the dlhost_host_api table: statuses, logging into spdlog, option lookup and the
// rendezvous store: in-process, or, in a rank of a multi-rank case (DLHOST_STORE=host:port set
// by the parent), the parent's network store (rendezvous_store.h); the table entry is the same.
#include "core/host_api.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/rendezvous_store.h"

namespace dlhost {
namespace {

dlhost_status* status_create(int32_t code, const char* message) {
  return new dlhost_status{code, message != nullptr ? message : ""};
}
int32_t status_code(const dlhost_status* s) { return s != nullptr ? s->code : DLHOST_CODE_OK; }
const char* status_message(const dlhost_status* s) {
  return s != nullptr ? s->message.c_str() : "";
}
void status_destroy(dlhost_status* s) { delete s; }

spdlog::level::level_enum to_spdlog(int32_t level) {
  switch (level) {
    case DLHOST_LOG_TRACE:
      return spdlog::level::trace;
    case DLHOST_LOG_DEBUG:
      return spdlog::level::debug;
    case DLHOST_LOG_INFO:
      return spdlog::level::info;
    case DLHOST_LOG_WARN:
      return spdlog::level::warn;
    default:
      return spdlog::level::err;
  }
}

void log_line(int32_t level, const char* source, const char* message) {
  spdlog::log(to_spdlog(level), "[{}] {}", source != nullptr ? source : "plugin",
              message != nullptr ? message : "");
}
int32_t log_enabled(int32_t level) { return spdlog::should_log(to_spdlog(level)) ? 1 : 0; }

const char* option_get(const dlhost_options* options, const char* key) {
  if (options == nullptr || key == nullptr) return nullptr;
  auto it = options->values.find(key);
  return it == options->values.end() ? nullptr : it->second.c_str();
}

struct Store {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, std::vector<unsigned char>> values;
};
Store& store() {
  static Store s;
  return s;
}

// The parent's store when this process is a rank of a multi-rank case, else NULL. Read once: the
// variable is the parent's choice for the whole life of the process.
RendezvousClient* network_store() {
  static const std::unique_ptr<RendezvousClient> client =
      []() -> std::unique_ptr<RendezvousClient> {
    const char* address = std::getenv("DLHOST_STORE");
    if (address == nullptr || *address == '\0') return nullptr;
    return std::make_unique<RendezvousClient>(address);
  }();
  return client.get();
}

dlhost_status* to_status(const StoreStatus& s) {
  return s.ok() ? nullptr : status_create(s.code, s.message.c_str());
}

dlhost_status* store_set(const char* key, const void* value, size_t size) {
  if (key == nullptr || (value == nullptr && size > 0))
    return status_create(DLHOST_CODE_INVALID_ARGUMENT, "store_set: NULL key or value");
  if (RendezvousClient* net = network_store()) return to_status(net->set(key, value, size));
  auto& s = store();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto bytes = static_cast<const unsigned char*>(value);
    if (!s.values.emplace(key, std::vector<unsigned char>(bytes, bytes + size)).second)
      return status_create(DLHOST_CODE_ALREADY_EXISTS,
                           (std::string("store_set: key '") + key + "' already set").c_str());
  }
  s.changed.notify_all();
  return nullptr;
}

dlhost_status* store_get(const char* key, int64_t timeout_ms, void* value, size_t capacity,
                         size_t* size) {
  if (key == nullptr || size == nullptr)
    return status_create(DLHOST_CODE_INVALID_ARGUMENT, "store_get: NULL key or size");
  if (RendezvousClient* net = network_store())
    return to_status(net->get(key, timeout_ms, value, capacity, size));
  auto& s = store();
  std::unique_lock<std::mutex> lock(s.mutex);
  bool found = s.changed.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0)),
                                  [&] { return s.values.count(key) != 0; });
  if (!found)
    return status_create(DLHOST_CODE_DEADLINE_EXCEEDED,
                         (std::string("store_get: key '") + key + "' not set within " +
                          std::to_string(timeout_ms) + " ms")
                             .c_str());
  const auto& bytes = s.values[key];
  if (bytes.size() > capacity) {
    *size = bytes.size();
    return status_create(DLHOST_CODE_OUT_OF_RANGE, "store_get: buffer too small");
  }
  if (!bytes.empty()) std::memcpy(value, bytes.data(), bytes.size());
  *size = bytes.size();
  return nullptr;
}

dlhost_host_api make_table() {
  dlhost_host_api t{};
  t.struct_size = DLHOST_HOST_API_STRUCT_SIZE;
  t.abi_major = DLHOST_ABI_MAJOR;
  t.abi_minor = DLHOST_ABI_MINOR;
  t.status_create = status_create;
  t.status_code = status_code;
  t.status_message = status_message;
  t.status_destroy = status_destroy;
  t.log = log_line;
  t.log_enabled = log_enabled;
  t.option_get = option_get;
  t.store_set = store_set;
  t.store_get = store_get;
  return t;
}

}  // namespace

const dlhost_host_api* host_api() {
  // The SDK's helpers (guard, check), used by the host too, reach the host through this slot.
  static const dlhost_host_api* const table = [] {
    static const dlhost_host_api t = make_table();
    sdk::host_slot() = &t;
    return &t;
  }();
  return table;
}

dlhost_status* make_status(dlhost_code code, const std::string& message) {
  return status_create(code, message.c_str());
}

void check_status(dlhost_status* status, const std::string& context) {
  if (status == nullptr) return;
  StatusPtr owned(status);
  throw Error(static_cast<dlhost_code>(owned->code), context + ": " + owned->message);
}

const char* code_name(int32_t code) {
  static const char* const names[] = {"OK",
                                      "CANCELLED",
                                      "UNKNOWN",
                                      "INVALID_ARGUMENT",
                                      "DEADLINE_EXCEEDED",
                                      "NOT_FOUND",
                                      "ALREADY_EXISTS",
                                      "PERMISSION_DENIED",
                                      "RESOURCE_EXHAUSTED",
                                      "FAILED_PRECONDITION",
                                      "ABORTED",
                                      "OUT_OF_RANGE",
                                      "UNIMPLEMENTED",
                                      "INTERNAL",
                                      "UNAVAILABLE",
                                      "DATA_LOSS"};
  return code >= 0 && code <= 15 ? names[code] : "UNKNOWN";
}

void reset_store() {
  auto& s = store();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.values.clear();
}

}  // namespace dlhost
