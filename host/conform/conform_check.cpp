// conform_check.cpp — see conform_check.h. Sums are taken in double so the judge adds no
// roundoff of its own to what it judges.
#include "conform/conform_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "dlhost/dlhost.hpp"

namespace dlhost::conform {

const char* status_name(Status status) {
  switch (status) {
    case Status::kPassed:
      return "PASSED";
    case Status::kSkipped:
      return "SKIPPED";
    case Status::kUnimplemented:
      return "UNIMPLEMENTED";
    case Status::kMistrusted:
      return "MISTRUSTED";
    case Status::kFailed:
      return "FAILED";
  }
  return "?";
}

double precision_eps(const std::string& precision) {
  if (precision == "fp32") return kEpsF32;
  if (precision == "tf32" || precision == "fp16") return std::ldexp(1.0, -10);
  if (precision == "bf16") return std::ldexp(1.0, -7);
  throw sdk::Error(DLHOST_CODE_INVALID_ARGUMENT,
                   "unknown precision '" + precision + "' (fp32, tf32, bf16 or fp16)");
}

double op_rtol(int64_t reduction_length, double eps) {
  return kOpToleranceFactor * eps *
         std::sqrt(static_cast<double>(std::max<int64_t>(reduction_length, 1)));
}

double network_rtol(int step, double eps) {
  return std::max(1e-3, 8 * eps) * std::ldexp(1.0, std::max(step, 1) - 1);
}

std::string multi_index(int64_t flat, const std::vector<int64_t>& dims) {
  if (dims.empty()) return "[" + std::to_string(flat) + "]";
  std::vector<int64_t> idx(dims.size());
  for (size_t k = dims.size(); k-- > 0;) {
    int64_t d = std::max<int64_t>(dims[k], 1);
    idx[k] = flat % d;
    flat /= d;
  }
  std::string s = "[";
  for (size_t k = 0; k < idx.size(); ++k) s += (k ? "," : "") + std::to_string(idx[k]);
  return s + "]";
}

namespace {

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

}  // namespace

Comparison compare_arrays(const std::string& name, const std::vector<float>& backend,
                          const std::vector<float>& reference, const std::vector<int64_t>& dims,
                          double rtol) {
  Comparison c;
  c.name = name;
  c.tol = rtol;
  if (backend.size() != reference.size()) {
    c.status = Status::kFailed;
    c.max_err = std::numeric_limits<double>::infinity();
    c.reason = name + ": backend has " + std::to_string(backend.size()) + " elements, reference " +
               std::to_string(reference.size());
    return c;
  }
  const size_t n = reference.size();
  double sum_sq = 0;
  bool ref_zero = true, backend_zero = true;
  for (size_t i = 0; i < n; ++i) {
    double r = reference[i];
    if (!std::isfinite(r)) {
      c.status = Status::kMistrusted;
      c.where = dims.empty() && n == 1 ? "" : multi_index(static_cast<int64_t>(i), dims);
      c.reference_value = r;
      c.backend_value = backend[i];
      c.reason = name + ": the reference itself is " + sci(r) + (c.where.empty() ? "" : " at ") +
                 c.where + ", nothing to compare with";
      return c;
    }
    sum_sq += r * r;
    ref_zero = ref_zero && r == 0.0;
    backend_zero = backend_zero && backend[i] == 0.0f;
  }
  if (ref_zero && backend_zero) {
    c.status = Status::kMistrusted;
    c.reason = name + ": all " + std::to_string(n) +
               " values are zero on both backends, so agreeing proves nothing";
    return c;
  }
  const double rms = n ? std::sqrt(sum_sq / static_cast<double>(n)) : 0.0;
  // An all-zero reference has no scale; any non-zero backend value then fails.
  const double floor = rms > 0 ? rms : std::numeric_limits<double>::min();
  int64_t worst = -1;
  for (size_t i = 0; i < n; ++i) {
    double b = backend[i], r = reference[i];
    double abs_err = std::fabs(b - r);
    double err = std::isfinite(b) ? abs_err / (std::fabs(r) + floor)
                                  : std::numeric_limits<double>::infinity();
    if (std::isfinite(b)) c.max_abs = std::max(c.max_abs, abs_err);
    if (worst < 0 || err > c.max_err) {
      c.max_err = err;
      worst = static_cast<int64_t>(i);
    }
  }
  if (worst >= 0) {
    c.where = n == 1 && dims.empty() ? "" : multi_index(worst, dims);
    c.backend_value = backend[worst];
    c.reference_value = reference[worst];
  }
  if (!(c.max_err <= rtol)) {
    c.status = Status::kFailed;
    c.reason = name + ": error " + sci(c.max_err) + " > tol " + sci(rtol) +
               (c.where.empty() ? "" : " at " + c.where) + " (backend " + sci(c.backend_value) +
               ", reference " + sci(c.reference_value) + "; max abs " + sci(c.max_abs) + ")";
  }
  return c;
}

FdJudgement judge_fd(const FdProbe& p, int64_t reduction_length, double eps) {
  FdJudgement j;
  const double coarse = (p.plus_h - p.minus_h) / (2.0 * p.h);
  j.fd = (p.plus_h2 - p.minus_h2) / (2.0 * p.h2);
  const double noise = kFdNoise * eps *
                       std::sqrt(static_cast<double>(std::max<int64_t>(reduction_length, 1))) *
                       std::fabs(p.loss) / p.h2;
  j.tol = kFdRtol * std::max(std::fabs(p.analytic), std::fabs(j.fd)) + noise;
  j.err = std::fabs(p.analytic - j.fd);
  // A kink within h/2 of w (a ReLU input or a max-pool pair sitting almost on the switch) biases
  // both differences alike, so comparing them cannot see it; the second differences can: for a
  // smooth loss (L(w+h) + L(w-h) - 2 L(w)) / h is h L'' and halves with h, across a kink it
  // stays at the jump of the slope.
  const double second_h = (p.plus_h + p.minus_h - 2.0 * p.loss) / p.h;
  const double second_h2 = (p.plus_h2 + p.minus_h2 - 2.0 * p.loss) / p.h2;
  bool kink = std::fabs(second_h2 - second_h / 2.0) > j.tol;
  // That test misses a kink whose slope jump is small beside the whole gradient (a ReLU layer's
  // bias sums 40 inputs, one of which sat near zero: a correct backend failed once). An eighth
  // step tells: a smooth loss gives the same central difference at h/2 and h/8 up to O(h^2) and
  // rounding, and second differences that shrink with the step; near a kink neither holds.
  if (p.h8 > 0) {
    const double fd8 = (p.plus_h8 - p.minus_h8) / (2.0 * p.h8);
    const double second_h8 = (p.plus_h8 + p.minus_h8 - 2.0 * p.loss) / p.h8;
    const double noise8 = noise * p.h2 / p.h8;
    if (!std::isfinite(fd8) || std::fabs(fd8 - j.fd) > 0.25 * j.tol + noise8) kink = true;
    if (std::fabs(second_h8 - second_h / 8.0) > std::max(0.25 * j.err, 4.0 * noise8)) kink = true;
  }
  if (!std::isfinite(coarse) || !std::isfinite(j.fd) || std::fabs(coarse - j.fd) > j.tol || kink) {
    j.verdict = FdVerdict::kNonSmooth;
  } else if (!(j.err <= j.tol)) {
    j.verdict = FdVerdict::kDisagrees;
  }
  return j;
}

Comparison compare_losses(const std::vector<float>& backend, const std::vector<float>& reference,
                          double eps) {
  Comparison c;
  c.name = "loss";
  if (backend.size() != reference.size()) {
    c.status = Status::kFailed;
    c.reason = "loss: backend ran " + std::to_string(backend.size()) + " steps, reference " +
               std::to_string(reference.size());
    return c;
  }
  double worst_ratio = -1;
  for (size_t s = 0; s < reference.size(); ++s) {
    double r = reference[s], b = backend[s];
    if (!std::isfinite(r)) {
      c.status = Status::kMistrusted;
      c.where = "step " + std::to_string(s + 1);
      c.reason = "loss: the reference's loss is " + sci(r) + " at " + c.where;
      return c;
    }
    double tol = network_rtol(static_cast<int>(s + 1), eps);
    double err = std::isfinite(b) ? std::fabs(b - r) / std::max(std::fabs(r), 1e-30)
                                  : std::numeric_limits<double>::infinity();
    double ratio = err / tol;
    if (std::isfinite(b)) c.max_abs = std::max(c.max_abs, std::fabs(b - r));
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      c.max_err = err;
      c.tol = tol;
      c.where = "step " + std::to_string(s + 1);
      c.backend_value = b;
      c.reference_value = r;
    }
  }
  if (worst_ratio > 1.0) {
    c.status = Status::kFailed;
    c.reason = "loss at " + c.where + ": backend " + sci(c.backend_value) + ", reference " +
               sci(c.reference_value) + ", relative error " + sci(c.max_err) + " > tol " +
               sci(c.tol);
  }
  return c;
}

Comparison compare_updates(const std::string& name, const std::vector<float>& initial,
                           const std::vector<float>& backend, const std::vector<float>& reference,
                           double rtol) {
  Comparison c;
  c.name = name;
  c.tol = rtol;
  if (backend.size() != initial.size() || reference.size() != initial.size()) {
    c.status = Status::kFailed;
    c.reason = name + ": sizes differ";
    return c;
  }
  double diff_sq = 0, ref_sq = 0, backend_sq = 0;
  for (size_t i = 0; i < initial.size(); ++i) {
    double dr = static_cast<double>(reference[i]) - initial[i];
    double db = static_cast<double>(backend[i]) - initial[i];
    diff_sq += (db - dr) * (db - dr);
    ref_sq += dr * dr;
    backend_sq += db * db;
    c.max_abs = std::max(c.max_abs, std::fabs(db - dr));
  }
  if (!std::isfinite(ref_sq)) {
    c.status = Status::kMistrusted;
    c.reason = name + ": the reference's update is not finite";
    return c;
  }
  if (ref_sq == 0) {
    c.status = backend_sq == 0 ? Status::kMistrusted : Status::kFailed;
    c.reason =
        name + (backend_sq == 0 ? ": neither backend changed it, so agreeing proves nothing"
                                : ": the reference left it unchanged but the backend changed it");
    c.max_err = backend_sq == 0 ? 0 : std::numeric_limits<double>::infinity();
    return c;
  }
  c.max_err = std::isfinite(diff_sq) ? std::sqrt(diff_sq / ref_sq)
                                     : std::numeric_limits<double>::infinity();
  c.where = "norm";
  c.backend_value = std::sqrt(backend_sq);
  c.reference_value = std::sqrt(ref_sq);
  if (!(c.max_err <= rtol)) {
    c.status = Status::kFailed;
    c.reason = name + ": the update differs by " + sci(c.max_err) + " of its norm (backend |dw| " +
               sci(c.backend_value) + ", reference |dw| " + sci(c.reference_value) + ") > tol " +
               sci(rtol);
  }
  return c;
}

}  // namespace dlhost::conform
