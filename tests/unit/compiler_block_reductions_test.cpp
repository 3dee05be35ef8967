// Tests of choose_block_reductions and the block schedule around it: which kernels take it and
// why not (the notes the dumps print), the tile chosen, the knob, the contiguous split of
// split_reductions, what the coverage proof and the verifier refuse, and lower()'s code. The
// generated kernels' values are checked on the host in compiler_host_run_test (bit for bit
// against the serial schedule).
#include <gtest/gtest.h>

#include "compiler/block_reductions.h"
#include "compiler/derive_grid.h"
#include "compiler/launch_geometry.h"
#include "compiler/lower.h"
#include "compiler/program_utils.h"
#include "compiler/split_reductions.h"
#include "ir/error.h"
#include "ir/verifier.h"
#include "ops/registry.h"

namespace adjoint::compiler {
namespace {

ir::Program program(const std::string& spec) {
  return ops::parse_specialization(spec).build_program();
}

const ir::Kernel& kernel_named(const ir::Program& p, const std::string& name) {
  for (const ir::Kernel& k : p.kernels) {
    if (k.name == name) return k;
  }
  throw std::runtime_error("no kernel " + name);
}

TEST(BlockReductions, MhcMixIsASkinnyGemm) {
  ir::Program p = program("mhc_pre batch=1 seq=4096 n=4 dim=4096 dtype=bf16");
  const BlockReductionShape shape = analyze_block_reduction(kernel_named(p, "mhc_mix"));
  ASSERT_TRUE(shape.why_not.empty()) << shape.why_not;
  EXPECT_EQ(shape.output_axis, 2);  // k
  EXPECT_EQ(shape.token_axes, (std::vector<int>{0, 1}));
  EXPECT_TRUE(shape.block_axes.empty());
  EXPECT_EQ(shape.token_parts.size(), 1u);  // cast(x) * gamma
  EXPECT_EQ(shape.weight_parts.size(), 1u);  // phi
  EXPECT_EQ(shape.trips, 16384);
  EXPECT_EQ(shape.tokens, 4096);
  EXPECT_EQ(shape.outputs, 24);

  ScheduleNotes notes;
  ir::Program chosen = choose_block_reductions(p, {}, &notes);
  const ir::GridConfig& g = kernel_named(chosen, "mhc_mix").grid;
  EXPECT_EQ(g.block_tokens, 256);
  EXPECT_EQ(g.block_token_points, 4);
  EXPECT_EQ(g.block_output_points, 8);
  EXPECT_EQ(g.block_chunk, 32);
  EXPECT_EQ(g.block_stage_width, 8);      // 8 d per staging thread: one 16-byte load of x
  EXPECT_EQ(g.block_shared_vectors, 4);  // f32 parts, 4 | C, K and Mk
  EXPECT_EQ(block_reduction_shared_bytes(kernel_named(chosen, "mhc_mix"), shape),
            256 * 36 * 4 + 32 * 24 * 4);
  EXPECT_NE(notes.at("mhc_mix").find("block reduction of 16384 iterations"), std::string::npos)
      << notes.at("mhc_mix");
  EXPECT_NE(notes.at("mhc_mix").find("8 iteration(s) per staging thread, 16-byte shared reads"),
            std::string::npos)
      << notes.at("mhc_mix");
  // The knobs' other values: the staging and shared layout of before.
  BlockReductionOptions before;
  before.max_stage_width = 1;
  before.shared_vectors = false;
  const ir::GridConfig scalar = kernel_named(choose_block_reductions(p, before), "mhc_mix").grid;
  EXPECT_EQ(scalar.block_stage_width, 1);
  EXPECT_EQ(scalar.block_shared_vectors, 0);
  // Rows of 132 d: 8 does not divide them, 4 does (and the chunk of 8 that 264 iterations allow).
  ir::Program odd = program("mhc_pre batch=1 seq=256 n=2 dim=132 dtype=bf16");
  const ir::GridConfig four = kernel_named(choose_block_reductions(odd, {}), "mhc_mix").grid;
  EXPECT_EQ(four.block_chunk, 8);
  EXPECT_EQ(four.block_stage_width, 4);
  // The other kernels are no skinny GEMM: no block fields, no notes.
  EXPECT_EQ(kernel_named(chosen, "mhc_rms").grid.block_tokens, 0);
  EXPECT_EQ(notes.count("mhc_rms"), 0u);
}

TEST(BlockReductions, RefusesStridedStagingAndBatchesOfTinyGemms) {
  // x_mix[k, i, d] = sum over tokens: the staging would walk s, whose stride is n*D.
  ir::Program backward = program("mhc_pre_backward batch=1 seq=4096 n=4 dim=4096 dtype=bf16");
  const BlockReductionShape x_mix = analyze_block_reduction(kernel_named(backward, "mhc_x_mix"));
  EXPECT_NE(x_mix.why_not.find("indexes no stride-1 dimension"), std::string::npos)
      << x_mix.why_not;
  // dh_res[b, s, i, j]: a 4 x 4 product per token (b, s block axes, 4 tokens).
  ir::Program post = program("mhc_post_backward batch=1 seq=4096 n=4 dim=4096 dtype=bf16");
  const BlockReductionShape dh_res =
      analyze_block_reduction(kernel_named(post, "mhc_post_dh_res"));
  EXPECT_NE(dh_res.why_not.find("token(s) share the weights of a block"), std::string::npos)
      << dh_res.why_not;
  EXPECT_TRUE(same_program(choose_block_reductions(backward, {}), backward));
  EXPECT_TRUE(same_program(choose_block_reductions(post, {}), post));
}

TEST(BlockReductions, OffKeepsTheProgramAndSaysSo) {
  ir::Program p = program("mhc_pre batch=1 seq=4096 n=4 dim=4096 dtype=bf16");
  BlockReductionOptions off;
  off.mode = parse_block_reduction_mode("off", "knob");
  ScheduleNotes notes;
  EXPECT_TRUE(same_program(choose_block_reductions(p, off, &notes), p));
  EXPECT_NE(notes.at("mhc_mix").find("ADJOINT_TUNE_BLOCK_REDUCTION=off"), std::string::npos);
  EXPECT_THROW(parse_block_reduction_mode("on", "knob"), Error);
}

TEST(BlockReductions, SplitsIntoContiguousRangesWithGAsABlockAxis) {
  ir::Program p = choose_block_reductions(
      program("mhc_pre batch=1 seq=4096 n=4 dim=4096 dtype=bf16"), {});
  ScheduleNotes notes;
  ir::Program split = split_reductions(p, {}, &notes);
  const ir::Kernel& partials = kernel_named(split, "mhc_mix_h_mix_partials");
  EXPECT_EQ(partials.grid.block_tokens, 256);
  EXPECT_EQ(partials.grid.block_output_axis, 3);  // (g, b, s, k)
  EXPECT_EQ(partials.stages.front().target->shape, (std::vector<int64_t>{32, 1, 4096, 24}));
  const BlockReductionShape shape = analyze_block_reduction(partials, any_block_shape());
  EXPECT_EQ(shape.block_axes, (std::vector<int>{0}));
  EXPECT_EQ(kernel_named(split, "mhc_mix").grid.block_tokens, 0);  // the combine
  EXPECT_NE(notes.at("mhc_mix").find("split into G=32 contiguous partials over d"),
            std::string::npos)
      << notes.at("mhc_mix");
  // One token taken by the block schedule (min_tokens 1, ADJOINT_TUNE_BLOCK_MIN_TOKENS=1): G =
  // 512 (past block_max_partials: one tile, ADJOINT_TUNE_BLOCK_FEW_TOKENS), and a warp per
  // point combines the 80 points; 256 with the mask at 0 (the split of before).
  BlockReductionOptions any_tokens;
  any_tokens.min_tokens = 1;
  const ir::Program one_token = choose_block_reductions(
      program("mhc_pre batch=1 seq=1 n=8 dim=16384 dtype=bf16"), any_tokens);
  ir::Program one = split_reductions(one_token, {});
  EXPECT_EQ(kernel_named(one, "mhc_mix_h_mix_partials").stages.front().target->shape.front(), 512);
  EXPECT_EQ(kernel_named(one, "mhc_mix").grid.reduction_lanes, 32);
  ReductionSplitOptions before;
  before.block_few_tokens = 0;
  EXPECT_EQ(kernel_named(split_reductions(one_token, before), "mhc_mix_h_mix_partials")
                .stages.front().target->shape.front(),
            256);
  // 256 tokens at n = 4: tiles of 256 (4 per lane) reach 64 blocks at most; tiles of 64 and
  // a warp per point for the 6,144 points' 64 partials (mask 0: one tile, thread combine).
  const ir::Program some_tokens =
      choose_block_reductions(program("mhc_pre batch=1 seq=256 n=4 dim=4096 dtype=bf16"), {});
  EXPECT_GT(kernel_named(some_tokens, "mhc_mix").grid.block_tokens, 0);
  ir::Program some = split_reductions(some_tokens, {});
  EXPECT_EQ(kernel_named(some, "mhc_mix_h_mix_partials").grid.block_tokens, 64);
  EXPECT_EQ(kernel_named(some, "mhc_mix").grid.reduction_lanes, 32);
  ir::Program some_before = split_reductions(some_tokens, before);
  EXPECT_EQ(kernel_named(some_before, "mhc_mix_h_mix_partials").grid.block_tokens, 256);
  EXPECT_EQ(kernel_named(some_before, "mhc_mix").grid.reduction_lanes, 1);
  // ADJOINT_TUNE_REDUCTION_SPLIT=0: no split, the block kernel alone.
  // Rows folded into the partials (ADJOINT_TUNE_BLOCK_SPLIT_ROWS): at D = 1000 the split over
  // d alone takes G = 8 (32 blocks); folding the 8 rows of i gives 64 partials, 8 ranges of 96
  // a row. Not at n = 4 (24 outputs, block_fold_min_outputs), nor with the knob off.
  const ir::Program thin =
      choose_block_reductions(program("mhc_pre batch=1 seq=126 n=8 dim=1000 dtype=bf16"), {});
  ScheduleNotes row_notes;
  split_reductions(thin, {}, &row_notes);
  EXPECT_NE(row_notes.at("mhc_mix").find("split into G=64 contiguous partials over i and d "
                                         "(kernel mhc_mix_h_mix_partials, partial g reduces i = "
                                         "g / 8, 8 partials a row; d in [(g % 8)*96"),
            std::string::npos)
      << row_notes.at("mhc_mix");
  ReductionSplitOptions no_rows;
  no_rows.block_split_rows = false;
  ScheduleNotes slice_notes;
  split_reductions(thin, no_rows, &slice_notes);
  EXPECT_NE(slice_notes.at("mhc_mix").find("split into G=8 contiguous partials over d "),
            std::string::npos)
      << slice_notes.at("mhc_mix");
  ReductionSplitOptions never;
  never.forced_partials = 0;
  EXPECT_TRUE(same_program(split_reductions(p, never), p));
}

TEST(BlockReductions, CoverageProofAndVerifierRefuseBrokenTiles) {
  ir::Program p = derive_grid(choose_block_reductions(
      program("mhc_pre batch=2 seq=300 n=4 dim=64 dtype=f32"), {}));
  const ir::Kernel& mix = kernel_named(p, "mhc_mix");
  ASSERT_EQ(mix.grid.block_tokens, 256);
  const LaunchDims good = launch_dims(mix);
  EXPECT_EQ(good.grid[0], 3u);   // ceil(600 / 256) tiles
  EXPECT_EQ(good.block[0], 192u);  // 64 token lanes x 3 output groups
  EXPECT_NO_THROW(check_block_reduction_coverage(mix, good));
  LaunchDims small = good;
  small.block[0] = 128;
  EXPECT_THROW(check_block_reduction_coverage(mix, small), Error);
  ir::Kernel odd_chunk = mix;
  odd_chunk.grid.block_chunk = 48;  // does not divide 256 iterations
  EXPECT_THROW(check_block_reduction_coverage(odd_chunk, good), Error);
  ir::Kernel odd_lanes = mix;
  odd_lanes.grid.block_tokens = 200;  // 50 token lanes: not whole warps
  EXPECT_THROW(check_block_reduction_coverage(odd_lanes, good), Error);
  ir::Program bad = p;
  for (ir::Kernel& k : bad.kernels) {
    if (k.name == "mhc_mix") k.grid.bindings[2] = ir::AxisBinding::kLinear;  // k not threads
  }
  EXPECT_THROW(ir::verify(bad), Error);
}

TEST(BlockReductions, LowerEmitsTheStagedLoop) {
  // Unsplit (dim=64 leaves d no split, and no rows fold into partials by default), so the
  // block kernel keeps tiles of 4 tokens per lane.
  CompiledProgram c = lower(program("mhc_pre batch=2 seq=300 n=4 dim=64 dtype=f32"), {});
  bool found = false;
  for (const CompiledKernel& k : c.kernels) {
    if (k.source.find("Block reduction") == std::string::npos) continue;
    found = true;
    EXPECT_NE(k.source.find("__syncthreads();"), std::string::npos);
    EXPECT_NE(k.source.find("acc[3][7] = fmaf(token_part_3, weight_part_7, acc[3][7]);"),
              std::string::npos)
        << k.source;
    EXPECT_EQ(k.launch.block[0], 192u);
  }
  EXPECT_TRUE(found);
  LowerOptions off;
  off.block_reduction = "off";
  for (const CompiledKernel& k : lower(program("mhc_pre batch=2 seq=300 n=4 dim=64 dtype=f32"), off).kernels)
    EXPECT_EQ(k.source.find("__syncthreads"), std::string::npos);
}

/// Few tokens whose weight re-reads stay small leave the block schedule to the split
/// (BlockReductionOptions::min_tokens, few_tokens, narrow_outputs and the two byte bounds): one
/// and two tokens of n = 8, D = 16384 (40 and 80 MiB of phi re-read) go, four (160 MiB) keep the
/// block; 8 tokens of n = 4 (24 outputs, 12 MB) go, 8 of n = 8 (80 outputs) and 32 of n = 4 keep
/// it; min_tokens 1 keeps it for one token too. Each refusal names the tokens and the bytes.
TEST(BlockReductions, FewTokensStreamTheirWeightsWhereTheReReadsStaySmall) {
  struct Case {
    const char* spec;
    bool streamed;
  };
  for (const Case& c : {Case{"mhc_pre batch=1 seq=1 n=8 dim=16384 dtype=bf16", true},
                        Case{"mhc_pre batch=1 seq=2 n=8 dim=16384 dtype=bf16", true},
                        Case{"mhc_pre batch=1 seq=4 n=8 dim=16384 dtype=bf16", false},
                        Case{"mhc_pre batch=1 seq=8 n=4 dim=4096 dtype=bf16", true},
                        Case{"mhc_pre batch=1 seq=8 n=8 dim=1024 dtype=bf16", false},
                        Case{"mhc_pre batch=1 seq=32 n=4 dim=4096 dtype=bf16", false}}) {
    ScheduleNotes notes;
    std::set<std::string> streamed;
    const ir::Program p = choose_block_reductions(program(c.spec), {}, &notes, &streamed);
    EXPECT_EQ(kernel_named(p, "mhc_mix").grid.block_tokens > 0, !c.streamed) << c.spec;
    EXPECT_EQ(streamed.count("mhc_mix"), c.streamed ? 1u : 0u) << c.spec;
    if (c.streamed)
      EXPECT_NE(notes.at("mhc_mix").find("token lanes, and their weight reads"), std::string::npos)
          << notes.at("mhc_mix");
  }
  BlockReductionOptions any_tokens;
  any_tokens.min_tokens = 1;
  const ir::Program one =
      choose_block_reductions(program("mhc_pre batch=1 seq=1 n=8 dim=16384 dtype=bf16"), any_tokens);
  EXPECT_GT(kernel_named(one, "mhc_mix").grid.block_tokens, 0);
}

}  // namespace
}  // namespace adjoint::compiler
