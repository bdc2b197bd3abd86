// step_loop.cpp — see step_loop.h.
#include "run/step_loop.h"

#include <algorithm>
#include <cmath>

#include "core/host_api.h"

namespace dlhost {

namespace {

using Clock = std::chrono::steady_clock;

double ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Events between the phases: start, after upload, forward, backward, all-reduce, update.
enum Mark { kStart, kUploaded, kForward, kBackward, kReduced, kUpdated, kMarks };

}  // namespace

StepLoop::StepLoop(const BackendDevice& backend, dlhost_context* context, dlhost_model* model,
                   DataParallel* dp, const std::vector<Upload>& uploads, const RunContext& ctx,
                   DataFeed* feed)
    : backend_(backend),
      api_(backend.api()),
      context_(context),
      m_(model),
      dp_(dp),
      ready_(dp ? dp->grad_ready() : nullptr),
      uploads_(uploads),
      ctx_(ctx),
      feed_(feed) {
  if (backend.has_events())
    for (int i = 0; i < kMarks; ++i) events_.emplace_back(backend, model);
  traced_ready_.struct_size = DLHOST_GRAD_READY_STRUCT_SIZE;
  traced_ready_.user = this;
  traced_ready_.fn = on_grad_ready;
}

// Per-gradient backward times for `dlhost project`: on the host clock a synchronous backend
// calls grad_ready as each layer's gradients are done, so the time of the call is the time the
// gradient became ready. Noting it costs a clock read; data parallelism's callback runs after.
void StepLoop::on_grad_ready(void* self, int32_t param) {
  auto* loop = static_cast<StepLoop*>(self);
  if (Samples* s = loop->trace_) {
    double at = ms(loop->backward_start_, Clock::now());
    size_t k = loop->traced_++;
    if (s->grad_order.size() == k && s->grad_ready_ms.size() == k) {
      s->grad_order.push_back(param);
      s->grad_ready_ms.emplace_back();
    }
    // A backend that reports another order in a later step: positions no longer match.
    if (k < s->grad_order.size() && s->grad_order[k] == param) s->grad_ready_ms[k].push_back(at);
  }
  if (loop->ready_ != nullptr) loop->ready_->fn(loop->ready_->user, param);
}

StepLoop::~StepLoop() = default;

double StepLoop::take_batch() {
  if (feed_ == nullptr) return 0;
  auto t0 = Clock::now();
  feed_->take();
  return ms(t0, Clock::now());
}

void StepLoop::upload() {
  if (feed_) feed_->upload();
  for (const Upload& u : uploads_) {
    if (u.device)
      backend_.copy_from_host(context_, m_, u.memory->data(), *u.device, 0, u.bytes);
    else
      check_status(api_->set_input(m_, u.tensor, u.memory->data(), u.bytes), "set_input (upload)");
  }
}

float StepLoop::warmup_step() {
  progress(0);
  take_batch();
  upload();
  check_status(api_->forward(m_), "forward");
  progress(1);
  check_status(api_->backward(m_, ready_), "backward");
  progress(2);
  if (dp_) dp_->finish(nullptr);
  progress(3);
  check_status(api_->update(m_), "update");
  ++step_;
  return loss();
}

void StepLoop::timed_step(Samples& s) {
  if (events_.empty())
    clock_step(s);
  else
    event_step(s);
  s.allreduce.push_back(dp_ ? s.dp.allreduce_ms : 0.0);
  s.loss.push_back(loss());  // outside the timers
  sample_memory(s.memory);
  ++step_;
}

// 1.1: the host clock, a synchronize after every phase.
void StepLoop::clock_step(Samples& s) {
  progress(0);
  auto t0 = Clock::now();
  const double data_ms = take_batch();
  auto td = Clock::now();
  upload();
  if (uploads()) check_status(api_->synchronize(m_), "synchronize after upload");
  auto tu = Clock::now();
  synchronized(api_->forward(m_), "forward");
  auto t1 = Clock::now();
  progress(1);
  trace_ = &s;
  traced_ = 0;
  backward_start_ = t1;
  dlhost_status* backward = api_->backward(m_, &traced_ready_);
  trace_ = nullptr;
  synchronized(backward, "backward");
  auto t2 = Clock::now();
  progress(2);
  if (dp_) dp_->finish(&s.dp);
  auto t3 = Clock::now();
  progress(3);
  synchronized(api_->update(m_), "update");
  auto t4 = Clock::now();
  if (feed_) s.data.push_back(data_ms);
  s.upload.push_back(ms(td, tu));
  s.forward.push_back(ms(tu, t1));
  s.backward.push_back(ms(t1, t2));
  s.exposed_comm.push_back(ms(t2, t3));
  s.update.push_back(ms(t3, t4));
  s.step.push_back(ms(t0, t4));
  s.wall_step.push_back(ms(t0, t4));
}

// 1.2: events between the phases, one synchronize at the end of the step.
void StepLoop::event_step(Samples& s) {
  auto& e = events_;
  progress(0);
  auto w0 = Clock::now();
  const double data_ms = take_batch();  // on the host, before the device's part of the step
  e[kStart].record();
  upload();
  e[kUploaded].record();
  check_status(api_->forward(m_), "forward");
  e[kForward].record();
  progress(1);
  check_status(api_->backward(m_, ready_), "backward");
  e[kBackward].record();
  progress(2);
  if (dp_) dp_->finish(&s.dp);
  e[kReduced].record();
  progress(3);
  check_status(api_->update(m_), "update");
  e[kUpdated].record();
  e[kUpdated].synchronize();
  auto w1 = Clock::now();
  if (dp_) dp_->settle(&s.dp);
  s.upload.push_back(e[kUploaded].ms_since(e[kStart]));
  s.forward.push_back(e[kForward].ms_since(e[kUploaded]));
  s.backward.push_back(e[kBackward].ms_since(e[kForward]));
  s.exposed_comm.push_back(e[kReduced].ms_since(e[kBackward]));
  s.update.push_back(e[kUpdated].ms_since(e[kReduced]));
  s.step.push_back(data_ms + e[kUpdated].ms_since(e[kStart]));
  if (feed_) s.data.push_back(data_ms);
  s.wall_step.push_back(ms(w0, w1));
}

void StepLoop::sample_memory(MemoryFigures& m) {
  if (auto stats = backend_.memory_stats(m_)) {
    m.in_use = stats->in_use_bytes;
    m.peak = std::max({m.peak, stats->peak_bytes, stats->in_use_bytes});
    m.device = stats;
    m.device->peak_bytes = m.peak;
    return;
  }
  uint64_t bytes = 0;
  check_status(api_->memory_in_use(m_, &bytes), "memory_in_use");
  m.in_use = bytes;
  m.peak = std::max(m.peak, bytes);
}

void StepLoop::synchronized(dlhost_status* status, const char* what) {
  check_status(status, what);
  check_status(api_->synchronize(m_), "synchronize");
}

float StepLoop::loss() {
  float l = 0;
  check_status(api_->read_loss(m_, &l), "read_loss");
  return l;
}

void StepLoop::progress(int phase) {
  if (ctx_.on_progress) ctx_.on_progress(step_, phase);
}

Samples train(StepLoop& loop, DataParallel* dp, const CaseParams& p, Clock::time_point case_start) {
  const int64_t warmup = p.warmup;
  const int64_t iterations = p.iterations;
  const double timeout_s = p.timeout;
  Samples s;
  for (auto* v : {&s.step, &s.forward, &s.backward, &s.exposed_comm, &s.update, &s.allreduce,
                  &s.loss, &s.upload, &s.wall_step, &s.data})
    v->reserve(static_cast<size_t>(iterations));
  // Every rank must stop at the same step, or the others would wait in an all-reduce forever.
  auto over_time = [&] {
    std::vector<double> late{ms(case_start, Clock::now()) > timeout_s * 1000.0 ? 1.0 : 0.0};
    if (dp) dp->all_reduce_max(late);
    return late[0] > 0;
  };
  for (int64_t i = 0; i < warmup && !s.timed_out; ++i) {
    s.warmup_loss.push_back(loop.warmup_step());
    s.timed_out = over_time();
  }
  loop.sample_memory(s.memory);
  for (int64_t i = 0; i < iterations && !s.timed_out; ++i) {
    loop.timed_step(s);
    if (!std::isfinite(s.loss.back()))
      throw Error(DLHOST_CODE_INTERNAL, "loss is " + std::to_string(s.loss.back()) +
                                            " at timed iteration " + std::to_string(i));
    s.timed_out = over_time();
  }
  return s;
}

}  // namespace dlhost
