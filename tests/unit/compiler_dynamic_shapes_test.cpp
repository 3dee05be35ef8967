// Generic programs (ir/dynamic_sizes.h) without a GPU: the printer, the interpreter at several
// sizes against the specialized program, the generic gather inversion and its refusals, the
// coverage proof of generic grids (including the configurations it must refuse), the index
// width from declared bounds, and generic keys.
#include <gtest/gtest.h>

#include <random>

#include "compiler/lower.h"
#include "compiler/lower_generic.h"
#include "compiler/lower_outer_generic.h"
#include "compiler/invert_floor_map.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ops/dynamic_ops.h"
#include "ops/registry.h"

namespace adjoint {
namespace {

ir::Program generic_program(const std::string& spec, const std::vector<std::string>& axes) {
  ops::Specialization s = ops::parse_specialization(spec);
  const ops::DynamicOp* op = ops::find_dynamic_op(s.op_name());
  EXPECT_NE(op, nullptr);
  return op->build_generic(s, axes);
}

ir::HostBuffers random_inputs(const ir::Program& p, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-64, 64);
  ir::HostBuffers in;
  for (const ir::Tensor& t : p.inputs) {
    std::vector<double> v(static_cast<size_t>(t->storage_elements()));
    for (double& x : v) x = dist(rng) / 16.0 + 1.0 / 1024;  // sums round in f16/bf16
    in[t->name] = v;
  }
  return in;
}

const std::vector<std::string> kAll2d = {"input_size[0]", "input_size[2]", "input_size[3]",
                                         "output_size[0]", "output_size[1]"};

TEST(DynamicShapes, PrinterShowsSizesAndDynamicTensors) {
  ir::Program p = generic_program(
      "upsample_nearest2d_backward dtype=f32 input_size=2,3,5,7 output_size=8,3", kAll2d);
  std::string text = ir::to_string(p);
  EXPECT_NE(text.find("size N = input_size[0] in [0, 2147483647]"), std::string::npos) << text;
  EXPECT_NE(text.find("size W_out = output_size[1] in [1, 4194304]"), std::string::npos) << text;
  EXPECT_NE(text.find("input grad_output: f32[N, 3, H_out, W_out] strides ["), std::string::npos)
      << text;
}

TEST(DynamicShapes, InterpreterOfAGenericProgramIsTheSpecializedProgramAtEverySize) {
  const std::vector<std::string> rules = {"upsample_nearest2d_backward",
                                          "_upsample_nearest_exact2d_backward"};
  for (const std::string& op : rules) {
    for (const char* layout : {"contiguous", "channels_last"}) {
      ir::Program g = generic_program(op + " dtype=bf16 input_size=2,3,5,7 output_size=8,3 layout=" +
                                          layout, kAll2d);
      // sizes: N, H_in, W_in, H_out, W_out
      for (std::vector<int64_t> sizes : std::vector<std::vector<int64_t>>{
               {1, 5, 7, 8, 3}, {3, 4, 9, 13, 2}, {2, 16, 3, 5, 40}, {0, 3, 3, 7, 7}}) {
        std::string spec = op + " dtype=bf16 input_size=" + std::to_string(sizes[0]) + ",3," +
                           std::to_string(sizes[1]) + "," + std::to_string(sizes[2]) +
                           " output_size=" + std::to_string(sizes[3]) + "," +
                           std::to_string(sizes[4]) + " layout=" + layout;
        ir::Program specialized = ops::parse_specialization(spec).build_program();
        ir::HostBuffers in = random_inputs(specialized, 7);
        EXPECT_EQ(ir::interpret(g, sizes, in), ir::interpret(specialized, in)) << spec;
      }
    }
  }
}

TEST(DynamicShapes, InterpreterNeedsSizesForAGenericProgram) {
  ir::Program g = generic_program(
      "upsample_nearest1d_backward dtype=f32 input_size=2,3,7 output_size=17", {"input_size[0]"});
  EXPECT_THROW(ir::interpret(g, {}), Error);
  EXPECT_THROW(ir::interpret(g, {-1}, {}), Error);  // below the lower bound
}

TEST(DynamicShapes, GenericGatherMatchesSpecializedAtSizesWithRoundingDepartures) {
  // Sizes where floor(o * f32(I/O)) departs from the rational map: the specialized gather keeps
  // a membership test; the generic window must still hold exactly the same points. Both rules,
  // derived ratios and given scales (among them ratios far from I/O).
  for (const std::string op : {"upsample_nearest1d_backward", "_upsample_nearest_exact1d_backward"}) {
    for (const std::string scales : {"", " scales=3", " scales=0.37", " scales=1.7"}) {
      ir::Program g = generic_program(op + " dtype=f32 input_size=1,1,8 output_size=9" + scales,
                                      {"input_size[2]", "output_size[0]"});
      ir::Program lowered = compiler::lower_scatter_to_gather_generic(g);
      for (int64_t in = 1; in <= 40; in += 3) {
        for (int64_t out = 1; out <= 120; out += 7) {
          std::string spec = op + " dtype=f32 input_size=1,1," + std::to_string(in) +
                             " output_size=" + std::to_string(out) + scales;
          ir::Program specialized = ops::parse_specialization(spec).build_program();
          ir::HostBuffers inputs = random_inputs(specialized, 3);
          EXPECT_EQ(ir::interpret(lowered, {in, out}, inputs), ir::interpret(specialized, inputs))
              << spec;
        }
      }
    }
  }
}

TEST(DynamicShapes, GenericGatherHoldsForRandomLargeSizesAndScales) {
  std::mt19937 rng(12);
  std::uniform_int_distribution<int64_t> size(1, 30000);
  std::uniform_real_distribution<double> scale(0.05, 9.0);
  for (int trial = 0; trial < 40; ++trial) {
    const bool exact = trial % 2 == 1;
    const std::string op = exact ? "_upsample_nearest_exact1d_backward" : "upsample_nearest1d_backward";
    const std::string scales = trial % 3 == 0 ? "" : " scales=" + ops::format_float(scale(rng));
    int64_t in = size(rng), out = size(rng);
    std::string spec = op + " dtype=f32 input_size=1,1," + std::to_string(in) +
                       " output_size=" + std::to_string(out) + scales;
    ir::Program g = generic_program(spec, {"input_size[2]", "output_size[0]"});
    ir::Program specialized = ops::parse_specialization(spec).build_program();
    ir::HostBuffers inputs = random_inputs(specialized, static_cast<unsigned>(trial));
    EXPECT_EQ(ir::interpret(compiler::lower_scatter_to_gather_generic(g), {in, out}, inputs)
                  .at("grad_input"),
              ir::interpret(specialized, inputs).at("grad_input"))
        << spec;
  }
}

TEST(DynamicShapes, GenericInversionRefusesAMapItCannotComputeInTheKernel) {
  ir::ProgramBuilder b("refused");
  ir::Var n = b.size("N", "input_size[0]", 1, 1024);
  ir::Tensor src = b.dynamic_tensor("src", ir::DType::kF32, {n}, {0}, ir::TensorRole::kInput);
  ir::Tensor dst = b.dynamic_tensor("dst", ir::DType::kF32, {n}, {0}, ir::TensorRole::kOutput);
  ir::Var o("o");
  // dst[(o * 7) % N] += src[o]: a permutation, not a monotone floor map.
  b.kernel("k", {ir::scatter_add(dst, {(ir::Expr(o) * ir::Expr(7)) % ir::Expr(n)},
                                 ir::load(src, {o}), ir::over(src, {o}), ir::DType::kF32)});
  ir::Program p = std::move(b).build();
  try {
    compiler::lower(p, compiler::LowerOptions{});
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no gather computable from runtime extents"),
              std::string::npos)
        << e.what();
  }
}

/// A generic copy kernel with an explicit grid, for the coverage proof.
ir::Program generic_copy(ir::GridConfig grid) {
  ir::ProgramBuilder b("copy");
  ir::Var n = b.size("N", "input_size[0]", 0, 1 << 20);
  ir::Tensor src = b.dynamic_tensor("src", ir::DType::kF32, {n, ir::Expr(64)}, {0, 1},
                                    ir::TensorRole::kInput);
  ir::Tensor dst = b.dynamic_tensor("dst", ir::DType::kF32, {n, ir::Expr(64)}, {0, 1},
                                    ir::TensorRole::kOutput);
  ir::Var i("i"), j("j");
  b.kernel("k", {ir::compute(dst, ir::over(dst, {i, j}), ir::load(src, {i, j}))}, grid);
  return std::move(b).build();
}

TEST(DynamicShapes, CoverageProofAcceptsLinearGridsAndRefusesWhatItCannotProve) {
  ir::GridConfig linear{true, {ir::AxisBinding::kLinear, ir::AxisBinding::kLinear}, 128, 1, 1};
  EXPECT_NO_THROW(compiler::lower(generic_copy(linear), compiler::LowerOptions{}));
  EXPECT_NO_THROW(compiler::lower(generic_copy({}), compiler::LowerOptions{}));

  ir::GridConfig grouped = linear;  // 4 consecutive innermost points per thread, tail-guarded
  grouped.tile_axis = 1;
  grouped.tile_points = 4;
  EXPECT_NO_THROW(compiler::lower(generic_copy(grouped), compiler::LowerOptions{}));

  // A vector group on a constant innermost extent that it divides (64 / 4 whole groups) is
  // covered for every N; with a group of points on the same axis as well, it is refused.
  ir::GridConfig vector_groups = linear;
  vector_groups.vector_width = 4;
  EXPECT_NO_THROW(compiler::lower(generic_copy(vector_groups), compiler::LowerOptions{}));
  ir::GridConfig vectorized = grouped;
  vectorized.vector_width = 4;
  ir::GridConfig blocks{true, {ir::AxisBinding::kBlock, ir::AxisBinding::kLinear}, 128, 1, 1};
  ir::GridConfig threads{true, {ir::AxisBinding::kLinear, ir::AxisBinding::kThread}, 64, 1, 1};
  // A group on the dynamic outer axis would need R | N (3 divides N at the verifier's sample
  // size, which proves nothing for other sizes); a group of 32 is beyond the proven bound.
  ir::GridConfig outer_group = grouped;
  outer_group.tile_axis = 0;
  outer_group.tile_points = 3;
  ir::GridConfig huge_group = grouped;
  huge_group.tile_points = 2 * compiler::kMaxGenericGroupPoints;
  for (const ir::GridConfig& g : {vectorized, blocks, threads, outer_group, huge_group}) {
    try {
      compiler::lower(generic_copy(g), compiler::LowerOptions{});
      FAIL() << "expected the coverage proof to refuse " << ir::to_string(generic_copy(g));
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cannot prove that its grid covers"), std::string::npos)
          << e.what();
    }
  }
}

TEST(DynamicShapes, GenericKernelsComputeAGroupOfInnermostPointsPerThread) {
  for (auto [dtype, points] : {std::pair{"f32", 4}, {"bf16", 8}}) {  // 16 bytes
    ir::Program g = generic_program("upsample_nearest2d_backward dtype=" + std::string(dtype) +
                                        " input_size=2,3,5,7 output_size=8,3",
                                    kAll2d);
    compiler::CompiledProgram c = compiler::lower(g, compiler::LowerOptions{});
    ASSERT_EQ(c.kernels.size(), 1u);
    EXPECT_EQ(c.kernels[0].points_per_thread, points) << dtype;
    const std::string& src = c.kernels[0].source;
    // One decode per group: the innermost axis counts ceil(W / R) groups, and each point is
    // guarded against the row's tail.
    EXPECT_NE(src.find("+ " + std::to_string(points - 1) + ") / " + std::to_string(points)),
              std::string::npos) << src;
    EXPECT_NE(src.find(" * " + std::to_string(points) + " + " + std::to_string(points - 1) + ";"),
              std::string::npos) << src;
  }
}

TEST(DynamicShapes, IndexWidthFollowsTheDeclaredBounds) {
  ir::Program g = generic_program(
      "upsample_nearest2d_backward dtype=f32 input_size=2,3,5,7 output_size=8,3", kAll2d);
  compiler::CompiledProgram wide = compiler::lower(g, compiler::LowerOptions{});
  ASSERT_EQ(wide.kernels.size(), 1u);
  EXPECT_NE(wide.kernels[0].source.find("64-bit index math"), std::string::npos);
  EXPECT_EQ(wide.kernels[0].size_param_bytes, 8);
  g.dynamic_storage_bound = compiler::kGenericInt32StorageBound;
  compiler::CompiledProgram narrow = compiler::lower(g, compiler::LowerOptions{});
  EXPECT_NE(narrow.kernels[0].source.find("32-bit index math"), std::string::npos)
      << narrow.kernels[0].source;
  EXPECT_EQ(narrow.kernels[0].size_param_bytes, 4);
  EXPECT_EQ(narrow.kernels[0].size_params,
            (std::vector<std::string>{"input_size[0]", "input_size[2]", "input_size[3]",
                                      "output_size[0]", "output_size[1]"}));
  EXPECT_EQ(narrow.kernels[0].points.text(),
            "3 * input_size[0] * input_size[2] * input_size[3]");
}

TEST(DynamicShapes, GenericKeysSayWhichAxesAreGeneric) {
  ops::Specialization s = ops::parse_specialization(
      "upsample_nearest2d_backward dtype=f32 input_size=2,3,5,7 output_size=8,3");
  EXPECT_EQ(ops::generic_key(s, {"input_size[0]"}),
            "upsample_nearest2d_backward dtype=f32 input_size=?,3,5,7 output_size=8,3 "
            "scales_h=none scales_w=none layout=contiguous");
  EXPECT_EQ(ops::generic_key(s, kAll2d),
            "upsample_nearest2d_backward dtype=f32 input_size=?,3,?,? output_size=?,? "
            "scales_h=none scales_w=none layout=contiguous");
  EXPECT_THROW(ops::find_dynamic_op(s.op_name())->build_generic(s, {"input_size[1]"}), Error);
}

/// The source's lines that are code (comments dropped).
std::string code_of(const std::string& source) {
  std::string code, line;
  for (size_t at = 0; at < source.size();) {
    size_t end = source.find('\n', at);
    if (end == std::string::npos) end = source.size();
    line = source.substr(at, end - at);
    at = end + 1;
    if (line.find_first_not_of(' ') != std::string::npos &&
        line.compare(line.find_first_not_of(' '), 2, "//") != 0)
      code += line + "\n";
  }
  return code;
}

/// A program generic in the batch only (compiler/lower_outer_generic.h): the specialized kernel
/// of each large bench shape, with the constant linear count `N0 * K` replaced by `N * K` for a
/// kernel parameter N and nothing else changed (both layouts, f32 and bf16).
TEST(DynamicShapes, BatchGenericKernelIsTheSpecializedOneWithTheBatchAsAParameter) {
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"dtype=f32 input_size=8,64,128,128 output_size=256,256", 8},
      {"dtype=bf16 input_size=8,64,256,256 output_size=128,128", 8},
      {"dtype=f32 input_size=4,32,256,256 output_size=384,192", 4},
      {"dtype=f32 input_size=32,3,224,224 output_size=448,448 layout=channels_last", 32},
      {"dtype=bf16 input_size=16,256,64,64 output_size=128,128", 16},
  };
  for (const auto& [text, batch] : cases) {
    const std::string spec = "upsample_nearest2d_backward " + text;
    ir::Program g = generic_program(spec, {"input_size[0]"});
    EXPECT_EQ(compiler::outer_batch_refusal(g), "its storage bound does not allow 32-bit index math");
    g.dynamic_storage_bound = compiler::kGenericInt32StorageBound;
    EXPECT_EQ(compiler::outer_batch_refusal(g), "") << spec;
    compiler::CompiledProgram generic = compiler::lower(g, {});
    compiler::CompiledProgram specialized =
        compiler::lower(ops::parse_specialization(spec).build_program(), {});
    ASSERT_EQ(generic.kernels.size(), 1u);
    ASSERT_EQ(specialized.kernels.size(), 1u);
    const compiler::CompiledKernel &k = generic.kernels[0], &s = specialized.kernels[0];
    EXPECT_TRUE(k.one_index_per_thread);
    EXPECT_EQ(k.size_params, std::vector<std::string>{"input_size[0]"});
    EXPECT_EQ(k.size_param_bytes, 4);
    // The runtime's grid at the specialization's batch is the specialized kernel's.
    const int64_t points = k.points.evaluate(k.size_params, {batch});
    const int64_t per_block = int64_t{k.launch.block[0]} * k.points_per_thread;
    EXPECT_EQ((points + per_block - 1) / per_block, int64_t{s.launch.grid[0]}) << spec;
    EXPECT_EQ(k.launch.block[0], s.launch.block[0]);
    const int64_t per_index = points / batch / k.points_per_thread;
    std::string expected = code_of(s.source);
    const std::string count = ">= " + std::to_string(batch * per_index) + ") return;";
    ASSERT_NE(expected.find(count), std::string::npos) << s.source;
    expected.replace(expected.find(count), count.size(),
                     ">= N * " + std::to_string(per_index) + ") return;");
    const std::string last_param = "__restrict__ grad_input) {";
    ASSERT_NE(expected.find(last_param), std::string::npos);
    expected.replace(expected.find(last_param), last_param.size(),
                     "__restrict__ grad_input,\n    const int N) {");
    EXPECT_EQ(code_of(k.source), expected) << spec;
    // Dynamic buffers: the batch dimension is the size, every stride a constant.
    for (const compiler::BufferInfo& b : generic.buffers) {
      ASSERT_EQ(b.dynamic_shape.size(), 4u) << b.name;
      EXPECT_EQ(b.dynamic_shape[0].sizes, std::vector<std::string>{"input_size[0]"});
      for (const compiler::SizeProduct& stride : b.dynamic_strides) EXPECT_TRUE(stride.sizes.empty());
    }
  }
}

/// What lower_outer_generic refuses goes through lower_generic's own pipeline: sizes other than
/// the batch (they enter the windows), the 64-bit variant, or the option switched off.
TEST(DynamicShapes, OuterBatchLoweringRefusesSizesThatEnterIndexMath) {
  const std::string spec = "upsample_nearest2d_backward dtype=f32 input_size=2,3,8,8 output_size=16,16";
  ir::Program spatial = generic_program(spec, {"input_size[2]"});
  spatial.dynamic_storage_bound = compiler::kGenericInt32StorageBound;
  EXPECT_EQ(compiler::outer_batch_refusal(spatial),
            "the size enters a stride of tensor 'grad_input' (not outermost in memory)");
  EXPECT_FALSE(compiler::lower(spatial, {}).kernels[0].one_index_per_thread);
  ir::Program two = generic_program(spec, {"input_size[0]", "output_size[1]"});
  two.dynamic_storage_bound = compiler::kGenericInt32StorageBound;
  EXPECT_EQ(compiler::outer_batch_refusal(two), "it has 2 sizes");
  ir::Program batch = generic_program(spec, {"input_size[0]"});
  EXPECT_FALSE(compiler::lower(batch, {}).kernels[0].one_index_per_thread);  // 64-bit
  batch.dynamic_storage_bound = compiler::kGenericInt32StorageBound;
  // N_max: grad_output (3 * 16 * 16 = 768 elements per batch) fills the bound first.
  EXPECT_EQ(compiler::outer_batch_lowering_value(batch), (compiler::kGenericInt32StorageBound - 768) / 768 + 1);
  compiler::LowerOptions off;
  off.outer_generic = false;
  EXPECT_FALSE(compiler::lower(batch, off).kernels[0].one_index_per_thread);
  std::string why = "unset";
  EXPECT_TRUE(compiler::lower_outer_generic(batch, {}, &why).has_value());
  EXPECT_EQ(why, "unset");
}

/// A per-token scale of [B, S, 8] rows with memory order `order`: contiguous tokens for
/// {0, 1, 2}; {1, 0, 2} puts the batch inside the seq (the seq stride B * 8, not 8).
ir::Program token_scale(const std::vector<int>& order) {
  ir::ProgramBuilder b("token_scale");
  ir::Var batch = b.size("B", "batch", 1, 1 << 20);
  ir::Var seq = b.size("S", "seq", 1, 1 << 20);
  ir::Tensor x = b.dynamic_tensor("x", ir::DType::kF32, {batch, seq, ir::Expr(8)}, order,
                                  ir::TensorRole::kInput);
  ir::Tensor y = b.dynamic_tensor("y", ir::DType::kF32, {batch, seq, ir::Expr(8)}, order,
                                  ir::TensorRole::kOutput);
  ir::Var i("i"), j("j"), k("k");
  b.kernel("scale", {ir::compute(y, ir::over(y, {i, j, k}), ir::load(x, {i, j, k}) * 2.0f)});
  ir::Program p = std::move(b).build();
  p.dynamic_storage_bound = compiler::kGenericInt32StorageBound;
  return p;
}

/// The mHC ops that compute per token are one token axis of B * S tokens (lower_outer_generic.h):
/// the specialized pipeline's kernels, taking both sizes; mhc_pre_backward (token sums) and a
/// tensor whose seq stride is not its row are refused.
TEST(DynamicShapes, TokenPairFlattensPerTokenMhcOps) {
  for (const std::string spec :
       {"mhc_pre dtype=bf16 batch=2 seq=64 n=4 dim=256", "mhc_post dtype=bf16 batch=2 seq=64 n=4 dim=256",
        "mhc_post_backward dtype=bf16 batch=2 seq=64 n=4 dim=256",
        "mhc_sinkhorn dtype=f32 batch=2 seq=64 n=4", "mhc_sinkhorn_backward dtype=f32 batch=2 seq=64 n=4"}) {
    ir::Program g = generic_program(spec, {"batch", "seq"});
    g.dynamic_storage_bound = compiler::kGenericInt32StorageBound;
    EXPECT_EQ(compiler::token_pair_refusal(g), "") << spec;
    std::string why;
    const std::optional<compiler::CompiledProgram> out = compiler::lower_outer_generic(g, {}, &why);
    if (spec.rfind("mhc_pre ", 0) == 0) {  // its h_mix partials are a block reduction
      EXPECT_FALSE(out.has_value());
      EXPECT_NE(why.find("not a linear grid"), std::string::npos) << why;
      continue;
    }
    ASSERT_TRUE(out.has_value()) << spec << ": " << why;
    EXPECT_EQ(out->sizes, (std::vector<std::string>{"batch", "seq"}));
    for (const compiler::CompiledKernel& k : out->kernels) {
      EXPECT_TRUE(k.one_index_per_thread) << k.entry;
      EXPECT_EQ(k.size_params, (std::vector<std::string>{"batch", "seq"})) << k.entry;
      EXPECT_NE(k.source.find("const int B,\n    const int S) {"), std::string::npos) << k.source;
      EXPECT_NE(k.source.find(">= B * S"), std::string::npos) << k.source;
    }
    for (const compiler::BufferInfo& b : out->buffers) {
      if (b.dynamic_shape.empty()) continue;
      EXPECT_EQ(b.dynamic_shape[0].sizes, std::vector<std::string>{"batch"}) << b.name;
      EXPECT_EQ(b.dynamic_strides[0].sizes, std::vector<std::string>{"seq"}) << b.name;
      EXPECT_EQ(b.dynamic_strides[0].constant, b.dynamic_strides[1].constant) << b.name;
    }
  }
  // The mHC ops with row groups keep them (mhc_sinkhorn: one kernel, as specialized).
  ir::Program sinkhorn = generic_program("mhc_sinkhorn dtype=f32 batch=2 seq=64 n=4", {"batch", "seq"});
  sinkhorn.dynamic_storage_bound = compiler::kGenericInt32StorageBound;
  EXPECT_EQ(compiler::lower_outer_generic(sinkhorn, {})->kernels.size(), 1u);

  ir::Program backward = generic_program("mhc_pre_backward dtype=bf16 batch=2 seq=64 n=4 dim=256",
                                         {"batch", "seq"});
  backward.dynamic_storage_bound = compiler::kGenericInt32StorageBound;
  EXPECT_NE(compiler::token_pair_refusal(backward), "");
  EXPECT_FALSE(compiler::lower(backward, {}).kernels[0].one_index_per_thread);

  EXPECT_EQ(compiler::token_pair_refusal(token_scale({0, 1, 2})), "");
  EXPECT_EQ(compiler::token_pair_lowering_value(token_scale({0, 1, 2})), 1 << 20);
  EXPECT_TRUE(compiler::lower(token_scale({0, 1, 2}), {}).kernels[0].one_index_per_thread);
  EXPECT_EQ(compiler::token_pair_refusal(token_scale({1, 0, 2})), "a size enters a stride of tensor 'x'");
  EXPECT_FALSE(compiler::lower(token_scale({1, 0, 2}), {}).kernels[0].one_index_per_thread);
}

}  // namespace
}  // namespace adjoint
