// runtime_model.cpp — see runtime_model.h.
#include "project/runtime_model.h"

#include "core/number_text.h"

namespace dlhost::project {

RuntimeModel runtime_model(const std::string& runtime, const std::string& mode, double bucket_mb) {
  RuntimeModel rm;
  if (runtime == "tf_ps" || runtime == "mxnet_kvstore") {
    rm.not_modelled =
        "a parameter server's push and pull (each worker sends its gradients to the servers and "
        "pulls the weights back over the servers' links) is not an all-reduce; dlhost project "
        "models an all-reduce only";
  } else if (mode == "async") {
    rm.not_modelled =
        "it runs asynchronously (mode async): a worker does not wait for the others' gradients, "
        "which the model of a synchronous step does not describe";
  } else if (runtime == "torch_ddp") {
    // DDP's Reducer is the DAG model's pattern: buckets in reverse parameter order (the first
    // 1 MiB, then bucket_cap_mb), each all-reduced through ProcessGroupGloo once ready.
    rm.collective = "gloo";
    rm.first_bucket_mb = 1;
    rm.bucket_mb = bucket_mb > 0 ? bucket_mb : 25;
    rm.how = "DDP's buckets (the first 1 MiB, then " + fmt("%g", rm.bucket_mb) +
             " MiB) all-reduced through Gloo as they become ready, at the cost of the gloo fit; "
             "its own comm time is a comm hook's span that overlaps backward, shown, not compared";
  } else if (runtime == "bigdl_spark") {
    rm.not_modelled =
        "BigDL's DistriOptimizer sums the gradients through Spark's block managers after the "
        "whole backward (each executor fetches its partition of every executor's gradients), "
        "which is not an all-reduce dlhost fits, and BigDL gives no grad-ready profile (its "
        "backward reports every gradient at its end)";
  } else if (runtime == "tf_collective") {
    rm.not_modelled =
        "TensorFlow's collective all-reduce (CollectiveReduceV2 over its gRPC channels) has no "
        "fit: comm-bench measures dlhost's comm plugins, not TensorFlow's collective";
  } else {
    rm.not_modelled = "dlhost project does not know the pattern of runtime '" + runtime + "'";
  }
  return rm;
}

}  // namespace dlhost::project
