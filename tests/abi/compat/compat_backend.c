/* compat_backend.c — a test fixture in plain C, compiled once against each frozen release of the
 * SDK headers (tests/abi/compat/v1_0, v1_1) to prove that a plugin built for an older ABI minor
 * loads and runs in the current host, and that the host gates newer behaviour on the plugin's
 * abi_minor (it must not hand a 1.0 backend a 1.1 op or attribute it cannot see).
 *
 * The backend "compat_v<major>_<minor>" keeps parameters and gradients in host memory and does
 * no arithmetic: its loss is 1 / step, which is all the host needs to run and time a case. The
 * "comm" of the same file is not built here: comm compatibility is covered by compat_comm.c.
 */
#include <stdlib.h>
#include <string.h>

#include "dlhost/dlhost.h"

#define STR2(x) #x
#define STR(x) STR2(x)

static const dlhost_host_api* g_host;

typedef struct model {
  int32_t num_params;
  float** values;
  float** grads;
  uint64_t* bytes;
  int64_t steps;
} model;

static dlhost_status* error(int32_t code, const char* message) {
  return g_host->status_create(code, message);
}

static int32_t device_count(void) { return 1; }

static dlhost_status* device_info(int32_t device, const dlhost_device_info** out) {
  static dlhost_device_info info;
  (void)device;
  memset(&info, 0, sizeof info);
  info.struct_size = DLHOST_DEVICE_INFO_STRUCT_SIZE;
  info.kind = DLHOST_DEVICE_CPU;
  info.name = "cpu0";
  info.model = "compat fixture";
  info.cores = 1;
  info.isa = "none";
  info.library = "built against dlhost ABI " STR(DLHOST_ABI_MAJOR) "." STR(DLHOST_ABI_MINOR);
  *out = &info;
  return NULL;
}

static dlhost_status* context_create(int32_t device, const dlhost_options* options,
                                     dlhost_context** out) {
  static int context_token;
  (void)device;
  (void)options;
  *out = (dlhost_context*)&context_token;
  return NULL;
}

static void context_destroy(dlhost_context* context) { (void)context; }

static void model_free(model* m) {
  int32_t i;
  if (m == NULL) return;
  for (i = 0; i < m->num_params; ++i) {
    if (m->values) free(m->values[i]);
    if (m->grads) free(m->grads[i]);
  }
  free(m->values);
  free(m->grads);
  free(m->bytes);
  free(m);
}

static dlhost_status* compile(dlhost_context* context, const dlhost_graph* graph,
                              const dlhost_optimizer_desc* optimizer,
                              const dlhost_options* options, dlhost_model** out) {
  int32_t i;
  model* m = (model*)calloc(1, sizeof(model));
  (void)context;
  (void)optimizer;
  (void)options;
  if (m == NULL) return error(DLHOST_CODE_RESOURCE_EXHAUSTED, "compat: out of memory");
  m->num_params = graph->num_params;
  m->values = (float**)calloc((size_t)graph->num_params + 1, sizeof(float*));
  m->grads = (float**)calloc((size_t)graph->num_params + 1, sizeof(float*));
  m->bytes = (uint64_t*)calloc((size_t)graph->num_params + 1, sizeof(uint64_t));
  if (!m->values || !m->grads || !m->bytes) {
    model_free(m);
    return error(DLHOST_CODE_RESOURCE_EXHAUSTED, "compat: out of memory");
  }
  for (i = 0; i < graph->num_params; ++i) {
    m->bytes[i] = (uint64_t)graph->params[i]->count * 4u;
    m->values[i] = (float*)calloc((size_t)graph->params[i]->count, 4);
    m->grads[i] = (float*)calloc((size_t)graph->params[i]->count, 4);
    if (!m->values[i] || !m->grads[i]) {
      model_free(m);
      return error(DLHOST_CODE_RESOURCE_EXHAUSTED, "compat: out of memory");
    }
  }
  *out = (dlhost_model*)m;
  return NULL;
}

static void model_destroy(dlhost_model* m) { model_free((model*)m); }

static dlhost_status* model_info(dlhost_model* m, dlhost_model_info* out) {
  (void)m;
  out->threads = 1;
  out->implementation = "compat fixture";
  return NULL;
}

static dlhost_status* set_input(dlhost_model* m, int32_t t, const void* data, size_t bytes) {
  (void)m;
  (void)t;
  (void)data;
  (void)bytes;
  return NULL;
}

static dlhost_status* forward(dlhost_model* m) {
  ((model*)m)->steps += 1;
  return NULL;
}

static dlhost_status* backward(dlhost_model* m, const dlhost_grad_ready* ready) {
  int32_t i;
  model* mm = (model*)m;
  if (ready != NULL && ready->fn != NULL)
    for (i = mm->num_params - 1; i >= 0; --i) ready->fn(ready->user, i);
  return NULL;
}

static dlhost_status* nothing(dlhost_model* m) {
  (void)m;
  return NULL;
}

static dlhost_status* read_loss(dlhost_model* m, float* loss) {
  *loss = 1.0f / (float)((model*)m)->steps;
  return NULL;
}

static dlhost_status* param_buffers(dlhost_model* m, int32_t p, dlhost_buffer* value,
                                    dlhost_buffer* grad) {
  model* mm = (model*)m;
  if (p < 0 || p >= mm->num_params) return error(DLHOST_CODE_OUT_OF_RANGE, "compat: param id");
  value->data = mm->values[p];
  grad->data = mm->grads[p];
  value->bytes = grad->bytes = mm->bytes[p];
  value->dtype = grad->dtype = DLHOST_DTYPE_F32;
  value->memory_space = grad->memory_space = DLHOST_MEMORY_HOST;
  value->device = grad->device = -1;
  return NULL;
}

static dlhost_status* copy_param(dlhost_model* m, int32_t p, int32_t part, void* host,
                                 size_t bytes, int to_host) {
  model* mm = (model*)m;
  float* mine;
  if (p < 0 || p >= mm->num_params || bytes != mm->bytes[p])
    return error(DLHOST_CODE_INVALID_ARGUMENT, "compat: param id or size");
  mine = part == DLHOST_PARAM_GRAD ? mm->grads[p] : mm->values[p];
  if (to_host)
    memcpy(host, mine, bytes);
  else
    memcpy(mine, host, bytes);
  return NULL;
}

static dlhost_status* read_param(dlhost_model* m, int32_t p, int32_t part, void* data,
                                 size_t bytes) {
  return copy_param(m, p, part, data, bytes, 1);
}

static dlhost_status* write_param(dlhost_model* m, int32_t p, int32_t part, const void* data,
                                  size_t bytes) {
  return copy_param(m, p, part, (void*)data, bytes, 0);
}

static dlhost_status* memory_in_use(dlhost_model* m, uint64_t* bytes) {
  (void)m;
  *bytes = 0;
  return NULL;
}

static const dlhost_backend_api kApi = {
    DLHOST_BACKEND_API_STRUCT_SIZE, device_count, device_info, context_create, context_destroy,
    compile, model_destroy, model_info, set_input, forward, backward, nothing, nothing, read_loss,
    param_buffers, read_param, write_param, memory_in_use};

static const dlhost_plugin kPlugin = {
    DLHOST_PLUGIN_STRUCT_SIZE, DLHOST_ABI_MAJOR, DLHOST_ABI_MINOR, DLHOST_PLUGIN_BACKEND,
    "compat_v" STR(DLHOST_ABI_MAJOR) "_" STR(DLHOST_ABI_MINOR), "1.0",
    "test fixture: a C backend built against frozen ABI headers", NULL, &kApi, NULL, NULL, NULL};

DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  if (host == NULL || host->abi_major != DLHOST_ABI_MAJOR) return NULL;
  g_host = host;
  return &kPlugin;
}
