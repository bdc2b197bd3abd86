// test_conform.cpp — the judgement of `dlhost conform` without any backend: descriptors (parse,
// canonical form, errors), every built-in problem builds and prints back as itself, the
// tolerance formulas, and that the comparators pass agreeing data and fail perturbed data
// (each test feeds both, so a comparator that always passes or always fails is caught).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "conform/conform_check.h"
#include "conform/conform_problems.h"
#include "core/graph.h"

namespace {

using dlhost::conform::compare_arrays;
using dlhost::conform::compare_losses;
using dlhost::conform::compare_updates;
using dlhost::conform::DescriptorError;
using dlhost::conform::kEpsF32;
using dlhost::conform::parse_descriptor;
using dlhost::conform::Status;

// --- descriptors ---------------------------------------------------------------------------------

TEST(ConformDescriptor, CanonicalStringRoundTrips) {
  const std::string text = "op=conv2d,n=3,c=5,h=9,w=7,oc=4,k=3,s=2,p=1,d=2,g=1,bias=1";
  EXPECT_EQ(parse_descriptor(text).str(), text);
}

TEST(ConformDescriptor, AnyOrderAndDefaultsGiveTheCanonicalForm) {
  EXPECT_EQ(parse_descriptor("k=5,op=conv2d,g=1").str(),
            "op=conv2d,n=2,c=3,h=7,w=7,oc=4,k=5,s=1,p=1,d=1,g=1,bias=1");
  EXPECT_EQ(parse_descriptor("op=batch_norm,eps=1e-5,shape=04x3").str(),
            "op=batch_norm,shape=4x3,eps=1e-05,momentum=0.1");
  EXPECT_EQ(parse_descriptor("net=lenet").str(), "net=lenet,batch=2,steps=3");
}

TEST(ConformDescriptor, Accessors) {
  auto d = parse_descriptor("op=lrn,shape=2x7x5x5,alpha=0.5");
  EXPECT_EQ(d.kind(), "op");
  EXPECT_EQ(d.name(), "lrn");
  EXPECT_EQ(d.get_int("size"), 5);
  EXPECT_DOUBLE_EQ(d.get_double("alpha"), 0.5);
  EXPECT_EQ(d.get_shape("shape"), (std::vector<int64_t>{2, 7, 5, 5}));
  EXPECT_THROW(d.get("nope"), DescriptorError);
}

// Each malformed descriptor is refused with a message naming what is wrong.
TEST(ConformDescriptor, ErrorsNameTheProblem) {
  auto message = [](const std::string& text) {
    try {
      parse_descriptor(text);
    } catch (const DescriptorError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(message("op=conv3d").find("unknown op 'conv3d'"), std::string::npos);
  EXPECT_NE(message("op=conv2d,q=1").find("has no key 'q'"), std::string::npos);
  EXPECT_NE(message("op=conv2d,q=1").find("oc=4"), std::string::npos);  // lists the keys
  EXPECT_NE(message("op=conv2d,n=1,n=2").find("given twice"), std::string::npos);
  EXPECT_NE(message("op=conv2d,n").find("not key=value"), std::string::npos);
  EXPECT_NE(message("op=conv2d,n=two").find("not an integer"), std::string::npos);
  EXPECT_NE(message("op=conv2d,n=-1").find(">= 0"), std::string::npos);
  EXPECT_NE(message("op=pool2d,kind=min").find("max|avg"), std::string::npos);
  EXPECT_NE(message("op=fc,shape=3x0").find("shape"), std::string::npos);
  EXPECT_NE(message("op=dropout,p=x").find("not a number"), std::string::npos);
  EXPECT_NE(message("n=2").find("op=OP or net=NETWORK"), std::string::npos);
  EXPECT_NE(message("op=fc,net=lenet").find("not both"), std::string::npos);
  EXPECT_EQ(message("op=fc"), "(accepted)");
}

// --- the built-in problems -----------------------------------------------------------------------

TEST(ConformProblems, EveryProblemIsCanonicalAndBuilds) {
  size_t count = 0;
  for (auto shapes : {dlhost::conform::Shapes::kSmall, dlhost::conform::Shapes::kMedium}) {
    for (const auto& op : dlhost::conform::op_names()) {
      auto problems = dlhost::conform::op_problems(op, shapes);
      EXPECT_FALSE(problems.empty()) << op;
      for (const auto& d : problems) {
        SCOPED_TRACE(d.str());
        EXPECT_EQ(d.name(), op);
        EXPECT_EQ(parse_descriptor(d.str()).str(), d.str());
        auto og = dlhost::conform::build_op_graph(d);
        ASSERT_NE(og.graph, nullptr);
        EXPECT_GT(og.graph->num_params(), 0);  // something to compare gradients of
        EXPECT_GE(og.reduction_length, 1);
        // Dropout's mask, and attention's when it drops weights, change with the step.
        EXPECT_EQ(og.step_dependent,
                  op == "dropout" || (op == "attention" && d.get_double("p") > 0));
        ++count;
      }
    }
  }
  EXPECT_GE(count, 45u);
}

TEST(ConformProblems, SmallProblemsCoverTheCornersTheBriefNames) {
  auto all = [](const std::string& op) {
    std::string s;
    for (const auto& d : dlhost::conform::op_problems(op, dlhost::conform::Shapes::kSmall))
      s += d.str() + "\n";
    return s;
  };
  std::string conv = all("conv2d"), pool = all("pool2d");
  EXPECT_NE(conv.find("n=1,"), std::string::npos);  // batch 1
  EXPECT_NE(conv.find("d=2"), std::string::npos);   // dilation
  EXPECT_NE(conv.find("s=3,p=2"), std::string::npos);
  EXPECT_NE(pool.find("ceil=1,cip=0"), std::string::npos);
  EXPECT_NE(pool.find("ceil=1,cip=1"), std::string::npos);
  EXPECT_NE(all("softmax_cross_entropy").find("shape=2x5x7"), std::string::npos);  // rank 3
  EXPECT_NE(all("lstm").find("layers=2"), std::string::npos);
  EXPECT_NE(all("fc").find("bd=2"), std::string::npos);  // per-step FC
}

TEST(ConformProblems, GraphShape) {
  // pre (1x1 conv: weight, bias), op (weight, bias), probe (weight): 5 parameters.
  auto og = dlhost::conform::build_op_graph(
      parse_descriptor("op=conv2d,n=3,c=5,h=9,w=7,oc=4,k=3,s=2,p=1,d=2,g=1,bias=1"));
  ASSERT_EQ(og.graph->num_params(), 5);
  EXPECT_STREQ(og.graph->param(0).name, "pre.weight");
  EXPECT_STREQ(og.graph->param(2).name, "op.weight");
  EXPECT_STREQ(og.graph->param(4).name, "probe.weight");
  // The longest reduction is the 1x1 input layer's weight gradient, over N x H x W = 3 x 9 x 7
  // (the op's forward sums 5 x 3 x 3 = 45 terms, its weight gradient N x OH x OW = 3 x 4 x 3).
  EXPECT_EQ(og.reduction_length, 189);
  EXPECT_EQ(dlhost::conform::reduction_length(*og.graph), 189);
  // Batch norm's input layer has no bias (its gradient would be exactly zero).
  auto bn = dlhost::conform::build_op_graph(parse_descriptor("op=batch_norm,shape=4x3x5x5"));
  EXPECT_STREQ(bn.graph->param(1).name, "op.scale");
  auto lstm = dlhost::conform::build_op_graph(parse_descriptor("op=lstm,n=2,t=3,c=4,hidden=5"));
  EXPECT_EQ(lstm.reduction_length, 3 * 4 * 5);  // T x 4 x max(C, H)
}

TEST(ConformProblems, ShapesTheOpCannotHaveAreRefused) {
  EXPECT_THROW(dlhost::conform::build_op_graph(parse_descriptor("op=lrn,shape=2x3")),
               DescriptorError);
  EXPECT_THROW(dlhost::conform::build_op_graph(parse_descriptor("op=fc,shape=2x3,bd=2")),
               DescriptorError);
  // The builder's own check (kernel larger than the padded input) comes back as a DescriptorError.
  EXPECT_THROW(dlhost::conform::build_op_graph(parse_descriptor("op=conv2d,h=2,w=2,k=5,p=0")),
               DescriptorError);
}

// --- tolerances ----------------------------------------------------------------------------------

TEST(ConformTolerance, Formulas) {
  EXPECT_DOUBLE_EQ(dlhost::conform::op_rtol(1), 64 * kEpsF32);
  EXPECT_DOUBLE_EQ(dlhost::conform::op_rtol(100), 640 * kEpsF32);
  EXPECT_DOUBLE_EQ(dlhost::conform::op_rtol(0), 64 * kEpsF32);
  EXPECT_DOUBLE_EQ(dlhost::conform::network_rtol(1), 1e-3);
  EXPECT_DOUBLE_EQ(dlhost::conform::network_rtol(3), 4e-3);
}

// `dlhost conform --precision`: the tolerances follow the mode's epsilon.
TEST(ConformTolerance, ScaleWithThePrecisionMode) {
  using dlhost::conform::precision_eps;
  EXPECT_DOUBLE_EQ(precision_eps("fp32"), kEpsF32);
  EXPECT_DOUBLE_EQ(precision_eps("tf32"), 1.0 / 1024);
  EXPECT_DOUBLE_EQ(precision_eps("fp16"), 1.0 / 1024);
  EXPECT_DOUBLE_EQ(precision_eps("bf16"), 1.0 / 128);
  EXPECT_THROW(precision_eps("int8"), dlhost::sdk::Error);
  EXPECT_DOUBLE_EQ(dlhost::conform::op_rtol(100, precision_eps("bf16")), 640.0 / 128);
  EXPECT_DOUBLE_EQ(dlhost::conform::network_rtol(1, precision_eps("bf16")), 8.0 / 128);
  EXPECT_DOUBLE_EQ(dlhost::conform::network_rtol(2, precision_eps("tf32")), 16.0 / 1024);
  EXPECT_DOUBLE_EQ(dlhost::conform::network_rtol(1, precision_eps("fp32")), 1e-3);
}

// --- array comparison ----------------------------------------------------------------------------

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) + 0.5f);
  return v;
}

TEST(ConformCompare, AgreeingArraysPassPerturbedOnesFail) {
  const double rtol = dlhost::conform::op_rtol(100);  // ~7.6e-6
  auto r = ramp(12);
  auto same = compare_arrays("grad w", r, r, {3, 4}, rtol);
  EXPECT_EQ(same.status, Status::kPassed);
  EXPECT_EQ(same.max_err, 0);

  // Rounding-level noise (a few ulps everywhere) passes.
  auto noisy = r;
  for (auto& v : noisy) v = std::nextafter(std::nextafter(v, 2.0f), 2.0f);
  EXPECT_EQ(compare_arrays("grad w", noisy, r, {3, 4}, rtol).status, Status::kPassed);

  // One element off by 1e-3 of itself fails, and the report points at it.
  auto wrong = r;
  wrong[6] *= 1.001f;
  auto c = compare_arrays("grad w", wrong, r, {3, 4}, rtol);
  EXPECT_EQ(c.status, Status::kFailed);
  EXPECT_EQ(c.where, "[1,2]");
  EXPECT_FLOAT_EQ(static_cast<float>(c.backend_value), wrong[6]);
  EXPECT_FLOAT_EQ(static_cast<float>(c.reference_value), r[6]);
  EXPECT_GT(c.ratio(), 1.0);
  EXPECT_NE(c.reason.find("grad w"), std::string::npos);
  EXPECT_NE(c.reason.find("[1,2]"), std::string::npos);
}

TEST(ConformCompare, SmallElementsAreJudgedAgainstTheArraysScale) {
  // 1e-6 next to values of 1: an absolute error of 1e-9 is cancellation noise, not a bug...
  std::vector<float> r{1.0f, -1.0f, 1e-6f}, b{1.0f, -1.0f, 1e-6f + 1e-9f};
  EXPECT_EQ(compare_arrays("g", b, r, {}, 1e-6).status, Status::kPassed);
  // ...but an error the size of the array's values is.
  b[2] = 0.1f;
  EXPECT_EQ(compare_arrays("g", b, r, {}, 1e-6).status, Status::kFailed);
}

TEST(ConformCompare, NonFiniteZeroAndSizeCases) {
  std::vector<float> r{1, 2, 3};
  auto nan_backend = r;
  nan_backend[1] = NAN;
  auto c = compare_arrays("g", nan_backend, r, {3}, 1e-3);
  EXPECT_EQ(c.status, Status::kFailed);
  EXPECT_EQ(c.where, "[1]");
  EXPECT_EQ(compare_arrays("g", r, nan_backend, {3}, 1e-3).status, Status::kMistrusted);
  std::vector<float> zeros(3, 0.0f);
  EXPECT_EQ(compare_arrays("g", zeros, zeros, {3}, 1e-3).status, Status::kMistrusted);
  EXPECT_EQ(compare_arrays("g", r, zeros, {3}, 1e-3).status, Status::kFailed);
  EXPECT_EQ(compare_arrays("g", {1, 2}, r, {3}, 1e-3).status, Status::kFailed);
  // A scalar (the loss) has no index.
  auto loss = compare_arrays("loss", {2.0f}, {2.1f}, {}, 1e-3);
  EXPECT_EQ(loss.status, Status::kFailed);
  EXPECT_EQ(loss.where, "");
}

TEST(ConformCompare, MultiIndex) {
  EXPECT_EQ(dlhost::conform::multi_index(0, {2, 3}), "[0,0]");
  EXPECT_EQ(dlhost::conform::multi_index(5, {2, 3}), "[1,2]");
  EXPECT_EQ(dlhost::conform::multi_index(7, {4, 1, 2, 3}), "[1,0,0,1]");
  EXPECT_EQ(dlhost::conform::multi_index(7, {}), "[7]");
}

// --- finite differences
// ----------------------------------------------------------------------------

// The probe of a weight at w of a loss function, with the steps the command uses.
dlhost::conform::FdProbe probe_of(const std::function<double(double)>& loss, double w,
                                  double analytic) {
  dlhost::conform::FdProbe p;
  p.analytic = analytic;
  p.loss = loss(w);
  p.h = dlhost::conform::kFdStep;
  p.h2 = dlhost::conform::kFdStep / 2;
  p.plus_h = loss(w + p.h);
  p.minus_h = loss(w - p.h);
  p.plus_h2 = loss(w + p.h2);
  p.minus_h2 = loss(w - p.h2);
  p.h8 = dlhost::conform::kFdStep / 8;
  p.plus_h8 = loss(w + p.h8);
  p.minus_h8 = loss(w - p.h8);
  return p;
}

TEST(ConformFiniteDifferences, RightGradientAgreesWrongOneDoesNot) {
  auto loss = [](double w) { return 0.3 * w * w * w + 2.0 * w + std::sin(w); };
  const double w = 0.7, g = 0.9 * w * w + 2.0 + std::cos(w);
  using dlhost::conform::FdVerdict;
  using dlhost::conform::judge_fd;
  EXPECT_EQ(judge_fd(probe_of(loss, w, g), 100).verdict, FdVerdict::kAgrees);
  EXPECT_EQ(judge_fd(probe_of(loss, w, g * 1.05), 100).verdict, FdVerdict::kDisagrees);
  EXPECT_EQ(judge_fd(probe_of(loss, w, -g), 100).verdict, FdVerdict::kDisagrees);
  EXPECT_EQ(judge_fd(probe_of(loss, w, 0.0), 100).verdict, FdVerdict::kDisagrees);
}

TEST(ConformFiniteDifferences, KinksAreSetAsideNotJudged) {
  using dlhost::conform::FdVerdict;
  // A ReLU whose input sits 1e-4 from zero: both steps straddle the kink alike.
  const double w = 0.5;
  auto near = [&](double x) { return std::max(0.0, x - w + 1e-4) + 0.2 * x; };
  EXPECT_EQ(dlhost::conform::judge_fd(probe_of(near, w, 1.2), 10).verdict, FdVerdict::kNonSmooth);
  // A kink between h/2 and h: only the coarse step sees it.
  auto mid = [&](double x) { return std::max(0.0, x - w - 0.007) + 0.2 * x; };
  EXPECT_EQ(dlhost::conform::judge_fd(probe_of(mid, w, 0.2), 10).verdict, FdVerdict::kNonSmooth);
  // A small slope jump (0.36) beside a large gradient (5), h/6 from w: the halving test alone
  // calls a correct gradient wrong (a regression: a ReLU layer's bias failed this way); the
  // eighth step sets it aside.
  const double e = dlhost::conform::kFdStep / 6;
  auto small_jump = [&](double x) { return 0.36 * std::max(0.0, x - w + e) + 4.64 * x; };
  auto with_h8 = probe_of(small_jump, w, 5.0);
  EXPECT_EQ(dlhost::conform::judge_fd(with_h8, 10).verdict, FdVerdict::kNonSmooth);
  auto without_h8 = with_h8;
  without_h8.h8 = 0;
  EXPECT_EQ(dlhost::conform::judge_fd(without_h8, 10).verdict, FdVerdict::kDisagrees);
  // And the eighth step does not excuse a wrong gradient of a smooth loss.
  auto smooth = [](double x) { return 0.3 * x * x * x + 2.0 * x; };
  EXPECT_EQ(dlhost::conform::judge_fd(probe_of(smooth, w, 0.9 * w * w + 2.0 + 0.1), 10).verdict,
            FdVerdict::kDisagrees);
}

// --- network checks ------------------------------------------------------------------------------

TEST(ConformNetwork, LossToleranceGrowsPerStep) {
  std::vector<float> r{2.0f, 1.5f, 1.0f};
  EXPECT_EQ(compare_losses(r, r).status, Status::kPassed);
  // 3e-3 relative: too much at step 1 (tol 1e-3), fine at step 3 (tol 4e-3).
  EXPECT_EQ(compare_losses({2.0f * 1.003f, 1.5f, 1.0f}, r).status, Status::kFailed);
  auto late = compare_losses({2.0f, 1.5f, 1.0f * 1.003f}, r);
  EXPECT_EQ(late.status, Status::kPassed);
  EXPECT_EQ(late.where, "step 3");
  auto bad = compare_losses({2.0f, NAN, NAN}, r);
  EXPECT_EQ(bad.status, Status::kFailed);
  EXPECT_EQ(bad.where, "step 2");
  EXPECT_EQ(compare_losses({2.0f, 1.5f}, r).status, Status::kFailed);
}

TEST(ConformNetwork, UpdatesAreComparedNormWise) {
  std::vector<float> w0{1, 2, 3, 4}, wr{0.9f, 2.1f, 2.9f, 4.0f};
  EXPECT_EQ(compare_updates("update w", w0, wr, wr, 4e-3).status, Status::kPassed);
  std::vector<float> scaled(4);
  for (size_t i = 0; i < 4; ++i) scaled[i] = w0[i] + 1.01f * (wr[i] - w0[i]);
  auto c = compare_updates("update w", w0, scaled, wr, 4e-3);
  EXPECT_EQ(c.status, Status::kFailed);
  EXPECT_NEAR(c.max_err, 0.01, 1e-4);
  EXPECT_EQ(compare_updates("update w", w0, w0, w0, 4e-3).status, Status::kMistrusted);
  EXPECT_EQ(compare_updates("update w", w0, wr, w0, 4e-3).status, Status::kFailed);
  EXPECT_EQ(compare_updates("update w", w0, w0, wr, 4e-3).status, Status::kFailed);
}

}  // namespace
