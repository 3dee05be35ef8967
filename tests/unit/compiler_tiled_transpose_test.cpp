// tiled_transpose: which copy kernels are batched transpositions, their merged extents and
// strides, and the kernels it leaves to the plain emitter. (That the emitted tiles copy the
// same bits is compiler_host_run_test's; that they run on the GPU, tests/gpu.)
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "compiler/cuda_emitter.h"
#include "compiler/lower.h"
#include "compiler/tiled_transpose.h"
#include "ir/builder.h"
#include "ops/registry.h"

namespace adjoint::compiler {
namespace {

using ir::DType;
using ir::Expr;
using ir::Var;

/// A program of one copy kernel `y[d] = x[indices(d)]`, y of `y_shape`.
ir::Program copy_program(DType dtype, const std::vector<int64_t>& x_shape,
                         const std::vector<int64_t>& y_shape,
                         const std::vector<int>& source_of_target,
                         std::vector<int64_t> x_strides = {}) {
  ir::ProgramBuilder b("copy");
  ir::Tensor x = b.input("x", dtype, x_shape, std::move(x_strides));
  ir::Tensor y = b.output("y", dtype, y_shape);
  std::vector<Var> vars;
  for (size_t k = 0; k < y_shape.size(); ++k) vars.emplace_back("d" + std::to_string(k));
  std::vector<Expr> indices(x_shape.size());
  for (size_t k = 0; k < y_shape.size(); ++k) indices[source_of_target[k]] = vars[k];
  b.kernel("copy", {ir::compute(y, ir::over(y, vars), ir::load(x, indices))});
  return std::move(b).build();
}

TEST(TiledTranspose, ChannelsLastCopiesAreBatchedTranspositions) {
  // N, C, H, W -> N, H, W, C: b = N, p = C, q = H * W.
  ir::Program to_last = copy_program(DType::kF32, {2, 64, 8, 5}, {2, 8, 5, 64}, {0, 2, 3, 1});
  auto t = match_tiled_transpose(to_last.kernels[0], 16);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->source, "x");
  EXPECT_EQ(t->target, "y");
  EXPECT_EQ(t->batches, 2);
  EXPECT_EQ(t->rows, 64);
  EXPECT_EQ(t->columns, 40);
  EXPECT_EQ(t->source_batch_stride, 64 * 40);
  EXPECT_EQ(t->source_row_stride, 40);
  EXPECT_EQ(t->source_column_stride, 1);
  EXPECT_EQ(t->target_batch_stride, 40 * 64);
  EXPECT_EQ(t->target_row_stride, 1);
  EXPECT_EQ(t->target_column_stride, 64);
  // And back: N, H, W, C -> N, C, H, W: p = H * W, q = C.
  ir::Program back = copy_program(DType::kBF16, {2, 8, 5, 64}, {2, 64, 8, 5}, {0, 3, 1, 2});
  t = match_tiled_transpose(back.kernels[0], 16);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->batches, 2);
  EXPECT_EQ(t->rows, 40);
  EXPECT_EQ(t->columns, 64);
  EXPECT_EQ(t->source_row_stride, 64);
  EXPECT_EQ(t->target_row_stride, 1);
  EXPECT_EQ(t->target_column_stride, 40);
  // A plain 2-d transposition has no batch; components of one element take no part.
  ir::Program plain = copy_program(DType::kF64, {1, 20, 1, 30}, {30, 1, 20, 1}, {3, 0, 1, 2});
  t = match_tiled_transpose(plain.kernels[0], 16);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->batches, 1);
  EXPECT_EQ(t->rows, 20);
  EXPECT_EQ(t->columns, 30);
}

TEST(TiledTranspose, OtherCopiesAndNarrowOnesStayPlain) {
  // Below the extent (3 channels), or the knob at 0.
  ir::Program narrow = copy_program(DType::kF32, {2, 3, 8, 8}, {2, 8, 8, 3}, {0, 2, 3, 1});
  EXPECT_FALSE(match_tiled_transpose(narrow.kernels[0], 16).has_value());
  EXPECT_TRUE(match_tiled_transpose(narrow.kernels[0], 3).has_value());
  ir::Program wide = copy_program(DType::kF32, {2, 32, 8, 8}, {2, 8, 8, 32}, {0, 2, 3, 1});
  EXPECT_FALSE(match_tiled_transpose(wide.kernels[0], 0).has_value());
  // The identity (nothing moves) and a permutation that is not [b | p | q] -> [b | q | p].
  ir::Program same = copy_program(DType::kF32, {32, 32}, {32, 32}, {0, 1});
  EXPECT_FALSE(match_tiled_transpose(same.kernels[0], 16).has_value());
  ir::Program swap3 = copy_program(DType::kF32, {32, 32, 32}, {32, 32, 32}, {2, 1, 0});
  EXPECT_FALSE(match_tiled_transpose(swap3.kernels[0], 16).has_value());
  // A source whose merged group is not dense (padded rows of H, W).
  ir::Program padded = copy_program(DType::kF32, {2, 32, 8, 8}, {2, 8, 8, 32}, {0, 2, 3, 1},
                                    {32 * 8 * 10, 8 * 10, 10, 1});
  EXPECT_FALSE(match_tiled_transpose(padded.kernels[0], 16).has_value());
  // A value that is more than a load (here a conversion) is no copy.
  ir::ProgramBuilder b("convert");
  ir::Tensor x = b.input("x", DType::kF32, {32, 32});
  ir::Tensor y = b.output("y", DType::kF64, {32, 32});
  Var i("i"), j("j");
  b.kernel("k", {ir::compute(y, ir::over(y, {i, j}), ir::cast(DType::kF64, ir::load(x, {j, i})))});
  ir::Program converted = std::move(b).build();
  EXPECT_FALSE(match_tiled_transpose(converted.kernels[0], 16).has_value());
}

TEST(TiledTranspose, TheEmittedKernelMovesTilesThroughSharedMemory) {
  ir::Program p = copy_program(DType::kF64, {3, 64, 100}, {3, 100, 64}, {0, 2, 1});
  LowerOptions options;
  CompiledProgram compiled = lower(p, options);
  ASSERT_EQ(compiled.kernels.size(), 1u);
  const CompiledKernel& k = compiled.kernels[0];
  EXPECT_NE(k.source.find("__shared__ double tiles[4][32][33];"), std::string::npos) << k.source;
  EXPECT_NE(k.source.find("__syncwarp();"), std::string::npos) << k.source;
  // 3 x 2 x 4 tiles, 4 warps per block (f64 tiles fill 33 KiB): 6 blocks of 128 threads.
  EXPECT_EQ(k.launch.block[0], 128u);
  EXPECT_EQ(k.launch.grid[0], 6u);
  EXPECT_NE(k.source.find("__launch_bounds__(128)"), std::string::npos) << k.source;
  // The knob at 0 emits the plain copy.
  options.tiled_transpose_min = 0;
  compiled = lower(p, options);
  EXPECT_EQ(compiled.kernels[0].source.find("__shared__"), std::string::npos);
  options.tiled_transpose_min = -1;
  EXPECT_THROW(lower(p, options), Error);
}

TEST(TiledTranspose, TheDefaultGridSamplerProgramTilesBothCopiesAtWideChannels) {
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=f32 input_size=8,64,128,128 output_size=128,128 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
        "grid_sampler_3d_backward dtype=bf16 input_size=2,16,32,32,32 output_size=32,32,32 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false"}) {
    for (bool fused : {true, false}) {
      LowerOptions options;
      options.transposed_store = fused;
      CompiledProgram compiled = lower(ops::parse_specialization(spec).build_program(), options);
      // The copy to channels-last before the gather and the copy back after it (fused into
      // the gather by default, transposed_store.h), and grad_grid's channels-last copy of the
      // input: for warp lanes at 64 channels (gathered_reduction_lanes.h), row-innermost at 16
      // bf16 channels (32-byte rows).
      std::set<std::string> tiled, stored, names;
      for (const CompiledKernel& k : compiled.kernels) {
        const size_t start = k.source.find("kernel '") + 8;
        const std::string name = k.source.substr(start, k.source.find('\'', start) - start);
        names.insert(name);
        if (k.source.find("Tiled transposition") != std::string::npos) tiled.insert(name);
        if (k.source.find("Transposed store") != std::string::npos) stored.insert(name);
      }
      EXPECT_TRUE(tiled.count("grad_input_bin_grad_output_transposed")) << spec;
      EXPECT_EQ(tiled.count("grad_input"), fused ? 0u : 1u) << spec;
      EXPECT_EQ(names.count("grad_input"), fused ? 0u : 1u) << spec;
      EXPECT_EQ(stored.count("grad_input_gather"), fused ? 1u : 0u) << spec;
      EXPECT_EQ(tiled.size(), fused ? 2u : 3u) << spec;
      bool gathered_allocated = false;
      for (const auto& buffer : compiled.buffers)
        gathered_allocated |= buffer.name == "grad_input_bin_gathered";
      EXPECT_EQ(gathered_allocated, !fused) << spec;
      EXPECT_TRUE(compiled.deterministic) << spec;
    }
  }
}

}  // namespace
}  // namespace adjoint::compiler
