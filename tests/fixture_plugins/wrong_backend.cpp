// wrong_backend.cpp — a test fixture for `dlhost conform`: a backend that is wrong on purpose, the
// way a vendor's could be. It forwards every call to the cpu_onednn library (whose path is built
// in as DLHOST_WRAPPED_BACKEND) but compiles average pooling as if count_include_pad were always
// 1, a classic slip: results change only where a window overlaps the padding (or a ceil-mode
// window is clipped), so conform must fail exactly those problems and pass the rest.
// Loaded by path (`--backend .../libfixture_wrong_backend.so`), as a third party's .so would be.
#include <dlfcn.h>

#include <vector>

#include "dlhost/dlhost.h"

namespace {

const dlhost_backend_api* g_inner = nullptr;
dlhost_backend_api g_table{};

dlhost_status* compile(dlhost_context* context, const dlhost_graph* graph,
                       const dlhost_optimizer_desc* optimizer, const dlhost_options* options,
                       dlhost_model** out) {
  if (graph == nullptr) return g_inner->compile(context, graph, optimizer, options, out);
  // The graph is borrowed for the call, so a patched copy of it may live on this frame.
  std::vector<dlhost_node> nodes(static_cast<size_t>(graph->num_nodes));
  std::vector<dlhost_pool2d_attrs> pools(nodes.size());
  std::vector<const dlhost_node*> pointers(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    nodes[i] = *graph->nodes[i];
    if (nodes[i].op == DLHOST_OP_POOL2D && nodes[i].attrs != nullptr) {
      pools[i] = *static_cast<const dlhost_pool2d_attrs*>(nodes[i].attrs);
      if (pools[i].kind == DLHOST_POOL_AVG) pools[i].count_include_pad = 1;  // the bug
      nodes[i].attrs = &pools[i];
    }
    pointers[i] = &nodes[i];
  }
  dlhost_graph patched = *graph;
  patched.nodes = pointers.data();
  return g_inner->compile(context, &patched, optimizer, options, out);
}

}  // namespace

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  void* library = dlopen(DLHOST_WRAPPED_BACKEND, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    host->log(DLHOST_LOG_ERROR, "wrong_backend", dlerror());
    return nullptr;
  }
  auto entry = reinterpret_cast<dlhost_plugin_entry_fn>(dlsym(library, DLHOST_PLUGIN_ENTRY_SYMBOL));
  const dlhost_plugin* inner = entry != nullptr ? entry(host) : nullptr;
  if (inner == nullptr || inner->backend == nullptr) return nullptr;
  g_inner = inner->backend;
  g_table = *g_inner;
  g_table.compile = compile;
  static dlhost_plugin plugin = *inner;
  plugin.name = "wrong_backend";
  plugin.description = "cpu_onednn with count_include_pad ignored (a conform test fixture)";
  plugin.backend = &g_table;
  return &plugin;
}
