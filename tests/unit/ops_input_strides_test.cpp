// Tests of input tensors of any strides (ops/input_strides.h): the `<tensor>_strides`
// attributes of upsample_nearest and grid_sampler. A strided specialization, interpreted on a
// storage where the tensor's elements sit at the given strides (and NaN fills the gaps it must
// never read), gives bit for bit the gradients of the contiguous specialization on the same
// logical values. The canonical text leaves the attribute out when it is not given, and bad
// strides get an error naming the attribute.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/verifier.h"
#include "ops/input_strides.h"
#include "ops/registry.h"

namespace adjoint {
namespace {

ir::Program build(const std::string& spec) {
  ir::Program p = ops::parse_specialization(spec).build_program();
  ir::verify(p);
  return p;
}

/// The element offset of logical index `flat` (row-major over `shape`) under `strides`.
int64_t offset_of(int64_t flat, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& strides) {
  int64_t offset = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    offset += (flat % shape[d]) * strides[d];
    flat /= shape[d];
  }
  return offset;
}

/// Interprets `contiguous` and `strided` (the same op; some inputs strided in the second) on
/// the same logical values and expects equal outputs, bit for bit.
void expect_same_gradients(const std::string& contiguous, const std::string& strided,
                           bool grid_values = false) {
  ir::Program a = build(contiguous), b = build(strided);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  std::uniform_int_distribution<int> grid(-20, 20);
  ir::HostBuffers in_a, in_b;
  for (const ir::Tensor& t : a.inputs) {
    const ir::Tensor u = b.find_tensor(t->name);
    ASSERT_NE(u, nullptr) << t->name;
    int64_t count = 1;
    for (int64_t s : t->shape) count *= s;
    std::vector<double>& logical = in_a[t->name];
    std::vector<double>& storage = in_b[t->name];
    storage.assign(static_cast<size_t>(u->storage_elements()),
                   std::numeric_limits<double>::quiet_NaN());
    for (int64_t i = 0; i < count; ++i) {
      double v = grid_values && t->name == "grid" ? grid(rng) / 16.0 : value(rng);
      logical.push_back(v);
      storage[static_cast<size_t>(offset_of(i, u->shape, u->strides))] = v;
    }
  }
  ir::HostBuffers out_a = ir::interpret(a, in_a), out_b = ir::interpret(b, in_b);
  for (const ir::Tensor& t : a.outputs) {
    const std::vector<double>& x = out_a.at(t->name);
    const std::vector<double>& y = out_b.at(t->name);
    ASSERT_EQ(x.size(), y.size()) << t->name;
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_FALSE(std::isnan(y[i])) << strided << ": " << t->name << "[" << i << "] read a gap";
      ASSERT_EQ(x[i], y[i]) << strided << ": " << t->name << "[" << i << "]";
    }
  }
}

TEST(InputStrides, UpsampleReadsAPermutedOrSlicedGradOutputInPlace) {
  const std::string op = "upsample_nearest2d_backward dtype=f32 input_size=2,3,5,7 output_size=9,11";
  // Channels innermost (a permute), every other row (a slice of a taller tensor), and padded
  // rows (a slice of a wider one).
  expect_same_gradients(op, op + " grad_output_strides=297,1,33,3");
  expect_same_gradients(op, op + " grad_output_strides=594,198,22,1");
  expect_same_gradients(op, op + " grad_output_strides=448,149,16,1");
  const std::string exact = "_upsample_nearest_exact1d_backward dtype=bf16 input_size=3,2,13 "
                            "output_size=5";
  expect_same_gradients(exact, exact + " grad_output_strides=1,3,6");
}

TEST(InputStrides, GridSamplerReadsEveryInputInPlace) {
  const std::string op2 = "grid_sampler_2d_backward dtype=f64 input_size=2,3,5,6 output_size=4,7 "
                          "interpolation_mode=bilinear padding_mode=border align_corners=false";
  // grad_output channels-last, input with padded rows, grid with x and y planes apart.
  expect_same_gradients(op2,
                        op2 + " grad_output_strides=84,1,21,3 input_strides=120,40,8,1 "
                              "grid_strides=28,7,1,56",
                        true);
  const std::string bicubic = "grid_sampler_2d_backward dtype=f32 input_size=1,2,4,4 "
                              "output_size=3,3 interpolation_mode=bicubic padding_mode=reflection "
                              "align_corners=true";
  expect_same_gradients(bicubic, bicubic + " input_strides=32,1,8,2", true);
  const std::string op3 = "grid_sampler_3d_backward dtype=f32 input_size=1,2,3,4,5 "
                          "output_size=2,3,2 interpolation_mode=nearest padding_mode=zeros";
  expect_same_gradients(op3, op3 + " grid_strides=36,18,6,3,1 grad_output_strides=24,1,6,2,24",
                        true);
}

TEST(InputStrides, TheCanonicalTextShowsStridesOnlyWhenGiven) {
  const std::string op = "upsample_nearest2d_backward dtype=f32 input_size=1,2,3,4 output_size=6,8";
  std::string plain = ops::parse_specialization(op).to_string();
  EXPECT_EQ(plain.find("strides"), std::string::npos) << plain;
  std::string strided = ops::parse_specialization(op + " grad_output_strides=96,1,16,2").to_string();
  EXPECT_NE(strided.find(" grad_output_strides=96,1,16,2"), std::string::npos) << strided;
  EXPECT_EQ(ops::parse_specialization(strided).to_string(), strided);
}

void expect_error(const std::string& spec, const std::string& fragment) {
  try {
    build(spec);
    FAIL() << "accepted: " << spec;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("grad_output_strides"), std::string::npos) << e.what();
  }
}

TEST(InputStrides, BadStridesAreRefusedNamingTheAttribute) {
  const std::string op = "upsample_nearest2d_backward dtype=f32 input_size=1,2,3,4 output_size=6,8";
  expect_error(op + " grad_output_strides=48,24,4", "4 strides");
  expect_error(op + " grad_output_strides=48,24,-4,1", "strides >= 0");
  expect_error(op + " grad_output_strides=48,0,8,1", "overlaps itself");  // expand()ed C
  expect_error(op + " grad_output_strides=48,24,4,1", "overlaps itself");  // rows interleave
  expect_error(op + " grad_output_strides=1,1,1,1152921504606846976", "below 2^58");
  // A size-1 dimension may take any stride; an empty tensor has nothing to overlap.
  EXPECT_NO_THROW(build("upsample_nearest2d_backward dtype=f32 input_size=1,2,3,4 output_size=6,8 "
                        "grad_output_strides=0,48,8,1"));
  EXPECT_NO_THROW(build("upsample_nearest2d_backward dtype=f32 input_size=0,2,3,4 output_size=6,8 "
                        "grad_output_strides=0,0,0,0"));
}

TEST(InputStrides, OverlapDetection) {
  EXPECT_FALSE(ops::overlaps_itself({2, 3}, {3, 1}));
  EXPECT_FALSE(ops::overlaps_itself({2, 3}, {1, 2}));
  EXPECT_TRUE(ops::overlaps_itself({2, 3}, {1, 1}));
  EXPECT_TRUE(ops::overlaps_itself({4, 3}, {0, 1}));
  EXPECT_FALSE(ops::overlaps_itself({1, 3}, {0, 1}));
  EXPECT_FALSE(ops::overlaps_itself({0, 3}, {0, 0}));
  EXPECT_FALSE(ops::overlaps_itself({3, 2, 2}, {1, 6, 3}));
  EXPECT_TRUE(ops::overlaps_itself({3, 2, 2}, {1, 2, 3}));
}

}  // namespace
}  // namespace adjoint
