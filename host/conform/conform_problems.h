// conform_problems.h — the problems `dlhost conform` checks and the strings that name them.
//
// A problem is a canonical descriptor, benchdnn-style: `op=conv2d,n=3,c=5,h=9,w=7,oc=4,k=3,s=2,
// p=1,d=2,g=1,bias=1` or `net=lenet,batch=2,steps=3`. Every key of the op is always printed, in
// one fixed order, so the string a run prints is the string `--case` takes back. This file owns
// the per-op keys and their defaults, the lists of problems per op at small and medium shapes,
// and the small training graph built around one op (see build_op_graph).
// Thread-safe: everything is built on call, nothing is shared.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace dlhost {
class Graph;
}

namespace dlhost::conform {

// A descriptor that cannot be parsed or built; the message says which key and what is allowed.
class DescriptorError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Descriptor {
 public:
  // "op" or "net".
  const std::string& kind() const { return fields_.front().first; }
  // The op's or network's name (the value of the first field).
  const std::string& name() const { return fields_.front().second; }
  const std::string& get(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_double(const std::string& key) const;
  std::vector<int64_t> get_shape(const std::string& key) const;  // "2x3x5" -> {2, 3, 5}
  // The canonical string.
  std::string str() const;

 private:
  friend Descriptor parse_descriptor(const std::string& text);
  friend Descriptor network_descriptor(const std::string& network, int64_t batch, int64_t steps);
  std::vector<std::pair<std::string, std::string>> fields_;
};

// Parses `key=value,...` in any order; keys left out take their defaults. Throws DescriptorError
// naming the unknown op or key, or the bad value and what the key accepts.
Descriptor parse_descriptor(const std::string& text);
Descriptor network_descriptor(const std::string& network, int64_t batch, int64_t steps);

// Every op name `--ops` accepts, in the order problems run.
const std::vector<std::string>& op_names();
// "n c h w oc k s p d g bias" with defaults, for help and error messages.
std::string op_keys_help(const std::string& op);

enum class Shapes { kSmall, kMedium };
// The problems of one op (canonical descriptors).
std::vector<Descriptor> op_problems(const std::string& op, Shapes shapes);

// The graph of one op problem: the inputs, a learnable layer in front of the op (a 1x1
// convolution or a fully connected layer that keeps the shape) so the op's input gradient shows
// up in that layer's weight gradient, the op, then a probe -- a fully connected layer to 3
// outputs, no bias -- and an MSE loss against a fixed random target. The probe's weight gradient
// is sum_n dz[n, o] * y[n, i], so every output element y[n, i] of the op is read back directly
// (not only through a scalar). Loss ops are the graph's loss themselves and have no probe.
struct OpGraph {
  std::unique_ptr<Graph> graph;
  int64_t reduction_length = 1;  // K of the tolerance: the longest reduction in the graph
  bool step_dependent = false;   // the loss depends on the step count (dropout's mask)
};
OpGraph build_op_graph(const Descriptor& d);

// The longest reduction any node of `graph` performs, forward or backward (see docs/conform.md).
int64_t reduction_length(const Graph& graph);

}  // namespace dlhost::conform
