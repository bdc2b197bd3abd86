// sync_replicas.h — tf_ps's synchronous mode (ps.cpp, cpu_tensorflow option ps_mode: sync): what
// tf.compat.v1.train.SyncReplicasOptimizer adds to a between-graph replicated graph, built from
// TensorFlow's own ops through the C API (sync_replicas.cpp):
// - per variable a ConditionalAccumulator (ResourceConditionalAccumulator, reduction MEAN, shared
//   name "<variable>/grad_accum") on the variable's ps task; a worker feeds its gradient into it
//   (ResourceAccumulatorApplyGradient) tagged with its local step, and the accumulator drops a
//   gradient older than its own global step;
// - the chief takes each accumulator's mean once all `workers` gradients are in
//   (ResourceAccumulatorTakeGradient, num_required = workers: it blocks until then, and moves the
//   accumulator's step on), applies the means with the case's optimizer on the ps (optimizer.cpp,
//   reading the means), increments the global step (an int64 variable on ps task 0), and puts one
//   token per worker, the new global step, into the token queue (FIFOQueueV2 "sync_token_q" on ps
//   task 0);
// - every worker (the chief too) then dequeues a token: its new local step; until the chief's
//   tokens are there it waits, so no worker starts a step before the update of the last one.
// TensorFlow runs the chief's take/apply/enqueue in a queue-runner thread of its own; here it is
// the chief's step's run itself (its gradients in, the take, the update, the tokens, then its
// token), which orders the same ops the same way. The local step is fed (the token the last run
// fetched) instead of a worker-local variable.
// Every op named "sync_replicas/..." belongs on ps task 0 (ps.cpp's device scope); the per-variable
// ones are named after their variable, so they land on its ps task.
// Thread-safety: built once, at attach, on the calling thread.
#ifndef DLHOST_CPU_TENSORFLOW_SYNC_REPLICAS_H
#define DLHOST_CPU_TENSORFLOW_SYNC_REPLICAS_H

#include <cstdint>
#include <vector>

#include "dlhost/dlhost_backend.h"
#include "lower.h"
#include "optimizer.h"

namespace dlhost::cpu_tensorflow {

// The name prefix of the ops that live beside the global step (ps task 0).
inline constexpr const char* kSyncReplicasScope = "sync_replicas/";

struct SyncReplicas {
  std::vector<TF_Output> grads;  // float placeholders a worker feeds, by parameter id
  TF_Output local_step{};        // int64 scalar placeholder: the last token this worker dequeued
  TF_Output token{};             // a worker's step: its gradients in, then its next token
  TF_Output chief_token{};       // the chief's: its gradients in, take, apply, tokens, its token
  TF_Operation* chief_init = nullptr;  // global step 0, every accumulator's step 0
  Update update;                       // the optimizer on the means (its state_bytes)
};

// Adds the synchronous replication of `ps.params` (the master copies, placed by the caller) for
// `workers` workers to `g`; the optimizer's slots' initializers go to `ps.initializers`.
SyncReplicas add_sync_replicas(TF_Graph* g, Lowered& ps, const dlhost_optimizer_desc& optimizer,
                               int32_t workers);

}  // namespace dlhost::cpu_tensorflow

#endif  // DLHOST_CPU_TENSORFLOW_SYNC_REPLICAS_H
