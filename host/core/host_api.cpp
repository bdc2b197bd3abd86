// host_api.cpp — the dlhost_host_api table: statuses, logging into spdlog, option lookup and the
// rendezvous store: in-process, or, in a rank of a multi-rank case (DLHOST_STORE=SECRET@HOST:PORT
// set by the parent), the parent's network store (rendezvous_store.h); the table entry is the
// same.
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

#include "distributed/rank_env.h"
#include "distributed/rendezvous_store.h"

namespace dlhost {
namespace {

dlhost_status* status_create(int32_t code, const char* message) {
  const std::string text = message != nullptr ? message : "";
  // A status is an error (dlhost_abi.h): one made with code OK is a plugin's bug, recorded as
  // such instead of as a failure that reads "OK: ...".
  if (code == DLHOST_CODE_OK)
    return new dlhost_status{DLHOST_CODE_INTERNAL,
                             "a plugin returned an error status with code OK (a bug in the "
                             "plugin; its message: '" +
                                 text + "')"};
  return new dlhost_status{code, text};
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

// A rank of several without DLHOST_STORE: every store call fails at once, naming why, instead of
// waiting on this process's own store for keys only the other ranks would set. Read once.
dlhost_status* unshared_store(const char* call) {
  static const std::string why = unshared_store_reason();
  if (why.empty()) return nullptr;
  return status_create(DLHOST_CODE_FAILED_PRECONDITION, (std::string(call) + ": " + why).c_str());
}

dlhost_status* to_status(const StoreStatus& s) {
  return s.ok() ? nullptr : status_create(s.code, s.message.c_str());
}

dlhost_status* store_set(const char* key, const void* value, size_t size) {
  if (key == nullptr || (value == nullptr && size > 0))
    return status_create(DLHOST_CODE_INVALID_ARGUMENT, "store_set: NULL key or value");
  if (dlhost_status* unshared = unshared_store("store_set")) return unshared;
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

// Waits for `key` in the in-process store; the lock is held on return when found.
bool wait_for_key(std::unique_lock<std::mutex>& lock, const char* key, int64_t timeout_ms) {
  auto& s = store();
  return s.changed.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0)),
                            [&] { return s.values.count(key) != 0; });
}

dlhost_status* not_set(const char* call, const char* key, int64_t timeout_ms) {
  return status_create(DLHOST_CODE_DEADLINE_EXCEEDED,
                       (std::string(call) + ": key '" + key + "' not set within " +
                        std::to_string(timeout_ms) + " ms")
                           .c_str());
}

// The network client reports the size needed on OUT_OF_RANGE; the ABI (1.2) leaves *size alone
// on every error, so the client writes into a local first.
dlhost_status* store_get(const char* key, int64_t timeout_ms, void* value, size_t capacity,
                         size_t* size) {
  if (key == nullptr || size == nullptr)
    return status_create(DLHOST_CODE_INVALID_ARGUMENT, "store_get: NULL key or size");
  size_t got = 0;
  if (dlhost_status* unshared = unshared_store("store_get")) return unshared;
  if (RendezvousClient* net = network_store()) {
    StoreStatus st = net->get(key, timeout_ms, value, capacity, &got);
    if (st.ok()) *size = got;
    return to_status(st);
  }
  auto& s = store();
  std::unique_lock<std::mutex> lock(s.mutex);
  if (!wait_for_key(lock, key, timeout_ms)) return not_set("store_get", key, timeout_ms);
  const auto& bytes = s.values[key];
  if (bytes.size() > capacity)
    return status_create(
        DLHOST_CODE_OUT_OF_RANGE,
        ("store_get: key '" + std::string(key) + "' holds " + std::to_string(bytes.size()) +
         " bytes, more than the " + std::to_string(capacity) + " given (ask store_size first)")
            .c_str());
  if (!bytes.empty()) std::memcpy(value, bytes.data(), bytes.size());
  *size = bytes.size();
  return nullptr;
}

dlhost_status* store_size(const char* key, int64_t timeout_ms, size_t* size) {
  if (key == nullptr || size == nullptr)
    return status_create(DLHOST_CODE_INVALID_ARGUMENT, "store_size: NULL key or size");
  if (dlhost_status* unshared = unshared_store("store_size")) return unshared;
  if (RendezvousClient* net = network_store()) {
    // A get into no room: OUT_OF_RANGE carries the size, OK means an empty value.
    size_t got = 0;
    StoreStatus st = net->get(key, timeout_ms, nullptr, 0, &got);
    if (st.ok() || st.code == DLHOST_CODE_OUT_OF_RANGE) {
      *size = got;
      return nullptr;
    }
    return to_status(st);
  }
  auto& s = store();
  std::unique_lock<std::mutex> lock(s.mutex);
  if (!wait_for_key(lock, key, timeout_ms)) return not_set("store_size", key, timeout_ms);
  *size = s.values[key].size();
  return nullptr;
}

dlhost_host_api make_table(uint32_t minor) {
  dlhost_host_api t{};
  // A host pretending to be older hands out the older table: its size and minor (1.0 and 1.1
  // had the same host table).
  t.struct_size = minor >= 2 ? DLHOST_HOST_API_STRUCT_SIZE : DLHOST_HOST_API_STRUCT_SIZE_1_0;
  t.abi_major = DLHOST_ABI_MAJOR;
  t.abi_minor = minor;
  t.status_create = status_create;
  t.status_code = status_code;
  t.status_message = status_message;
  t.status_destroy = status_destroy;
  t.log = log_line;
  t.log_enabled = log_enabled;
  t.option_get = option_get;
  t.store_set = store_set;
  t.store_get = store_get;
  if (minor >= 2) t.store_size = store_size;
  return t;
}

}  // namespace

const dlhost_host_api* host_api() {
  // The SDK's helpers (guard, check), used by the host too, reach the host through this slot.
  static const dlhost_host_api* const table = [] {
    static const dlhost_host_api t = make_table(DLHOST_ABI_MINOR);
    sdk::host_slot() = &t;
    return &t;
  }();
  return table;
}

const dlhost_host_api* host_api(uint32_t abi_minor) {
  if (abi_minor >= DLHOST_ABI_MINOR) return host_api();
  host_api();  // the SDK's slot stays on the real table
  static const dlhost_host_api v1_0 = make_table(0), v1_1 = make_table(1), v1_2 = make_table(2),
                               v1_3 = make_table(3);
  return abi_minor == 0 ? &v1_0 : abi_minor == 1 ? &v1_1 : abi_minor == 2 ? &v1_2 : &v1_3;
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
