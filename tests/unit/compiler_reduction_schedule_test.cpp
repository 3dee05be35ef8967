// Tests of choose_reduction_schedules and the warp schedule around it: which kernels get warp
// lanes under each mode and why (the notes the dumps print), the knob's parsing, what the
// verifier and the coverage proof accept, and the code lower() emits for a warp kernel. The
// generated kernels' values are checked on the host in compiler_host_run_test.
#include <gtest/gtest.h>

#include "compiler/launch_geometry.h"
#include "compiler/lower.h"
#include "compiler/program_utils.h"
#include "compiler/reduction_schedule.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace adjoint::compiler {
namespace {

using ir::DType;
using ir::Expr;
using ir::Var;
using Mode = ReductionScheduleOptions::Mode;

/// out[p] = sum over t of x[p, t] (rows: t contiguous) or of x[t, p] (columns: t strided).
ir::Program sums(int64_t points, int64_t trips, bool columns) {
  ir::ProgramBuilder b("sums");
  ir::Tensor x = b.input("x", DType::kBF16,
                         columns ? std::vector<int64_t>{trips, points}
                                 : std::vector<int64_t>{points, trips});
  ir::Tensor out = b.output("out", DType::kF32, {points});
  Var p("p"), t("t");
  Expr load = columns ? ir::load(x, {t, p}) : ir::load(x, {p, t});
  b.kernel("sums", {ir::compute(out, ir::over(out, {p}),
                                ir::sum({ir::range(t, Expr(trips))}, ir::cast(DType::kF32, load),
                                        DType::kF32))});
  return std::move(b).build();
}

int lanes(const ir::Program& p) { return p.kernels.front().grid.reduction_lanes; }

TEST(ReductionSchedule, LongContiguousReductionsGetAWarpPerPoint) {
  ScheduleNotes notes;
  ir::Program p = choose_reduction_schedules(sums(4096, 4096, false), {}, &notes);
  EXPECT_EQ(lanes(p), 32);
  EXPECT_NE(notes.at("sums").find("warp-cooperative, 32 lanes stride over t"), std::string::npos)
      << notes.at("sums");
  EXPECT_NE(ir::to_string(p).find("grid(derived; reduction lanes 32)"), std::string::npos);
}

TEST(ReductionSchedule, StridedShortOrSmallDomainsKeepSerialThreads) {
  struct Case {
    ir::Program program;
    const char* why;
  };
  std::vector<Case> cases = {
      {sums(4096, 4096, true), "t indexes no stride-1 dimension"},
      {sums(512, 4096, false), "fewer than 1024 points"},
  };
  for (const Case& c : cases) {
    ScheduleNotes notes;
    ir::Program p = choose_reduction_schedules(c.program, {}, &notes);
    EXPECT_TRUE(same_program(p, c.program)) << c.why;
    EXPECT_NE(notes.at("sums").find(c.why), std::string::npos) << notes.at("sums");
  }
  // Short reductions stay serial without a note: every kernel has them.
  ScheduleNotes notes;
  ir::Program shorter = sums(4096, 255, false);
  EXPECT_TRUE(same_program(choose_reduction_schedules(shorter, {}, &notes), shorter));
  EXPECT_EQ(notes.count("sums"), 0u);
}

TEST(ReductionSchedule, SharedLoadsGiveEachWarpSeveralPoints) {
  // h[p, k] = sum over t of x[p, t] * w[k, t]: x's row is the same for every k, so a warp
  // takes 8 k's (the largest of 8, 4, 2 dividing 24) and reads it once for all of them.
  ir::ProgramBuilder b("mix");
  ir::Tensor x = b.input("x", DType::kF32, {2048, 1024});
  ir::Tensor w = b.input("w", DType::kF32, {24, 1024});
  ir::Tensor h = b.output("h", DType::kF32, {2048, 24});
  Var p("p"), k("k"), t("t");
  b.kernel("mix", {ir::compute(h, ir::over(h, {p, k}),
                               ir::sum({ir::range(t, Expr(1024))},
                                       ir::load(x, {p, t}) * ir::load(w, {k, t}), DType::kF32))});
  ScheduleNotes notes;
  ir::Program chosen = choose_reduction_schedules(std::move(b).build(), {}, &notes);
  EXPECT_EQ(lanes(chosen), 32);
  EXPECT_EQ(chosen.kernels.front().grid.vector_width, 8);
  EXPECT_NE(notes.at("mix").find("each warp computes 8 points of k"), std::string::npos)
      << notes.at("mix");
  CompiledProgram c = lower(chosen, LowerOptions{});
  const std::string& s = c.kernels.at(0).source;
  EXPECT_NE(s.find("acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], offset);"), std::string::npos)
      << s;
  EXPECT_NE(s.find("if (lane == 0) adjoint::store_elements"), std::string::npos) << s;
  // A row sum reads nothing the group could share: one point per warp.
  EXPECT_EQ(choose_reduction_schedules(sums(4096, 4096, false), {}).kernels[0].grid.vector_width,
            1);
}

TEST(ReductionSchedule, GroupsNeverLeaveFewerWarpsThanTheMinimum) {
  // h[p, k] = sum over t of x[p, t] * w[k, t] with 160 x 8 points (mhc_pre_backward's gate_grads
  // at few tokens): 8 k a warp would leave 160 warps; the width halves until the warps reach
  // min_points (1024): one point a warp, 1280 warps. fill_warps = false keeps 8.
  auto mix = [](int64_t rows) {
    ir::ProgramBuilder b("mix");
    ir::Tensor x = b.input("x", DType::kBF16, {rows, 1024});
    ir::Tensor w = b.input("w", DType::kBF16, {8, 1024});
    ir::Tensor h = b.output("h", DType::kF32, {rows, 8});
    Var p("p"), k("k"), t("t");
    b.kernel("mix", {ir::compute(h, ir::over(h, {p, k}),
                                 ir::sum({ir::range(t, Expr(1024))},
                                         ir::cast(DType::kF32, ir::load(x, {p, t})) *
                                             ir::cast(DType::kF32, ir::load(w, {k, t})),
                                         DType::kF32))});
    return std::move(b).build();
  };
  ScheduleNotes notes;
  ir::Program few = choose_reduction_schedules(mix(160), {}, &notes);
  EXPECT_EQ(lanes(few), 32);
  EXPECT_EQ(few.kernels.front().grid.vector_width, 1);
  EXPECT_NE(notes.at("mix").find("1 point(s) of k per warp, not 8: 8 would leave 160 warps, "
                                 "fewer than 1024 to fill the GPU; 1280 warps"),
            std::string::npos)
      << notes.at("mix");
  // 300 x 8 points: 4 k a warp leave 600 warps, 2 leave 1200.
  EXPECT_EQ(choose_reduction_schedules(mix(300), {}).kernels.front().grid.vector_width, 2);
  // Enough warps with 8 (1024 x 8 points): unchanged.
  EXPECT_EQ(choose_reduction_schedules(mix(1024), {}).kernels.front().grid.vector_width, 8);
  ReductionScheduleOptions widest;
  widest.fill_warps = false;
  ScheduleNotes widest_notes;
  ir::Program before = choose_reduction_schedules(mix(160), widest, &widest_notes);
  EXPECT_EQ(before.kernels.front().grid.vector_width, 8);
  EXPECT_EQ(widest_notes.at("mix").find("per warp, not"), std::string::npos);
  // The lowered warp kernel of one point per warp: a plain accumulator, no group.
  CompiledProgram c = lower(few, LowerOptions{});
  EXPECT_NE(c.kernels.at(0).source.find("__shfl_xor_sync"), std::string::npos);
}

TEST(ReductionSchedule, KnobForcesOrSwitchesOff) {
  ReductionScheduleOptions warp{Mode::kWarp};
  EXPECT_EQ(lanes(choose_reduction_schedules(sums(8, 3, true), warp)), 32);
  ReductionScheduleOptions claiming{Mode::kWarp};
  claiming.excluded_kernels = {"sums"};  // a kernel whose loads claim slots keeps its threads
  ScheduleNotes claim_notes;
  EXPECT_EQ(lanes(choose_reduction_schedules(sums(4096, 4096, false), claiming, &claim_notes)), 1);
  EXPECT_NE(claim_notes.at("sums").find("claims slots with atomics"), std::string::npos);
  ReductionScheduleOptions serial{Mode::kSerial};
  ScheduleNotes notes;
  ir::Program rows = sums(4096, 4096, false);
  EXPECT_TRUE(same_program(choose_reduction_schedules(rows, serial, &notes), rows));
  EXPECT_NE(notes.at("sums").find("ADJOINT_TUNE_REDUCTION=serial"), std::string::npos);
  EXPECT_EQ(parse_reduction_mode("warp", "knob"), Mode::kWarp);
  try {
    parse_reduction_mode("block", "ADJOINT_TUNE_REDUCTION");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("ADJOINT_TUNE_REDUCTION: expected auto, serial or warp, got 'block'"),
              std::string::npos)
        << e.what();
  }
  LowerOptions bad;
  bad.reduction_schedule = "blocks";
  EXPECT_THROW(lower(rows, bad), Error);
}

TEST(ReductionSchedule, LowerEmitsLanesShufflesAndLaneZeroStores) {
  CompiledProgram c = lower(sums(4096, 4096, false), LowerOptions{});
  ASSERT_EQ(c.kernels.size(), 1u);  // not split: the warp took it
  const std::string& s = c.kernels[0].source;
  EXPECT_NE(s.find("// Schedule: out: reduction of 4096 iterations per point, 4096 points: "
                   "warp-cooperative"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("threadIdx.x / 32"), std::string::npos) << s;
  // Lane spans (docs/compiler.md): 8 consecutive elements a lane and trip, one 16-byte load.
  EXPECT_NE(s.find("for (int t_base = lane * 8; t_base < 4096; t_base += 256)"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("acc += __shfl_xor_sync(0xffffffffu, acc, offset);"), std::string::npos) << s;
  LowerOptions strided;  // ADJOINT_TUNE_LANE_SPANS=0: the strided lanes of before
  strided.lane_spans = 0;
  const std::string before = lower(sums(4096, 4096, false), strided).kernels[0].source;
  EXPECT_NE(before.find("for (int t = lane; t < 4096; t += 32)"), std::string::npos) << before;
  EXPECT_EQ(before.find("t_base"), std::string::npos) << before;
  strided.lane_spans = 4;
  EXPECT_THROW(lower(sums(64, 64, false), strided), Error);
  EXPECT_NE(s.find("if (lane == 0) out[p] = "), std::string::npos) << s;
  // 4096 points, 8 warps per block of 256 threads.
  EXPECT_EQ(c.kernels[0].launch.grid[0], 512u);
  EXPECT_TRUE(c.deterministic);
}

TEST(ReductionSchedule, VerifierAndCoverageProofCheckTheLanes) {
  ir::Program p = sums(64, 64, false);
  ir::Kernel& k = p.kernels.front();
  k.grid.is_set = true;
  k.grid.bindings = {ir::AxisBinding::kLinear};
  k.grid.block_size = 256;
  k.grid.reduction_lanes = 32;
  EXPECT_NO_THROW(ir::verify(p));
  EXPECT_NO_THROW(launch_dims(k));
  EXPECT_EQ(launch_dims(k).grid[0], 8u);  // 64 points, 8 per block
  k.grid.reduction_lanes = 16;  // 16 lanes per point, two points per warp
  EXPECT_NO_THROW(ir::verify(p));
  EXPECT_EQ(launch_dims(k).grid[0], 4u);  // 64 points, 16 per block
  k.grid.reduction_lanes = 12;
  EXPECT_THROW(ir::verify(p), Error);
  EXPECT_THROW(launch_dims(k), Error);
  k.grid.reduction_lanes = 32;
  k.grid.vector_width = 2;  // two points per warp: 32 linear indices, 8 per block
  EXPECT_NO_THROW(ir::verify(p));
  EXPECT_EQ(launch_dims(k).grid[0], 4u);
  k.grid.vector_width = 1;
  k.grid.bindings = {ir::AxisBinding::kBlock};
  EXPECT_THROW(launch_dims(k), Error);
  k.grid.bindings = {ir::AxisBinding::kLinear};
  k.grid.block_size = 48;
  EXPECT_THROW(launch_dims(k), Error);
}

}  // namespace
}  // namespace adjoint::compiler
