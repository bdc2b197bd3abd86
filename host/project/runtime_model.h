// runtime_model.h — how `dlhost project` takes a tool's own distributed runtime (a record's
// distributed.runtime, issue 41; docs/distributed.md, "What `dlhost project` does with a tool's
// runtime"): a synchronous all-reduce of buckets as they become ready, the DAG model's pattern,
// at the cost of a comm plugin's fit that stands for the runtime's own collective; or why its
// pattern is not modelled, in one line, so that no number stands where the model cannot.
// Pure; safe from any thread.
#pragma once

#include <string>

namespace dlhost::project {

struct RuntimeModel {
  std::string not_modelled;  // "" when it is modelled, else why not
  std::string collective;    // the comm plugin whose comm-bench fit stands for its all-reduce
  double bucket_mb = 0, first_bucket_mb = -1;  // its buckets (make_buckets' arguments)
  std::string how;                             // how it is modelled, for the output
};

// `runtime`, `mode` ("sync"/"async") and `bucket_mb` (0: none recorded) as the record has them.
// torch_ddp: DDP's buckets (the first 1 MiB, then bucket_mb, 25 unset) through Gloo. Not
// modelled: parameter servers (tf_ps, mxnet_kvstore), an asynchronous mode, tf_collective (no
// fit of TensorFlow's collective), a runtime this function does not know.
RuntimeModel runtime_model(const std::string& runtime, const std::string& mode, double bucket_mb);

}  // namespace dlhost::project
