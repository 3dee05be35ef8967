// runtime_temporary_arena_test: the placement of a launch's temporaries in one allocation
// (runtime/temporary_arena.h): aligned parts that do not overlap, the temporaries zeroed before
// their first use placed first and zeroed at the start, and every other zeroing left in place.
#include "runtime/temporary_arena.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace adjoint::runtime {
namespace {

compiler::BufferInfo buffer(const std::string& name, ir::TensorRole role, int64_t bytes) {
  compiler::BufferInfo b;
  b.name = name;
  b.role = role;
  b.bytes = bytes;
  return b;
}

LoadedKernel kernel(std::vector<int> params, std::vector<int> zero_before = {}) {
  LoadedKernel k;
  k.params = std::move(params);
  k.zero_before = std::move(zero_before);
  return k;
}

TEST(TemporaryArena, ZeroedTemporariesComeFirstAndOthersFollowAligned) {
  using ir::TensorRole;
  // 0 input, 1 output (zeroed: an atomics target, stays in place), 2 a temporary zeroed
  // before kernel 1 and untouched before it, 3 a plain temporary, 4 a temporary zeroed before
  // kernel 2 but written by kernel 0 (stays in place), 5 an empty temporary.
  std::vector<compiler::BufferInfo> buffers = {
      buffer("x", TensorRole::kInput, 4000), buffer("out", TensorRole::kOutput, 64),
      buffer("count", TensorRole::kTemporary, 100), buffer("coords", TensorRole::kTemporary, 300),
      buffer("reused", TensorRole::kTemporary, 8), buffer("none", TensorRole::kTemporary, 0)};
  std::vector<LoadedKernel> kernels = {kernel({0, 3, 4}), kernel({2, 3}, {2, 1}),
                                       kernel({4, 2, 1}, {4})};
  TemporaryArena arena = plan_temporary_arena(buffers, kernels);
  EXPECT_EQ(arena.zeroed_at_start, (std::vector<char>{0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(arena.offsets[2], 0u);
  EXPECT_EQ(arena.zeroed_bytes, 256u);
  EXPECT_EQ(arena.offsets[3], 256u);  // then the others in buffer order, 256-byte aligned
  EXPECT_EQ(arena.offsets[4], 256u + 512u);
  EXPECT_EQ(arena.bytes, 256u + 512u + 256u);
}

TEST(TemporaryArena, NoTemporariesNoAllocation) {
  std::vector<compiler::BufferInfo> buffers = {buffer("x", ir::TensorRole::kInput, 16),
                                               buffer("y", ir::TensorRole::kOutput, 16)};
  TemporaryArena arena = plan_temporary_arena(buffers, {kernel({0, 1}, {1})});
  EXPECT_EQ(arena.bytes, 0u);
  EXPECT_EQ(arena.zeroed_bytes, 0u);
  EXPECT_EQ(arena.zeroed_at_start, (std::vector<char>{0, 0}));
}

}  // namespace
}  // namespace adjoint::runtime
