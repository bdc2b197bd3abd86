#!/usr/bin/env python3
"""tf_keras_paths.py: tf_peer.py's own Keras training step (the fairness peer of cpu_tensorflow)
run on the paths dlhost's cpu_tensorflow lowers to, one change at a time, to size a rule-2 row's
cause (issue 40) inside Keras itself:

  keras       tf_peer.py as it is: Keras 3's SGD with momentum (its update is TensorFlow ops
              per variable: m = momentum * m - lr * g; v += m), Keras's LSTM as a while loop
  fused_sgd   the update as cpu_tensorflow runs it: one fused TensorFlow kernel per variable,
              ResourceApplyMomentum with momentum (accum = momentum * accum + g; v -= lr *
              accum: the same rule), ResourceApplyGradientDescent without (v -= lr * g, where
              Keras's SGD runs a Mul and an AssignSubVariableOp), everything else as `keras`
  unroll      Keras's LSTM with unroll=True (the cell unrolled over time, as cpu_tensorflow
              lowers it: lower.cpp), everything else as `keras`
  both        fused_sgd and unroll (fused_sgd fails on the LSTMs, whose step clips the gradients:
              a TypeError out of autograph, not looked into)
  inter1      TensorFlow's inter-op threads at 1 (tf_peer.py before 2026-12-06's fix; now it
              sets them to --threads, as cpu_tensorflow does)

Each variant runs in its own process under the environment `dlhost case-env` gives
cpu_tensorflow (the fairness runs' allocator, thread variables, omp_wait_policy=passive);
variants alternate, the first rotating with the round. Per step: CPU time of the whole process
(time.process_time, all threads; the step ends in .numpy()) and wall time; medians over the
timed steps, then over the rounds.

    python3 bench/probe/tf_keras_paths.py --build build --venvs /work/wt/h40-truth/build \
        autoencoder 100 --threads 2 --variants keras,fused_sgd --rounds 3
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = ("keras", "fused_sgd", "unroll", "both", "inter1")


class FusedSGD:
    """apply_gradients through cpu_tensorflow's update ops: tf.raw_ops.ResourceApplyMomentum
    with momentum, ResourceApplyGradientDescent without (optimizer.cpp's choice)."""

    def __init__(self, tf, lr, momentum):
        self.tf, self.lr, self.momentum = tf, lr, momentum
        self.slots = {}

    def apply_gradients(self, pairs):
        tf = self.tf
        for g, v in pairs:
            var = getattr(v, "value", v)  # Keras 3 wraps a tf.Variable
            lr = tf.constant(self.lr, var.dtype)
            if not self.momentum:
                tf.raw_ops.ResourceApplyGradientDescent(var=var.handle, alpha=lr, delta=g,
                                                        use_locking=False)
                continue
            key = id(v)
            if key not in self.slots:
                self.slots[key] = tf.Variable(tf.zeros_like(var), trainable=False)
            tf.raw_ops.ResourceApplyMomentum(
                var=var.handle, accum=self.slots[key].handle, lr=lr, grad=g,
                momentum=tf.constant(self.momentum, var.dtype), use_locking=False,
                use_nesterov=False)


def child(a):
    """One variant in this process: prints one JSON line."""
    sys.path.insert(0, os.path.join(HERE, "..", "peers"))
    import tf_peer
    tf = tf_peer.tf
    tf_peer.set_threads(a.threads)
    if a.variant == "inter1":
        tf.config.threading.set_inter_op_parallelism_threads(1)
    if a.variant in ("unroll", "both"):
        lstm = tf_peer.L.LSTM
        tf_peer.L.LSTM = lambda *p, **k: lstm(*p, unroll=True, **k)
    if a.variant in ("fused_sgd", "both"):
        keep = tf_peer.optimizer

        def optimizer(name):
            opt, wd, clip = keep(name)
            if not isinstance(opt, tf.keras.optimizers.SGD):
                sys.exit("tf_keras_paths.py: fused_sgd is for the SGD networks")
            return FusedSGD(tf, float(opt.learning_rate.numpy()),
                                 float(opt.momentum)), wd, clip
        tf_peer.optimizer = optimizer
    # tf_peer.train's loop, with the process's CPU time per step beside the wall time
    real_perf = time.perf_counter
    cpu_marks = []

    def perf():
        cpu_marks.append(time.process_time())
        return real_perf()
    import types
    tf_peer.time = types.SimpleNamespace(perf_counter=perf)  # tf_peer's own clock only
    wall, losses, _ = tf_peer.train(a.network, a.batch, None, a.warmup, a.iterations)
    cpu = [(cpu_marks[2 * i + 1] - cpu_marks[2 * i]) * 1e3 for i in range(len(cpu_marks) // 2)]
    cpu = cpu[a.warmup:]
    print(json.dumps({"variant": a.variant, "cpu_ms": statistics.median(cpu),
                      "wall_ms": statistics.median(wall), "loss_last": losses[-1]}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("network")
    ap.add_argument("batch", type=int)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--variants", default="keras,fused_sgd")
    ap.add_argument("--variant", default=None, help=argparse.SUPPRESS)  # the child's
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--venvs", default=None)
    ap.add_argument("--jsonl", default=None)
    a = ap.parse_args()
    if a.variant:
        return child(a)
    sys.path.insert(0, os.path.join(HERE, ".."))
    from bench import case_env
    dlhost = os.path.join(a.build, "host", "dlhost")
    env, allocator = case_env(dlhost, "cpu_tensorflow", a.threads, ["omp_wait_policy=passive"])
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    py = os.path.join(a.venvs or a.build, "bench-venv", "bin", "python")
    variants = [v for v in a.variants.split(",") if v]
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        sys.exit(f"tf_keras_paths.py: unknown variants {bad}; known: {list(VARIANTS)}")
    res = {v: [] for v in variants}
    for rnd in range(a.rounds):
        for v in variants[rnd % len(variants):] + variants[:rnd % len(variants)]:
            load = os.getloadavg()[0]
            p = subprocess.run([py, os.path.abspath(__file__), a.network, str(a.batch),
                                "--threads", str(a.threads), "--variant", v, "--warmup",
                                str(a.warmup), "--iterations", str(a.iterations)],
                               env=env, capture_output=True, text=True)
            line = next((ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("{")),
                        None)
            if p.returncode or not line:
                sys.exit(f"tf_keras_paths.py: {v}: exit {p.returncode}: {p.stderr[-800:]}")
            r = json.loads(line)
            res[v].append(r)
            print(f"round {rnd + 1} {v:10s}: {r['cpu_ms']:8.1f} CPU ms/step, wall "
                  f"{r['wall_ms']:8.1f} ms, loss {r['loss_last']:.4f} (load {load:.2f}, malloc "
                  f"{allocator['name']})", flush=True)
    out = {"network": a.network, "batch": a.batch, "threads": a.threads,
           "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "cpu_ms_per_step": {v: statistics.median(x["cpu_ms"] for x in r)
                               for v, r in res.items()},
           "wall_ms_per_step": {v: statistics.median(x["wall_ms"] for x in r)
                                for v, r in res.items()},
           "load_end": round(os.getloadavg()[0], 2)}
    print(json.dumps(out))
    if a.jsonl:
        with open(a.jsonl, "a") as f:
            f.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
