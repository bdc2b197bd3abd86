// model.cpp — compiles a dlhost graph into replayable oneDNN steps and runs the training step:
// forward, backward with grad-ready notices, and the SGD update. The per-op primitives are made
// in layers.cpp; this file owns buffers, layouts, the shared scratchpad and the optimizer.
// Thread-safety: as model.h (one caller at a time per model).
#include "model.h"

#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "dlhost/common.hpp"

namespace dlhost::cpu_onednn {

namespace sdk = dlhost::sdk;

void Context::apply_threads() const {
  if (host.threads > 0) omp_set_num_threads(host.threads);
}

void with_dnnl(const std::string& what, const std::function<void()>& body) {
  try {
    body();
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_unimplemented)
      sdk::unimplemented("cpu_onednn: " + what + ": oneDNN has no implementation (" + e.what() +
                         ")");
    // Out of memory is the case's size, not a fault of the plugin: the record must say OOM.
    if (e.status == dnnl_out_of_memory)
      sdk::fail(DLHOST_CODE_RESOURCE_EXHAUSTED,
                "cpu_onednn: " + what + ": out of memory (" + e.what() + ")");
    sdk::fail(DLHOST_CODE_INTERNAL, "cpu_onednn: " + what + ": " + e.what());
  }
}

bool has_bf16_isa() {
  // oneDNN's ISA values are bit sets, each containing the ones below it: avx512_core_amx and
  // avx512_core_fp16 (3.x) contain avx512_core_bf16's bits, avx2_vnni_2 (bf16 conversions, no
  // bf16 dot products) does not.
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & bf16) == bf16;
}

std::string bf16_isa_gap() {
  return std::string("precision bf16 needs avx512_core_bf16 or AMX; this CPU: ") +
         compat::isa_name(dnnl::get_effective_cpu_isa());
}

Md plain_md(const std::vector<int64_t>& dims, dnnl::memory::data_type type) {
  using tag = dnnl::memory::format_tag;
  static const tag kTags[] = {tag::undef, tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde};
  if (dims.empty() || dims.size() > 5)
    sdk::unimplemented("cpu_onednn: tensors of rank " + std::to_string(dims.size()) +
                       " not supported");
  return Md(dims, type, kTags[dims.size()]);
}

namespace {

// Chunk of gradient elements per norm partial sum: big enough to amortize the parallel loop,
// fixed so that the summation order never depends on the thread count.
constexpr int64_t kNormChunk = 1 << 16;
// Below this many elements an OpenMP region costs more than the loop it would split.
constexpr int64_t kParallelMin = 1 << 14;

}  // namespace

Model::Model(const Context& context, const dlhost_graph* graph,
             const dlhost_optimizer_desc& optimizer, uint64_t seed, bool bf16, bool fused_step)
    : context_(context), optimizer_(optimizer), seed_(seed), bf16_(bf16), fused_step_(fused_step) {
  context_.apply_threads();
  if (bf16_ && !has_bf16_isa()) sdk::unimplemented("cpu_onednn: " + bf16_isa_gap());
  if (optimizer_.kind == DLHOST_OPTIMIZER_ADAMW &&
      !(optimizer_.beta1 >= 0 && optimizer_.beta1 < 1 && optimizer_.beta2 >= 0 &&
        optimizer_.beta2 < 1 && optimizer_.epsilon >= 0))
    sdk::invalid("cpu_onednn: AdamW needs beta1 and beta2 in [0, 1) and epsilon >= 0");
  // One scratchpad for every primitive: they run one after another on one stream.
  attr_.set_scratchpad_mode(dnnl::scratchpad_mode::user);

  tensors_.resize(graph->num_tensors);
  for (int32_t i = 0; i < graph->num_tensors; ++i) {
    const dlhost_tensor_desc& d = sdk::tensor(graph, i);
    Tensor& t = tensors_[i];
    t.name = d.name != nullptr ? d.name : ("tensor" + std::to_string(i));
    t.dtype = d.dtype;
    t.dims = sdk::dims_of(d);
    t.elements = sdk::element_count(d);
    t.is_loss = d.rank == 0;
  }
  params_.resize(graph->num_params);
  for (int32_t i = 0; i < graph->num_params; ++i) {
    const dlhost_param_desc& p = *graph->params[i];
    params_[i].name = p.name != nullptr ? p.name : ("param" + std::to_string(i));
    params_[i].count = p.count;
  }
  inputs_.assign(graph->inputs, graph->inputs + graph->num_inputs);

  // A tensor needs a gradient when a parameter lies upstream of it; the others (inputs, what
  // only depends on inputs) get no diff buffer and their backward-data primitives are skipped.
  for (int32_t n = 0; n < graph->num_nodes; ++n) {
    const dlhost_node& node = *graph->nodes[n];
    if (node.op == DLHOST_OP_INPUT) continue;
    bool grad = node.num_params > 0;
    for (int32_t i = 0; i < node.num_inputs; ++i) grad = grad || tensor(node.inputs[i]).needs_grad;
    Tensor& out = tensor(node.output);
    out.needs_grad = grad && !out.is_loss;
    out.producer_op = node.op;
    for (int32_t i = 0; i < node.num_inputs; ++i) ++tensor(node.inputs[i]).consumers;
  }

  // The fusion-planning pass (fusion_plan.h): its spans become the fused layers built below.
  PlanOptions plan_options;
  plan_options.fused_step = fused_step_;
  plan_options.sgd_in_backward = sgd_in_backward();
  plan_ = FusionPlan(graph, plan_options);

  // A plain layer per node, and one fused layer per span of the plan, made at its first node
  // and asked for each of its nodes' steps in turn.
  layers_.resize(graph->num_nodes);
  fused_layer_of_.assign(graph->num_nodes, nullptr);
  for (int32_t n = 0; n < graph->num_nodes; ++n) {
    const dlhost_node& node = *graph->nodes[n];
    std::string name = node.name != nullptr ? node.name : ("node" + std::to_string(n));
    with_dnnl("node " + name, [&] {
      const FusedSpan* span = plan_.span_of(n);
      if (span != nullptr && fused_layer_of_[n] == nullptr) {
        fused_layers_.push_back(make_fused_layer(graph, *span));
        for (int32_t member : span->nodes) fused_layer_of_[member] = fused_layers_.back().get();
      }
      if (fused_layer_of_[n] != nullptr) {
        fused_layer_of_[n]->build_forward(*this, forward_steps_, n);
        return;
      }
      layers_[n] = make_layer(graph, n);
      layers_[n]->build_forward(*this, forward_steps_);
    });
  }
  for (int32_t n = graph->num_nodes - 1; n >= 0; --n) {
    const dlhost_node& node = *graph->nodes[n];
    std::string name = node.name != nullptr ? node.name : ("node" + std::to_string(n));
    building_backward_ = true;
    with_dnnl("node " + name, [&] {
      if (fused_layer_of_[n] != nullptr)
        fused_layer_of_[n]->build_backward(*this, backward_steps_, n);
      else
        layers_[n]->build_backward(*this, backward_steps_);
    });
    building_backward_ = false;
    end_node_backward(tensor(node.output));
  }
  for (const Param& p : params_)
    if (!p.value) sdk::invalid("cpu_onednn: parameter " + p.name + " belongs to no node");
  finish_scratchpad();
  build_update();
  plan_.finish();
  // DLHOST_CPU_ONEDNN_PLAN=1: the fusion plan on stderr as built (fusion_plan.h), for a developer.
  const char* show_plan = std::getenv("DLHOST_CPU_ONEDNN_PLAN");
  if (show_plan != nullptr && *show_plan != '\0' && std::strcmp(show_plan, "0") != 0)
    std::fprintf(stderr, "cpu_onednn fusion plan:\n%s", plan_.describe().c_str());
  const char* profile = std::getenv("DLHOST_CPU_ONEDNN_PROFILE");
  profile_ = profile != nullptr && *profile != '\0' && std::strcmp(profile, "0") != 0;
}

Model::~Model() {
  if (profile_) print_profile();
}

// One line per step name (a layer's steps of one kind are summed), largest first, in ms per
// forward call: the warm-up calls are included, so run enough steps for them not to matter.
void Model::print_profile() const {
  if (forward_calls_ == 0) return;
  std::vector<std::pair<std::string, double>> rows;
  for (const Steps* list : {&forward_steps_, &backward_steps_}) {
    for (const Step& s : *list) {
      if (s.ready_param >= 0) continue;
      auto it =
          std::find_if(rows.begin(), rows.end(), [&](const auto& r) { return r.first == s.what; });
      if (it == rows.end())
        rows.emplace_back(s.what, s.spent_ms);
      else
        it->second += s.spent_ms;
    }
  }
  rows.emplace_back("update (clipping, optimizer)", update_ms_);
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  double total = 0;
  for (const auto& r : rows) total += r.second;
  const double calls = static_cast<double>(forward_calls_);
  std::fprintf(stderr, "cpu_onednn profile: %.3f ms per step over %llu steps, %d thread(s)\n",
               total / calls, static_cast<unsigned long long>(forward_calls_), context_.threads);
  for (const auto& [what, ms] : rows)
    std::fprintf(stderr, "  %9.3f ms %5.1f%%  %s\n", ms / calls,
                 total > 0 ? 100.0 * ms / total : 0.0, what.c_str());
}

Model::Arena::~Arena() {
  if (base != nullptr) munmap(base, reserved);
}

Tensor& Model::tensor(int32_t id) {
  if (id < 0 || id >= static_cast<int32_t>(tensors_.size()))
    sdk::invalid("cpu_onednn: tensor id " + std::to_string(id) + " out of range");
  return tensors_[id];
}

Param& Model::param(int32_t id) { return params_[sdk::param_index(id, params_.size())]; }

dnnl::memory Model::alloc(const Md& md, bool is_param) {
  dnnl::memory mem(md, context_.engine);
  size_t size = md.get_size();
  // Touch every page now so that no training step pays the first-touch cost.
  if (size > 0) std::memset(mem.get_data_handle(), 0, size);
  (is_param ? param_bytes_ : workspace_bytes_) += size;
  return mem;
}

void Model::alloc_param(int32_t id, const Md& md, const Md& user_md) {
  Param& p = param(id);
  if (p.value) sdk::invalid("cpu_onednn: parameter " + p.name + " is used by two nodes");
  int64_t user_count = static_cast<int64_t>(user_md.get_size() / sizeof(float));
  if (user_count != p.count)
    sdk::invalid("cpu_onednn: parameter " + p.name + " has " + std::to_string(p.count) +
                 " elements, its node needs " + std::to_string(user_count));
  p.user_md = user_md;
  p.value = alloc(md, true);
  p.grad = alloc(md);
  if (optimizer_.kind == DLHOST_OPTIMIZER_ADAMW) {
    p.velocity = alloc(md);
    p.moment2 = alloc(md);
  } else if (optimizer_.momentum != 0.0f) {
    p.velocity = alloc(md);
  }
  p.floats = static_cast<int64_t>(md.get_size() / sizeof(float));
}

void Model::alloc_tensor(Tensor& t, const Md& md) {
  t.md = md;
  t.value = dnnl::memory(md, context_.engine, arena_at(take_pooled(md.get_size())));
}

dnnl::memory& Model::diff_of(Tensor& t) {
  if (!t.needs_grad) sdk::invalid("cpu_onednn: tensor " + t.name + " has no gradient");
  if (t.diff) return t.diff;
  t.diff_offset = static_cast<int64_t>(take_pooled(t.md.get_size()));
  t.diff = dnnl::memory(t.md, context_.engine, arena_at(static_cast<size_t>(t.diff_offset)));
  return t.diff;
}

namespace {

// Every range of the arena starts on a cache line (what oneDNN's own allocations align to).
constexpr size_t kArenaAlign = 64;
size_t arena_round(size_t bytes) {
  return std::max(kArenaAlign, (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign);
}

}  // namespace

size_t Model::take_pooled(size_t bytes) {
  bytes = arena_round(bytes);
  if (arena_.base == nullptr) {
    // Address space only (PROT_NONE commits nothing): twice the machine's memory, so that a
    // model too large fails as out of memory when it grows, not here.
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    arena_.reserved = 2 * static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * page;
    void* p = mmap(nullptr, arena_.reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
      sdk::fail(DLHOST_CODE_RESOURCE_EXHAUSTED, "cpu_onednn: cannot reserve " +
                                                    std::to_string(arena_.reserved >> 20) +
                                                    " MiB of address space for tensors");
    arena_.base = static_cast<char*>(p);
  }
  auto best = free_ranges_.end();
  for (auto it = free_ranges_.begin(); it != free_ranges_.end(); ++it)
    if (it->second >= bytes && (best == free_ranges_.end() || it->second < best->second)) best = it;
  if (best != free_ranges_.end()) {
    const size_t offset = best->first, left = best->second - bytes;
    free_ranges_.erase(best);
    if (left > 0) free_ranges_.emplace(offset + bytes, left);
    return offset;
  }
  // No free range fits: the one at the end, if any, grows into new bytes.
  size_t offset = arena_.used;
  if (!free_ranges_.empty()) {
    auto last = std::prev(free_ranges_.end());
    if (last->first + last->second == arena_.used) {
      offset = last->first;
      free_ranges_.erase(last);
    }
  }
  const size_t end = offset + bytes;
  if (end > arena_.reserved)
    sdk::fail(DLHOST_CODE_RESOURCE_EXHAUSTED, "cpu_onednn: tensors need more than " +
                                                  std::to_string(arena_.reserved >> 20) + " MiB");
  const size_t grow = end - arena_.used;
  // mprotect rounds to whole pages; the pages of the range grown may already be open.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  char* from = arena_.base + arena_.used / page * page;
  if (mprotect(from, static_cast<size_t>(arena_.base + end - from), PROT_READ | PROT_WRITE) != 0)
    sdk::fail(DLHOST_CODE_RESOURCE_EXHAUSTED,
              "cpu_onednn: out of memory for " + std::to_string(grow >> 20) + " MiB of tensors");
  // Touch every page now so that no training step pays the first-touch cost.
  std::memset(arena_.base + arena_.used, 0, grow);
  workspace_bytes_ += grow;
  arena_.used = end;
  return offset;
}

void Model::give_back(size_t offset, size_t bytes) {
  bytes = arena_round(bytes);
  auto next = free_ranges_.lower_bound(offset);
  if (next != free_ranges_.end() && offset + bytes == next->first) {
    bytes += next->second;
    next = free_ranges_.erase(next);
  }
  if (next != free_ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += bytes;
      return;
    }
  }
  free_ranges_.emplace(offset, bytes);
}

dnnl::memory Model::scratch(const Md& md) {
  if (!building_backward_) return alloc(md);
  node_scratches_.emplace_back(take_pooled(md.get_size()), md.get_size());
  return dnnl::memory(md, context_.engine, arena_at(node_scratches_.back().first));
}

// Once its producer's backward steps are built, no later-built step reads the tensor's value
// (its readers are the producer and its consumers, all built by now), and the next forward
// writes it before anything reads it: until then its bytes can hold gradients. PyTorch's
// allocator reuses freed activations for gradients the same way; without this, ResNet-50's
// gradient pool was 286 MiB on top of its activations. Graph inputs stay (they are set once
// and read by every step), so do the loss and a buffer already lent (an in-place activation's
// output shares its input's bytes).
void Model::lend_value(Tensor& t) {
  if (!t.value || t.producer_op == 0 || t.producer_op == DLHOST_OP_INPUT || t.is_loss) return;
  char* data = static_cast<char*>(t.value.get_data_handle());
  if (data < arena_.base || data >= arena_.base + arena_.used) return;  // not an arena value
  t.value_lent = true;
  if (std::find(lent_values_.begin(), lent_values_.end(), data) != lent_values_.end()) return;
  lent_values_.push_back(data);
  give_back(static_cast<size_t>(data - arena_.base), t.value.get_desc().get_size());
}

void Model::write_over(Tensor& x, Tensor& y, const std::string& node) {
  y.md = x.md;
  y.value = x.value;
  x.overwritten_by = node;
}

bool Model::value_kept(const Tensor& t) const {
  const char* data = static_cast<const char*>(t.value.get_data_handle());
  return !t.value_lent &&
         std::find(lent_values_.begin(), lent_values_.end(), data) == lent_values_.end();
}

void Model::end_node_backward(Tensor& output) {
  release_diff(output);
  lend_value(output);
  for (const auto& [offset, bytes] : node_scratches_) give_back(offset, bytes);
  node_scratches_.clear();
}

void Model::release_diff(Tensor& t) {
  if (t.diff_offset < 0) return;
  give_back(static_cast<size_t>(t.diff_offset), t.md.get_size());
  t.diff_offset = -1;
}

dnnl::memory Model::product_operand(const dnnl::memory& plain, Steps& steps,
                                    const std::string& what) {
  if (!bf16_) return plain;
  const std::vector<int64_t> dims = compat::dims_of(plain.get_desc());
  if (plain.get_desc() != plain_md(dims, dnnl::memory::data_type::f32))
    sdk::fail(DLHOST_CODE_INTERNAL, "cpu_onednn: " + what + ": a bf16 copy of a non-plain buffer");
  return as_layout(plain, plain_md(dims, dnnl::memory::data_type::bf16), steps,
                   what + " (to bf16)");
}

void Model::refuse_bf16(const std::string& node, const char* op) const {
  if (bf16_)
    sdk::unimplemented(std::string("cpu_onednn: precision bf16 is not implemented for op ") + op +
                       " (node " + node + "); bf16 covers fc, conv2d, attention and tied_fc");
}

dnnl::memory Model::as_layout(const dnnl::memory& mem, const Md& want, Steps& steps,
                              const std::string& what) {
  if (mem.get_desc() == want) return mem;
  dnnl::memory out = scratch(want);
  dnnl::reorder::primitive_desc pd(context_.engine, mem.get_desc(), context_.engine, want, attr_);
  add_primitive(steps, what + ": reorder", dnnl::reorder(pd), pd,
                {{DNNL_ARG_FROM, mem}, {DNNL_ARG_TO, out}});
  return out;
}

dnnl::memory Model::diff_sink(Tensor& t, const Md& produced, Steps& post, const std::string& what) {
  bool accumulate = t.diff_written;
  t.diff_written = true;
  diff_of(t);
  if (!accumulate && produced == t.md) return t.diff;
  dnnl::memory produced_mem = scratch(produced);
  dnnl::memory in_layout = produced_mem;
  if (!(produced == t.md)) {
    in_layout = accumulate ? scratch(t.md) : t.diff;
    dnnl::reorder::primitive_desc pd(context_.engine, produced, context_.engine, t.md, attr_);
    add_primitive(post, what + ": gradient reorder", dnnl::reorder(pd), pd,
                  {{DNNL_ARG_FROM, produced_mem}, {DNNL_ARG_TO, in_layout}});
  }
  if (accumulate) {
    const auto pd = compat::make_pd<dnnl::binary>(context_.engine, attr_, false,
                                                  dnnl::algorithm::binary_add, t.md, t.md, t.md);
    add_primitive(post, what + ": gradient sum", dnnl::binary(pd), pd,
                  {{DNNL_ARG_SRC_0, t.diff}, {DNNL_ARG_SRC_1, in_layout}, {DNNL_ARG_DST, t.diff}});
  }
  return produced_mem;
}

bool Model::adopt_diff(Tensor& t, const dnnl::memory& mem) {
  if (!t.needs_grad || t.diff || t.diff_written || !(mem.get_desc() == t.md)) return false;
  t.diff = mem;  // diff_offset stays -1: not the pool's bytes, so release_diff keeps them
  t.diff_written = true;
  return true;
}

bool Model::pass_diff(Tensor& from, Tensor& to) {
  if (!to.needs_grad || to.diff || to.diff_written || from.diff_offset < 0 || !(from.md == to.md))
    return false;
  to.diff_offset = from.diff_offset;
  from.diff_offset = -1;  // release_diff(from) leaves the bytes to `to`
  to.diff = dnnl::memory(to.md, context_.engine, arena_at(static_cast<size_t>(to.diff_offset)));
  to.diff_written = true;
  return true;
}

void Model::hand_over_diff(Tensor& from, Tensor& to, Steps& steps, const std::string& what) {
  if (!to.needs_grad || pass_diff(from, to)) return;
  Steps post;
  dnnl::memory sink = diff_sink(to, from.md, post, what);
  dnnl::reorder::primitive_desc pd(context_.engine, from.md, context_.engine, from.md, attr_);
  add_primitive(steps, what, dnnl::reorder(pd), pd,
                {{DNNL_ARG_FROM, diff_of(from)}, {DNNL_ARG_TO, sink}});
  steps.insert(steps.end(), post.begin(), post.end());
}

dnnl::memory Model::output_as(const dnnl::memory& target, const Md& produced, Steps& post,
                              const std::string& what) {
  if (produced == target.get_desc()) return target;
  dnnl::memory out = scratch(produced);
  dnnl::reorder::primitive_desc pd(context_.engine, produced, context_.engine, target.get_desc(),
                                   attr_);
  add_primitive(post, what + ": reorder", dnnl::reorder(pd), pd,
                {{DNNL_ARG_FROM, out}, {DNNL_ARG_TO, target}});
  return out;
}

void Model::add_primitive(Steps& steps, const std::string& what, const dnnl::primitive& prim,
                          const dnnl::primitive_desc_base& pd, const Args& args) {
  Step s;
  s.what = what;
  s.prim = prim;
  s.scratchpad_md = pd.scratchpad_desc();
  for (const auto& [arg, mem] : args) {
    s.hold.push_back(mem);
    s.args.push_back({arg, mem.get()});
  }
  steps.push_back(std::move(s));
}

void Model::add_function(Steps& steps, const std::string& what, std::function<void()> fn) {
  Step s;
  s.what = what;
  s.fn = std::move(fn);
  steps.push_back(std::move(s));
}

void Model::add_ready(Steps& steps, int32_t param) {
  Step s;
  s.what = "grad ready";
  s.ready_param = param;
  steps.push_back(std::move(s));
}

void Model::note_implementation(const std::string& primitive, const char* impl) {
  std::string key = primitive + "=" + (impl != nullptr ? impl : "?");
  for (auto& [k, count] : implementations_) {
    if (k == key) {
      ++count;
      return;
    }
  }
  implementations_.emplace_back(key, 1);
}

void Model::finish_scratchpad() {
  size_t size = 0;
  for (const Steps* list : {&forward_steps_, &backward_steps_})
    for (const Step& s : *list)
      if (s.prim) size = std::max(size, s.scratchpad_md.get_size());
  if (size == 0) return;
  scratchpad_ = alloc(
      Md({static_cast<int64_t>(size)}, dnnl::memory::data_type::u8, dnnl::memory::format_tag::a));
  for (Steps* list : {&forward_steps_, &backward_steps_}) {
    for (Step& s : *list) {
      if (!s.prim || s.scratchpad_md.get_size() == 0) continue;
      s.hold.emplace_back(s.scratchpad_md, context_.engine, scratchpad_.get_data_handle());
      s.args.push_back({DNNL_ARG_SCRATCHPAD, s.hold.back().get()});
    }
  }
}

void Model::build_update() {
  int64_t chunks = 0;
  for (const Param& p : params_) {
    const float* g = static_cast<const float*>(p.grad.get_data_handle());
    for (int64_t off = 0; off < p.floats; off += kNormChunk, ++chunks)
      norm_chunks_.push_back({g + off, std::min(kNormChunk, p.floats - off)});
  }
  norm_partials_.assign(chunks, 0.0);
  for (const auto& [key, count] : implementations_) {
    if (!implementation_.empty()) implementation_ += ", ";
    implementation_ += key;
    if (count > 1) implementation_ += " x" + std::to_string(count);
  }
  if (implementation_.empty()) implementation_ = "no conv/inner product";
}

// The profile's clock: read only when profiling, so a plain run pays one branch per step.
Model::Clock::time_point Model::profile_start() const {
  return profile_ ? Clock::now() : Clock::time_point();
}

double Model::ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void Model::run(Steps& steps) {
  for (Step& s : steps) {
    const auto start = profile_start();
    if (s.prim) {
      dnnl_status_t status = dnnl_primitive_execute(s.prim.get(), context_.stream.get(),
                                                    static_cast<int>(s.args.size()), s.args.data());
      if (status != dnnl_success)
        sdk::fail(DLHOST_CODE_INTERNAL, "cpu_onednn: " + s.what +
                                            ": execution failed (dnnl status " +
                                            std::to_string(static_cast<int>(status)) + ")");
    } else if (s.fn) {
      s.fn();
    } else if (s.ready_param >= 0 && ready_ != nullptr) {
      ready_->fn(ready_->user, s.ready_param);
    }
    if (profile_) s.spent_ms += ms_since(start);
  }
}

void Model::set_input(int32_t id, const void* data, size_t bytes) {
  if (std::find(inputs_.begin(), inputs_.end(), id) == inputs_.end())
    sdk::invalid("cpu_onednn: set_input: tensor " + std::to_string(id) + " is not a graph input");
  Tensor& t = tensor(id);
  size_t expected = static_cast<size_t>(t.elements) * 4;
  if (bytes != expected)
    sdk::invalid("cpu_onednn: set_input: " + t.name + " holds " + std::to_string(expected) +
                 " bytes, got " + std::to_string(bytes));
  if (data == nullptr) sdk::invalid("cpu_onednn: set_input: " + t.name + ": null data");
  if (t.dtype == DLHOST_DTYPE_I32 && t.label_classes > 0) {
    const int32_t* labels = static_cast<const int32_t*>(data);
    for (int64_t i = 0; i < t.elements; ++i) {
      if (labels[i] < 0 || labels[i] >= t.label_classes)
        sdk::invalid("cpu_onednn: set_input: " + t.name + "[" + std::to_string(i) +
                     "] = " + std::to_string(labels[i]) + " is not a class in [0, " +
                     std::to_string(t.label_classes) + ")");
    }
  }
  std::memcpy(t.value.get_data_handle(), data, bytes);
}

void Model::forward() {
  context_.apply_threads();
  values_overwritten_ = false;
  run(forward_steps_);
  ++forward_calls_;
}

void Model::backward(const dlhost_grad_ready* ready) {
  context_.apply_threads();
  if (ready != nullptr &&
      (ready->struct_size < DLHOST_GRAD_READY_STRUCT_SIZE || ready->fn == nullptr))
    sdk::invalid("cpu_onednn: backward: grad_ready without fn");
  ready_ = ready;
  values_overwritten_ = true;  // lent values now hold gradients (lend_value)
  try {
    run(backward_steps_);
  } catch (...) {
    ready_ = nullptr;
    throw;
  }
  ready_ = nullptr;
}

void Model::update() {
  context_.apply_threads();
  const auto start = profile_start();
  float scale = 1.0f;
  if (optimizer_.clip_norm > 0.0f) {
    const int64_t chunks = static_cast<int64_t>(norm_chunks_.size());
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const float* g = norm_chunks_[c].data;
      // A simd reduction: one serial chain of double additions is latency-bound (~8 ms of an
      // LSTM step for 6.2M gradients); its lanes are summed in an order fixed at compile time,
      // so the norm still does not depend on the thread count.
      double sum = 0.0;
#pragma omp simd reduction(+ : sum)
      for (int64_t i = 0; i < norm_chunks_[c].n; ++i) sum += static_cast<double>(g[i]) * g[i];
      norm_partials_[c] = sum;
    }
    double total = 0.0;
    for (double partial : norm_partials_) total += partial;
    double norm = std::sqrt(total);
    if (norm > optimizer_.clip_norm) scale = static_cast<float>(optimizer_.clip_norm / norm);
  }
  if (optimizer_.kind == DLHOST_OPTIMIZER_ADAMW) {
    adamw_update(scale);
    if (profile_) update_ms_ += ms_since(start);
    return;
  }
  const float lr = optimizer_.learning_rate;
  const float momentum = optimizer_.momentum;
  const float decay = optimizer_.weight_decay;
  for (size_t id = 0; id < params_.size(); ++id) {
    Param& p = params_[id];
    float* w = static_cast<float*>(p.value.get_data_handle());
    const float* g = static_cast<const float*>(p.grad.get_data_handle());
    const int64_t n = p.floats;
    if (plan_.updated_in_backward(static_cast<int32_t>(id))) {
      // A fused "fc backward+sgd" node (fusion_plan.h) applied this parameter's step in its
      // weight-gradient GEMM and never wrote `grad`: it did the step (momentum 0) or left
      // mu v + g in v: the same v as below, its sums in another order (scale is 1: no clipping
      // on this path).
      if (momentum == 0.0f) continue;
      float* v = static_cast<float*>(p.velocity.get_data_handle());
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) {
        v[i] += decay * w[i];
        w[i] -= lr * v[i];
      }
      continue;
    }
    if (momentum == 0.0f) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) w[i] -= lr * (scale * g[i] + decay * w[i]);
    } else {
      float* v = static_cast<float*>(p.velocity.get_data_handle());
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) {
        v[i] = momentum * v[i] + (scale * g[i] + decay * w[i]);
        w[i] -= lr * v[i];
      }
    }
  }
  if (profile_) update_ms_ += ms_since(start);
}

// AdamW as dlhost_backend.h states it (cpu_reference's order: clipping scales the raw gradient,
// decay is decoupled, bias corrections from t). oneDNN has no optimizer primitive: one fused,
// vectorized pass per parameter. A padded element (a blocked layout's) has zero gradient and
// value, so it stays zero.
void Model::adamw_update(float scale) {
  ++updates_;
  const double t = static_cast<double>(updates_);
  const float b1 = optimizer_.beta1, b2 = optimizer_.beta2, eps = optimizer_.epsilon;
  const float lr = optimizer_.learning_rate;
  const float keep = 1.0f - lr * optimizer_.weight_decay;
  // m / c1 / (sqrt(v / c2) + eps) = (m / c1) / (sqrt(v) / sqrt(c2) + eps)
  const float step = static_cast<float>(lr / (1.0 - std::pow(double(b1), t)));
  const float inv_sqrt_c2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(double(b2), t)));
  for (Param& p : params_) {
    float* w = static_cast<float*>(p.value.get_data_handle());
    const float* g = static_cast<const float*>(p.grad.get_data_handle());
    float* m1 = static_cast<float*>(p.velocity.get_data_handle());
    float* m2 = static_cast<float*>(p.moment2.get_data_handle());
    const int64_t n = p.floats;
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
      const float gi = scale * g[i];
      m1[i] = b1 * m1[i] + (1.0f - b1) * gi;
      m2[i] = b2 * m2[i] + (1.0f - b2) * gi * gi;
      w[i] = keep * w[i] - step * m1[i] / (std::sqrt(m2[i]) * inv_sqrt_c2 + eps);
    }
  }
}

void Model::synchronize() { context_.stream.wait(); }

void Model::param_buffers(int32_t id, dlhost_buffer* value, dlhost_buffer* grad) {
  Param& p = param(id);
  // The internal (maybe blocked and padded) buffer: a collective must cover the padding too.
  auto fill = [](dlhost_buffer* out, const dnnl::memory& mem) {
    sdk::host_buffer(out, static_cast<float*>(mem.get_data_handle()),
                     mem.get_desc().get_size() / sizeof(float));
  };
  fill(value, p.value);
  fill(grad, p.grad);
}

namespace {

// read_param/write_param's arguments checked in the framework kit's order and words (the id,
// then exactly the parameter's F32 bytes, then the part); the part's memory.
const dnnl::memory& checked_part(int32_t id, const Param& p, int32_t part, const void* data,
                                 size_t bytes) {
  sdk::expect_bytes("parameter " + std::to_string(id), data != nullptr, bytes,
                    static_cast<size_t>(p.count) * sizeof(float));
  sdk::expect_param_part(part);
  return part == DLHOST_PARAM_VALUE ? p.value : p.grad;
}

}  // namespace

void Model::read_param(int32_t id, int32_t part, void* data, size_t bytes) {
  Param& p = param(id);
  // A handle copy: execute() wants non-const.
  dnnl::memory internal = checked_part(id, p, part, data, bytes);
  with_dnnl("read_param " + p.name, [&] {
    dnnl::memory user(p.user_md, context_.engine, data);
    dnnl::reorder(internal, user).execute(context_.stream, internal, user);
    context_.stream.wait();
  });
}

// The value in the tensor's internal layout, reordered into the canonical row-major one.
void Model::read_tensor(int32_t id, void* data, size_t bytes) {
  Tensor& t = tensor(id);
  if (t.dtype != DLHOST_DTYPE_F32 || !t.value)
    sdk::invalid("cpu_onednn: read_tensor: " + t.name + " is not a float32 tensor with a value");
  if (bytes != static_cast<size_t>(t.elements) * 4)
    sdk::invalid("cpu_onednn: read_tensor: " + t.name + " holds " + std::to_string(t.elements * 4) +
                 " bytes, got " + std::to_string(bytes));
  // Where a successor works in place, the bytes hold its output after forward: refused rather
  // than handed back as this tensor's value. Read that node's output, or the tensor on
  // cpu_reference, which keeps every value.
  if (!t.overwritten_by.empty())
    sdk::unimplemented("cpu_onednn: read_tensor: " + t.name + " is not kept: " + t.overwritten_by +
                       " writes its output over it in place");
  if (t.value_lent && values_overwritten_)
    sdk::unimplemented("cpu_onednn: read_tensor: " + t.name +
                       " is not kept after backward (its bytes hold gradients until the next "
                       "forward): read it between forward and backward");
  with_dnnl("read_tensor " + t.name, [&] {
    dnnl::memory user(plain_md(t.dims, dnnl::memory::data_type::f32), context_.engine, data);
    dnnl::memory internal = t.value;  // a handle copy: execute() wants non-const
    dnnl::reorder(internal, user).execute(context_.stream, internal, user);
    context_.stream.wait();
  });
}

void Model::write_param(int32_t id, int32_t part, const void* data, size_t bytes) {
  Param& p = param(id);
  // A handle copy: execute() wants non-const.
  dnnl::memory internal = checked_part(id, p, part, data, bytes);
  with_dnnl("write_param " + p.name, [&] {
    // The reorder only reads from `user`.
    dnnl::memory user(p.user_md, context_.engine, const_cast<void*>(data));
    dnnl::reorder(user, internal).execute(context_.stream, user, internal);
    context_.stream.wait();
  });
}

Model::RunningStats Model::add_running_stats(const std::string& node, int64_t channels) {
  RunningStats r;
  r.node = node;
  r.channels = channels;
  r.buffer = alloc(Md({2 * channels}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a));
  r.mean = static_cast<float*>(r.buffer.get_data_handle());
  r.variance = r.mean + channels;
  std::fill(r.variance, r.variance + channels, 1.0f);
  running_stats_.push_back(r);
  return r;
}

sdk::ModelInfo Model::info() const {
  // Under the host's fused_step the loss's gradient is made in forward, SGD may run inside
  // backward and no gradient is announced: the three calls are not the three phases (ABI 1.5).
  return {context_.threads, implementation_.c_str(), param_bytes_, workspace_bytes_, fused_step_};
}

}  // namespace dlhost::cpu_onednn
