/* dlhost_network.h — the table a network-definition plugin fills (ABI v1).
 *
 * A network plugin holds one or more networks. The host asks for their descriptions and builds
 * one by calling `build` with its builder (dlhost_graph.h); the plugin only describes layers, the
 * host owns the graph. All calls are thread-safe if the plugin keeps no mutable state (the usual
 * case); the host calls them from one thread.
 */
#ifndef DLHOST_NETWORK_H
#define DLHOST_NETWORK_H

#include "dlhost/dlhost_abi.h"
#include "dlhost/dlhost_backend.h"
#include "dlhost/dlhost_graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Plugin-owned; lives as long as the library. */
typedef struct dlhost_network_info {
  size_t struct_size;
  const char* name;        /* what suites use: lower case, e.g. "fcn5" */
  const char* description; /* one paragraph: layers, where the definition comes from */
  const char* dataset;     /* what its synthetic data imitates: "MNIST", "ImageNet" */
  int64_t cpu_batch;       /* the paper's CPU mini-batch */
  int64_t gpu_batch;       /* the paper's single-GPU mini-batch */
  /* The paper scripts' optimizer; a case may override each field. */
  const dlhost_optimizer_desc* optimizer;
} dlhost_network_info;
#define DLHOST_NETWORK_INFO_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_network_info, optimizer)

typedef struct dlhost_network_api {
  size_t struct_size;
  int32_t (*count)(void);
  dlhost_status* (*info)(int32_t index, const dlhost_network_info** out);
  /* Describes network `index` through `api`/`builder` (both valid only during the call).
   * `options` are the case's options for this plugin (may be NULL). */
  dlhost_status* (*build)(int32_t index, const dlhost_builder_api* api,
                          dlhost_graph_builder* builder, const dlhost_options* options);
} dlhost_network_api;
#define DLHOST_NETWORK_API_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_network_api, build)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLHOST_NETWORK_H */
