/* dlhost_abi.h — the common part of the dlhost plugin ABI (v1): versions, status objects,
 * host services, and the one entry symbol every plugin exports. ABI 1.2's device extensions
 * (streams, events, device memory, capabilities, option schemas) are in dlhost_device.h.
 *
 * This header, with dlhost_graph.h, dlhost_backend.h, dlhost_comm.h and dlhost_network.h, is the
 * whole contract between the dlhost host and a plugin. Only C crosses it: fixed-width integers,
 * size_t, UTF-8 `const char*`, plain structs, function pointers and opaque handles.
 *
 * Rules that hold for every struct and call in these headers:
 * - Every struct that crosses starts with `size_t struct_size`, set by whoever fills the struct to
 *   DLHOST_<NAME>_STRUCT_SIZE (offset of the last field + its size). A reader uses a field only if
 *   struct_size covers it, so an old plugin works with a new host and the other way round.
 * - Append only: fields and table entries are never reordered, removed or retyped. A new field or
 *   function is added at the end and raises DLHOST_ABI_MINOR; a change that breaks layout raises
 *   DLHOST_ABI_MAJOR, and the host refuses a plugin whose major differs.
 * - Errors: a function returning `dlhost_status*` returns NULL on success; otherwise a status made
 *   through dlhost_host_api.status_create, which the caller owns and must release with
 *   status_destroy. On error, out-parameters are left untouched.
 * - Destroy/release functions return void and accept NULL.
 * - Enumerations are passed as int32_t so their size is fixed.
 * - No exception, C++ type or allocator crosses: every exported function catches everything.
 */
#ifndef DLHOST_ABI_H
#define DLHOST_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DLHOST_ABI_MAJOR 1
#define DLHOST_ABI_MINOR 5

/* Name of the one symbol a plugin exports (see dlhost_plugin_entry_fn). */
#define DLHOST_PLUGIN_ENTRY_SYMBOL "dlhost_plugin_entry"

/* Optional second export: a NUL-terminated ASCII text saying how the plugin was compiled,
 * "optimized=0|1 ndebug=0|1 compiler=..." (common.hpp defines it in every plugin built on the C++
 * layer, from __OPTIMIZE__ and NDEBUG). The host records it and warns when optimized=0: an -O0
 * plugin's times are not benchmark numbers. Absent (a hand-written table): unknown, no warning.
 * A symbol, not a struct field, so that no table changes and any host of major 1 may look. */
#define DLHOST_PLUGIN_BUILD_SYMBOL "dlhost_plugin_build"

#if defined(_WIN32)
#define DLHOST_EXPORT __declspec(dllexport)
#else
#define DLHOST_EXPORT __attribute__((visibility("default")))
#endif

/* Size of a struct up to and including its field `last` (what struct_size must hold). */
#define DLHOST_STRUCT_SIZE(type, last) (offsetof(type, last) + sizeof(((type*)0)->last))

/* True when a struct of the reader's view, whose writer set struct_size, contains `field`. */
#define DLHOST_HAS_FIELD(ptr, type, field) ((ptr)->struct_size >= DLHOST_STRUCT_SIZE(type, field))

/* A reader that requires a struct or table must compare its struct_size with the size of the
 * FIRST release that had it (the *_STRUCT_SIZE_1_0 constants below and beside each struct), never
 * with the current *_STRUCT_SIZE: that one grows with every minor, and a requirement on it would
 * refuse every plugin built before the growth. */

/* ---------------------------------------------------------------------------------------------
 * Status codes: the absl/gRPC numbering, so they read the same as in PJRT and TensorFlow.
 * UNIMPLEMENTED has a meaning of its own here: a backend that lacks an op returns it from compile,
 * and the host records the case as SKIPPED with the message instead of FAILED. */
typedef enum dlhost_code {
  DLHOST_CODE_OK = 0,
  DLHOST_CODE_CANCELLED = 1,
  DLHOST_CODE_UNKNOWN = 2,
  DLHOST_CODE_INVALID_ARGUMENT = 3,
  DLHOST_CODE_DEADLINE_EXCEEDED = 4,
  DLHOST_CODE_NOT_FOUND = 5,
  DLHOST_CODE_ALREADY_EXISTS = 6,
  DLHOST_CODE_PERMISSION_DENIED = 7,
  DLHOST_CODE_RESOURCE_EXHAUSTED = 8,
  DLHOST_CODE_FAILED_PRECONDITION = 9,
  DLHOST_CODE_ABORTED = 10,
  DLHOST_CODE_OUT_OF_RANGE = 11,
  DLHOST_CODE_UNIMPLEMENTED = 12,
  DLHOST_CODE_INTERNAL = 13,
  DLHOST_CODE_UNAVAILABLE = 14,
  DLHOST_CODE_DATA_LOSS = 15
} dlhost_code;

/* Opaque error object, made and owned by the host (its memory survives the plugin's frames). */
typedef struct dlhost_status dlhost_status;

typedef enum dlhost_log_level {
  DLHOST_LOG_TRACE = 0,
  DLHOST_LOG_DEBUG = 1,
  DLHOST_LOG_INFO = 2,
  DLHOST_LOG_WARN = 3,
  DLHOST_LOG_ERROR = 4
} dlhost_log_level;

/* Element types of tensors and communication buffers. */
typedef enum dlhost_dtype {
  DLHOST_DTYPE_F32 = 1,
  DLHOST_DTYPE_I32 = 2,
  DLHOST_DTYPE_F16 = 3,
  DLHOST_DTYPE_BF16 = 4,
  DLHOST_DTYPE_F64 = 5,
  DLHOST_DTYPE_I64 = 6
} dlhost_dtype;

/* Where a buffer lives. Communication plugins say which spaces they accept. */
typedef enum dlhost_memory_space {
  DLHOST_MEMORY_HOST = 1,
  DLHOST_MEMORY_DEVICE = 2
} dlhost_memory_space;

/* A buffer a plugin exposes. `data` is borrowed: it stays valid as long as the object that
 * exposed it (a model, say) and is not moved by the plugin meanwhile. */
typedef struct dlhost_buffer {
  size_t struct_size;
  void* data;
  uint64_t bytes;
  int32_t dtype;        /* dlhost_dtype */
  int32_t memory_space; /* dlhost_memory_space */
  int32_t device;       /* device index within its backend; -1 for host memory */
} dlhost_buffer;
#define DLHOST_BUFFER_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_buffer, device)

/* Optional capabilities travel in typed chains, PJRT-style; an unknown `type` is skipped, and a
 * missing extension is a valid answer. Types are allocated in this header only. */
typedef struct dlhost_extension {
  size_t struct_size;
  int32_t type;
  const struct dlhost_extension* next;
} dlhost_extension;
#define DLHOST_EXTENSION_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_extension, next)

/* Per-case options for one plugin (the suite's and command line's `options:` for it, plus keys
 * the host sets such as "threads"). Opaque; read through dlhost_host_api.option_get. */
typedef struct dlhost_options dlhost_options;

/* ---------------------------------------------------------------------------------------------
 * Host services, handed to the plugin's entry function. The table and every function in it live
 * as long as the process. All functions are thread-safe unless said otherwise. */
typedef struct dlhost_host_api {
  size_t struct_size;
  uint32_t abi_major; /* the host's DLHOST_ABI_MAJOR */
  uint32_t abi_minor; /* the host's DLHOST_ABI_MINOR */

  /* Makes an error. `message` is copied (UTF-8, may be NULL). The caller of the function that
   * returns it owns the result. Never returns NULL. A status is an error: asked for code OK, the
   * host makes an INTERNAL status whose message says so (1.2; 1.1 hosts kept the OK code). */
  dlhost_status* (*status_create)(int32_t code, const char* message);
  /* Reads a status. The message lives as long as the status. */
  int32_t (*status_code)(const dlhost_status* status);
  const char* (*status_message)(const dlhost_status* status);
  /* Releases a status; accepts NULL. */
  void (*status_destroy)(dlhost_status* status);

  /* Writes one line into the host's log (spdlog). `source` names the plugin; both strings are
   * borrowed for the call. Cheap to call when the level is filtered out, but formatting is not:
   * ask log_enabled first for messages that cost to build. */
  void (*log)(int32_t level, const char* source, const char* message);
  int32_t (*log_enabled)(int32_t level);

  /* Looks up a per-case option. Returns NULL when the key is absent; the string is borrowed and
   * lives as long as `options`. `options` may be NULL (then NULL is returned). */
  const char* (*option_get)(const dlhost_options* options, const char* key);

  /* A rendezvous key-value store shared by every rank of a case (comm plugins bootstrap through
   * it: NCCL's unique id, addresses). `store_set` copies the value; setting a key twice is
   * ALREADY_EXISTS. `store_get` blocks until the key exists or `timeout_ms` passes
   * (DEADLINE_EXCEEDED); with `capacity` too small it returns OUT_OF_RANGE. On error *size is left
   * untouched (1.2; a 1.1 host wrote the size needed there on OUT_OF_RANGE): ask store_size (1.2)
   * for the size first. Keys are UTF-8, values are bytes. May block; thread-safe. A comm
   * prefixes its keys with dlhost_comm_init_args.store_prefix (1.2) so that two comms of one
   * case never collide. */
  dlhost_status* (*store_set)(const char* key, const void* value, size_t size);
  dlhost_status* (*store_get)(const char* key, int64_t timeout_ms, void* value, size_t capacity,
                              size_t* size);

  /* ABI 1.2 */
  /* Blocks like store_get until the key exists, then writes the size of its value. */
  dlhost_status* (*store_size)(const char* key, int64_t timeout_ms, size_t* size);
} dlhost_host_api;
#define DLHOST_HOST_API_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_host_api, store_size)
#define DLHOST_HOST_API_STRUCT_SIZE_1_0 DLHOST_STRUCT_SIZE(dlhost_host_api, store_get)

/* ---------------------------------------------------------------------------------------------
 * The plugin table. */
typedef enum dlhost_plugin_kind {
  DLHOST_PLUGIN_BACKEND = 1, /* compute: devices, compile a graph, train steps */
  DLHOST_PLUGIN_COMM = 2,    /* communication: all-reduce, broadcast, barrier */
  DLHOST_PLUGIN_NETWORK = 3  /* network definitions built through the host's graph builder */
} dlhost_plugin_kind;

struct dlhost_backend_api;
struct dlhost_comm_api;
struct dlhost_network_api;

typedef struct dlhost_plugin {
  size_t struct_size;
  /* The ABI the plugin was compiled against: set to DLHOST_ABI_MAJOR / DLHOST_ABI_MINOR. These
   * three first fields never move, in any major version, so any host can read and refuse. */
  uint32_t abi_major;
  uint32_t abi_minor;
  int32_t kind; /* dlhost_plugin_kind */
  /* Strings live as long as the library is loaded. `name` is what suites and the CLI use:
   * [a-z0-9_], unique among plugins of a kind. */
  const char* name;
  const char* version;
  const char* description;

  /* Says whether the plugin can run on this machine: NULL when usable, else a status whose
   * message says why not (no CUDA device, say). `priority` ranks usable plugins of a kind when a
   * suite lets the host choose (higher wins). May be NULL in the table: then always usable at
   * priority 0. Not thread-safe with respect to other calls into the plugin. The host calls it
   * only for a plugin it is about to use or list (1.2: lazily), so a GPU plugin that initializes
   * its driver here costs nothing in a CPU-only case. */
  dlhost_status* (*query)(int32_t* priority);

  /* Exactly the table matching `kind` is non-NULL; it lives as long as the library. */
  const struct dlhost_backend_api* backend;
  const struct dlhost_comm_api* comm;
  const struct dlhost_network_api* network;

  /* Optional capabilities (may be NULL): the typed extensions of dlhost_device.h. Plugin-owned,
   * lives as long as the library. */
  const dlhost_extension* extensions;
} dlhost_plugin;
#define DLHOST_PLUGIN_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_plugin, extensions)
#define DLHOST_PLUGIN_STRUCT_SIZE_1_0 DLHOST_STRUCT_SIZE(dlhost_plugin, extensions)

/* The entry symbol. Called once, from one thread, right after the library is loaded. `host` lives
 * as long as the process; the plugin may keep it. Returns the plugin's table (plugin-owned, lives
 * as long as the library) or NULL when the plugin cannot initialize, after logging why through
 * host->log. */
typedef const dlhost_plugin* (*dlhost_plugin_entry_fn)(const dlhost_host_api* host);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLHOST_ABI_H */
