// test_extension_tables.cpp — what every plugin this build made publishes in its ABI 1.2
// extension chain holds up, checked through the host's own plugin loading (no GPU needed):
// - every function-table extension is filled up to the struct_size it declares: the host calls
//   what it finds without checking for NULL (gpu_cudnn once declared the full device memory
//   table and left copy_device and input_buffer NULL: every upload case would have crashed);
// - no extension type appears twice in one chain (two declarations that can disagree);
// - the precisions a backend declares are exactly those its context_create accepts (gpu_cudnn
//   declared tf32 in a hand-built chain while its kit refused it: every tf32 case SKIPPED).
// The plugins are the build's plugin folder plus the device-path fixtures.
#include <gtest/gtest.h>

#include <cstddef>
#include <set>
#include <string>

#include "core/host_api.h"
#include "core/plugin_registry.h"
#include "dlhost/backend_kit.hpp"
#include "dlhost/dlhost_device.h"

namespace dlhost {
namespace {

const PluginRegistry& registry() {
  static PluginRegistry* r = [] {
    auto* made = new PluginRegistry();  // plugins are never unloaded
    made->discover({DLHOST_TEST_PLUGIN_DIR, DLHOST_TEST_BINARY_DIR "/tests/fixture_device"});
    return made;
  }();
  return *r;
}

// The size this host knows of each extension whose fields after the header are all function
// pointers; 0 for the others (data, or a type newer than this host).
size_t function_table_size(int32_t type) {
  switch (type) {
    case DLHOST_EXT_BACKEND_CAPS:
      return DLHOST_BACKEND_CAPS_EXT_STRUCT_SIZE;
    case DLHOST_EXT_STREAM:
      return DLHOST_STREAM_EXT_STRUCT_SIZE;
    case DLHOST_EXT_EVENTS:
      return DLHOST_EVENTS_EXT_STRUCT_SIZE;
    case DLHOST_EXT_DEVICE_MEMORY:
      return DLHOST_DEVICE_MEMORY_EXT_STRUCT_SIZE;
    case DLHOST_EXT_COMM_GROUP:
      return DLHOST_COMM_GROUP_EXT_STRUCT_SIZE;
    case DLHOST_EXT_COMM_ABORT:
      return DLHOST_COMM_ABORT_EXT_STRUCT_SIZE;
    case DLHOST_EXT_TENSOR_READ:
      return DLHOST_TENSOR_READ_EXT_STRUCT_SIZE;
    default:
      return 0;
  }
}

// Pointer fields start right after the common header in every function-table extension.
constexpr size_t kFirstEntry = DLHOST_EXTENSION_STRUCT_SIZE;
static_assert(offsetof(dlhost_device_memory_ext, memory_stats) == kFirstEntry);
static_assert(offsetof(dlhost_events_ext, event_create) == kFirstEntry);
static_assert(offsetof(dlhost_backend_caps_ext, capabilities) == kFirstEntry);
static_assert(offsetof(dlhost_tensor_read_ext, read_tensor) == kFirstEntry);

TEST(ExtensionTables, SomePluginsWereLoaded) {
  for (const auto& r : registry().refused())
    std::printf("refused: %s: %s\n", r.path.c_str(), r.reason.c_str());
  ASSERT_FALSE(registry().plugins().empty());
  for (const LoadedPlugin& p : registry().plugins())
    std::printf("%-8s %-20s ABI 1.%u %s\n", kind_name(p.kind), p.name.c_str(), p.abi_minor,
                p.path.c_str());
}

TEST(ExtensionTables, EveryEntryUpToTheDeclaredSizeIsSet) {
  int tables = 0, device_memory = 0;
  for (const LoadedPlugin& p : registry().plugins()) {
    if (p.speaks_minor < 2) continue;
    std::set<int32_t> seen;
    for (const dlhost_extension* e = p.table->extensions; e != nullptr; e = e->next) {
      EXPECT_TRUE(seen.insert(e->type).second)
          << p.name << ": extension type " << e->type << " appears twice in its chain";
      EXPECT_GE(e->struct_size, DLHOST_EXTENSION_STRUCT_SIZE) << p.name << " type " << e->type;
      const size_t known = function_table_size(e->type);
      if (known == 0) continue;
      ++tables;
      device_memory += e->type == DLHOST_EXT_DEVICE_MEMORY;
      const size_t end = std::min(known, e->struct_size);
      const auto* bytes = reinterpret_cast<const char*>(e);
      for (size_t at = kFirstEntry; at + sizeof(void*) <= end; at += sizeof(void*)) {
        const void* entry = *reinterpret_cast<const void* const*>(bytes + at);
        EXPECT_NE(entry, nullptr) << p.name << ": extension type " << e->type
                                  << " declares struct_size " << e->struct_size
                                  << " but its entry at byte offset " << at << " is NULL";
      }
    }
    if (const dlhost_option_schema_ext* s = p.extensions.option_schema) {
      ASSERT_GE(s->count, 0) << p.name;
      if (s->count > 0) {
        ASSERT_NE(s->options, nullptr) << p.name;
      }
      for (int32_t i = 0; i < s->count; ++i) {
        ASSERT_NE(s->options[i], nullptr) << p.name << " option " << i;
        EXPECT_NE(s->options[i]->name, nullptr) << p.name << " option " << i;
      }
    }
  }
  std::printf("%d function tables checked, %d of them device memory\n", tables, device_memory);
  // Not vacuous: the device-path fixture (always built) publishes a device memory table.
  EXPECT_GE(device_memory, 1);
}

// What a backend declares it implements, the kit (or the plugin's own table) must accept, and
// nothing else: context_create with each precision either gets past the precision check (OK,
// or another refusal such as no device) or is UNIMPLEMENTED exactly when undeclared.
TEST(ExtensionTables, DeclaredPrecisionsAreTheAcceptedOnes) {
  int checked = 0;
  for (const LoadedPlugin& p : registry().plugins()) {
    if (p.kind != DLHOST_PLUGIN_BACKEND || p.extensions.caps == nullptr) continue;
    dlhost_backend_caps caps{};
    caps.struct_size = DLHOST_BACKEND_CAPS_STRUCT_SIZE;
    dlhost_status* s = p.extensions.caps->capabilities(&caps);
    ASSERT_EQ(s, nullptr) << p.name << ": " << host_api()->status_message(s);
    const dlhost_backend_api* api = p.table->backend;
    for (int32_t precision = DLHOST_PRECISION_FP32; precision <= DLHOST_PRECISION_FP16;
         ++precision) {
      const bool declared = (caps.precisions & (1u << precision)) != 0;
      dlhost_options options;
      options.values["precision"] = sdk::precision_name(precision);
      dlhost_context* context = nullptr;
      dlhost_status* status = api->context_create(0, &options, &context);
      const int32_t code = status == nullptr ? DLHOST_CODE_OK : host_api()->status_code(status);
      const std::string message = status == nullptr ? "" : host_api()->status_message(status);
      if (status != nullptr) host_api()->status_destroy(status);
      if (context != nullptr) api->context_destroy(context);
      if (declared) {
        EXPECT_NE(code, DLHOST_CODE_UNIMPLEMENTED)
            << p.name << " declares " << sdk::precision_name(precision)
            << " but refuses it: " << message;
      } else {
        EXPECT_EQ(code, DLHOST_CODE_UNIMPLEMENTED)
            << p.name << " does not declare " << sdk::precision_name(precision)
            << " but context_create answered " << code << " " << message;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace dlhost
