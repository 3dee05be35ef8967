// Tests of choose_thread_tiles and the thread-tile schedule around it: which axis a kernel is
// tiled along and why (the notes the dumps print), the knob, what the verifier and the coverage
// proof accept, how split_reductions counts tiled threads, and the code lower() emits for a
// tiled kernel (in derived blocks of 128 threads). The generated kernels' values are checked on the host in
// compiler_host_run_test (bit for bit against the interpreter and the untiled kernel).
#include <gtest/gtest.h>

#include "compiler/launch_geometry.h"
#include "compiler/lower.h"
#include "compiler/program_utils.h"
#include "compiler/split_reductions.h"
#include "compiler/thread_tiles.h"
#include "compiler/tile_blocks.h"
#include "compiler/derive_grid.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace adjoint::compiler {
namespace {

using ir::DType;
using ir::Expr;
using ir::Var;

/// out[k, j] = sum over t of w[t, k] * x[t, j]: x[t, j] does not move with k.
ir::Program token_sums(int64_t k_extent, int64_t columns, int64_t tokens) {
  ir::ProgramBuilder b("token_sums");
  ir::Tensor x = b.input("x", DType::kBF16, {tokens, columns});
  ir::Tensor w = b.input("w", DType::kF32, {tokens, k_extent});
  ir::Tensor out = b.output("out", DType::kF32, {k_extent, columns});
  Var k("k"), j("j"), t("t");
  Expr body = ir::load(w, {t, k}) * ir::cast(DType::kF32, ir::load(x, {t, j}));
  b.kernel("sums", {ir::compute(out, ir::over(out, {k, j}),
                                ir::sum({ir::range(t, Expr(tokens))}, body, DType::kF32))});
  return std::move(b).build();
}

/// y[s, j] = sum over k of w[s, k] * phi[k, j]: phi[k, j] does not move with s.
ir::Program mixes(int64_t rows, int64_t columns, int64_t k_extent) {
  ir::ProgramBuilder b("mixes");
  ir::Tensor w = b.input("w", DType::kF32, {rows, k_extent});
  ir::Tensor phi = b.input("phi", DType::kF32, {k_extent, columns});
  ir::Tensor y = b.output("y", DType::kBF16, {rows, columns});
  Var s("s"), j("j"), k("k");
  Expr value = ir::sum({ir::range(k, Expr(k_extent))}, ir::load(w, {s, k}) * ir::load(phi, {k, j}),
                       DType::kF32);
  b.kernel("mix", {ir::compute(y, ir::over(y, {s, j}), ir::cast(DType::kBF16, value))});
  return std::move(b).build();
}

TEST(ThreadTiles, TokenSumsTileTheAxisTheirLoadsDoNotMoveWith) {
  ScheduleNotes notes;
  ir::Program p = choose_thread_tiles(token_sums(24, 1 << 20, 64), {}, &notes);
  EXPECT_EQ(p.kernels.front().grid.tile_axis, 0);
  EXPECT_EQ(p.kernels.front().grid.tile_points, 24);  // the whole of k
  EXPECT_NE(notes.at("sums").find("thread tile: 24 points of k per thread"), std::string::npos)
      << notes.at("sums");
  EXPECT_NE(notes.at("sums").find("16 bytes per reduction iteration do not move with k"),
            std::string::npos)
      << notes.at("sums");
  EXPECT_NE(ir::to_string(p).find("grid(derived; tile axis 0 x 24)"), std::string::npos);

  // A long axis, taken in parts, gives way to the vector width: y is bf16, so derive_grid's
  // groups are 8 wide, and 16 x 8 accumulators would exceed 64: 8 points (8 x 8).
  ir::Program m = choose_thread_tiles(mixes(4096, 4096, 24), {}, &notes);
  EXPECT_EQ(m.kernels.front().grid.tile_axis, 0);
  EXPECT_EQ(m.kernels.front().grid.tile_points, 8);
  EXPECT_NE(notes.at("mix").find("16 halved to 8 so that its vector groups of 8 fit 64 "
                                 "accumulators"),
            std::string::npos)
      << notes.at("mix");
  // With 8-byte groups (V = 4) 16 x 4 fits: 16 points, as without prefer_vector.
  ThreadTileOptions narrow;
  narrow.group_bytes = 8;
  EXPECT_EQ(choose_thread_tiles(mixes(4096, 4096, 24), narrow).kernels.front().grid.tile_points,
            16);
  ThreadTileOptions before;
  before.prefer_vector = false;
  EXPECT_EQ(choose_thread_tiles(mixes(4096, 4096, 24), before).kernels.front().grid.tile_points,
            16);
  // lower() keeps R = 8 with V = 8 (derive_grid halves V only past 64 accumulators).
  CompiledProgram lowered = lower(mixes(4096, 4096, 24), {});
  const std::string& source = lowered.kernels.front().source;
  EXPECT_NE(source.find("computes 8 consecutive points of j"), std::string::npos) << source;
  EXPECT_NE(source.find("also computes 8 consecutive points of s"), std::string::npos) << source;
}

TEST(ThreadTiles, NothingSharedShortOrSmallKeepsOnePointPerThread) {
  // out[p] = sum_t x[p, t]: rank 1.
  ir::ProgramBuilder b("rows");
  ir::Tensor x = b.input("x", DType::kF32, {64, 4096});
  ir::Tensor out = b.output("out", DType::kF32, {64, 8});
  Var p("p"), q("q"), t("t");
  b.kernel("rows", {ir::compute(out, ir::over(out, {p, q}),
                                ir::sum({ir::range(t, Expr(4096))},
                                        ir::load(x, {p, (t + q) % 4096}), DType::kF32))});
  ir::Program rows = std::move(b).build();
  ScheduleNotes notes;
  EXPECT_TRUE(same_program(choose_thread_tiles(rows, {}, &notes), rows));  // x moves with p, q
  ir::Program short_sums = token_sums(24, 1 << 20, 8);
  EXPECT_TRUE(same_program(choose_thread_tiles(short_sums, {}, &notes), short_sums));
  ir::Program small = token_sums(24, 1024, 64);  // 24 x 1024 points: no 2^17 threads to keep
  EXPECT_TRUE(same_program(choose_thread_tiles(small, {}, &notes), small));
  EXPECT_NE(notes.at("sums").find("no thread tile (too few points"), std::string::npos)
      << notes.at("sums");
}

TEST(ThreadTiles, AxesNoTileDividesTakeAPartialLastTile) {
  // dx's mixing sum at 181 tokens (prime): no candidate divides 181, so 16 (padding 11 of 181,
  // at most 1/8) with a partial last tile, halved to 8 for vector groups of 8 (23 tiles, the
  // last holding 5 points). Off (ThreadTileOptions::partial_tiles, ADJOINT_TUNE_TILE_PARTIAL=0):
  // no tile, as before.
  ScheduleNotes notes;
  ir::Program m = choose_thread_tiles(mixes(181, 16384, 24), {}, &notes);
  EXPECT_EQ(m.kernels.front().grid.tile_axis, 0);
  EXPECT_EQ(m.kernels.front().grid.tile_points, 8);
  EXPECT_NE(notes.at("mix").find("the last of its 23 tiles is partial (5 of 8 points of s's 181)"),
            std::string::npos)
      << notes.at("mix");
  ThreadTileOptions before;
  before.partial_tiles = false;
  ir::Program whole = mixes(181, 16384, 24);
  EXPECT_TRUE(same_program(choose_thread_tiles(whole, before), whole));
  // 67 tokens: 16 would pad 13 (more than 67 / 8), 8 pads 5: R = 8, 9 tiles.
  ir::Program odd = choose_thread_tiles(mixes(67, 16384, 24), {}, &notes);
  EXPECT_EQ(odd.kernels.front().grid.tile_points, 8);
  // An axis a candidate divides keeps the tile of before, whatever partial_tiles says.
  EXPECT_EQ(choose_thread_tiles(mixes(4096, 4096, 24), {}).kernels.front().grid.tile_points, 8);
  EXPECT_EQ(choose_thread_tiles(mixes(4096, 4096, 24), before).kernels.front().grid.tile_points,
            8);
  // lower() emits 23 tiles along s (23 x 2048 groups of 8, 128 threads a block), the clamped
  // index and the guarded store.
  CompiledProgram lowered = lower(mixes(181, 16384, 24), {});
  const std::string& source = lowered.kernels.front().source;
  EXPECT_NE(source.find("The last tile is partial: its points past 180 compute at 180 and are "
                        "not stored."),
            std::string::npos)
      << source;
  EXPECT_NE(source.find("const int s = s_base + r < 181 ? s_base + r : 180;"), std::string::npos)
      << source;
  EXPECT_NE(source.find("if (s_base + r < 181) {"), std::string::npos) << source;
  EXPECT_EQ(lowered.kernels.front().launch.grid[0], 23u * 2048u / 128u);
}

TEST(ThreadTiles, KnobForcesOrSwitchesOff) {
  ThreadTileOptions off;
  off.forced_points = 0;
  ScheduleNotes notes;
  ir::Program p = token_sums(24, 1 << 20, 64);
  EXPECT_TRUE(same_program(choose_thread_tiles(p, off, &notes), p));
  EXPECT_NE(notes.at("sums").find("ADJOINT_TUNE_THREAD_TILE=0"), std::string::npos);
  ThreadTileOptions forced;
  forced.forced_points = 4;
  ir::Program small = token_sums(24, 1024, 64);
  EXPECT_EQ(choose_thread_tiles(small, forced, &notes).kernels.front().grid.tile_points, 4);
  forced.forced_points = 5;  // does not divide 24: 5 tiles, the last one partial
  EXPECT_EQ(choose_thread_tiles(small, forced, &notes).kernels.front().grid.tile_points, 5);
  EXPECT_NE(notes.at("sums").find("the last of its 5 tiles is partial (4 of 5 points of k's 24)"),
            std::string::npos)
      << notes.at("sums");
  forced.partial_tiles = false;  // ADJOINT_TUNE_TILE_PARTIAL=0: only tiles that divide
  EXPECT_TRUE(same_program(choose_thread_tiles(small, forced, &notes), small));
  EXPECT_NE(notes.at("sums").find("which does not divide k's 24"), std::string::npos);
  forced.partial_tiles = true;
  forced.forced_points = 24;  // not below the extent: no partial tile of the whole axis
  EXPECT_EQ(choose_thread_tiles(small, forced, &notes).kernels.front().grid.tile_points, 24);
  forced.forced_points = 32;
  EXPECT_TRUE(same_program(choose_thread_tiles(small, forced, &notes), small));
  for (int bad : {-2, 1, 65}) {
    ThreadTileOptions o;
    o.forced_points = bad;
    EXPECT_THROW(choose_thread_tiles(p, o), Error) << bad;
  }
  LowerOptions lower_options;
  lower_options.thread_tile = 1;
  try {
    lower(p, lower_options);
    FAIL() << "thread_tile 1 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("thread_tile"), std::string::npos) << e.what();
  }
}

TEST(ThreadTiles, SplitCountsTiledThreads) {
  // 24 x 16384 points over 4096 tokens: untiled, 2^20 threads would take G = 4 partials;
  // tiled 24 points to a thread, the split aims at 2^20 / 8 threads: G = 8.
  ScheduleNotes notes;
  ir::Program split = split_reductions(token_sums(24, 16384, 4096), {}, &notes);
  ASSERT_TRUE(split.find_tensor("out_partials"));
  EXPECT_EQ(split.find_tensor("out_partials")->shape, (std::vector<int64_t>{8, 24, 16384}));
  ir::Program tiled = choose_thread_tiles(split, {}, &notes);
  EXPECT_EQ(tiled.kernels.front().grid.tile_points, 24);  // the partials kernel: g, k, j
  EXPECT_EQ(tiled.kernels.front().grid.tile_axis, 1);
  EXPECT_EQ(tiled.kernels.back().grid.tile_points, 1);  // the combine shares nothing
}

TEST(ThreadTiles, VerifierAndCoverageProofCheckTheTile) {
  ir::Program p = token_sums(24, 64, 16);
  ir::Kernel& k = p.kernels.front();
  k.grid.is_set = true;
  k.grid.bindings = {ir::AxisBinding::kLinear, ir::AxisBinding::kLinear};
  k.grid.block_size = 256;
  k.grid.tile_axis = 0;
  k.grid.tile_points = 8;
  EXPECT_NO_THROW(ir::verify(p));
  LaunchDims dims = launch_dims(k);
  EXPECT_EQ(dims.grid[0], 1u);  // 24 x 64 points / 8 per thread = 192 threads
  k.grid.tile_points = 5;  // does not divide 24: 5 tiles of 5, the last partial (4 points)
  EXPECT_NO_THROW(ir::verify(p));
  dims = launch_dims(k);
  EXPECT_EQ(dims.grid[0], 2u);  // 5 tiles x 64 points = 320 threads
  EXPECT_EQ(grid_mapping(k).linear_points, 5 * 64);
  EXPECT_NO_THROW(check_grid_coverage("sums", {24, 64}, k.grid, dims, {0, 1}));
  k.grid.tile_points = 25;  // longer than its axis
  EXPECT_THROW(ir::verify(p), Error);
  EXPECT_THROW(check_grid_coverage("sums", {24, 64}, k.grid, dims, {0, 1}), Error);
  k.grid.tile_points = 8;
  dims = launch_dims(k);
  k.grid.tile_axis = 1;  // the innermost axis belongs to the vector group
  EXPECT_NO_THROW(ir::verify(p));
  EXPECT_THROW(check_grid_coverage("sums", {24, 64}, k.grid, dims, {0, 1}), Error);
  k.grid.tile_axis = 0;
  k.grid.reduction_lanes = 32;
  EXPECT_THROW(ir::verify(p), Error);
  k.grid.reduction_lanes = 1;
  k.grid.bindings[0] = ir::AxisBinding::kSerial;
  EXPECT_THROW(ir::verify(p), Error);
}

TEST(ThreadTiles, AnAxisOfFewPartsKeepsItsTile) {
  // 48 k (x_mix at n = 6): 2 parts of 24 (few_parts = 2), kept though 24 x 4 exceeds 64
  // accumulators (derive_grid halves V to 2); before (few_parts = 0), 3 parts of 16 with V = 4.
  ScheduleNotes notes;
  ir::Program p = choose_thread_tiles(token_sums(48, 1 << 20, 64), {}, &notes);
  EXPECT_EQ(p.kernels.front().grid.tile_axis, 0);
  EXPECT_EQ(p.kernels.front().grid.tile_points, 24);
  EXPECT_EQ(notes.at("sums").find("halved"), std::string::npos) << notes.at("sums");
  CompiledProgram lowered = lower(token_sums(48, 1 << 20, 64), {});
  EXPECT_NE(lowered.kernels.front().source.find("float acc[24][2]"), std::string::npos)
      << lowered.kernels.front().source;
  ThreadTileOptions before;
  before.few_parts = 0;
  EXPECT_EQ(choose_thread_tiles(token_sums(48, 1 << 20, 64), before).kernels.front().grid.tile_points,
            16);
  // 72 k: 3 parts of 24 are not few; 8 (the largest of 16, 8, ... dividing 72).
  EXPECT_EQ(choose_thread_tiles(token_sums(72, 1 << 20, 64), {}).kernels.front().grid.tile_points,
            8);
  // 80 k (n = 8): 16, as before.
  EXPECT_EQ(choose_thread_tiles(token_sums(80, 1 << 20, 64), {}).kernels.front().grid.tile_points,
            16);
}

TEST(ThreadTiles, LongTilesKeepUpTo96Accumulators) {
  // x_mix's partials: 24 k (the whole axis) over 512 tokens a partial. A long tile (more than
  // 128 iterations a point) keeps up to long_tile_accumulators (96): V = 4 with R = 24, where
  // 64 halved it to 2; lower() holds it to 3 blocks of 128 a SM (at most 168 registers).
  ThreadTileOptions options;
  const ir::Program long_sums = choose_thread_tiles(token_sums(24, 1 << 17, 512), options);
  const ir::Kernel& kernel = long_sums.kernels.front();
  ASSERT_EQ(kernel.grid.tile_points, 24);
  EXPECT_EQ(tile_accumulator_limit(kernel, kernel.grid.tile_axis, 24, options), 96);
  EXPECT_EQ(derive_grid(long_sums).kernels.front().grid.vector_width, 4);
  // Short reductions (64 tokens), tiles in many parts (dx's 8 of 4096 tokens) and a cap of 64
  // (ADJOINT_TUNE_TILE_ACCUMULATORS=64): 64, the tiles before.
  const ir::Program short_sums = choose_thread_tiles(token_sums(24, 1 << 20, 64), options);
  EXPECT_EQ(tile_accumulator_limit(short_sums.kernels.front(), 0, 24, options), 64);
  const ir::Program m = choose_thread_tiles(mixes(4096, 4096, 24), options);
  EXPECT_EQ(tile_accumulator_limit(m.kernels.front(), 0, 8, options), 64);
  ThreadTileOptions before;
  before.long_tile_accumulators = 64;
  EXPECT_EQ(tile_accumulator_limit(kernel, kernel.grid.tile_axis, 24, before), 64);
  DeriveGridOptions grid_before;
  grid_before.tiles = before;
  EXPECT_EQ(derive_grid(long_sums, grid_before).kernels.front().grid.vector_width, 2);
  // Through lower(): 24 x 4 accumulators and 3 blocks; 24 x 2 and 5 blocks with the knob at 64.
  LowerOptions lower_options;
  lower_options.reduction_split = 0;
  const std::string source = lower(token_sums(24, 1 << 17, 512), lower_options).kernels.front().source;
  EXPECT_NE(source.find("float acc[24][4]"), std::string::npos) << source;
  EXPECT_NE(source.find("__launch_bounds__(128, 3)"), std::string::npos) << source;
  EXPECT_NE(source.find("minimum 3 blocks per SM (96 accumulators"), std::string::npos) << source;
  lower_options.tile_accumulators = 64;
  const std::string old = lower(token_sums(24, 1 << 17, 512), lower_options).kernels.front().source;
  EXPECT_NE(old.find("float acc[24][2]"), std::string::npos) << old;
  EXPECT_NE(old.find("__launch_bounds__(128, 5)"), std::string::npos) << old;
  lower_options.tile_accumulators = 8;
  EXPECT_THROW(lower(token_sums(24, 1 << 17, 512), lower_options), Error);
}

TEST(ThreadTiles, LowerEmitsOneLoopForTheTileAndSharedSpansBeforeIt) {
  LowerOptions options;
  options.tile_prefetch = 0;  // one body with a check per access (the aligned copy: below)
  CompiledProgram c = lower(token_sums(24, 1 << 20, 64), options);
  ASSERT_EQ(c.kernels.size(), 1u);
  const std::string& src = c.kernels.front().source;
  EXPECT_NE(src.find("// Thread tile: each thread also computes 24 consecutive points of k"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("float acc[24][2]"), std::string::npos) << src;
  // x is loaded once per iteration before the tile loop; w's row as one tile span.
  const size_t x_span = src.find("load_elements<4>(x_span");
  const size_t w_span = src.find("w_span[24]");
  const size_t tile_loop = src.find("for (int r = 0; r < 24; ++r)");
  ASSERT_NE(x_span, std::string::npos) << src;
  ASSERT_NE(w_span, std::string::npos) << src;
  ASSERT_NE(tile_loop, std::string::npos) << src;
  EXPECT_LT(x_span, tile_loop);
  EXPECT_LT(w_span, tile_loop);
  EXPECT_NE(src.find("acc[r][e] += w_span[r] * adjoint::to_float(x_span[e]);"), std::string::npos)
      << src;
  // The long token loop is partially unrolled, never left to NVVM's full unrolling: 2 times
  // (24 x 2 updates a trip, at most kTileUnrollUpdates = 128 a body), 4 when
  // LowerOptions::tile_unroll says so.
  const size_t token_loop = src.find("for (int t = 0; t < 64; ++t)");
  ASSERT_NE(token_loop, std::string::npos) << src;
  EXPECT_NE(src.find("#pragma unroll 2\n  for (int t = 0; t < 64; ++t)"), std::string::npos)
      << src;
  LowerOptions unroll4 = options;
  unroll4.tile_unroll = 4;
  EXPECT_NE(lower(token_sums(24, 1 << 20, 64), unroll4)
                .kernels.front()
                .source.find("#pragma unroll 4\n  for (int t = 0; t < 64; ++t)"),
            std::string::npos);
  // The default (tile_prefetch 8): an aligned copy whose token loop runs in chunks of 8, x
  // copied into a ring of shared memory a chunk ahead, behind one alignment test; else each
  // point alone in rolled loops (tile_point_fallback; false: the body above).
  options.tile_prefetch = 8;
  const std::string aligned = lower(token_sums(24, 1 << 20, 64), options).kernels.front().source;
  const size_t test = aligned.find("if (adjoint::is_aligned<4>(x) && adjoint::is_aligned<16>(w)");
  const size_t chunks = aligned.find("for (int t_chunk = 0; t_chunk < 64; t_chunk += 8) {");
  const size_t checked = aligned.find("} else {  // a misaligned base: each point alone");
  ASSERT_NE(test, std::string::npos) << aligned;
  ASSERT_NE(chunks, std::string::npos) << aligned;
  ASSERT_NE(checked, std::string::npos) << aligned;
  EXPECT_LT(test, chunks);
  EXPECT_LT(chunks, checked);
  EXPECT_NE(aligned.find("alignas(16) __shared__ adjoint::bfloat16 x_ring[2][8][128][2];"),
            std::string::npos)
      << aligned;
  // w[t, k] is the same for the whole block (tile_uniform_ring): a ring of the block, read
  // after each chunk's __syncthreads; per thread and iteration without it.
  EXPECT_NE(aligned.find("acc[r][e] += w_block_ring[ring_buffer][u][r] * adjoint::to_float(x_ring[ring_buffer][u][threadIdx.x][e]);"),
            std::string::npos)
      << aligned;
  EXPECT_NE(aligned.find("__syncthreads();"), std::string::npos) << aligned;
  {
    LowerOptions per_thread = options;
    per_thread.tile_uniform_ring = false;
    const std::string loaded = lower(token_sums(24, 1 << 20, 64), per_thread).kernels.front().source;
    EXPECT_NE(loaded.find("acc[r][e] += w_span[r] * adjoint::to_float(x_ring[ring_buffer][u][threadIdx.x][e]);"),
              std::string::npos)
        << loaded;
    EXPECT_EQ(loaded.find("__syncthreads"), std::string::npos) << loaded;
  }
  EXPECT_NE(aligned.find("#pragma unroll 1\n        for (int t = 0; t < 64; ++t)", checked),
            std::string::npos)
      << aligned;
  EXPECT_EQ(aligned.find("load_elements<", checked), std::string::npos) << aligned;
  options.tile_point_fallback = false;
  const std::string tiled = lower(token_sums(24, 1 << 20, 64), options).kernels.front().source;
  const size_t tiled_checked = tiled.find("} else {  // a misaligned base: a check per access");
  ASSERT_NE(tiled_checked, std::string::npos) << tiled;
  EXPECT_NE(tiled.find("load_elements<4>(x_span", tiled_checked), std::string::npos) << tiled;
}

TEST(ThreadTiles, TiledKernelsGetDerivedBlocksOf128Threads) {
  // Tiled: 128 threads a block, unless ADJOINT_TUNE_BLOCK_SIZE (LowerOptions::block_size) says.
  LowerOptions options;
  CompiledProgram tiled = lower(token_sums(24, 1 << 20, 64), options);
  ASSERT_EQ(tiled.kernels.size(), 1u);
  EXPECT_EQ(tiled.kernels.front().launch.block[0], 128u);
  // (and, with its x ring and 48 accumulators, a minimum of 5 such blocks per SM)
  EXPECT_NE(tiled.kernels.front().source.find("__launch_bounds__(128, 5)"), std::string::npos);
  options.block_size = 256;
  EXPECT_EQ(lower(token_sums(24, 1 << 20, 64), options).kernels.front().launch.block[0], 256u);
  // Untiled (tiles off): the default 256.
  options.block_size = 0;
  options.thread_tile = 0;
  EXPECT_EQ(lower(token_sums(24, 1 << 20, 64), options).kernels.front().launch.block[0], 256u);
}

TEST(ThreadTiles, BlocksOfRowsShareWhatDoesNotMoveWithTheTile) {
  // mixes' y[s, j] = sum_k w[s, k] phi[k, j] (dx's shape): tile of 8 s, groups of 8 j, blocks
  // of 128. One row of threads reads 128 groups of phi (32 bytes each) and one tile of w per
  // iteration; 4 rows of 32 read 32 groups of phi and 4 tiles of w (tile_blocks.h; 8 rows of
  // 16 would read less, 768 bytes, but a row must hold a warp).
  ScheduleNotes notes;
  ir::Program p = derive_grid(choose_thread_tiles(mixes(4096, 4096, 24), {}));
  ASSERT_EQ(p.kernels.front().grid.tile_points, 8);
  ASSERT_EQ(p.kernels.front().grid.vector_width, 8);
  ir::Program rows = choose_tile_blocks(p, {}, &notes);
  EXPECT_EQ(rows.kernels.front().grid.tile_block_rows, 4);
  EXPECT_EQ(notes["mix"],
            "tile block: 4 rows (tiles of s) x 32 columns (groups of j) per block (4128 -> 1152 "
            "bytes a block reads per reduction iteration: the rows share the loads that do not "
            "move with s)");
  EXPECT_NO_THROW(ir::verify(rows));
  EXPECT_EQ(launch_dims(rows.kernels.front()).grid[0], 4096u * 4096u / 64u / 128u);
  // Off (0 or 1): the very same program; forced: any power of two that fits the counts.
  EXPECT_TRUE(same_program(choose_tile_blocks(p, {0}), p));
  EXPECT_TRUE(same_program(choose_tile_blocks(p, {1}), p));
  EXPECT_EQ(choose_tile_blocks(p, {8}).kernels.front().grid.tile_block_rows, 8);
  TileBlockOptions narrow_rows;
  narrow_rows.min_columns = 16;
  EXPECT_EQ(choose_tile_blocks(p, narrow_rows).kernels.front().grid.tile_block_rows, 8);
  EXPECT_EQ(choose_tile_blocks(p, {64}).kernels.front().grid.tile_block_rows, 64);
  // 8 rows of 16 columns do not divide 40 groups of j (320 columns): one row, and a note.
  notes.clear();
  ir::Program narrow = derive_grid(choose_thread_tiles(mixes(4096, 320, 24), {}));
  EXPECT_TRUE(same_program(choose_tile_blocks(narrow, {8}, &notes), narrow));
  EXPECT_NE(notes["mix"].find("8 rows forced by ADJOINT_TUNE_TILE_BLOCK_ROWS, which do not divide"),
            std::string::npos)
      << notes["mix"];
  // A long reduction (256 iterations a point: a loop the emitter prefetches in chunks) keeps
  // one row, so that what moves with the tile alone is one ring of the block; without
  // yield_to_block_ring (ADJOINT_TUNE_TILE_UNIFORM_RING=0) the rows' rule alone gives it rows.
  ir::Program long_k = derive_grid(choose_thread_tiles(mixes(4096, 4096, 256), {}));
  ASSERT_EQ(long_k.kernels.front().grid.tile_points, 8);
  const TileBlockChoice yielded = choose_tile_block(long_k.kernels.front(), {});
  EXPECT_EQ(yielded.rows, 1);
  EXPECT_NE(yielded.why.find("prefetched in chunks"), std::string::npos) << yielded.why;
  TileBlockOptions rows_alone;
  rows_alone.yield_to_block_ring = false;
  EXPECT_EQ(choose_tile_block(long_k.kernels.front(), rows_alone).rows, 4);
  EXPECT_EQ(choose_tile_block(long_k.kernels.front(), {8}).rows, 8);  // forced rows still apply
  // Nothing shared across the tile's columns (token sums tile k over the whole axis): one row.
  ir::Program sums = derive_grid(choose_thread_tiles(token_sums(24, 1 << 20, 64), {}));
  EXPECT_TRUE(same_program(choose_tile_blocks(sums, {}), sums));
  for (int bad : {-2, 3, 6, 2048}) EXPECT_THROW(check_tile_block_options({bad}), Error) << bad;
  // The coverage proof checks the rows: 3 do not divide the block, rows need a full grid.
  ir::Kernel odd = rows.kernels.front();
  odd.grid.tile_block_rows = 3;
  EXPECT_THROW(launch_dims(odd), Error);
  ir::Kernel untiled = p.kernels.front();
  untiled.grid.tile_points = 1;
  untiled.grid.tile_block_rows = 2;
  EXPECT_THROW(launch_dims(untiled), Error);
  // lower(): the decode of the rows, and LowerOptions::tile_block_rows = 0 the source of before.
  LowerOptions options;
  const std::string source = lower(mixes(4096, 4096, 24), options).kernels.front().source;
  EXPECT_NE(source.find("const int tile_row = threadIdx.x / 32;"), std::string::npos) << source;
  EXPECT_NE(source.find("const int s_base = ((int)blockIdx.x / 16 * 4 + tile_row) * 8;"),
            std::string::npos)
      << source;
  EXPECT_NE(source.find("const int j_base = ((int)blockIdx.x % 16 * 32 + column) * 8;"),
            std::string::npos)
      << source;
  options.tile_block_rows = 0;
  const std::string before = lower(mixes(4096, 4096, 24), options).kernels.front().source;
  EXPECT_EQ(before.find("tile_row"), std::string::npos) << before;
  EXPECT_NE(before.find("const int s_base = linear / 512 * 8;"), std::string::npos) << before;
}

}  // namespace
}  // namespace adjoint::compiler
