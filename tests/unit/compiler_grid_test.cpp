// Tests of grid derivation, the coverage proof (each condition has a configuration that trips
// it, including the seed reports' bugs) and the index width decision.
#include <gtest/gtest.h>

#include "compiler/derive_grid.h"
#include "compiler/index_width.h"
#include "compiler/launch_geometry.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "ir/printer.h"

namespace adjoint::compiler {
namespace {

using ir::AxisBinding;
using ir::DType;
using ir::Expr;
using ir::Var;

/// out = in + 1 over the given shape, with an optional explicit grid.
ir::Program elementwise(std::vector<int64_t> shape, ir::GridConfig grid = {},
                        std::vector<int64_t> strides = {}) {
  ir::ProgramBuilder b("elementwise");
  ir::Tensor in = b.input("in", DType::kF32, shape, strides);
  ir::Tensor out = b.output("out", DType::kF32, shape, strides);
  std::vector<Var> vars;
  std::vector<Expr> idx;
  for (size_t d = 0; d < shape.size(); ++d) {
    vars.emplace_back("d" + std::to_string(d));
    idx.push_back(vars.back());
  }
  b.kernel(
      "add_one",
      {ir::compute(out, ir::over(out, vars), ir::load(in, idx) + ir::constant(DType::kF32, 1.0))},
      grid);
  return std::move(b).build();
}

ir::GridConfig config(std::vector<AxisBinding> bindings, int block, int vector_width = 1) {
  ir::GridConfig g;
  g.is_set = true;
  g.bindings = std::move(bindings);
  g.block_size = block;
  g.vector_width = vector_width;
  return g;
}

LaunchDims dims(uint32_t gx, uint32_t gy, uint32_t gz, uint32_t block) {
  LaunchDims d;
  d.grid[0] = gx;
  d.grid[1] = gy;
  d.grid[2] = gz;
  d.block[0] = block;
  return d;
}

/// check_grid_coverage throws an Error that names the kernel and mentions `reason`.
void expect_not_covered(const std::vector<int64_t>& extents, const ir::GridConfig& g,
                        const LaunchDims& d, const std::string& reason) {
  try {
    check_grid_coverage("mhc_backward_dx", extents, g, d);
    ADD_FAILURE() << "expected the coverage proof to fail: " << reason;
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("'mhc_backward_dx'"), std::string::npos) << what;
    EXPECT_NE(what.find(reason), std::string::npos) << what;
  }
}

TEST(DeriveGrid, DefaultsToALinearGridStrideLoopOf256Threads) {
  ir::Program p = derive_grid(elementwise({3, 1000}));
  const ir::GridConfig& g = p.kernels[0].grid;
  EXPECT_TRUE(g.is_set);
  EXPECT_EQ(g.bindings, (std::vector<AxisBinding>{AxisBinding::kLinear, AxisBinding::kLinear}));
  EXPECT_EQ(g.block_size, kDefaultBlockSize);
  LaunchDims d = launch_dims(p.kernels[0]);
  EXPECT_EQ(d.grid[0], 12u);  // ceil(3000 / 256)
  EXPECT_EQ(d.block[0], 256u);
  EXPECT_EQ(derive_grid(p).kernels[0].grid.block_size, 256) << "idempotent";
}

TEST(DeriveGrid, HugeDomainsLoopInsteadOfLaunchingMoreBlocks) {
  ir::Program p = derive_grid(elementwise({int64_t{1} << 32}));
  EXPECT_EQ(launch_dims(p.kernels[0]).grid[0], static_cast<uint32_t>(kMaxLinearBlocks));
}

TEST(DeriveGrid, TunedBlockSizesApplyToDerivedGridsOnly) {
  DeriveGridOptions options;
  options.block_size = 128;
  ir::Program p = derive_grid(elementwise({3, 1000}), options);
  EXPECT_EQ(p.kernels[0].grid.block_size, 128);
  LaunchDims d = launch_dims(p.kernels[0]);
  EXPECT_EQ(d.block[0], 128u);
  EXPECT_EQ(d.grid[0], 24u);  // ceil(3000 / 128)
  options.block_size = 1024;
  EXPECT_EQ(launch_dims(derive_grid(elementwise({3, 1000}), options).kernels[0]).grid[0], 3u);
  // An explicit configuration keeps its block; a one-point domain keeps one warp.
  ir::Program explicit_grid = derive_grid(
      elementwise({8, 512}, config({AxisBinding::kBlock, AxisBinding::kThread}, 512)), options);
  EXPECT_EQ(explicit_grid.kernels[0].grid.block_size, 512);
  EXPECT_EQ(derive_grid(elementwise({}), options).kernels[0].grid.block_size, 32);
}

TEST(DeriveGrid, TuningOptionsOutsideTheirRangesAreRejected) {
  auto expect_rejected = [](DeriveGridOptions options, const std::string& field,
                            const std::string& given) {
    try {
      derive_grid(elementwise({3, 1000}), options);
      ADD_FAILURE() << field << " " << given << " should be rejected";
    } catch (const Error& e) {
      std::string what = e.what();
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << what;
      EXPECT_NE(what.find(field + ": expected"), std::string::npos) << what;
      EXPECT_NE(what.find("got " + given), std::string::npos) << what;
    }
  };
  expect_rejected({100, 0}, "block_size", "100");   // not a multiple of 32
  expect_rejected({16, 0}, "block_size", "16");     // below a warp
  expect_rejected({2048, 0}, "block_size", "2048");  // above the hardware limit
  expect_rejected({-32, 0}, "block_size", "-32");
  expect_rejected({0, 4}, "vector_bytes", "4");
  expect_rejected({0, 64}, "vector_bytes", "64");
  // Valid knobs are taken, not ignored.
  ir::Program small = derive_grid(elementwise({3, 1000}), {32, 8});
  EXPECT_EQ(launch_dims(small.kernels[0]).block[0], 32u);
  ir::Program large = derive_grid(elementwise({3, 1000}), {1024, 32});
  EXPECT_EQ(launch_dims(large.kernels[0]).block[0], 1024u);
}

/// out[d] = sum over k < rows of in[k, d]: a column sum, each point a serial reduction.
ir::Program column_sum(int64_t rows, int64_t columns) {
  ir::ProgramBuilder b("column_sum");
  ir::Tensor in = b.input("in", DType::kF32, {rows, columns});
  ir::Tensor out = b.output("out", DType::kF32, {columns});
  Var d("d"), k("k");
  b.kernel("sum_rows", {ir::compute(out, ir::over(out, {d}),
                                    ir::sum({ir::range(k, Expr(rows))}, ir::load(in, {k, d}),
                                            DType::kF32))});
  return std::move(b).build();
}

/// Kernels whose points each reduce over at least reducing_min_trips (64) iterations keep
/// reducing_min_groups (2^17) threads before they vectorize; shorter reductions and plain
/// kernels keep kMinVectorGroups (2^15).
TEST(DeriveGrid, LongSerialReductionsKeepMoreThreadsBeforeVectorGroups) {
  auto width = [](const ir::Program& p, DeriveGridOptions options = {}) {
    return derive_grid(p, options).kernels[0].grid.vector_width;
  };
  EXPECT_EQ(width(column_sum(80, 131072)), 1);        // 2^17 points: one point a thread
  EXPECT_EQ(width(column_sum(80, 1 << 19)), 4);       // 2^17 groups of 4
  EXPECT_EQ(width(column_sum(63, 131072)), 4);        // a short reduction: 2^15 groups of 4
  EXPECT_EQ(width(elementwise({131072})), 4);
  DeriveGridOptions before;
  before.reducing_min_groups = kMinVectorGroups;      // ADJOINT_TUNE_REDUCING_MIN_GROUPS=32768
  EXPECT_EQ(width(column_sum(80, 131072), before), 4);
}

TEST(DeriveGrid, EmptyDomainsLaunchNothing) {
  ir::Program p = derive_grid(elementwise({4, 0}));
  EXPECT_EQ(launch_dims(p.kernels[0]).grid[0], 0u);
}

TEST(DeriveGrid, ExplicitConfigurationsAreKeptAndChecked) {
  ir::Program ok =
      derive_grid(elementwise({8, 512}, config({AxisBinding::kBlock, AxisBinding::kThread}, 512)));
  LaunchDims d = launch_dims(ok.kernels[0]);
  EXPECT_EQ(d.grid[0], 8u);
  EXPECT_EQ(d.block[0], 512u);
  // The mHC seed bug: a block sized from the wrong extent drops most of each row.
  try {
    derive_grid(elementwise({8, 512}, config({AxisBinding::kBlock, AxisBinding::kThread}, 128)));
    ADD_FAILURE() << "a 128-thread block cannot run a 512-point thread axis";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kernel 'add_one'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("384 points per block would never run"), std::string::npos)
        << e.what();
  }
}

TEST(CoverageProof, TripsOnABlockAxisWhoseGridIsNotItsExtent) {
  // The other mHC seed bug: grid = cdiv(n, BLOCK) where one block per row (n) was needed.
  auto g = config({AxisBinding::kBlock, AxisBinding::kThread}, 256);
  expect_not_covered({1000, 256}, g, dims(4, 1, 1, 256),
                     "grid.x is 4 but block axis 0 has extent 1000");
  check_grid_coverage("mhc_backward_dx", {1000, 256}, g, dims(1000, 1, 1, 256));
}

TEST(CoverageProof, TripsOnThreadAxesThatDoNotFitOrSplitTheBlock) {
  expect_not_covered({4, 300}, config({AxisBinding::kBlock, AxisBinding::kThread}, 256),
                     dims(4, 1, 1, 256), "thread axes hold 300 points");
  expect_not_covered({64, 3}, config({AxisBinding::kLinear, AxisBinding::kThread}, 256),
                     dims(1, 1, 1, 256), "cannot be split into lanes");
  check_grid_coverage("k", {64, 4}, config({AxisBinding::kLinear, AxisBinding::kThread}, 256),
                      dims(1, 1, 1, 256));
}

TEST(CoverageProof, TripsOnDuplicateBlocksEmptyGridsAndMismatchedBlocks) {
  auto linear = config({AxisBinding::kLinear}, 128);
  expect_not_covered({1000}, linear, dims(8, 2, 1, 128), "grid.y is 2 though no axis uses it");
  expect_not_covered({1000}, linear, dims(0, 1, 1, 128), "grid.x is 0");
  expect_not_covered({1000}, linear, dims(8, 1, 1, 256), "blockDim is (256, 1, 1)");
  expect_not_covered({1000}, config({AxisBinding::kLinear}, 2048), dims(1, 1, 1, 2048),
                     "outside [1, 1024]");
  expect_not_covered({0}, linear, dims(1, 1, 1, 128), "domain is empty but the grid launches");
  check_grid_coverage("k", {1000}, linear,
                      dims(1, 1, 1, 128));  // a grid-stride loop: any grid >= 1
}

TEST(CoverageProof, TripsOnBadBindingsAndVectorWidths) {
  expect_not_covered({4, 4}, config({AxisBinding::kLinear}, 32), dims(1, 1, 1, 32),
                     "1 axis bindings for a domain of rank 2");
  expect_not_covered({4, 6}, config({AxisBinding::kLinear, AxisBinding::kLinear}, 32, 4),
                     dims(1, 1, 1, 32), "not a multiple of the vector width 4");
  expect_not_covered({4}, config({AxisBinding::kSerial}, 32, 2), dims(1, 1, 1, 32),
                     "needs a linear axis");
  expect_not_covered(
      {2, 2, 2, 2},
      config({AxisBinding::kLinear, AxisBinding::kBlock, AxisBinding::kBlock, AxisBinding::kBlock},
             32),
      dims(1, 2, 2, 32), "3 block axes but only 2 grid dimensions are free");
  expect_not_covered({2, 70000}, config({AxisBinding::kLinear, AxisBinding::kBlock}, 32),
                     dims(1, 70000, 1, 32), "more than grid.y allows");
}

TEST(LaunchGeometry, LinearAxesAreDecodedInnermostByTheWrittenTensorsStrides) {
  std::vector<int64_t> shape = {2, 8, 5, 6};
  ir::Program p = derive_grid(elementwise(shape, {}, ir::channels_last_strides(shape)));
  GridMapping m = grid_mapping(p.kernels[0]);
  EXPECT_EQ(m.linear_axes, (std::vector<int>{0, 2, 3, 1})) << "channels (stride 1) innermost";
  ir::Program q = derive_grid(elementwise(shape));
  EXPECT_EQ(grid_mapping(q.kernels[0]).linear_axes, (std::vector<int>{0, 1, 2, 3}));
}

// --- index width ------------------------------------------------------------------------------

TEST(IndexWidth, SmallKernelsUse32BitIndexMath) {
  ir::Program p = derive_grid(elementwise({3, 1000}));
  EXPECT_EQ(kernel_index_width(p.kernels[0]), IndexWidth::k32);
  ir::Program n = narrow_index_math(p);
  EXPECT_EQ(ir::to_string(n.kernels[0].stages[0].value), "in[d0, d1] + 1.0f")
      << "bare variables stay";
}

TEST(IndexWidth, TensorsBeyondInt32Take64BitMath) {
  const int64_t just_fits = int64_t{1} << 30;  // offsets and the grid-stride loop fit
  const int64_t too_many =
      (int64_t{1} << 31);  // 2^31 elements: offset 2^31 - 1 fits, the loop does not
  EXPECT_EQ(kernel_index_width(derive_grid(elementwise({just_fits})).kernels[0]), IndexWidth::k32);
  EXPECT_EQ(kernel_index_width(derive_grid(elementwise({too_many})).kernels[0]), IndexWidth::k64);
  EXPECT_EQ(kernel_index_width(derive_grid(elementwise({3, int64_t{1} << 31})).kernels[0]),
            IndexWidth::k64);
  ir::Program big = derive_grid(elementwise({too_many + 1}));
  EXPECT_TRUE(
      narrow_index_math(big).kernels[0].stages[0].value.same_as(big.kernels[0].stages[0].value));
}

TEST(IndexWidth, ATensorOf2To31ElementsStillHas32BitOffsets) {
  // grad_output of 2^31 elements (offsets up to 2^31 - 1), iterated over a smaller domain.
  ir::ProgramBuilder b("half_size");
  ir::Tensor in = b.input("in", DType::kF32, {2, int64_t{1} << 30});
  ir::Tensor out = b.output("out", DType::kF32, {int64_t{1} << 30});
  ir::Tensor wider = b.input("wider", DType::kF32, {(int64_t{1} << 31) + 1});
  Var i("i");
  b.kernel("sum_halves", {ir::compute(out, ir::over(out, {i}),
                                      ir::load(in, {Expr(0), i}) + ir::load(in, {Expr(1), i}))});
  Var j("j");
  b.kernel("read_wider", {ir::compute(out, ir::over(out, {j}), ir::load(wider, {j}))});
  ir::Program p = derive_grid(std::move(b).build());
  EXPECT_EQ(kernel_index_width(p.kernels[0]), IndexWidth::k32);
  EXPECT_EQ(kernel_index_width(p.kernels[1]), IndexWidth::k64) << "2^31 + 1 elements";
}

TEST(IndexWidth, AReadTensorBeyondInt32AloneForces64Bits) {
  ir::ProgramBuilder b("strided_read");
  ir::Tensor in =
      b.input("in", DType::kF32, {4, 4}, {int64_t{1} << 30, 1});  // spans 3 * 2^30 + 4 elements
  ir::Tensor out = b.output("out", DType::kF32, {4, 4});
  Var i("i"), j("j");
  b.kernel("copy", {ir::compute(out, ir::over(out, {i, j}), ir::load(in, {i, j}))});
  ir::Program p = derive_grid(std::move(b).build());
  EXPECT_EQ(kernel_index_width(p.kernels[0]), IndexWidth::k64);
}

TEST(IndexWidth, ExpressionsThatMayNotFitStay64Bit) {
  ir::ProgramBuilder b("wide_math");
  ir::Tensor in = b.input("in", DType::kF32, {64});
  ir::Tensor out = b.output("out", DType::kF32, {64});
  Var i("i");
  Expr huge = ir::cast(DType::kF32, i * Expr(int64_t{1} << 40));
  Expr data_index = ir::cast(DType::kI64, ir::load(in, {i}));  // unbounded: data
  Expr safe = ir::select(data_index >= 0 && data_index < 64, data_index, Expr(0));
  b.kernel("k", {ir::compute(out, ir::over(out, {i}), huge + ir::load(in, {safe}))});
  ir::Program p = narrow_index_math(derive_grid(std::move(b).build()));
  EXPECT_EQ(
      ir::to_string(p.kernels[0].stages[0].value),
      "f32(i * 1099511627776) + in[select((i64(in[i]) >= 0) && (i64(in[i]) < 64), i64(in[i]), 0)]");
}

TEST(IndexWidth, ReduceBoundsAreNarrowedWhenTheyFit) {
  ir::ProgramBuilder b("sum_rows");
  ir::Tensor in = b.input("in", DType::kF32, {16, 32});
  ir::Tensor out = b.output("out", DType::kF32, {16});
  Var i("i"), k("k");
  b.kernel("k", {ir::compute(
                    out, ir::over(out, {i}),
                    ir::sum({ir::range(k, i, Expr(32) - i)}, ir::load(in, {i, k}), DType::kF32))});
  ir::Program p = narrow_index_math(derive_grid(std::move(b).build()));
  EXPECT_EQ(ir::to_string(p.kernels[0].stages[0].value),
            "sum<f32>(k in [i32(i), i32(i) + 32i32 - i32(i)) : in[i, k])");
}

}  // namespace
}  // namespace adjoint::compiler
