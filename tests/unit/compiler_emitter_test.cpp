// Tests of CUDA emission without NVRTC: literal spellings that read back exactly, the name
// supply, the device templates' integer and bfloat16 helpers run on the host against the IR's
// definitions, the emitter's structure (parameters, lazy branches, safe hoisting, reductions,
// floor division, index width), and lower()'s pipeline, dump and launch facts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "ir/bounds.h"
#include "compiler/cuda_emitter.h"
#include "compiler/cuda_syntax.h"
#include "compiler/derive_grid.h"
#include "compiler/index_width.h"
#include "compiler/lower.h"
#include "compiler/simplify.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "ops/registry.h"
#include "templates/adjoint_types.cuh"

namespace adjoint::compiler {
namespace {

using ir::DType;
using ir::Expr;
using ir::Var;

/// Parses a float literal the way a C++ compiler does (suffix f: float, else double).
double read_back(const std::string& literal) {
  std::string text = literal;
  if (text.front() == '(') text = text.substr(1, text.size() - 2);
  if (text.back() == 'f') return std::strtof(text.c_str(), nullptr);
  return std::strtod(text.c_str(), nullptr);
}

TEST(CudaSyntax, FloatLiteralsReadBackExactly) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<uint32_t> bits32;
  for (int i = 0; i < 2000; ++i) {
    uint32_t b = bits32(rng);
    float f;
    std::memcpy(&f, &b, sizeof f);
    if (!std::isfinite(f)) continue;
    ASSERT_EQ(read_back(cuda_float_literal(DType::kF32, f)), f)
        << cuda_float_literal(DType::kF32, f);
    double d = static_cast<double>(f) * 1.0000000001;
    ASSERT_EQ(read_back(cuda_float_literal(DType::kF64, d)), d)
        << cuda_float_literal(DType::kF64, d);
  }
  EXPECT_EQ(cuda_float_literal(DType::kF32, 2.0), "2.0f");
  EXPECT_EQ(cuda_float_literal(DType::kF64, 0.5), "0.5");
  EXPECT_EQ(cuda_float_literal(DType::kF16, -0.0), "(-0.0f)");
  EXPECT_EQ(cuda_float_literal(DType::kF32, INFINITY), "__int_as_float(0x7f800000)");
  EXPECT_EQ(cuda_float_literal(DType::kF64, -INFINITY),
            "__longlong_as_double(0xfff0000000000000LL)");
  EXPECT_EQ(cuda_float_literal(DType::kBF16, NAN), "__int_as_float(0x7fc00000)");
}

TEST(CudaSyntax, IntegerLiteralsNeverOverflow) {
  EXPECT_EQ(cuda_int_literal(DType::kI64, 5), "5");
  EXPECT_EQ(cuda_int_literal(DType::kI64, int64_t{1} << 40), "1099511627776LL");
  EXPECT_EQ(cuda_int_literal(DType::kI64, INT64_MIN), "(-9223372036854775807LL - 1)");
  EXPECT_EQ(cuda_int_literal(DType::kI32, INT32_MIN), "(-2147483647 - 1)");
  EXPECT_EQ(cuda_int_literal(DType::kI32, -3), "(-3)");
  EXPECT_EQ(cuda_int_literal(DType::kBool, 1), "true");
}

TEST(CudaSyntax, NameSupplyAvoidsKeywordsAndDuplicates) {
  NameSupply names;
  EXPECT_EQ(names.fresh("x"), "x");
  EXPECT_EQ(names.fresh("x"), "x_1");
  EXPECT_EQ(names.fresh("int"), "int_1");
  EXPECT_EQ(names.fresh("grad.input"), "grad_input");
  EXPECT_EQ(names.fresh("2d"), "_2d");
  EXPECT_EQ(names.fresh("__bad"), "v__bad");
  EXPECT_EQ(names.fresh("threadIdx"), "threadIdx_1");
}

// --- the device templates' portable helpers, run on the host ----------------------------------

TEST(Templates, FloorDivisionAndModuloMatchTheIr) {
  for (int64_t a = -40; a <= 40; ++a) {
    for (int64_t b = -9; b <= 9; ++b) {
      if (b == 0) continue;
      ASSERT_EQ(adjoint::floor_div(a, b), ir::floor_div(a, b)) << a << " / " << b;
      ASSERT_EQ(adjoint::floor_mod(a, b), ir::floor_mod(a, b)) << a << " % " << b;
      ASSERT_EQ(adjoint::floor_div(static_cast<int>(a), static_cast<int>(b)),
                ir::floor_div(a, b));
    }
  }
}

TEST(Templates, BFloat16RoundingMatchesTheIr) {
  std::mt19937 rng(2);
  std::uniform_int_distribution<uint32_t> bits32;
  std::vector<uint32_t> cases = {0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x00008000u,
                                 0x80000001u, 0x7f800000u, 0x7fc00000u, 0xffc00000u,
                                 0x7f800001u, 0xff812345u, 0x7fffffffu, 0xffffffffu};
  for (int i = 0; i < 100000; ++i) cases.push_back(bits32(rng));
  for (uint32_t b : cases) {
    float f;
    std::memcpy(&f, &b, sizeof f);
    uint16_t device = adjoint::bfloat16_bits_from_float_bits(b);
    ASSERT_EQ(device, ir::float_to_bfloat16_bits(f)) << std::hex << b;
    if (std::isnan(f)) ASSERT_EQ(device, 0x7fffu) << std::hex << b;  // cvt.rn.bf16.f32's NaN
  }
}

TEST(Templates, HalfRoundingMatchesTheIr) {
  // float -> binary16 (the host side of from_float<half>; the device uses cvt.rn.f16.f32).
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits32;
  std::vector<uint32_t> cases = {0x00000000u, 0x80000000u, 0x33000000u, 0x33000001u, 0x337fffffu,
                                 0x387fc000u, 0x387fe000u, 0x38800000u, 0x477fefffu, 0x477ff000u,
                                 0x3f801000u, 0x3f803000u, 0x7f800000u, 0xff800000u, 0x7fc00000u};
  for (int i = 0; i < 100000; ++i) cases.push_back(bits32(rng));
  for (uint32_t e = 100; e < 145; ++e) {  // every exponent around the binary16 range, with ties
    for (uint32_t m : {0x0u, 0x1000u, 0x1001u, 0x2000u, 0x3000u, 0x7fffffu}) {
      cases.push_back((e << 23) | m);
      cases.push_back(0x80000000u | (e << 23) | m);
    }
  }
  for (uint32_t b : cases) {
    float f;
    std::memcpy(&f, &b, sizeof f);
    ASSERT_EQ(adjoint::half_bits_from_float_bits(b), ir::float_to_half_bits(f)) << std::hex << b;
  }
  // binary16 -> float, every value.
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    uint32_t bits = adjoint::float_bits_from_half_bits(static_cast<uint16_t>(h));
    float f;
    std::memcpy(&f, &bits, sizeof f);
    float expected = ir::half_bits_to_float(static_cast<uint16_t>(h));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
    } else {
      ASSERT_EQ(f, expected) << std::hex << h;
      ASSERT_EQ(std::signbit(f), std::signbit(expected)) << std::hex << h;
    }
  }
}

// --- the emitter ------------------------------------------------------------------------------

/// The passes that shape what the emitter sees (no scatter strategy), then kernel `kernel`.
ir::Program prepared(const ir::Program& p) {
  return narrow_index_math(derive_grid(simplify(p)));
}
std::string emit(const ir::Program& p, size_t kernel = 0) {
  return emit_cuda_kernel(prepared(p), kernel, "entry").source;
}

bool contains(const std::string& text, const std::string& piece) {
  return text.find(piece) != std::string::npos;
}

TEST(CudaEmitter, UsesTheIndexWidthNarrowIndexMathDecided) {
  ir::ProgramBuilder b("p");
  ir::Tensor a = b.input("a", DType::kF32, {8});
  ir::Tensor out = b.output("out", DType::kF32, {8});
  Var i("i");
  b.kernel("k", {ir::compute(out, ir::over(out, {i}), ir::load(a, {i}) * 2.0)});
  std::vector<IndexWidth> widths;
  ir::Program p = narrow_index_math_recording(derive_grid(std::move(b).build()), widths);
  ASSERT_EQ(widths, std::vector<IndexWidth>{IndexWidth::k32});
  EXPECT_TRUE(contains(emit_cuda_kernel(p, 0, "e").source, "32-bit index math"));
  EmitOptions wide;
  wide.index_width = IndexWidth::k64;  // the decision is taken, not derived again
  EXPECT_TRUE(contains(emit_cuda_kernel(p, 0, "e", wide).source, "64-bit index math"));
}

TEST(CudaEmitter, SignatureFollowsTheProgramsTensorOrder) {
  ir::ProgramBuilder b("p");
  ir::Tensor a = b.input("a", DType::kF16, {8});
  ir::Tensor unused = b.input("unused", DType::kF32, {8});
  ir::Tensor bias = b.input("bias", DType::kBF16, {8});
  ir::Tensor out = b.output("out", DType::kF32, {8});
  Var i("i");
  b.kernel("k", {ir::compute(out, ir::over(out, {i}),
                             ir::cast(DType::kF32, ir::load(a, {i}) * ir::load(a, {i})) +
                                 ir::cast(DType::kF32, ir::load(bias, {i})))});
  CompiledKernel k = emit_cuda_kernel(prepared(std::move(b).build()), 0, "my_entry");
  EXPECT_EQ(k.params, (std::vector<std::string>{"a", "bias", "out"}));
  EXPECT_TRUE(contains(k.source,
                       "extern \"C\" __global__ void __launch_bounds__(256)\n"
                       "my_entry(const adjoint::half* __restrict__ a,\n"
                       "    const adjoint::bfloat16* __restrict__ bias,\n"
                       "    float* __restrict__ out) {"))
      << k.source;
  // a * a in f16: computed in float and rounded to f16; the load is shared.
  EXPECT_TRUE(contains(k.source, "const float a_value = adjoint::to_float(a[i]);")) << k.source;
  EXPECT_TRUE(contains(k.source, "adjoint::round_to_half(a_value * a_value)")) << k.source;
  EXPECT_FALSE(k.uses_atomics);
  (void)unused;
}

TEST(CudaEmitter, FloorDivisionOnlyWhereOperandsMayBeNegative) {
  ir::ProgramBuilder b("p");
  ir::Tensor out = b.output("out", DType::kF32, {16});
  Var i("i");
  b.kernel("k", {ir::compute(out, ir::over(out, {i}),
                             ir::cast(DType::kF32, i / 4 + (i - 8) / 4 + (i - 8) % 3))});
  std::string s = emit(std::move(b).build());
  EXPECT_TRUE(contains(s, "(i / 4)")) << s;
  EXPECT_TRUE(contains(s, "adjoint::floor_div(")) << s;
  EXPECT_TRUE(contains(s, "adjoint::floor_mod(")) << s;
}

TEST(CudaEmitter, LoadsThatMayBeOutOfBoundsStayInsideTheirBranch) {
  ir::ProgramBuilder b("p");
  ir::Tensor x = b.input("x", DType::kF32, {16});
  ir::Tensor out = b.output("out", DType::kF32, {16});
  Var i("i");
  Expr previous = ir::load(x, {i - 1});  // out of bounds at i == 0
  b.kernel("k",
           {ir::compute(out, ir::over(out, {i}),
                        ir::select(i > 0, previous * previous, ir::constant(DType::kF32, 0.0)))});
  std::string s = emit(std::move(b).build());
  size_t branch = s.find("if (i > 0) {");
  size_t load = s.find("x[i - 1]");
  ASSERT_NE(branch, std::string::npos) << s;
  ASSERT_NE(load, std::string::npos) << s;
  EXPECT_LT(branch, load) << "the load must only run when i > 0:\n" << s;
}

TEST(CudaEmitter, InBoundsLoadsSharedByBothBranchesAreHoisted) {
  ir::ProgramBuilder b("p");
  ir::Tensor x = b.input("x", DType::kF32, {16});
  ir::Tensor out = b.output("out", DType::kF32, {16});
  Var i("i");
  Expr v = ir::load(x, {i});
  b.kernel("k", {ir::compute(out, ir::over(out, {i}),
                             ir::select(v > ir::constant(DType::kF32, 0.0),
                                        v * ir::constant(DType::kF32, 2.0), -v))});
  std::string s = emit(std::move(b).build());
  EXPECT_TRUE(contains(s, "const float x_value = x[i];")) << s;
  EXPECT_TRUE(contains(s, "out[i] = (x_value > 0.0f) ? (x_value * 2.0f) : (-x_value);")) << s;
}

TEST(CudaEmitter, ReductionsAreSerialLoopsInTheirDtype) {
  ir::ProgramBuilder b("p");
  ir::Tensor x = b.input("x", DType::kBF16, {4, 32});
  ir::Tensor total = b.output("total", DType::kBF16, {4});
  ir::Tensor top = b.output("top", DType::kF64, {4});
  Var i("i"), k("k"), j("j"), l("l");
  b.kernel("sum",
           {ir::compute(total, ir::over(total, {i}),
                        ir::sum({ir::range(k, Expr(32))}, ir::load(x, {i, k}), DType::kBF16))});
  b.kernel("max",
           {ir::compute(top, ir::over(top, {j}),
                        ir::maximum({ir::range(l, j, Expr(32) - j)},
                                    ir::cast(DType::kF64, ir::load(x, {j, l})), DType::kF64))});
  ir::Program p = std::move(b).build();
  std::string sum = emit(p, 0);
  EXPECT_TRUE(contains(sum,
                       "float acc = 0.0f;\n  for (int k = 0; k < 32; ++k) {\n    acc += "
                       "adjoint::to_float(x[i * 32 + k]);"))
      << sum;
  EXPECT_TRUE(contains(
      sum, "total[i] = adjoint::from_float<adjoint::bfloat16>(adjoint::round_to_bfloat16(acc));"))
      << sum;
  std::string max = emit(p, 1);
  EXPECT_TRUE(contains(max, "double acc = __longlong_as_double(0xfff0000000000000LL);")) << max;
  EXPECT_TRUE(contains(max, "for (int l = j; l < 32; ++l) {")) << max;
  EXPECT_TRUE(contains(max, "acc = fmax(acc, (double)adjoint::to_float(x[j * 32 + l]));")) << max;
}

TEST(CudaEmitter, LargeTensorsUse64BitIndexMath) {
  ir::ProgramBuilder b("p");
  ir::Tensor x = b.input("x", DType::kF16, {3, int64_t{1} << 30});
  ir::Tensor out = b.output("out", DType::kF16, {3, int64_t{1} << 30});
  Var i("i"), j("j");
  b.kernel("k", {ir::compute(out, ir::over(out, {i, j}), ir::load(x, {i, j}))});
  std::string s = emit(std::move(b).build());
  // 8 points of j per thread: 402653184 groups, more than 2^20 blocks cover, so a grid-stride
  // loop; one 16-byte load and store per group.
  EXPECT_TRUE(contains(
      s, "for (long long linear = (long long)blockIdx.x * 256 + threadIdx.x; linear < 402653184;"))
      << s;
  EXPECT_TRUE(contains(s, "const long long j_base = linear % 134217728 * 8;")) << s;
  EXPECT_TRUE(contains(s, "adjoint::store_elements<16>(&out[i * 1073741824 + j_base], ")) << s;
  EXPECT_TRUE(contains(s, "64-bit index math")) << s;
}

TEST(CudaEmitter, ScattersAddAtomicallyUnderTheirCondition) {
  ir::ProgramBuilder b("p");
  ir::Tensor x = b.input("x", DType::kF32, {16});
  ir::Tensor index = b.input("index", DType::kI32, {16});
  ir::Tensor out = b.output("out", DType::kF32, {4});
  Var i("i");
  Expr where = ir::cast(DType::kI64, ir::load(index, {i}));
  b.kernel("k", {ir::scatter_add(out, {ir::min(ir::max(where, 0), 3)}, ir::load(x, {i}),
                                 ir::over(x, {i}), DType::kF32, where >= 0)});
  CompiledKernel k = emit_cuda_kernel(prepared(std::move(b).build()), 0, "e");
  EXPECT_TRUE(k.uses_atomics);
  EXPECT_TRUE(contains(k.source, "#include \"adjoint_atomics.cuh\"")) << k.source;
  size_t guard = k.source.find("if (index_value >= 0) {"),
         add = k.source.find("adjoint::atomic_add(&out[");
  ASSERT_NE(guard, std::string::npos) << k.source;
  EXPECT_GT(add, guard) << k.source;
}

// --- lower() ----------------------------------------------------------------------------------

ir::Program upsample_like() {
  ir::ProgramBuilder b("my-op.v2");
  ir::Tensor go = b.input("grad_output", DType::kBF16, {2, 9});
  ir::Tensor gi = b.output("grad_input", DType::kBF16, {2, 4});
  Var n("n"), o("o");
  Expr source = ir::min(ir::cast(DType::kI64, ir::floor(ir::cast(DType::kF32, o) *
                                                        ir::constant(DType::kF32, 4.0 / 9.0))),
                        Expr(3));
  b.kernel("scatter", {ir::scatter_add(gi, {n, source}, ir::cast(DType::kF32, ir::load(go, {n, o})),
                                       ir::over(go, {n, o}), DType::kF32)});
  return std::move(b).build();
}

ir::Program data_dependent_bf16() {
  ir::ProgramBuilder b("by_index");
  ir::Tensor x = b.input("x", DType::kF32, {16});
  ir::Tensor index = b.input("index", DType::kI64, {16});
  ir::Tensor out = b.output("out", DType::kBF16, {4});
  Var i("i"), j("j");
  Expr where = ir::min(ir::max(ir::load(index, {i}), 0), 3);
  Expr where2 = ir::min(ir::max(ir::load(index, {j}), 0), 3);
  b.kernel("first",
           {ir::scatter_add(out, {where}, ir::load(x, {i}), ir::over(x, {i}), DType::kF32)});
  b.kernel("second",
           {ir::scatter_add(out, {where2}, ir::load(x, {j}), ir::over(x, {j}), DType::kF32)});
  return std::move(b).build();
}

TEST(Lower, RecordsTheIrAfterEachPass) {
  CompiledProgram quiet = lower(upsample_like(), LowerOptions{});
  EXPECT_TRUE(quiet.pass_dump.empty());
  LowerOptions options;
  options.record_passes = true;
  CompiledProgram p = lower(upsample_like(), options);
  const std::string& d = p.pass_dump;
  size_t at = 0;
  for (const char* pass :
       {"input", "after simplify", "after lower_scatter_to_gather", "after simplify",
        "after lower_scatter_to_atomics", "after derive_grid", "after narrow_index_math"}) {
    size_t next = d.find(std::string("// ----- ") + pass, at);
    ASSERT_NE(next, std::string::npos) << pass << "\n" << d;
    at = next + 1;
  }
  EXPECT_TRUE(contains(d, "// ----- after lower_scatter_to_atomics\n(unchanged)\n")) << d;
  EXPECT_TRUE(contains(d, "compute grad_input[n, i1] = bf16(sum<f32>(o in [")) << d;
}

TEST(Lower, GatherProgramsNeedNoZeroingAndAreDeterministic) {
  CompiledProgram p = lower(upsample_like(), LowerOptions{});
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_TRUE(p.deterministic);
  EXPECT_TRUE(p.kernels[0].zero_before.empty());
  EXPECT_EQ(p.kernels[0].entry, "my_op_v2_scatter");
  EXPECT_EQ(p.kernels[0].params, (std::vector<std::string>{"grad_output", "grad_input"}));
  EXPECT_EQ(p.kernels[0].launch.grid[0], 1u);
  EXPECT_EQ(p.kernels[0].launch.block[0], 256u);
  ASSERT_EQ(p.buffers.size(), 2u);
  EXPECT_EQ(p.buffers[1].bytes, 2 * 4 * 2);
}

TEST(Lower, AtomicProgramsZeroTheirAccumulatorOnceAndSayTheyAreNotDeterministic) {
  CompiledProgram p = lower(data_dependent_bf16(), LowerOptions{});
  EXPECT_FALSE(p.deterministic);
  ASSERT_EQ(p.kernels.size(), 3u);
  EXPECT_EQ(p.kernels[0].zero_before, (std::vector<std::string>{"out_accumulator"}));
  EXPECT_TRUE(p.kernels[1].zero_before.empty()) << "zeroed once, before the first scatter";
  EXPECT_TRUE(p.kernels[0].uses_atomics && p.kernels[1].uses_atomics);
  EXPECT_FALSE(p.kernels[2].uses_atomics);
  EXPECT_EQ(p.kernels[2].entry, "by_index_out_convert");
  ASSERT_EQ(p.buffers.size(), 4u);
  EXPECT_EQ(p.buffers[3].name, "out_accumulator");
  EXPECT_EQ(p.buffers[3].role, ir::TensorRole::kTemporary);
  EXPECT_EQ(p.buffers[3].bytes, 4 * 4);
}

TEST(Lower, ExplicitGridsThatDoNotCoverTheirDomainAreErrors) {
  ir::Program p = upsample_like();
  ir::ProgramBuilder b("rows");
  ir::Tensor x = b.input("x", DType::kF32, {8, 512});
  ir::Tensor y = b.output("y", DType::kF32, {8, 512});
  Var r("r"), c("c");
  ir::GridConfig grid;
  grid.is_set = true;
  grid.bindings = {ir::AxisBinding::kBlock, ir::AxisBinding::kThread};
  grid.block_size = 128;
  b.kernel("row_kernel", {ir::compute(y, ir::over(y, {r, c}), ir::load(x, {r, c}))}, grid);
  try {
    lower(std::move(b).build(), LowerOptions{});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "kernel 'row_kernel'")) << e.what();
  }
}

/// The 224x224 bf16 upsample backward of the benchmark, lowered with `options`.
CompiledKernel bench_upsample_kernel(const LowerOptions& options) {
  CompiledProgram p = lower(ops::parse_specialization("upsample_nearest2d_backward dtype=bf16 "
                                                      "input_size=32,3,224,224 output_size=448,448")
                                .build_program(),
                            options);
  EXPECT_EQ(p.kernels.size(), 1u);
  return p.kernels.at(0);
}

TEST(Lower, TuningKnobsChangeTheEmittedKernel) {
  LowerOptions plain_options;  // streaming hints are on by default: switch them off here
  plain_options.streaming_loads = plain_options.streaming_stores = false;
  const CompiledKernel plain = bench_upsample_kernel(plain_options);
  EXPECT_TRUE(contains(plain.source, "__launch_bounds__(256)")) << plain.source;
  EXPECT_TRUE(contains(plain.source, "adjoint::bfloat16 grad_input_values[8];")) << plain.source;
  EXPECT_TRUE(contains(plain.source, "adjoint::load_elements<16>(")) << plain.source;
  EXPECT_TRUE(contains(plain.source, "adjoint::store_elements<16>(")) << plain.source;
  EXPECT_FALSE(contains(plain.source, "_streaming")) << plain.source;
  EXPECT_EQ(plain.launch.block[0], 256u);

  LowerOptions block = plain_options;
  block.block_size = 512;
  const CompiledKernel wide_blocks = bench_upsample_kernel(block);
  EXPECT_TRUE(contains(wide_blocks.source, "__launch_bounds__(512)")) << wide_blocks.source;
  EXPECT_EQ(wide_blocks.launch.block[0], 512u);
  EXPECT_EQ(wide_blocks.launch.grid[0], (plain.launch.grid[0] + 1) / 2);

  LowerOptions two_vectors = plain_options;
  two_vectors.vector_bytes = 32;  // 16 bf16 per thread: a span of 32 per row, two stores
  const CompiledKernel doubled = bench_upsample_kernel(two_vectors);
  EXPECT_TRUE(contains(doubled.source, "adjoint::bfloat16 grad_input_values[16];")) << doubled.source;
  EXPECT_TRUE(contains(doubled.source, "_span[32];")) << doubled.source;
  EXPECT_TRUE(contains(doubled.source, "adjoint::store_elements<16>(")) << doubled.source;

  LowerOptions half_vector = plain_options;
  half_vector.vector_bytes = 8;
  const CompiledKernel halved = bench_upsample_kernel(half_vector);
  EXPECT_TRUE(contains(halved.source, "adjoint::bfloat16 grad_input_values[4];")) << halved.source;
  EXPECT_TRUE(contains(halved.source, "adjoint::store_elements<8>(")) << halved.source;

  LowerOptions streaming;  // the default
  const CompiledKernel hinted = bench_upsample_kernel(streaming);
  EXPECT_TRUE(contains(hinted.source, "adjoint::load_elements_streaming<16>(")) << hinted.source;
  EXPECT_TRUE(contains(hinted.source, "adjoint::store_elements_streaming<16>(")) << hinted.source;
  EXPECT_FALSE(contains(hinted.source, "adjoint::load_elements<")) << hinted.source;
  EXPECT_FALSE(contains(hinted.source, "adjoint::store_elements<")) << hinted.source;

  LowerOptions loads_only;  // each hint switches on its own
  loads_only.streaming_stores = false;
  const CompiledKernel hinted_loads = bench_upsample_kernel(loads_only);
  EXPECT_TRUE(contains(hinted_loads.source, "adjoint::load_elements_streaming<16>("));
  EXPECT_TRUE(contains(hinted_loads.source, "adjoint::store_elements<16>("));
  EXPECT_TRUE(contains(hinted_loads.source, "evict first) on span loads."));
  LowerOptions stores_only;
  stores_only.streaming_loads = false;
  const CompiledKernel hinted_stores = bench_upsample_kernel(stores_only);
  EXPECT_TRUE(contains(hinted_stores.source, "adjoint::load_elements<16>("));
  EXPECT_TRUE(contains(hinted_stores.source, "adjoint::store_elements_streaming<16>("));
  EXPECT_TRUE(contains(hinted_stores.source, "evict first) on group stores."));
}

TEST(Lower, BroadcastSpansKeepTheDefaultCaching) {
  // mhc_dx reads x once per point (streamed) but phi and gamma, indexed without (b, s), are
  // read by every token: their spans keep the default caching.
  CompiledProgram p = lower(ops::parse_specialization("mhc_pre_backward dtype=bf16 batch=1 "
                                                      "seq=64 n=4 dim=256")
                                .build_program(),
                            LowerOptions{});
  const CompiledKernel* dx = nullptr;
  for (const CompiledKernel& k : p.kernels) {
    if (k.entry == "mhc_pre_backward_mhc_dx") dx = &k;
  }
  ASSERT_NE(dx, nullptr);
  auto span_load = [&](const std::string& span) {  // the line loading `span`
    size_t at = dx->source.find("(" + span + ", &");
    if (at == std::string::npos) return std::string();
    size_t start = dx->source.rfind('\n', at) + 1;
    return dx->source.substr(start, dx->source.find('\n', at) - start);
  };
  EXPECT_TRUE(contains(span_load("x_span"), "load_elements_streaming<")) << dx->source;
  EXPECT_TRUE(contains(span_load("phi_span"), "adjoint::load_elements<")) << dx->source;
  EXPECT_TRUE(contains(span_load("gamma_span"), "adjoint::load_elements<")) << dx->source;
}

TEST(Lower, InvalidTuningOptionsAreErrors) {
  LowerOptions options;
  options.block_size = 48;
  try {
    lower(upsample_like(), options);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_TRUE(contains(e.what(), "block_size: expected")) << e.what();
  }
  options.block_size = 0;
  options.vector_bytes = 12;
  EXPECT_THROW(lower(upsample_like(), options), Error);
}

TEST(Lower, EveryRegisteredExampleLowers) {
  int lowered = 0;
  for (const ops::OpDefinition& op : ops::all_ops()) {
    for (const std::string& example : op.examples) {
      CompiledProgram p = lower(ops::parse_specialization(example).build_program(), LowerOptions{});
      EXPECT_FALSE(p.kernels.empty()) << example;
      for (const CompiledKernel& k : p.kernels) {
        EXPECT_TRUE(contains(k.source, "extern \"C\" __global__ void __launch_bounds__("))
            << example;
      }
      ++lowered;
    }
  }
  EXPECT_GT(lowered, 0);
}

}  // namespace
}  // namespace adjoint::compiler
