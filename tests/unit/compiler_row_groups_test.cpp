// Row groups (compiler/row_groups.h): which runs of kernels fuse and with how many row axes, the
// reasons in the notes, the knob, the verifier's same-row rule, the interpreter's stage order,
// the launch and its coverage proof, and the emitted loops and barriers. The fused kernels'
// results are checked on the host against the separate kernels in compiler_host_run_test.
#include <gtest/gtest.h>

#include "compiler/launch_geometry.h"
#include "compiler/lower.h"
#include "compiler/row_groups.h"
#include "compiler/stage_loops.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/registry.h"

namespace adjoint::compiler {
namespace {

using ir::DType;
using ir::Expr;
using ir::Var;

/// t[i, j] = 2 x[i, j]; u[i, j] = t[i, (j + 1) % 5] + t[i, j] (another point of row i);
/// v[i] = sum_j u[i, j]; and, with `cross_row`, w[i] = v[(i + 1) % 3] (another row).
ir::Program row_chain(bool cross_row) {
  ir::ProgramBuilder b("row_chain");
  ir::Tensor x = b.input("x", DType::kF32, {3, 5});
  ir::Tensor t = b.temporary("t", DType::kF32, {3, 5});
  ir::Tensor u = b.temporary("u", DType::kF32, {3, 5});
  ir::Tensor v = b.output("v", DType::kF32, {3});
  Var i("i"), j("j"), i2("i"), j2("j"), i3("i"), k("k");
  b.kernel("scale", {ir::compute(t, ir::over(t, {i, j}), ir::load(x, {i, j}) * 2.0)});
  b.kernel("shift", {ir::compute(u, ir::over(u, {i2, j2}),
                                 ir::load(t, {i2, (j2 + 1) % 5}) + ir::load(t, {i2, j2}))});
  b.kernel("sum", {ir::compute(v, ir::over(v, {i3}),
                               ir::sum({ir::range(k, Expr(5))}, ir::load(u, {i3, k}),
                                       DType::kF32))});
  if (cross_row) {
    ir::Tensor w = b.output("w", DType::kF32, {3});
    Var i4("i");
    b.kernel("next_row", {ir::compute(w, ir::over(w, {i4}), ir::load(v, {(i4 + 1) % 3}))});
  }
  return std::move(b).build();
}

/// Options of the block schedule (the block's threads stride over each stage, barriers between),
/// which the tests below check; RowPerThread* check RowSchedule::kThread.
RowGroupOptions block_rows(int64_t forced = -1) {
  RowGroupOptions options;
  options.schedule = RowSchedule::kBlock;
  options.forced_rows_per_block = forced;
  return options;
}

TEST(RowGroups, ReadsWithinARowFuseOverTheRowAxes) {
  ir::Program p = row_chain(true);
  ScheduleNotes notes;
  ir::Program fused = fuse_row_groups(p, block_rows(), &notes);
  ASSERT_EQ(fused.kernels.size(), 2u) << ir::to_string(fused);
  const ir::Kernel& k = fused.kernels[0];
  EXPECT_EQ(k.name, "scale_to_sum");
  EXPECT_EQ(k.row_axes, 1);  // u reads t at another j of the same i
  EXPECT_EQ(k.stages.size(), 3u);
  EXPECT_TRUE(k.grid.is_set);
  EXPECT_EQ(k.grid.rows_per_block, 1);  // 3 rows: one per block
  EXPECT_EQ(k.grid.block_size, 32);
  EXPECT_EQ(fused.kernels[1].name, "next_row");  // reads another row: a kernel of its own
  EXPECT_EQ(fused.kernels[1].row_axes, 0);
  ASSERT_TRUE(notes.count("scale_to_sum"));
  EXPECT_NE(notes["scale_to_sum"].find("row group: 3 kernels (scale, shift, sum) fused over rows "
                                       "(i): 3 rows, 1 per block"),
            std::string::npos)
      << notes["scale_to_sum"];
  EXPECT_NE(notes["scale_to_sum"].find("ends because the next kernel 'next_row' cannot join: it "
                                       "reads what a kernel before it wrote outside its own row"),
            std::string::npos)
      << notes["scale_to_sum"];
  ir::verify(fused);
  EXPECT_NE(ir::to_string(fused).find("kernel scale_to_sum rows(1 axes) grid(1 rows per block; "
                                      "block 32)"),
            std::string::npos);
  // Stage by stage, the fused kernel computes what the separate kernels computed.
  ir::HostBuffers in{{"x", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}};
  EXPECT_EQ(ir::interpret(fused, in), ir::interpret(p, in));
}

TEST(RowGroups, TheKnobSwitchesThemOffOrForcesRowsPerBlock) {
  ir::Program p = row_chain(false);
  RowGroupOptions off;
  off.forced_rows_per_block = 0;
  ScheduleNotes notes;
  ir::Program same = fuse_row_groups(p, off, &notes);
  EXPECT_EQ(same.kernels.size(), 3u);
  EXPECT_EQ(notes["scale"],
            "no row group with the 2 kernels after it (row groups switched off by "
            "ADJOINT_TUNE_ROW_GROUPS=0)");
  RowGroupOptions forced = block_rows(2);
  ir::Program fused = fuse_row_groups(p, forced, &notes);
  ASSERT_EQ(fused.kernels.size(), 1u);
  EXPECT_EQ(fused.kernels[0].grid.rows_per_block, 2);
  EXPECT_EQ(fused.kernels[0].grid.block_size, 32);
  EXPECT_EQ(launch_dims(fused.kernels[0]).grid[0], 2u);  // rows 0-1 and 2
  RowGroupOptions bad;
  bad.forced_rows_per_block = 1025;
  EXPECT_THROW(fuse_row_groups(p, bad), Error);
  LowerOptions options;
  options.row_groups = -2;
  EXPECT_THROW(lower(p, options), Error);
}

TEST(RowGroups, TwoKernelsStayApartUnlessForced) {
  ir::Program p = row_chain(false);
  p.kernels.pop_back();  // scale and shift
  p.outputs.clear();
  p.outputs.push_back(p.find_tensor("u"));
  p.temporaries = {p.find_tensor("t")};
  ir::Program derived = fuse_row_groups(p, RowGroupOptions{});
  EXPECT_EQ(derived.kernels.size(), 2u);
  RowGroupOptions forced;
  forced.forced_rows_per_block = 1;
  EXPECT_EQ(fuse_row_groups(p, forced).kernels.size(), 1u);
}

TEST(RowGroups, LongReductionsKeepTheirKernels) {
  ir::ProgramBuilder b("long");
  ir::Tensor x = b.input("x", DType::kF32, {4, 1000});
  ir::Tensor t = b.temporary("t", DType::kF32, {4, 2});
  ir::Tensor u = b.temporary("u", DType::kF32, {4, 2});
  ir::Tensor v = b.output("v", DType::kF32, {4, 2});
  Var i("i"), j("j"), d("d"), i2("i"), j2("j"), i3("i"), j3("j");
  b.kernel("norms", {ir::compute(t, ir::over(t, {i, j}),
                                 ir::sum({ir::range(d, Expr(1000))}, ir::load(x, {i, d}),
                                         DType::kF32))});
  b.kernel("swap", {ir::compute(u, ir::over(u, {i2, j2}), ir::load(t, {i2, 1 - j2}))});
  b.kernel("again", {ir::compute(v, ir::over(v, {i3, j3}), ir::load(u, {i3, 1 - j3}))});
  ir::Program p = std::move(b).build();
  ir::Program fused = fuse_row_groups(p, RowGroupOptions{});
  ASSERT_EQ(fused.kernels.size(), 3u);  // norms has 1000 iterations; swap and again are two
  RowGroupOptions forced;
  forced.forced_rows_per_block = 2;
  ir::Program two = fuse_row_groups(p, forced);
  ASSERT_EQ(two.kernels.size(), 2u);
  EXPECT_EQ(two.kernels[0].name, "norms");
  EXPECT_EQ(two.kernels[1].name, "swap_to_again");
  EXPECT_EQ(two.kernels[1].row_axes, 1);
}

TEST(RowGroups, TheVerifierKeepsReadsInTheirRow) {
  ir::Program fused = fuse_row_groups(row_chain(false), RowGroupOptions{});
  ASSERT_EQ(fused.kernels.size(), 1u);
  ir::Program broken = fused;
  broken.kernels[0].row_axes = 2;  // u reads t at another point of a two-axis row
  EXPECT_THROW(ir::verify(broken), Error);
  try {
    ir::verify(broken);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is read in another row than an earlier stage of this "
                                         "row-group kernel wrote"),
              std::string::npos)
        << e.what();
  }
  ir::Program no_rows = fused;
  no_rows.kernels[0].grid.rows_per_block = 0;
  EXPECT_THROW(ir::verify(no_rows), Error);
  ir::Program bindings = fused;
  bindings.kernels[0].grid.bindings = {ir::AxisBinding::kLinear};
  EXPECT_THROW(ir::verify(bindings), Error);
  ir::Program unfused = fused;
  unfused.kernels[0].row_axes = 0;  // the stages do not share one domain
  EXPECT_THROW(ir::verify(unfused), Error);
}

TEST(RowGroups, TheLaunchCoversEveryRowOnce) {
  ir::Program fused = fuse_row_groups(row_chain(false), block_rows());
  const ir::Kernel& k = fused.kernels[0];
  RowGroupShape shape = row_group_shape(k);
  EXPECT_EQ(shape.rows, 3);
  EXPECT_EQ(shape.stage_points, (std::vector<int64_t>{5, 5, 1}));
  LaunchDims dims = launch_dims(k);
  EXPECT_EQ(dims.grid[0], 3u);
  EXPECT_EQ(dims.block[0], 32u);
  LaunchDims short_grid = dims;
  short_grid.grid[0] = 2;
  EXPECT_THROW(check_row_group_coverage(k.name, shape, k.grid, short_grid), Error);
  LaunchDims wrong_block = dims;
  wrong_block.block[0] = 64;
  EXPECT_THROW(check_row_group_coverage(k.name, shape, k.grid, wrong_block), Error);
}

TEST(RowGroups, TheKernelStridesOverEachStageWithBarriersBetween) {
  LowerOptions block;
  block.row_schedule = "block";
  CompiledProgram c = lower(row_chain(false), block);
  ASSERT_EQ(c.kernels.size(), 1u);
  const std::string& s = c.kernels[0].source;
  EXPECT_NE(s.find("// Row group: rows (i < 3), 1 rows per block; points per row: t 5, u 5, v 1; "
                   "3 stages, __syncthreads() between them; launch grid (3, 1, 1) x 32 threads"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("const int first_row = (int)blockIdx.x * 1;"), std::string::npos) << s;
  EXPECT_NE(s.find("for (int p = threadIdx.x; p < 5; p += 32) {"), std::string::npos) << s;
  size_t barriers = 0;
  for (size_t at = s.find("__syncthreads();"); at != std::string::npos;
       at = s.find("__syncthreads();", at + 1))
    ++barriers;
  EXPECT_EQ(barriers, 2u) << s;
  EXPECT_EQ(s.find("return;"), std::string::npos) << s;  // every thread meets every barrier
}

TEST(RowGroups, SinkhornIsOneKernelAtEveryShape) {
  for (const char* spec : {"mhc_sinkhorn batch=1 seq=4096 n=4", "mhc_sinkhorn batch=1 seq=1 n=8",
                           "mhc_sinkhorn_backward batch=1 seq=4096 n=4",
                           "mhc_sinkhorn_backward batch=2 seq=2048 n=6",
                           "mhc_sinkhorn_backward batch=1 seq=1 n=8"}) {
    ir::Program p = ops::parse_specialization(spec).build_program();
    CompiledProgram c = lower(p, LowerOptions{});
    ASSERT_EQ(c.kernels.size(), 1u) << spec;
    EXPECT_LE(c.kernels[0].params.size(), kMaxKernelParams) << spec;
    EXPECT_TRUE(c.deterministic) << spec;
  }
  LowerOptions off;
  off.row_groups = 0;
  ir::Program p = ops::parse_specialization("mhc_sinkhorn batch=1 seq=4096 n=4").build_program();
  EXPECT_EQ(lower(p, off).kernels.size(), 13u);
}

TEST(RowGroups, RowPerThreadForSmallRowsWhoseTemporariesFitRegisters) {
  // The forward: 16 points per row at most, K and two states live (128 bytes): a row per
  // thread, blocks of one warp leaving 128 blocks, the temporaries held in the thread.
  ir::Program fwd = ops::parse_specialization("mhc_sinkhorn batch=1 seq=4096 n=4").build_program();
  ScheduleNotes notes;
  LowerOptions options;
  CompiledProgram c = lower(fwd, options);
  ASSERT_EQ(c.kernels.size(), 1u);
  const std::string& s = c.kernels[0].source;
  EXPECT_NE(s.find("4096 rows, 32 per block (a row per thread (128 bytes of row-local "
                   "temporaries live at most)"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("22 stages, run in order by the row's thread; launch grid (128, 1, 1) x 32 "
                   "threads"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("const int row = (int)blockIdx.x * 32 + (int)threadIdx.x;"), std::string::npos);
  EXPECT_NE(s.find("float scales_3_row[8];  // scales_3, this row's elements"), std::string::npos);
  // scales_2 is written by the first iteration of a launch and read by nobody (the second
  // recomputes it inline): its stage is left out (stage 1 stores the initial scales_1).
  EXPECT_NE(s.find("// stage 2: scales_2 is read by no stage and no other kernel: not computed"),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("scales_2_row"), std::string::npos);
  EXPECT_NE(s.find("base_row[i * 4 + j] = "), std::string::npos) << s;
  EXPECT_EQ(s.find("__syncthreads"), std::string::npos);
  EXPECT_EQ(s.find("scales_2[s"), std::string::npos);  // never in global memory
  EXPECT_NE(s.find("    out["), std::string::npos) << s;  // the output is stored
  // The backward keeps every state for its reverse sweep: the block schedule.
  ir::Program bwd =
      ops::parse_specialization("mhc_sinkhorn_backward batch=1 seq=4096 n=4").build_program();
  ir::Program fused_bwd = fuse_row_groups(bwd, RowGroupOptions{}, &notes);
  ASSERT_EQ(fused_bwd.kernels.size(), 1u);
  EXPECT_FALSE(fused_bwd.kernels[0].grid.row_per_thread);
  EXPECT_NE(notes.begin()->second.find("not a row per thread: 880 bytes of row-local temporaries "
                                       "live at once (at most 512)"),
            std::string::npos)
      << notes.begin()->second;
  // Forced: R rows and threads per block; the verifier and the coverage proof want one thread
  // per row.
  RowGroupOptions thread;
  thread.schedule = RowSchedule::kThread;
  thread.forced_rows_per_block = 2;
  ir::Program forced = fuse_row_groups(row_chain(false), thread);
  ASSERT_EQ(forced.kernels.size(), 1u);
  EXPECT_TRUE(forced.kernels[0].grid.row_per_thread);
  EXPECT_EQ(forced.kernels[0].grid.block_size, 2);
  EXPECT_EQ(launch_dims(forced.kernels[0]).grid[0], 2u);
  ir::verify(forced);
  ir::Program wrong = forced;
  wrong.kernels[0].grid.block_size = 32;
  EXPECT_THROW(ir::verify(wrong), Error);
  EXPECT_THROW(launch_dims(wrong.kernels[0]), Error);
  ir::Program outside = fuse_row_groups(row_chain(false), block_rows());
  outside.kernels[0].row_axes = 0;
  outside.kernels[0].grid.row_per_thread = true;
  EXPECT_THROW(ir::verify(outside), Error);
  EXPECT_THROW(parse_row_schedule("warp", "row_schedule"), Error);
  LowerOptions bad;
  bad.row_schedule = "warp";
  EXPECT_THROW(lower(fwd, bad), Error);
}

/// Stage loops (stage_loops.h): the Sinkhorn iterations from the second on, and the reverse
/// steps, repeat up to their tensors; each run is found with its families (the tensor of every
/// iteration), and the emitter writes it once as a loop.
TEST(StageLoops, SinkhornIterationsAndReverseStepsAreLoops) {
  ir::Program bwd =
      ops::parse_specialization("mhc_sinkhorn_backward batch=1 seq=4096 n=8").build_program();
  ir::Program fused = fuse_row_groups(bwd, RowGroupOptions{});
  ASSERT_EQ(fused.kernels.size(), 1u);
  std::vector<StageLoop> loops = find_stage_loops(fused.kernels[0].stages);
  ASSERT_EQ(loops.size(), 2u);
  // base (softmax, then + eps), col_sums, scales_1, then scales_2 .. scales_20 from the
  // state before each.
  EXPECT_EQ(loops[0].first, 4u);
  EXPECT_EQ(loops[0].period, 1u);
  EXPECT_EQ(loops[0].count, 19u);
  ASSERT_EQ(loops[0].families.size(), 2u);  // the state written and the one read
  EXPECT_EQ(loops[0].families[0].front()->name, "scales_2");
  EXPECT_EQ(loops[0].families[0].back()->name, "scales_20");
  EXPECT_EQ(loops[0].families[1].front()->name, "scales_1");
  ASSERT_EQ(loops[0].invariant.size(), 1u);  // K
  EXPECT_EQ(loops[0].invariant[0]->name, "base");
  // The reverse steps t = 20 .. 2: grad_p_{t-1} from grad_p_t (grad_out first), scales_t and
  // scales_{t-1}.
  EXPECT_EQ(loops[1].first, 23u);
  EXPECT_EQ(loops[1].count, 19u);
  ASSERT_EQ(loops[1].families.size(), 4u);
  EXPECT_EQ(loops[1].families[0].front()->name, "grad_p_19");
  EXPECT_EQ(loops[1].families[0].back()->name, "grad_p_1");
  EXPECT_EQ(loops[1].end(), fused.kernels[0].stages.size() - 1);  // then grad_h_res

  CompiledProgram c = lower(bwd, LowerOptions{});
  ASSERT_EQ(c.kernels.size(), 1u);
  const std::string& s = c.kernels[0].source;
  EXPECT_NE(s.find("// Schedule: stage loop: stages 4 to 22 (scales_2 to scales_20), 19 "
                   "iterations of 1 stage(s)"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("__shared__ float* grad_p_19_of[19];  // grad_p_19 to grad_p_1, one per "
                   "iteration"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("const float* __restrict__ grad_out_now = grad_out_of[iteration_1];"),
            std::string::npos)
      << s;
  // Off (ADJOINT_TUNE_STAGE_LOOPS=0): every stage written out, no table.
  LowerOptions off;
  off.stage_loops = false;
  const std::string straight = lower(bwd, off).kernels[0].source;
  EXPECT_EQ(straight.find("stage loop"), std::string::npos);
  EXPECT_EQ(straight.find("__shared__"), std::string::npos);
  EXPECT_NE(straight.find("// stage 41: 64 points per row"), std::string::npos);

  // The forward, a row per thread: the state lives in two row arrays, the one written copied
  // into the one read at the end of each iteration; out reads the last state from it.
  ir::Program fwd = ops::parse_specialization("mhc_sinkhorn batch=1 seq=4096 n=8").build_program();
  const std::string f = lower(fwd, LowerOptions{}).kernels[0].source;
  EXPECT_NE(f.find("0 tensor(s) through tables of pointers in shared memory, 1 row-local "
                   "chain(s)"),
            std::string::npos)
      << f;
  EXPECT_EQ(f.find("__syncthreads"), std::string::npos);
  EXPECT_NE(f.find("for (int e = 0; e < 16; ++e) scales_1_row[e] = scales_2_row[e];"),
            std::string::npos)
      << f;
  EXPECT_NE(f.find("out[s_3 * 64 + i_1 * 8 + j_1] = (scales_2_row[i_1] *"), std::string::npos)
      << f;
}

/// Runs shorter than kMinStageLoopIterations stay straight-line; stages that differ in more
/// than their tensors are never one loop.
TEST(StageLoops, ShortOrDifferentRunsAreNotLoops) {
  ir::Program p =
      ops::parse_specialization("mhc_sinkhorn_backward batch=1 seq=8 n=4 t_max=3").build_program();
  EXPECT_TRUE(find_stage_loops(fuse_row_groups(p, RowGroupOptions{}).kernels[0].stages).empty());
  EXPECT_TRUE(find_stage_loops(row_chain(false).kernels[0].stages).empty());
}

}  // namespace
}  // namespace adjoint::compiler

namespace adjoint::compiler {
namespace {

/// A row-per-thread stage whose unrolled loop would read memory more than
/// LowerOptions::row_stage_unroll_loads times stays a loop (mhc_pre at D=32: h_mix's 24 points
/// of 128 trips of phi, each point its own, and x and gamma shared: 3328 distinct loads, 16 s of
/// NVRTC on the H100 host unrolled); one below it is unrolled; loads shared by points that differ
/// only in axes the address does not depend on count once (mhc_sinkhorn n = 8: its base stage's
/// 64 points read 8 rows); 0 unrolls every stage of at most 64 points, as before. The kernels'
/// results do not depend on it (the host-run tests run these shapes against the interpreter).
TEST(RowStageUnroll, StagesThatReadMuchStayLoops) {
  ir::Program p =
      ops::parse_specialization("mhc_pre batch=1 seq=3 n=4 dim=32 dtype=bf16").build_program();
  auto fused_source = [&](int64_t loads) {
    LowerOptions options;
    options.row_stage_unroll_loads = loads;
    for (const CompiledKernel& k : lower(p, options).kernels)
      if (k.source.find("stage 0: 24 points of the thread's row") != std::string::npos)
        return k.source;
    ADD_FAILURE() << "no fused kernel with h_mix's stage";
    return std::string();
  };
  auto pragma_of_stage = [](const std::string& s, const std::string& stage) {
    const size_t at = s.find("// " + stage + ": ");
    if (at == std::string::npos) return std::string("(no " + stage + ")");
    const size_t line = s.find('\n', at) + 1;
    return s.substr(line, s.find('\n', line) - line);
  };
  const std::string capped = fused_source(LowerOptions{}.row_stage_unroll_loads);
  EXPECT_NE(capped.find("// Schedule: stage 0: 24 points reading memory 3328 times unrolled "
                        "(their distinct loads, reductions unrolled), over 1024: kept a loop "
                        "(#pragma unroll 1)"),
            std::string::npos)
      << capped;
  EXPECT_EQ(pragma_of_stage(capped, "stage 0"), "  #pragma unroll 1");
  // h_in's stage: 32 points of 4 trips of x (its own per point) and h_pre (shared): unrolled.
  EXPECT_EQ(pragma_of_stage(capped, "stage 4"), "  #pragma unroll");
  // Just below and at the stage's 3328 loads.
  EXPECT_EQ(pragma_of_stage(fused_source(3327), "stage 0"), "  #pragma unroll 1");
  EXPECT_EQ(pragma_of_stage(fused_source(3328), "stage 0"), "  #pragma unroll");
  const std::string before = fused_source(0);
  EXPECT_EQ(pragma_of_stage(before, "stage 0"), "  #pragma unroll");
  EXPECT_EQ(before.find("kept a loop"), std::string::npos);

  // Sinkhorn at n = 8: base's 64 points (i, j) read h_res's row i (8 x 81 loads with the
  // reductions, not 64 x 81): unrolled by the default.
  ir::Program sinkhorn =
      ops::parse_specialization("mhc_sinkhorn batch=4 seq=64 n=8").build_program();
  for (const CompiledKernel& k : lower(sinkhorn, LowerOptions{}).kernels)
    EXPECT_EQ(k.source.find("kept a loop"), std::string::npos) << k.source;
  LowerOptions tight;
  tight.row_stage_unroll_loads = 703;
  bool rolled = false;
  for (const CompiledKernel& k : lower(sinkhorn, tight).kernels)
    rolled |= k.source.find("stage 0: 64 points reading memory 704 times") != std::string::npos;
  EXPECT_TRUE(rolled);
}

}  // namespace
}  // namespace adjoint::compiler
