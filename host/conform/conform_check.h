// conform_check.h — the numerical judgement of `dlhost conform`, kept apart from the backends so
// it can be tested on plain arrays: the status words, the tolerance formulas, the comparison of a
// backend's array with the reference's, the central finite-difference test of one weight, and the
// loss-sequence and weight-update comparisons of the network checks.
//
// Every formula here is stated in docs/conform.md; change both together.
// Pure functions on values; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlhost::conform {

// benchdnn's words. MISTRUSTED: the check ran but could not prove anything (all-zero gradients,
// a reference that fails its own finite differences).
enum class Status { kPassed, kSkipped, kUnimplemented, kMistrusted, kFailed };
const char* status_name(Status status);

// --- tolerances ------------------------------------------------------------------------------

// Unit round-off of float32 (2^-23).
constexpr double kEpsF32 = 1.1920928955078125e-07;
// c in rtol = c * eps * sqrt(K): room for a handful of chained layers, different summation orders
// (blocked, Winograd, split reductions) and a few ulps of exp/tanh/pow per element.
constexpr double kOpToleranceFactor = 64.0;

// The machine epsilon of the products a precision mode (`dlhost conform --precision`) computes
// with, which every tolerance below scales with: fp32 2^-23, tf32 and fp16 2^-10 (10 stored
// mantissa bits), bf16 2^-7 (7 bits). The reference always runs fp32. INVALID_ARGUMENT (thrown)
// for an unknown name.
double precision_eps(const std::string& precision);

// Relative tolerance of an op problem whose longest reduction has K terms. Rounding errors of K
// float32 additions in random order grow like sqrt(K) * eps; the worst case (K * eps) does not
// happen with real data and would hide real bugs at large K.
double op_rtol(int64_t reduction_length, double eps = kEpsF32);

// Relative tolerance on the loss of training step `step` (1-based) of a network: 1e-3 at the
// first step in fp32 (max(1e-3, 8 eps) in a reduced mode), doubling per step, since the two
// backends' weights drift apart once updated.
double network_rtol(int step, double eps = kEpsF32);

// --- comparisons -----------------------------------------------------------------------------

// The verdict on one quantity (the loss, one gradient, the finite-difference test, ...).
struct Comparison {
  std::string name;  // "loss", "grad conv.weight", "fd backend"
  Status status = Status::kPassed;
  std::string reason;  // why, when not PASSED; a line a person can act on
  double max_err = 0;  // the figure compared with `tol` (defined per kind of comparison)
  double max_abs = 0;  // largest |backend - reference|
  double tol = 0;
  std::string where;  // element of the worst error: "[1,0,2,2]", "step 3"
  double backend_value = 0, reference_value = 0;  // at `where`
  // max_err / tol: below 1 passes; the table shows the worst per problem.
  double ratio() const { return tol > 0 ? max_err / tol : 0.0; }
};

// Element-wise comparison with a scale floor: element i passes when
//   |b_i - r_i| <= rtol * (|r_i| + rms(r)),
// so a value near zero is judged against the array's typical magnitude (cancellation in a sum
// leaves an error proportional to its terms, not to its result). max_err is the largest
// |b_i - r_i| / (|r_i| + rms(r)). A non-finite reference, or an all-zero pair, is MISTRUSTED;
// a non-finite backend value is FAILED. `dims` (canonical layout) only names the worst element.
Comparison compare_arrays(const std::string& name, const std::vector<float>& backend,
                          const std::vector<float>& reference, const std::vector<int64_t>& dims,
                          double rtol);

// "[i,j,k]" for flat index `flat` of a row-major array of `dims` ("[flat]" without dims).
std::string multi_index(int64_t flat, const std::vector<int64_t>& dims);

// --- central finite differences --------------------------------------------------------------

// One weight w of one parameter: the loss at w +- h and w +- h/2 (everything else fixed) against
// the analytic gradient g the backend returned.
struct FdProbe {
  double analytic = 0;
  double loss = 0;  // at the unperturbed weights
  double h = 0;     // effective step: (float(w + h) - float(w - h)) / 2
  double plus_h = 0, minus_h = 0;
  double h2 = 0;  // effective half step
  double plus_h2 = 0, minus_h2 = 0;
  double h8 = 0;  // effective eighth step (0: not probed)
  double plus_h8 = 0, minus_h8 = 0;
};

enum class FdVerdict { kAgrees, kDisagrees, kNonSmooth };

struct FdJudgement {
  FdVerdict verdict = FdVerdict::kAgrees;
  double fd = 0;   // the central difference at h/2
  double err = 0;  // |analytic - fd|
  double tol = 0;
};

// Relative part of the finite-difference tolerance: the truncation error of a central difference
// at h = 1e-2 is O(h^2 L''') and a float32 loss carries roundoff; 2% still catches a wrong
// formula (a missing factor, a wrong term), which is what this check is for.
constexpr double kFdRtol = 2e-2;
// Absolute part, the loss roundoff turned into a slope: kFdNoise * eps * sqrt(K) * |L| / h.
constexpr double kFdNoise = 8.0;
// Step of the central difference (weights are O(0.1 - 1)); the half step is h / 2.
constexpr double kFdStep = 1e-2;

// tol = kFdRtol * max(|g|, |fd|) + kFdNoise * eps * sqrt(K) * |L| / (h/2).
// NonSmooth when the differences at h and h/2 disagree by more than tol: a ReLU or max-pool kink
// lies within h, or the loss is too noisy, and the sample proves nothing either way.
FdJudgement judge_fd(const FdProbe& probe, int64_t reduction_length, double eps = kEpsF32);

// --- network checks --------------------------------------------------------------------------

// Loss per training step: step s (1-based) passes when |b - r| <= network_rtol(s) * |r|.
Comparison compare_losses(const std::vector<float>& backend, const std::vector<float>& reference,
                          double eps = kEpsF32);

// What N training steps did to one parameter, norm-wise (robust to the rare element that sits
// on a ReLU kink in one backend and not the other):
//   || (w_b - w0) - (w_r - w0) ||_2 <= rtol * || w_r - w0 ||_2.
// MISTRUSTED when the reference did not move the parameter at all.
Comparison compare_updates(const std::string& name, const std::vector<float>& initial,
                           const std::vector<float>& backend, const std::vector<float>& reference,
                           double rtol);

}  // namespace dlhost::conform
