// layers_lstm.cpp — the multi-layer LSTM on cuDNN's RNN API (v8: cudnnRNNForward,
// cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8), batch-major unpacked sequences, one bias
// per gate (CUDNN_RNN_SINGLE_INP_BIAS, the ABI's collapsed b_ih + b_hh), gates i, f, g, o in
// cuDNN's linear-layer order 0-3 (input) and 4-7 (recurrent), each gate matrix row-major [H, C]
// as in the canonical layout. The parameters stay in the model's arenas (one SGD update for all);
// forward copies them into cuDNN's packed weight space and backward copies the weight gradients
// out, in as few device copies as the two layouts allow (adjacent pieces merge).
#include <cstring>

#include "layers.h"

namespace dlhost::gpu_cudnn {
namespace {

using RnnDesc =
    Descriptor<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;
using RnnDataDesc = Descriptor<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor,
                               cudnnDestroyRNNDataDescriptor>;
using DropoutDesc = Descriptor<cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor,
                               cudnnDestroyDropoutDescriptor>;

// A piece copied between a canonical parameter and the packed weight space.
struct Piece {
  char* canonical;  // in the value arena; the gradient sits at the same offset of its arena
  ptrdiff_t grad_shift;
  char* packed;  // in the weight space; the gradient at the same offset of its space
  size_t bytes;
};

struct Lstm {
  RnnDesc rnn;
  DropoutDesc dropout;
  RnnDataDesc x, y;
  TensorDesc h;
  int32_t* seq_lengths = nullptr;  // device, one per sample
  size_t weight_bytes = 0, work_bytes = 0, reserve_bytes = 0;
  char *weights = nullptr, *dweights = nullptr;
  void* reserve = nullptr;
  float* dx_scratch = nullptr;  // when dx must be added to, or nobody wants it
  std::vector<Piece> pieces;
};

void add_piece(std::vector<Piece>& pieces, Piece p) {
  if (!pieces.empty()) {
    Piece& last = pieces.back();
    if (last.canonical + last.bytes == p.canonical && last.packed + last.bytes == p.packed &&
        last.grad_shift == p.grad_shift) {
      last.bytes += p.bytes;
      return;
    }
  }
  pieces.push_back(p);
}

Piece piece(Param& p, size_t offset, void* packed, size_t bytes) {
  char* value = reinterpret_cast<char*>(p.value);
  return {value + offset, reinterpret_cast<char*>(p.grad) - value, static_cast<char*>(packed),
          bytes};
}

// Where each gate's matrix and bias of layer `l` lives in the weight space.
void map_layer(Model& m, Lstm& s, int32_t l, int64_t in, int64_t hidden, Param* w[3]) {
  TensorDesc mdesc, bdesc;
  const size_t gate_in = static_cast<size_t>(hidden * in) * 4,
               gate_h = static_cast<size_t>(hidden * hidden) * 4,
               gate_b = static_cast<size_t>(hidden) * 4;
  // Matrices first, then biases: each kind's pieces are adjacent in both layouts when cuDNN
  // packs them as the canonical parameters are, and then merge into one copy.
  std::vector<Piece> biases;
  for (int32_t lin = 0; lin < 8; ++lin) {
    void *mat = nullptr, *bias = nullptr;
    check_cudnn(cudnnGetRNNWeightParams(m.cudnn(), s.rnn, l, s.weight_bytes, s.weights, lin, mdesc,
                                        &mat, bdesc, &bias),
                "cudnnGetRNNWeightParams");
    const size_t gate = static_cast<size_t>(lin % 4);
    const size_t gate_bytes = lin < 4 ? gate_in : gate_h;
    add_piece(s.pieces, piece(*w[lin < 4 ? 0 : 1], gate * gate_bytes, mat, gate_bytes));
    if (lin < 4 && bias != nullptr) add_piece(biases, piece(*w[2], gate * gate_b, bias, gate_b));
  }
  for (const Piece& b : biases) add_piece(s.pieces, b);
}

void copy_pieces(Model& m, const Lstm& s, bool to_packed) {
  const ptrdiff_t dshift = s.dweights - s.weights;
  for (const Piece& p : s.pieces) {
    void* dst = to_packed ? static_cast<void*>(p.packed) : p.canonical + p.grad_shift;
    const void* src = to_packed ? static_cast<const void*>(p.canonical) : p.packed + dshift;
    check_cuda(cudaMemcpyAsync(dst, src, p.bytes, cudaMemcpyDeviceToDevice, m.stream()),
               "LSTM weight copy");
  }
}

void describe(Model& m, const dlhost_node& node, Lstm& s, int64_t n, int64_t t, int64_t c,
              int64_t hidden, int64_t layers) {
  size_t states = 0;
  check_cudnn(cudnnDropoutGetStatesSize(m.cudnn(), &states), "cudnnDropoutGetStatesSize");
  void* state = m.memory().alloc(states, "LSTM dropout states");
  check_cudnn(cudnnSetDropoutDescriptor(s.dropout, m.cudnn(), 0.0f, state, states, m.seed()),
              node_label(node) + ": dropout descriptor");
  // Padded I/O is what allows the batch-major unpacked layout (every sequence is full length).
  check_cudnn(cudnnSetRNNDescriptor_v8(
                  s.rnn, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_SINGLE_INP_BIAS,
                  CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT,
                  math_type(m.settings()), static_cast<int32_t>(c), static_cast<int32_t>(hidden),
                  static_cast<int32_t>(hidden), static_cast<int32_t>(layers), s.dropout,
                  CUDNN_RNN_PADDED_IO_ENABLED),
              node_label(node) + ": RNN descriptor");
  const std::vector<int32_t> lengths(static_cast<size_t>(n), static_cast<int32_t>(t));
  float fill = 0;
  for (auto [d, width] : {std::pair{&s.x, c}, std::pair{&s.y, hidden}})
    check_cudnn(
        cudnnSetRNNDataDescriptor(*d, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED,
                                  static_cast<int>(t), static_cast<int>(n), static_cast<int>(width),
                                  lengths.data(), &fill),
        node_label(node) + ": RNN data descriptor");
  const int dims[3] = {static_cast<int>(layers), static_cast<int>(n), static_cast<int>(hidden)};
  const int strides[3] = {dims[1] * dims[2], dims[2], 1};
  check_cudnn(cudnnSetTensorNdDescriptor(s.h, CUDNN_DATA_FLOAT, 3, dims, strides),
              node_label(node) + ": state descriptor");
  s.seq_lengths = m.memory().alloc_n<int32_t>(n, "LSTM sequence lengths");
  m.upload(s.seq_lengths, lengths.data(), lengths.size() * 4, "LSTM sequence lengths");
  check_cudnn(cudnnGetRNNWeightSpaceSize(m.cudnn(), s.rnn, &s.weight_bytes),
              "cudnnGetRNNWeightSpaceSize");
  check_cudnn(cudnnGetRNNTempSpaceSizes(m.cudnn(), s.rnn, CUDNN_FWD_MODE_TRAINING, s.x,
                                        &s.work_bytes, &s.reserve_bytes),
              "cudnnGetRNNTempSpaceSizes");
  s.weights = static_cast<char*>(m.memory().alloc(s.weight_bytes, "LSTM weight space"));
  s.dweights = static_cast<char*>(m.memory().alloc(s.weight_bytes, "LSTM weight gradients"));
  s.reserve = m.memory().alloc(s.reserve_bytes, "LSTM reserve space");
  m.need_workspace(s.work_bytes);
}

}  // namespace

BackwardBuilder lower_lstm(Model& m, const dlhost_node& node) {
  expect_inputs(node, 1);
  const auto& a = attrs_of<dlhost_lstm_attrs>(node, DLHOST_LSTM_ATTRS_STRUCT_SIZE);
  Tensor &in = m.tensor(node.inputs[0]), &out = m.tensor(node.output);
  if (in.dims.size() != 3 || a.hidden <= 0 || a.layers <= 0 || node.num_params != 3 * a.layers)
    node_invalid(node, "lstm wants [N, T, C] and 3 parameters a layer");
  const int64_t n = in.dims[0], t = in.dims[1], c = in.dims[2], hidden = a.hidden;
  auto s = std::make_shared<Lstm>();
  describe(m, node, *s, n, t, c, hidden, a.layers);
  for (int32_t l = 0; l < a.layers; ++l) {
    Param* w[3] = {&m.param(node.params[3 * l]), &m.param(node.params[3 * l + 1]),
                   &m.param(node.params[3 * l + 2])};
    const int64_t layer_in = l == 0 ? c : hidden;
    if (w[0]->count != 4 * hidden * layer_in || w[1]->count != 4 * hidden * hidden ||
        w[2]->count != 4 * hidden)
      node_invalid(node, "lstm layer " + std::to_string(l) + " parameters are not canonical");
    map_layer(m, *s, l, layer_in, hidden, w);
  }
  m.note(std::string(node.name != nullptr ? node.name : "lstm") + ": cuDNN RNN v8 standard, " +
         std::to_string(s->pieces.size()) + " weight copies a step, reserve " +
         std::to_string(s->reserve_bytes >> 10) + " KiB");
  m.add_forward([&m, s, x = in.value, y = out.value] {
    copy_pieces(m, *s, true);
    check_cudnn(
        cudnnRNNForward(m.cudnn(), s->rnn, CUDNN_FWD_MODE_TRAINING, s->seq_lengths, s->x, x, s->y,
                        y, s->h, nullptr, nullptr, s->h, nullptr, nullptr, s->weight_bytes,
                        s->weights, s->work_bytes, m.workspace(), s->reserve_bytes, s->reserve),
        "cudnnRNNForward");
  });
  return [&m, s, &in, &out] {
    // cuDNN overwrites dx: a second writer, or a graph input, goes through a scratch.
    const bool direct = in.grad != nullptr && m.beta_for(in) == 0.0f;
    if (!direct) s->dx_scratch = m.memory().alloc_n<float>(in.count, "LSTM dx");
    m.add_backward([&m, s, direct, count = in.count, x = in.value, dx_in = in.grad, y = out.value,
                    dy = out.grad] {
      float* dx = direct ? dx_in : s->dx_scratch;
      check_cudnn(cudnnRNNBackwardData_v8(m.cudnn(), s->rnn, s->seq_lengths, s->y, y, dy, s->x, dx,
                                          s->h, nullptr, nullptr, nullptr, s->h, nullptr, nullptr,
                                          nullptr, s->weight_bytes, s->weights, s->work_bytes,
                                          m.workspace(), s->reserve_bytes, s->reserve),
                  "cudnnRNNBackwardData_v8");
      if (!direct && dx_in != nullptr) {
        const float one = 1;
        check_cublas(cublasSaxpy(m.cublas(), static_cast<int>(count), &one, dx, 1, dx_in, 1),
                     "cublasSaxpy (LSTM dx)");
      }
      check_cuda(cudaMemsetAsync(s->dweights, 0, s->weight_bytes, m.stream()), "LSTM dw");
      check_cudnn(
          cudnnRNNBackwardWeights_v8(m.cudnn(), s->rnn, CUDNN_WGRAD_MODE_ADD, s->seq_lengths, s->x,
                                     x, s->h, nullptr, s->y, y, s->weight_bytes, s->dweights,
                                     s->work_bytes, m.workspace(), s->reserve_bytes, s->reserve),
          "cudnnRNNBackwardWeights_v8");
      copy_pieces(m, *s, false);
    });
  };
}

}  // namespace dlhost::gpu_cudnn
