// comm_bench.cpp — `dlhost comm-bench`: the collective bandwidth of a comm plugin, in the manner
// of nccl-tests. Every rank runs this command under a launcher (mpirun, srun); it learns its rank
// from the launcher's environment (rank_env.h), never by linking MPI itself.
//
// For each collective and size: warm-up, a barrier, then `iters` timed collectives (issue + wait
// each), optionally checked element by element against exactly known results on every iteration
// (comm_bench_data.h). Time is the mean over iterations, the slowest rank's (an all-reduce MAX
// through the plugin itself); algbw = bytes / time, busbw = algbw x nccl-tests' factor. The same
// sweep through a baseline plugin (`mpi_raw` for `mpi`: plain blocking MPI calls) runs size by
// size alongside, so the plugin's overhead reads as a ratio. Buffers are allocated and touched
// once for the largest size: a fresh page costs ~12 us here, which would swamp the collective.
//
// A comm on device memory (caps.device_memory; NCCL, device_store) runs on device buffers that
// a backend allocates (--backend; ABI 1.2's device memory extension): the comm is handed the
// stream of a one-layer model compiled for the purpose, inputs and checked results cross with
// copy_from_host / copy_to_host, and each timed collective ends with that stream's synchronize.
// The host's own reductions (timings, #wrong, who runs where) then go over the rendezvous store
// when the comm takes no host memory (control_plane.h).
//
// Rank 0 prints the header, one table per collective and the footer, and writes the JSON.
// `--in-place` all-reduces with one buffer, as data parallelism does (Open MPI picks its
// algorithm by it). `--interconnect NAME --ranks N` is run once, not under a launcher: it starts
// the N ranks itself as `dlhost run` starts a case's (on test hosts over an emulated link, or
// mpirun on this host for loopback) and adds the link's `interconnect` block to the JSON.
// Exit code: 0 all values right, 1 a wrong value or a failed collective, 2 a usage error; with
// --interconnect also 77 (test hosts cannot be made here: SKIPPED, the reason printed) and 124
// (the ranks passed --timeout).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "commbench/bench_memory.h"
#include "commbench/collectives.h"
#include "commbench/comm_bench_data.h"
#include "control_plane/control_plane.h"
#include "core/command.h"
#include "core/device.h"
#include "core/environment.h"
#include "core/graph.h"
#include "core/handles.h"
#include "core/host_api.h"
#include "core/link_profiles.h"
#include "distributed/rank_env.h"
#include "launch/launcher.h"
#include "launch/process_group.h"
#include "launch/served_store.h"
#include "launch/test_hosts.h"
#include "output/output_file.h"

namespace dlhost {
namespace {

using json = nlohmann::ordered_json;
using comm_bench::Collective;

struct Options {
  std::string comm;
  std::string baseline;  // empty: the plugin's default baseline (mpi -> mpi_raw); "none": off
  std::string min_bytes = "8", max_bytes = "64M";
  uint64_t factor = 2;
  int iters = 20, warmup = 5;
  std::vector<std::string> ops{"all_reduce", "broadcast", "all_gather"};
  std::string dtype = "f32", redop = "sum";
  int root = 0;
  int check = 1;
  std::string json_path;
  std::string backend;    // device buffers from this backend; empty: host memory
  int device = -1;        // -1: local rank modulo the backend's devices
  bool in_place = false;  // all_reduce with one buffer (send == recv), as the runner issues it
  // Launch mode: this process starts `ranks` ranks itself over the named interconnect (test
  // hosts for 10gbe / 1gbe / custom, mpirun on this host for loopback); empty: it is a rank.
  std::string interconnect;
  double link_gbit = 0, link_latency_us = 0;
  int ranks = 2;
  double timeout_s = 600;
};

// The baseline each plugin is compared with when --baseline is not given.
std::string default_baseline(const std::string& comm) { return comm == "mpi" ? "mpi_raw" : ""; }

// What one row moves: elements per rank, their type, and the op's parameters.
struct Shape {
  const Collective* op;
  uint64_t count;       // per rank (all_gather: each rank's block)
  uint64_t recv_count;  // in the receive buffer after the collective
  int32_t dtype;
  int32_t redop;
  int root;
  bool in_place;  // all_reduce: the input sits in `recv`, which is also the output
};

// Issues the collective of shape `s` on `comm` and returns its request; the caller waits on it
// and frees it. Errors become dlhost::Error naming the plugin.
dlhost_request* issue(const CommSession& comm, const Shape& s, const BenchMemory& m) {
  dlhost_request* r = nullptr;
  const comm_bench::IssueArgs args{m.send(), m.recv(), s.count,   s.dtype,
                                   s.redop,  s.root,   m.space(), s.in_place};
  check_status(s.op->issue(comm.api(), comm.get(), args, &r), comm.name() + ": " + s.op->name);
  return r;
}

// One collective to its end: the request, and on a stream-ordered comm the stream.
void complete(const CommSession& comm, const Shape& s, BenchMemory& m) {
  // In place, every all-reduce starts from the input again.
  if (s.in_place) m.input_to_recv(s.count * comm_bench::dtype_size(s.dtype));
  comm.complete(issue(comm, s, m), "wait");
  m.drain();
}

// One rank's timings of one row, and the wrong elements it saw.
struct Sample {
  std::vector<double> iter_us;
  uint64_t wrong = 0;
};

// Times `o.iters` collectives of shape `s` through `comm`; with --check, every result is compared
// with `b.expected` (filled by the caller), after re-poisoning the receive buffer so a collective
// that writes nothing cannot pass on the previous iteration's values.
Sample measure(const CommSession& comm, ControlPlane& control, const Shape& s, BenchMemory& b,
               const Options& o, int rank, int world) {
  const size_t esize = comm_bench::dtype_size(s.dtype);
  const uint64_t recv_elems = s.recv_count;
  const bool keeps_input = s.op->root_input_in_recv && rank == s.root;
  // Broadcast works in place on `recv`: the root's copy is its input.
  if (keeps_input) b.input_to_recv(s.count * esize);
  auto poison = [&] {
    // An in-place all-reduce starts from the input itself, which is not the sum either (more
    // than one rank), so one that writes nothing still fails.
    if (s.in_place)
      b.input_to_recv(s.count * esize);
    else if (!keeps_input)
      b.poison(recv_elems * esize);  // never expected
  };

  for (int i = 0; i < o.warmup; ++i) complete(comm, s, b);
  control.barrier();
  Sample out;
  out.iter_us.reserve(static_cast<size_t>(o.iters));
  for (int i = 0; i < o.iters; ++i) {
    if (o.check || s.in_place) {
      poison();
      // Checking takes longer on some ranks; start every timed collective together.
      control.barrier();
    }
    auto t0 = std::chrono::steady_clock::now();
    dlhost_request* r = issue(comm, s, b);
    comm.wait(r, "wait");
    b.drain();
    auto t1 = std::chrono::steady_clock::now();
    comm.release(r);
    out.iter_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    if (o.check)
      out.wrong +=
          comm_bench::count_wrong(b.results(recv_elems * esize), b.expected(), recv_elems, s.dtype);
  }
  return out;
}

// A row's numbers as every rank agrees on them.
struct Timing {
  double time_us = 0;           // mean over iterations, slowest rank
  double median_us = 0;         // median over iterations of the slowest rank's time
  double algbw = 0, busbw = 0;  // GB/s
  int64_t wrong = 0;            // summed over ranks
};

// Reduces a rank's sample over all ranks through `via` (the plugin under test, or the store).
Timing agree(ControlPlane& via, const Sample& s, const Collective& op, uint64_t bytes, int world) {
  std::vector<double> v(1 + s.iter_us.size());
  double sum = 0;
  for (double t : s.iter_us) sum += t;
  v[0] = s.iter_us.empty() ? 0 : sum / static_cast<double>(s.iter_us.size());
  std::copy(s.iter_us.begin(), s.iter_us.end(), v.begin() + 1);
  via.all_reduce(v.data(), v.size(), DLHOST_DTYPE_F64, DLHOST_REDUCE_MAX);
  int64_t wrong = static_cast<int64_t>(s.wrong);
  via.all_reduce(&wrong, 1, DLHOST_DTYPE_I64, DLHOST_REDUCE_SUM);

  Timing t;
  t.time_us = v[0];
  std::vector<double> per_iter(v.begin() + 1, v.end());
  std::sort(per_iter.begin(), per_iter.end());
  if (!per_iter.empty()) {
    size_t n = per_iter.size();
    t.median_us = n % 2 ? per_iter[n / 2] : (per_iter[n / 2 - 1] + per_iter[n / 2]) / 2;
  }
  t.algbw = t.time_us > 0 ? static_cast<double>(bytes) / (t.time_us * 1e-6) / 1e9 : 0;
  t.busbw = t.algbw * op.busbw_factor(world);
  t.wrong = wrong;
  return t;
}

json timing_json(const Timing& t) {
  return json{{"time_us", t.time_us},
              {"median_us", t.median_us},
              {"algbw_gbs", t.algbw},
              {"busbw_gbs", t.busbw},
              {"wrong", t.wrong}};
}

std::string plugin_label(const CommSession& c) {
  return c.plugin().name + " " + c.plugin().version + " (" +
         (c.caps().library != nullptr ? c.caps().library : "?") + ")";
}

const LoadedPlugin* find_comm(const PluginRegistry& registry, const std::string& name,
                              const char* what) {
  const LoadedPlugin* p = registry.find(DLHOST_PLUGIN_COMM, name);
  if (p == nullptr) {
    std::string known;
    for (const auto& n : registry.names(DLHOST_PLUGIN_COMM))
      known += (known.empty() ? "" : ", ") + n;
    std::fprintf(stderr, "dlhost: comm-bench: no comm plugin '%s' (%s); comm plugins here: %s\n",
                 name.c_str(), what, known.empty() ? "none" : known.c_str());
    return nullptr;
  }
  if (!p->usable) {
    std::fprintf(stderr, "dlhost: comm-bench: comm plugin '%s' is not usable here: %s\n",
                 name.c_str(), p->unusable_reason.c_str());
    return nullptr;
  }
  return p;
}

// What the command line asks for, checked the same way on every rank before any collective.
struct Sweep {
  RankEnv env;
  std::vector<uint64_t> sizes;
  std::vector<const Collective*> ops;
  int32_t dtype = 0, redop = 0;
};

std::vector<const Collective*> parse_ops(const std::vector<std::string>& names) {
  std::vector<const Collective*> ops;
  std::string known;
  for (const Collective* c : comm_bench::collectives()) known += std::string(c->name) + ", ";
  for (const auto& name : names) {
    std::vector<const Collective*> named;
    if (name == "all")
      named = comm_bench::collectives();
    else if (const Collective* c = comm_bench::find_collective(name))
      named = {c};
    else
      throw std::invalid_argument("unknown collective '" + name + "' (" + known + "all)");
    for (const Collective* n : named)
      if (std::find(ops.begin(), ops.end(), n) == ops.end()) ops.push_back(n);
  }
  return ops;
}

// Throws std::invalid_argument (or the rank parser's error) naming the bad option.
Sweep parse_sweep(const Options& o) {
  Sweep w;
  w.dtype = comm_bench::parse_dtype(o.dtype);
  w.redop = comm_bench::parse_redop(o.redop);
  w.env = detect_rank_env();
  const uint64_t min_bytes = comm_bench::parse_size(o.min_bytes);
  const uint64_t max_bytes = comm_bench::parse_size(o.max_bytes);
  if (min_bytes > max_bytes)
    throw std::invalid_argument("-b " + o.min_bytes + " is larger than -e " + o.max_bytes +
                                " (the sweep goes from -b up to -e)");
  w.sizes = comm_bench::size_sweep(min_bytes, max_bytes, o.factor);
  // Each rank holds three buffers of the largest size (input, result, expected result): refused
  // here, before any comm starts, rather than as std::bad_alloc in the middle of the ranks.
  const uint64_t per_rank = 3 * w.sizes.back();
  const uint64_t memory = host_memory_bytes();
  const uint64_t local = static_cast<uint64_t>(std::max(w.env.local_size, 1));
  if (per_rank > memory / local) {
    char why[320];
    std::snprintf(why, sizeof(why),
                  "-e %s needs 3 buffers of %.1f GiB per rank (%.1f GiB for the %llu rank(s) of "
                  "this host), more than its %.1f GiB of memory: lower -e (--maxbytes)",
                  o.max_bytes.c_str(), w.sizes.back() / 1073741824.0,
                  per_rank * static_cast<double>(local) / 1073741824.0,
                  static_cast<unsigned long long>(local), memory / 1073741824.0);
    throw std::invalid_argument(why);
  }
  w.ops = parse_ops(o.ops);
  if (w.dtype == 0)
    throw std::invalid_argument("unknown --dtype '" + o.dtype + "' (f32, f64, i32, i64)");
  if (w.redop == 0)
    throw std::invalid_argument("unknown --redop '" + o.redop + "' (sum, avg, max, min)");
  if (o.root < 0 || o.root >= w.env.size)
    throw std::invalid_argument("--root " + std::to_string(o.root) + " is not a rank of " +
                                std::to_string(w.env.size));
  return w;
}

// Why `c` cannot run this sweep ("" when it can). `device`: on a backend's device buffers;
// `control`: comm-bench's own reductions go through `c`.
std::string unfit(const CommSession& c, int32_t dtype, const Options& o, bool device,
                  bool control) {
  std::string why;
  if (!device && !c.caps().host_memory)
    why = "accepts no host memory: name a backend (--backend NAME) whose device buffers it uses";
  if (device && !c.caps().device_memory)
    why = "accepts no device memory (--backend " + o.backend + " gives it device buffers)";
  if (!c.supports(dtype)) why = std::string("does not support dtype ") + o.dtype;
  if (control && (!c.supports(DLHOST_DTYPE_F64) || !c.supports(DLHOST_DTYPE_I64)))
    why = "lacks f64/i64, which comm-bench reduces its timings and error counts in";
  return why;
}

// Who ran where: pid and host name of every rank, gathered through the plugin.
struct Placement {
  json ranks = json::array();
  std::set<std::string> hosts;
};

Placement gather_placement(ControlPlane& comm, int world) {
  std::array<int64_t, 8> me{};
  me[0] = static_cast<int64_t>(getpid());
  gethostname(reinterpret_cast<char*>(&me[1]), sizeof(int64_t) * 7 - 1);
  std::vector<int64_t> everyone(me.size() * static_cast<size_t>(world));
  comm.all_gather(me.data(), everyone.data(), me.size(), DLHOST_DTYPE_I64);
  Placement where;
  for (int r = 0; r < world; ++r) {
    const int64_t* rec = &everyone[static_cast<size_t>(r) * me.size()];
    std::string host(reinterpret_cast<const char*>(rec + 1));
    where.hosts.insert(host);
    where.ranks.push_back(json{{"rank", r}, {"pid", rec[0]}, {"host", host}});
  }
  return where;
}

// One run of the sweep: the plugin under test, its baseline, and what the rows add up to.
struct Bench {
  const Options& o;
  const Sweep& w;
  const CommSession& comm;
  const CommSession* base;  // NULL: no baseline
  std::string baseline_name;
  ControlPlane& control;
  BenchMemory& buffers;
  const DeviceRig* rig;  // NULL: host memory
  bool root_prints;
  json rows = json::array();
  int64_t total_wrong = 0;
  double busbw_sum = 0, base_busbw_sum = 0, log_ratio_sum = 0, log_median_ratio_sum = 0;
  int n_rows = 0;
};

void print_header(const Bench& b, const Placement& where) {
  const Options& o = b.o;
  const int world = b.w.env.size;
  std::printf("# dlhost comm-bench %s: comm %s\n", dlhost_version().c_str(),
              plugin_label(b.comm).c_str());
  if (b.base)
    std::printf("# baseline %s: ratio = time %s / time %s\n", plugin_label(*b.base).c_str(),
                o.comm.c_str(), b.baseline_name.c_str());
  std::printf("# %d rank%s on %zu host%s (launcher %s); dtype %s, redop %s, root %d\n", world,
              world == 1 ? "" : "s", where.hosts.size(), where.hosts.size() == 1 ? "" : "s",
              b.w.env.launcher.c_str(), o.dtype.c_str(), o.redop.c_str(), o.root);
  if (b.rig)
    std::printf("# device buffers of backend %s, device %d; host reductions over %s\n",
                b.rig->backend().name().c_str(), b.rig->device(), b.control.kind().c_str());
  std::printf("# sizes %llu..%llu B x%llu, iters %d, warm-up %d, check %s%s\n",
              static_cast<unsigned long long>(b.w.sizes.front()),
              static_cast<unsigned long long>(b.w.sizes.back()),
              static_cast<unsigned long long>(o.factor), o.iters, o.warmup,
              o.check ? "every iteration" : "off",
              o.in_place ? "; all_reduce in place (send = recv)" : "");
  for (const auto& r : where.ranks)
    std::printf("#  Rank %2d Pid %7lld on %s\n", r["rank"].get<int>(),
                static_cast<long long>(r["pid"].get<int64_t>()),
                r["host"].get<std::string>().c_str());
  std::fflush(stdout);
}

void print_op_header(const Collective& op, bool with_base) {
  std::printf("#\n# %s\n", op.name);
  std::printf("# %12s %12s %5s %6s %5s | %10s %8s %8s %7s", "size", "count", "type", "redop",
              "root", "time", "algbw", "busbw", "#wrong");
  if (with_base) std::printf(" | %10s %7s %6s", "base time", "#wrong", "ratio");
  std::printf("\n# %12s %12s %5s %6s %5s | %10s %8s %8s %7s", "(B)", "(elements)", "", "", "",
              "(us)", "(GB/s)", "(GB/s)", "");
  if (with_base) std::printf(" | %10s %7s %6s", "(us)", "", "");
  std::printf("\n");
}

// Measures one (collective, size) row on the plugin and its baseline; adds it to `b`.
void run_row(Bench& b, const Collective& op, uint64_t size) {
  const Options& o = b.o;
  const int world = b.w.env.size;
  const comm_bench::RowShape row_shape = op.shape(size, comm_bench::dtype_size(b.w.dtype), world);
  if (row_shape.count == 0) return;
  const uint64_t count = row_shape.count, bytes = row_shape.bytes;
  Shape s{&op,
          count,
          row_shape.recv_count,
          b.w.dtype,
          op.reduces ? b.w.redop : 0,
          op.rooted ? o.root : -1,
          op.in_place && o.in_place};
  if (o.check) op.fill_expected(b.buffers.expected(), count, b.w.dtype, s.redop, world, s.root);
  const int rank = b.w.env.rank;
  Timing t =
      agree(b.control, measure(b.comm, b.control, s, b.buffers, o, rank, world), op, bytes, world);
  Timing bt;
  if (b.base)
    bt = agree(b.control, measure(*b.base, b.control, s, b.buffers, o, rank, world), op, bytes,
               world);
  double ratio = b.base && bt.time_us > 0 ? t.time_us / bt.time_us : 0;
  // Means are what nccl-tests reports; on a busy machine one descheduled iteration moves them a
  // lot, so the ratio of medians is kept too.
  double median_ratio = b.base && bt.median_us > 0 ? t.median_us / bt.median_us : 0;
  b.total_wrong += t.wrong + bt.wrong;
  b.busbw_sum += t.busbw;
  b.base_busbw_sum += bt.busbw;
  if (ratio > 0) b.log_ratio_sum += std::log(ratio);
  if (median_ratio > 0) b.log_median_ratio_sum += std::log(median_ratio);
  ++b.n_rows;
  json row{{"op", op.name},
           {"size", bytes},
           {"count", count},
           {"type", o.dtype},
           {"redop", comm_bench::redop_name(s.redop)},
           {"root", s.root}};
  row.update(timing_json(t));
  if (b.base) {
    row["baseline"] = timing_json(bt);
    row["ratio"] = ratio;
    row["ratio_median"] = median_ratio;
  }
  b.rows.push_back(row);
  if (!b.root_prints) return;
  std::printf("  %12llu %12llu %5s %6s %5d | %10.2f %8.3f %8.3f %7lld",
              static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(count),
              o.dtype.c_str(), comm_bench::redop_name(s.redop), s.root, t.time_us, t.algbw, t.busbw,
              static_cast<long long>(t.wrong));
  if (b.base)
    std::printf(" | %10.2f %7lld %6.2f", bt.time_us, static_cast<long long>(bt.wrong), ratio);
  std::printf("\n");
  std::fflush(stdout);
}

// The sweep's summary figures.
struct Footer {
  bool ok;
  double avg_busbw, avg_base_busbw, ratio_geomean, median_ratio_geomean;
};

Footer footer(const Bench& b) {
  const int n = b.n_rows;
  return Footer{b.total_wrong == 0, n ? b.busbw_sum / n : 0, n ? b.base_busbw_sum / n : 0,
                n && b.base ? std::exp(b.log_ratio_sum / n) : 0,
                n && b.base ? std::exp(b.log_median_ratio_sum / n) : 0};
}

void print_footer(const Bench& b, const Footer& f) {
  std::printf("#\n# Out of bounds values : %lld %s\n", static_cast<long long>(b.total_wrong),
              f.ok ? "OK" : "FAILED");
  std::printf("# Avg bus bandwidth    : %.4f GB/s", f.avg_busbw);
  if (b.base) std::printf("  (baseline %s: %.4f GB/s)", b.baseline_name.c_str(), f.avg_base_busbw);
  std::printf("\n");
  if (b.base)
    std::printf("# Time ratio %s/%s : %.3f of means, %.3f of medians (geometric means over rows)\n",
                b.o.comm.c_str(), b.baseline_name.c_str(), f.ratio_geomean, f.median_ratio_geomean);
  if (!b.o.check) std::printf("# (values not checked: --check 0)\n");
  std::fflush(stdout);
}

json describe(const CommSession& c) {
  return json{{"name", c.plugin().name},
              {"version", c.plugin().version},
              {"library", c.caps().library != nullptr ? c.caps().library : ""},
              {"path", c.plugin().path}};
}

// Writes `doc` as the whole of `path` (output/output_file.h: never through a link planted in a
// shared folder); false, having said why, when it cannot be written whole.
bool write_json_file(const std::string& path, const json& doc) {
  try {
    output::write_whole_file(path, doc.dump(2) + "\n");
    return true;
  } catch (const output::OutputError& e) {
    std::fprintf(stderr, "dlhost: comm-bench: cannot write %s\n", e.what());
    return false;
  }
}

// The --json document (dlhost.comm-bench/1); false when it cannot be written.
bool write_json(const Bench& b, const Footer& f, const Placement& where) {
  const Options& o = b.o;
  json doc{{"schema", "dlhost.comm-bench/1"},
           {"dlhost_version", dlhost_version()},
           {"plugin", describe(b.comm)},
           {"baseline", b.base ? describe(*b.base) : json()},
           {"memory", b.rig ? "device" : "host"},
           {"backend",
            b.rig ? json{{"name", b.rig->backend().name()}, {"device", b.rig->device()}} : json()},
           {"control_plane", b.control.kind()},
           {"world_size", b.w.env.size},
           {"launcher", b.w.env.launcher},
           {"hosts", std::vector<std::string>(where.hosts.begin(), where.hosts.end())},
           {"ranks", where.ranks},
           {"config",
            {{"minbytes", b.w.sizes.front()},
             {"maxbytes", b.w.sizes.back()},
             {"stepfactor", o.factor},
             {"iters", o.iters},
             {"warmup", o.warmup},
             {"check", o.check != 0},
             {"dtype", o.dtype},
             {"redop", o.redop},
             {"root", o.root},
             {"in_place", o.in_place}}},
           {"results", b.rows},
           {"out_of_bounds", {{"count", b.total_wrong}, {"okay", f.ok}}},
           {"average_bus_bandwidth", {{"plugin", f.avg_busbw}}},
           {"status", f.ok ? "OK" : "FAILED"}};
  if (b.base) {
    doc["average_bus_bandwidth"]["baseline"] = f.avg_base_busbw;
    doc["time_ratio_geomean"] = f.ratio_geomean;
    doc["time_ratio_median_geomean"] = f.median_ratio_geomean;
  }
  return write_json_file(o.json_path, doc);
}

// The sweep on initialized communicators; the exit code.
int sweep(const Options& o, const Sweep& w, const CommSession& comm, const CommSession* base,
          const std::string& baseline_name, const DeviceRig* rig) {
  const bool root_prints = w.env.rank == 0;
  const bool control_over_comm = comm.caps().host_memory != 0;
  for (const CommSession* c : {&comm, base}) {
    std::string why =
        c != nullptr ? unfit(*c, w.dtype, o, rig != nullptr, c == &comm && control_over_comm) : "";
    if (why.empty()) continue;
    if (root_prints)
      std::fprintf(stderr, "dlhost: comm-bench: %s %s\n", c->name().c_str(), why.c_str());
    return 2;
  }
  // A comm on device memory only cannot carry comm-bench's own host arrays: the store does.
  std::unique_ptr<ControlPlane> control =
      control_over_comm ? comm_control_plane(comm)
                        : store_control_plane(w.env.rank, w.env.size, "dlhost/control/comm-bench/");
  Placement where = gather_placement(*control, w.env.size);
  BenchMemory buffers(w.sizes.back(), rig);
  comm_bench::fill_input(buffers.host_send(), w.sizes.back() / comm_bench::dtype_size(w.dtype),
                         w.dtype, w.env.rank);
  buffers.load_input(w.sizes.back());
  Bench b{o, w, comm, base, baseline_name, *control, buffers, rig, root_prints};
  if (root_prints) print_header(b, where);
  for (const Collective* op : w.ops) {
    if (root_prints) print_op_header(*op, base != nullptr);
    for (uint64_t size : w.sizes) run_row(b, *op, size);
  }
  Footer f = footer(b);
  if (root_prints) print_footer(b, f);
  if (root_prints && !o.json_path.empty() && !write_json(b, f, where)) return 1;
  return f.ok ? 0 : 1;
}

// The backend whose device buffers the comm runs on (--backend), or NULL for host memory.
std::unique_ptr<DeviceRig> open_device(const PluginRegistry& registry, const Options& o,
                                       const RankEnv& env) {
  if (o.backend.empty()) return nullptr;
  const LoadedPlugin* backend = registry.find(DLHOST_PLUGIN_BACKEND, o.backend);
  if (backend == nullptr || !backend->usable)
    throw std::invalid_argument("--backend " + o.backend + ": no usable backend of that name");
  const int32_t devices = backend->table->backend->device_count();
  const int32_t device = o.device >= 0 ? o.device : (devices > 0 ? env.local_rank % devices : 0);
  if (device >= devices)
    throw std::invalid_argument("--backend " + o.backend + " has no device " +
                                std::to_string(device) + " (" + std::to_string(devices) +
                                " devices)");
  return std::make_unique<DeviceRig>(*backend, device);
}

// Why a device-only comm cannot start as asked ("" when it can): it needs device buffers, and its
// ranks share comm-bench's figures through the rendezvous store, which only `dlhost run` (or
// whoever sets DLHOST_STORE) serves across processes.
std::string device_only_unfit(const LoadedPlugin& plugin, const RankEnv& env, const Options& o) {
  dlhost_comm_caps caps{};
  caps.struct_size = DLHOST_COMM_CAPS_STRUCT_SIZE;
  StatusPtr failed(plugin.table->comm->capabilities(&caps));
  if (failed || caps.host_memory) return "";
  if (o.backend.empty())
    return "comm '" + plugin.name +
           "' accepts no host memory: name a backend (--backend NAME) whose device buffers it uses";
  const char* store = std::getenv("DLHOST_STORE");
  if (env.size == 1 || (store != nullptr && *store != '\0')) return "";
  return "comm '" + plugin.name + "' takes no host memory, so " + std::to_string(env.size) +
         " ranks need a shared rendezvous store (DLHOST_STORE=SECRET@HOST:PORT) for comm-bench's "
         "own "
         "reductions";
}

// ---- Launch mode (--interconnect): this process starts the ranks, as `dlhost run` does for a
// multi-rank case: over test hosts (network namespaces, tc-shaped links; launch/test_hosts.h)
// for 10gbe / 1gbe / custom, mpirun on this host for loopback; then it adds the link to the JSON.

volatile sig_atomic_t g_launch_interrupted = 0;
void on_launch_signal(int) { g_launch_interrupted = 1; }

std::string joined_ops(const std::vector<std::string>& ops) {
  std::string s;
  for (const auto& op : ops) s += (s.empty() ? "" : ",") + op;
  return s;
}

// The folder of a plugin unless the ranks find it anyway (the default search path): naming a
// folder twice would load its libraries twice.
void add_plugin_folder(std::vector<std::string>& argv, const LoadedPlugin* p) {
  if (p == nullptr) return;
  const std::string dir = std::filesystem::path(p->path).parent_path().string();
  std::error_code ec;
  for (const auto& f : PluginRegistry::default_search_path())
    if (std::filesystem::equivalent(f, dir, ec)) return;
  argv.insert(argv.end(), {"--plugin-path", dir});
}

// One rank's command: this binary, the same sweep, no launch options.
std::vector<std::string> rank_command(const Options& o, const std::string& json_path,
                                      const LoadedPlugin* comm, const LoadedPlugin* baseline) {
  std::vector<std::string> argv{self_exe()};
  add_plugin_folder(argv, comm);
  add_plugin_folder(argv, baseline);
  argv.insert(argv.end(), {"comm-bench",
                           "--comm",
                           o.comm,
                           "-b",
                           o.min_bytes,
                           "-e",
                           o.max_bytes,
                           "-f",
                           std::to_string(o.factor),
                           "-n",
                           std::to_string(o.iters),
                           "-w",
                           std::to_string(o.warmup),
                           "--ops",
                           joined_ops(o.ops),
                           "-d",
                           o.dtype,
                           "-o",
                           o.redop,
                           "-r",
                           std::to_string(o.root),
                           "-c",
                           std::to_string(o.check),
                           "--json",
                           json_path});
  if (!o.baseline.empty()) argv.insert(argv.end(), {"--baseline", o.baseline});
  if (!o.backend.empty()) argv.insert(argv.end(), {"--backend", o.backend});
  if (o.device >= 0) argv.insert(argv.end(), {"--device", std::to_string(o.device)});
  if (o.in_place) argv.push_back("--in-place");
  return argv;
}

// Runs `cmd` in a process group of its own with this process's stdout and stderr and `env`,
// ending the group at the timeout or on SIGINT/SIGTERM; its exit code, 124 on timeout, 130
// interrupted.
int run_launcher(const std::vector<std::string>& cmd, double timeout_s, char* const* env) {
  SpawnOptions spawn;
  spawn.capture_output = false;
  spawn.env = env;
  spawn.error_prefix = "dlhost: comm-bench: ";
  ProcessGroup group(cmd, spawn);
  struct sigaction sa {};
  sa.sa_handler = on_launch_signal;
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  Supervision s;
  s.timeout_s = timeout_s;
  s.interrupted = &g_launch_interrupted;
  s.on_stop = [](const char* why) {
    std::fprintf(stderr, "dlhost: comm-bench: %s: ending the ranks\n", why);
  };
  const GroupOutcome o = group.supervise(s);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (o.stopped) return g_launch_interrupted ? 130 : 124;
  return exit_code(o.status);
}

// Why the launch options cannot be run, for a usage error (exit 2); "" when they can.
std::string launch_unfit(const Options& o) {
  if (detect_rank_env().size > 1)
    return "--interconnect starts the ranks itself: run it once, not under a launcher";
  if (o.ranks < 2)
    return "--ranks " + std::to_string(o.ranks) + ": over an interconnect it takes 2 or more";
  const std::string& name = o.interconnect;
  if (find_link_profile(name) == nullptr) {
    std::string names;
    for (const LinkProfile& l : link_profiles()) names += (names.empty() ? "" : ", ") + l.name;
    return "unknown --interconnect '" + name + "' (" + names + ")";
  }
  if ((o.link_gbit != 0 || o.link_latency_us != 0) && name != "custom")
    return "--link-gbit and --link-latency-us go with --interconnect custom";
  if (name == "custom" && !(o.link_gbit > 0) && !(o.link_latency_us > 0))
    return "--interconnect custom needs --link-gbit and/or --link-latency-us above 0";
  return "";
}

// Exit 77 for test hosts that cannot be made here, saying why (and writing so to --json).
int launch_skipped(const Options& o, const std::string& json_path, const std::string& why) {
  const std::string& name = o.interconnect;
  std::fprintf(stderr, "dlhost: comm-bench: SKIPPED: interconnect %s: %s\n", name.c_str(),
               why.c_str());
  if (!o.json_path.empty()) {
    json doc{{"schema", "dlhost.comm-bench/1"},
             {"dlhost_version", dlhost_version()},
             {"status", "SKIPPED"},
             {"reason", "interconnect " + name + ": " + why},
             {"interconnect", {{"profile", name}}},
             {"results", json::array()}};
    write_json_file(json_path, doc);
  }
  return 77;
}

// What the launched ranks left: their JSON, checked to be theirs; the link added to it. The exit
// code of comm-bench --interconnect.
int launch_result(const Options& o, const std::string& json_path, int rc, const json& described) {
  // mpirun may exit 0 without starting anything (as root without leave): the ranks' JSON says
  // whether they ran.
  json doc;
  if (std::ifstream in(json_path); in) doc = json::parse(in, nullptr, false);
  if (o.json_path.empty()) std::remove(json_path.c_str());
  if (rc != 0) {
    std::fprintf(stderr, "dlhost: comm-bench: the ranks over %s ended with code %d\n",
                 o.interconnect.c_str(), rc);
    return rc == 124 || rc == 130 ? rc : 1;
  }
  if (!doc.is_object() || doc.value("world_size", 0) != o.ranks) {
    std::fprintf(stderr, "dlhost: comm-bench: mpirun exited 0 but no %d ranks wrote %s\n", o.ranks,
                 json_path.c_str());
    return 1;
  }
  if (!o.json_path.empty()) {
    doc["interconnect"] = described;
    if (!write_json_file(json_path, doc)) return 1;
  }
  return doc.value("status", "") == "OK" ? 0 : 1;
}

// --interconnect: starts the ranks under mpirun as `dlhost run` starts a case's (launcher.h), on
// test hosts for an emulated link, with a rendezvous store served to them as `dlhost run` serves
// one (a comm that bootstraps through it, or takes no host memory, runs here too).
int launch_ranks(const PluginRegistry& registry, const Options& o) {
  if (std::string why = launch_unfit(o); !why.empty()) {
    std::fprintf(stderr, "dlhost: comm-bench: %s\n", why.c_str());
    return 2;
  }
  const std::string& name = o.interconnect;
  const LoadedPlugin* comm = find_comm(registry, o.comm, "--comm");
  if (comm == nullptr) return 2;
  const std::string base_name = o.baseline.empty() ? default_baseline(o.comm) : o.baseline;
  const LoadedPlugin* base = nullptr;
  if (!base_name.empty() && base_name != "none" && base_name != o.comm) {
    base = find_comm(registry, base_name, "--baseline");
    if (base == nullptr) return 2;
  }
  // The same shaping as `dlhost run`'s for a case with this interconnect.
  const Interconnect link = link_profile(name, o.link_gbit, o.link_latency_us);
  json described{{"profile", "loopback"}, {"ranks_per_host", o.ranks}};
  // The JSON the ranks write; a scratch one when none is asked for, to see that they ran.
  const std::string json_path = !o.json_path.empty()
                                    ? std::filesystem::absolute(o.json_path).string()
                                    : (std::filesystem::path(temp_folder()) /
                                       ("dlhost-comm-bench-" + std::to_string(getpid()) + ".json"))
                                          .string();
  LaunchSpec spec;
  spec.ranks = o.ranks;
  spec.store = true;
  std::unique_ptr<TestHosts> hosts;
  if (name != "loopback") {
    if (std::string why = test_hosts_unavailable(link); !why.empty())
      return launch_skipped(o, json_path, why);
    try {
      hosts = std::make_unique<TestHosts>(o.ranks, 1, link);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dlhost: comm-bench: cannot make the test hosts: %s\n", e.what());
      return 1;
    }
    spec.extra_args = hosts->launcher_args();
    described = hosts->describe();
  }
  std::remove(json_path.c_str());
  int rc = 0;
  try {
    ServedStore store(hosts ? hosts->parent_address()
                            : launcher_named(spec.launcher)
                                  .store_endpoint(std::getenv("DLHOST_STORE_HOST"), false, {})
                                  .address);
    rc = run_launcher(launcher_command(spec, rank_command(o, json_path, comm, base), host_cores()),
                      o.timeout_s, store.job_environment());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlhost: comm-bench: %s\n", e.what());
    return 1;
  }
  return launch_result(o, json_path, rc, described);
}

int run_comm_bench(const PluginRegistry& registry, const Options& o) {
  if (!o.interconnect.empty()) return launch_ranks(registry, o);
  Sweep w;
  try {
    w = parse_sweep(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlhost: comm-bench: %s\n", e.what());
    return 2;
  }
  const LoadedPlugin* plugin = find_comm(registry, o.comm, "--comm");
  if (plugin == nullptr) return 2;
  std::string baseline_name = o.baseline.empty() ? default_baseline(o.comm) : o.baseline;
  if (baseline_name == "none" || baseline_name == o.comm) baseline_name.clear();
  const LoadedPlugin* baseline_plugin = nullptr;
  if (!baseline_name.empty()) {
    baseline_plugin = find_comm(registry, baseline_name, "--baseline");
    if (baseline_plugin == nullptr) return 2;
  }
  if (std::string why = device_only_unfit(*plugin, w.env, o); !why.empty()) {
    std::fprintf(stderr, "dlhost: comm-bench: %s\n", why.c_str());
    return 2;
  }
  try {
    std::unique_ptr<DeviceRig> rig = open_device(registry, o, w.env);
    const CommDevice where = rig ? rig->comm_device() : CommDevice{};
    CommSession comm(*plugin, w.env, {}, where);
    std::unique_ptr<CommSession> base;
    if (baseline_plugin != nullptr)
      base = std::make_unique<CommSession>(*baseline_plugin, w.env, dlhost_options{}, where);
    const int code = sweep(o, w, comm, base.get(), baseline_name, rig.get());
    if (base) base->goodbye();
    comm.goodbye();
    return code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlhost: comm-bench: rank %d: %s\n", w.env.rank, e.what());
    if (w.env.size > 1) {
      // The other ranks may be waiting in a collective this rank will never join, and a normal
      // exit would finalize MPI, which waits for them: leave at once, so the launcher sees a
      // rank die without finalizing and tears the job down instead of hanging.
      std::fflush(nullptr);
      std::_Exit(1);
    }
    return 1;
  }
}

}  // namespace

Command add_comm_bench_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  Command c;
  c.sub = app.add_subcommand(
      "comm-bench",
      "Collective bandwidth of a comm plugin (nccl-tests style): time, algbw, busbw and #wrong "
      "per size; run one per rank under mpirun/srun");
  auto* s = c.sub;
  s->add_option("--comm", o->comm, "Comm plugin to measure (see `dlhost plugins`)")->required();
  s->add_option("--baseline", o->baseline,
                "Comm plugin run through the same sweep for a time ratio; 'none' to skip "
                "(default: mpi_raw for --comm mpi)");
  s->add_option("-b,--minbytes", o->min_bytes, "Smallest size, e.g. 8, 1K, 4M")
      ->capture_default_str();
  s->add_option("-e,--maxbytes", o->max_bytes, "Largest size")->capture_default_str();
  s->add_option("-f,--stepfactor", o->factor, "Size multiplier between rows")
      ->capture_default_str()
      ->check(CLI::Range(2, 1 << 20));
  s->add_option("-n,--iters", o->iters, "Timed collectives per size")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  s->add_option("-w,--warmup", o->warmup, "Untimed collectives before each size")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  s->add_option("--ops", o->ops, "Collectives: all_reduce, broadcast, all_gather, all")
      ->capture_default_str()
      ->delimiter(',');
  s->add_option("-d,--dtype", o->dtype, "Element type: f32, f64, i32, i64")->capture_default_str();
  s->add_option("-o,--redop", o->redop, "All-reduce op: sum, avg, max, min")->capture_default_str();
  s->add_option("-r,--root", o->root, "Broadcast root")->capture_default_str();
  s->add_option("-c,--check", o->check,
                "1: check every result element against its exact value; 0: time only")
      ->capture_default_str();
  s->add_option("--json", o->json_path, "Write every row as JSON here (rank 0)");
  s->add_option("--backend", o->backend,
                "Run on device buffers of this backend (a comm on device memory needs one)");
  s->add_option("--device", o->device,
                "The backend's device (default: local rank modulo its devices)")
      ->check(CLI::Range(0, 1 << 20));
  s->add_flag("--in-place", o->in_place,
              "all_reduce in place (one buffer for input and result), as data parallelism "
              "issues it; Open MPI chooses its algorithm by it");
  s->add_option("--interconnect", o->interconnect,
                "Start --ranks ranks itself over this link, as `dlhost run` does for a case: "
                "loopback (mpirun on this host), 10gbe, 1gbe, custom (test hosts in network "
                "namespaces; root); the JSON records the link");
  s->add_option("--ranks", o->ranks, "With --interconnect: how many ranks (one per test host)")
      ->capture_default_str();
  s->add_option("--link-gbit", o->link_gbit, "--interconnect custom: bandwidth, Gbit/s");
  s->add_option("--link-latency-us", o->link_latency_us,
                "--interconnect custom: latency host to host, us (needs the netem qdisc)");
  s->add_option("--timeout", o->timeout_s,
                "With --interconnect: seconds before the ranks are ended (exit 124)")
      ->capture_default_str();
  c.run = [o](const PluginRegistry& registry, const std::vector<NetworkRef>&) {
    return run_comm_bench(registry, *o);
  };
  return c;
}

}  // namespace dlhost
