// The loop-unroll policy (compiler/unroll_policy.h): complete unrolling within the budget,
// factors that fit (dividing the trip count where one does), rolled loops past it, short and
// other run-time trip counts, the window-extent bound, the size measure, and what the emitter
// writes for mhc_pre_backward and upsample with the budget on and off.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "compiler/lower.h"
#include "compiler/unroll_policy.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "ops/registry.h"

namespace adjoint::compiler {
namespace {

/// Loops of constant trip counts (nullopt: known only at run time, no bound).
std::vector<LoopTrips> constant(std::initializer_list<std::optional<int64_t>> trips) {
  std::vector<LoopTrips> loops;
  for (const std::optional<int64_t>& t : trips) loops.push_back({t, std::nullopt});
  return loops;
}

std::vector<int64_t> factors(const std::vector<LoopUnroll>& loops) {
  std::vector<int64_t> out;
  for (const LoopUnroll& loop : loops) out.push_back(loop.factor);
  return out;
}

TEST(UnrollPolicy, CompleteWithinTheBudget) {
  int64_t nodes = 0;
  auto loops = choose_unrolling(constant({4, 8}), 10, UnrollPolicy{512, 1}, &nodes);
  EXPECT_EQ(factors(loops), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(nodes, 320);
  EXPECT_TRUE(loops[0].reason.empty());
  EXPECT_EQ(loops[0].pragma(), "#pragma unroll");
}

TEST(UnrollPolicy, LongLoopsGetAFactorThatFits) {
  // 512 trips of 64 nodes (mhc dphi partials) are over 8192: 8 copies fit in 8192 / 16.
  auto loops = choose_unrolling(constant({512}), 64, UnrollPolicy{8192, 1});
  EXPECT_EQ(factors(loops), (std::vector<int64_t>{8}));
  EXPECT_EQ(loops[0].pragma(), "#pragma unroll 8");
  EXPECT_NE(loops[0].reason.find("512 trips of 64 IR nodes, over the budget of 8192"),
            std::string::npos);
  // 240 trips of 40 nodes: 12 copies fit in 512, and 12 divides 240.
  EXPECT_EQ(factors(choose_unrolling(constant({240}), 40, UnrollPolicy{8192, 1})),
            (std::vector<int64_t>{12}));
  // 250 trips: 10 divides it and is more than half of 8, the largest power of two that fits.
  EXPECT_EQ(factors(choose_unrolling(constant({250}), 40, UnrollPolicy{8192, 1})),
            (std::vector<int64_t>{10}));
  // 251 trips: no divisor, so that power of two.
  EXPECT_EQ(factors(choose_unrolling(constant({251}), 40, UnrollPolicy{8192, 1})),
            (std::vector<int64_t>{8}));
}

TEST(UnrollPolicy, InnerLoopsFirstOuterLoopsRolledPastTheBudget) {
  // 32 x 4 x 24 over an 8-node body (mhc dgamma partials): the inner 24 and 4 fit (768
  // nodes); 32 of those do not, and not even 2 fit in 8192 / 16.
  int64_t nodes = 0;
  auto loops = choose_unrolling(constant({32, 4, 24}), 8, UnrollPolicy{8192, 1}, &nodes);
  EXPECT_EQ(factors(loops), (std::vector<int64_t>{1, 0, 0}));
  EXPECT_EQ(loops[0].pragma(), "#pragma unroll 1");
  EXPECT_NE(loops[0].reason.find("not unrolled"), std::string::npos);
  EXPECT_EQ(nodes, 768);
  // A single trip is always unrolled, whatever its body.
  EXPECT_EQ(factors(choose_unrolling(constant({1}), 100000, UnrollPolicy{512, 1})),
            (std::vector<int64_t>{0}));
}

TEST(UnrollPolicy, BudgetOffLeavesConstantLoopsToTheCaller) {
  auto loops = choose_unrolling(constant({512, 4}), 64, UnrollPolicy{});
  EXPECT_EQ(factors(loops), (std::vector<int64_t>{-1, -1}));
  EXPECT_EQ(UnrollPolicy{}.budget, 0);
  EXPECT_EQ(UnrollPolicy{}.runtime_factor, 0);
}

TEST(UnrollPolicy, RuntimeTripCounts) {
  auto rolled = choose_unrolling(constant({std::nullopt}), 10, UnrollPolicy{512, 1});
  EXPECT_EQ(rolled[0].pragma(), "#pragma unroll 1");
  EXPECT_NE(rolled[0].reason.find("run time"), std::string::npos);
  auto nvvm = choose_unrolling(constant({std::nullopt}), 10, UnrollPolicy{512, 0});
  EXPECT_EQ(nvvm[0].pragma(), "");
  EXPECT_TRUE(nvvm[0].reason.empty());
  // Provably short (at most 3 trips): rolled whatever the settings; 4 trips: NVVM's choice.
  for (const UnrollPolicy& policy : {UnrollPolicy{}, UnrollPolicy{512, 0}, UnrollPolicy{0, 4}}) {
    auto short_loop = choose_unrolling({LoopTrips{std::nullopt, 3}}, 10, policy);
    EXPECT_EQ(short_loop[0].pragma(), "#pragma unroll 1");
    EXPECT_NE(short_loop[0].reason.find("at most 3 trips"), std::string::npos);
  }
  EXPECT_EQ(choose_unrolling({LoopTrips{std::nullopt, 4}}, 10, UnrollPolicy{})[0].pragma(), "");
  int64_t nodes = 0;
  auto twice = choose_unrolling(constant({4, std::nullopt}), 10, UnrollPolicy{512, 2}, &nodes);
  EXPECT_EQ(factors(twice), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(nodes, 80);
}

TEST(UnrollPolicy, SizeCountsSharedNodesOnceAndConstantSelectsByTheirLargerArm) {
  ir::Var tap("tap"), other("other");
  ir::Expr big = ir::Expr(other) * ir::Expr(other) + ir::Expr(other) * 3 - ir::Expr(other);
  ir::Expr small = ir::Expr(other) + 1;
  ir::Axis axis{tap, ir::Expr(0), ir::Expr(16)};
  const UnrollPolicy policy{512, 1};
  // Over the loop variable alone: condition (1 node) + the larger arm + the select.
  ir::Expr on_tap = ir::select(ir::Expr(tap) == 0, big, small);
  const int64_t big_size = unrolled_size(big, policy, {});
  EXPECT_EQ(unrolled_size(on_tap, policy, {axis}), 1 + 1 + big_size);
  // Over another variable: every arm counts.
  ir::Expr on_other = ir::select(ir::Expr(other) == 0, big, small);
  EXPECT_EQ(unrolled_size(on_other, policy, {axis}),
            1 + 1 + big_size + unrolled_size(small, policy, {}));
  // The same node twice counts once.
  EXPECT_EQ(unrolled_size(big + big, policy, {}), 1 + big_size);
}

TEST(UnrollPolicy, WindowExtentBound) {
  ir::Var i("i");
  const ir::Expr t = ir::Expr(i) * 203;
  // The upsample 203 -> 101 window: (t + 303) / 101 - (t + 100) / 101 is 2 or 3.
  EXPECT_EQ(window_extent_at_most((t + 303) / 101 - (t + 100) / 101), 3);
  // A multiple of the divisor: exactly delta / d.
  EXPECT_EQ(window_extent_at_most((t + 202) / 101 - t / 101), 2);
  // Other forms: no bound.
  EXPECT_EQ(window_extent_at_most((t + 303) / 101 - (t + 100) / 100), std::nullopt);
  EXPECT_EQ(window_extent_at_most((t + 303) / 101 - (ir::Expr(i) + 100) / 101), std::nullopt);
  EXPECT_EQ(window_extent_at_most((t + 100) / 101 - (t + 303) / 101), std::nullopt);
  EXPECT_EQ(window_extent_at_most(t + 3), std::nullopt);
}

std::string sources(const std::string& spec, int64_t budget, int thread_tile = -1,
                    int long_loop_unroll = LowerOptions{}.long_loop_unroll) {
  LowerOptions options;
  options.unroll_budget = budget;
  options.thread_tile = thread_tile;
  options.long_loop_unroll = long_loop_unroll;
  CompiledProgram program = lower(ops::parse_specialization(spec).build_program(), options);
  std::string text;
  for (const CompiledKernel& kernel : program.kernels) text += kernel.source;
  return text;
}

TEST(UnrollPolicy, EmitterCapsMhcLongLoopsAndSaysWhy) {
  // Without thread tiles (whose long loops take their own partial unroll), mhc_pre_backward's
  // x_mix partials run a 512-trip token loop per thread.
  const std::string spec = "mhc_pre_backward batch=1 seq=4096 n=4 dim=2560 dtype=bf16";
  const std::string on = sources(spec, kSuggestedUnrollBudget, /*thread_tile=*/0, 0);
  EXPECT_TRUE(std::regex_search(on, std::regex(R"(#pragma unroll 8\n *for \(int s_step = 0; s_step < 512;)")))
      << on;
  EXPECT_NE(on.find("// Schedule: unroll s_step: 512 trips of"), std::string::npos);
  // Off (the budget's default, and the long-loop rule off): no capping pragma and no note, as
  // before the policy.
  const std::string off = sources(spec, 0, /*thread_tile=*/0, 0);
  EXPECT_EQ(off.find("#pragma unroll 1"), std::string::npos);
  EXPECT_EQ(off.find("#pragma unroll 8"), std::string::npos);
  EXPECT_EQ(off.find("Schedule: unroll"), std::string::npos);
  // The policy only adds pragmas and notes: removing them gives the source of before (both
  // stripped of pragmas: the lane spans' own unroll of gate_grads is in both).
  std::string stripped = std::regex_replace(on, std::regex(R"( *#pragma unroll \d+\n)"), "");
  stripped = std::regex_replace(stripped, std::regex(R"(// Schedule: unroll [^\n]*\n)"), "");
  EXPECT_EQ(stripped, std::regex_replace(off, std::regex(R"( *#pragma unroll \d+\n)"), ""));
}

/// The long-loop rule (EmitOptions::long_loop_unroll, on by default): a constant loop of more
/// than 128 trips that nothing else gives a pragma is unrolled 16 times, not completely by NVVM;
/// 0 gives the source of before.
TEST(UnrollPolicy, LongConstantLoopsAreNotLeftToCompleteUnrolling) {
  const std::string spec = "mhc_pre_backward batch=1 seq=455 n=4 dim=1024 dtype=bf16";
  const std::string on = sources(spec, 0);
  EXPECT_TRUE(std::regex_search(on, std::regex(R"(#pragma unroll 16\n *for \(int s = 0; s < 455;)")))
      << on;
  EXPECT_NE(on.find("// Schedule: unroll s: 16 (a constant loop of 455 trips, which NVVM would "
                    "unroll completely)"),
            std::string::npos);
  const std::string off = sources(spec, 0, -1, 0);
  EXPECT_EQ(off.find("#pragma unroll 16"), std::string::npos);
  std::string stripped = std::regex_replace(on, std::regex(R"( *#pragma unroll 16\n)"), "");
  stripped = std::regex_replace(stripped, std::regex(R"(// Schedule: unroll [^\n]*\n)"), "");
  EXPECT_EQ(stripped, off);
}

TEST(UnrollPolicy, ShortGatherWindowsStayRolledByDefault) {
  const std::string text = sources(
      "upsample_nearest2d_backward dtype=f32 input_size=1,3,101,67 output_size=203,134",
      LowerOptions{}.unroll_budget);
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(#pragma unroll 1\n *for \(int oh = oh_begin;)")))
      << text;
  EXPECT_NE(text.find("// Schedule: unroll oh: at most 3 trips, known only at run time: not "
                      "unrolled"),
            std::string::npos);
  // The bins of a binned gather have data-dependent lengths: left to NVVM, without a note.
  const std::string bins = sources(
      "grid_sampler_2d_backward dtype=f32 input_size=2,3,16,16 output_size=8,8 "
      "interpolation_mode=bicubic",
      LowerOptions{}.unroll_budget);
  EXPECT_EQ(bins.find("#pragma unroll 1"), std::string::npos) << bins;
  EXPECT_EQ(bins.find("Schedule: unroll"), std::string::npos);
}

TEST(UnrollPolicy, OutOfRangeOptionsAreNamedErrors) {
  const std::string spec = "upsample_nearest1d_backward dtype=f32 input_size=1,1,4 output_size=8";
  for (auto [budget, runtime] : {std::pair<int64_t, int>{-1, 1}, {(int64_t{1} << 20) + 1, 1},
                                 {512, -1}, {512, 17}}) {
    LowerOptions options;
    options.unroll_budget = budget;
    options.runtime_unroll = runtime;
    try {
      lower(ops::parse_specialization(spec).build_program(), options);
      ADD_FAILURE() << budget << " " << runtime << ": expected an error";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      const std::string what = error.what();
      EXPECT_NE(what.find(runtime == 1 ? "unroll_budget" : "runtime_unroll"), std::string::npos)
          << what;
    }
  }
}

}  // namespace
}  // namespace adjoint::compiler
