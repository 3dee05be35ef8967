// runtime_temporary_arena_test: the placement of a launch's temporaries in one allocation
// (runtime/temporary_arena.h): aligned parts that do not overlap, the temporaries zeroed before
// their first use placed first and zeroed at the start, and every other zeroing left in place;
// and that the plan made once per program (at load, and for a binding of a generic program to
// its sizes) is the one each launch made for itself before.
#include "runtime/temporary_arena.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "ir/error.h"
#include "runtime/engine.h"

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
  EXPECT_EQ(arena.zeroed_first, (std::vector<char>{0, 0, 1, 0, 0, 0}));
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

/// What LoadedProgram::launch computed on every call before the plan moved to the load: the
/// kernel walk of main 766d4ed, which chose the temporaries zeroed at the start with the sizes
/// of the call (the part this change split off), then the same layout of them (the unchanged
/// loop of place_temporaries, checked by hand above).
TemporaryArena per_launch_plan(const std::vector<compiler::BufferInfo>& buffers,
                               const std::vector<LoadedKernel>& kernels) {
  const size_t n = buffers.size();
  auto placed = [&](size_t i) {
    return buffers[i].role == ir::TensorRole::kTemporary && buffers[i].bytes > 0;
  };
  std::vector<char> zeroed_at_start(n, 0), used(n, 0);
  for (const LoadedKernel& k : kernels) {
    for (int z : k.zero_before) {
      if (placed(static_cast<size_t>(z)) && !used[z]) zeroed_at_start[z] = 1;
    }
    for (int p : k.params) used[p] = 1;
  }
  TemporaryArena arena = place_temporaries(buffers, zeroed_at_start);
  EXPECT_EQ(arena.zeroed_at_start, zeroed_at_start);
  return arena;
}

/// Everything a launch reads of the plan (zeroed_first is new and not compared).
void expect_same_placement(const TemporaryArena& plan, const TemporaryArena& per_launch) {
  EXPECT_EQ(plan.bytes, per_launch.bytes);
  EXPECT_EQ(plan.zeroed_bytes, per_launch.zeroed_bytes);
  EXPECT_EQ(plan.offsets, per_launch.offsets);
  EXPECT_EQ(plan.zeroed_at_start, per_launch.zeroed_at_start);
}

/// A one-dimensional f32 buffer of `size` elements whose length is `dynamic` (a generic
/// program's buffer) or static when `dynamic` is empty.
compiler::BufferInfo vector_buffer(const std::string& name, ir::TensorRole role, int64_t size,
                                   std::vector<std::string> dynamic = {}) {
  compiler::BufferInfo b = buffer(name, role, size * 4);
  b.dtype = ir::DType::kF32;
  b.shape = {size};
  b.strides = {1};
  if (!dynamic.empty()) {
    b.dynamic_shape = {compiler::SizeProduct{1, std::move(dynamic)}};
    b.dynamic_strides = {compiler::SizeProduct{1, {}}};
  }
  return b;
}

TEST(TemporaryArena, APlanMadeAtLoadIsThePlanOfEachLaunchBefore) {
  using ir::TensorRole;
  // A generic program (sizes n and m, upper bounds in the static shapes): temporaries of n
  // elements (zeroed first, zeroed after a use, plain), one of m, one of a static size.
  auto generic = std::make_shared<LoadedProgram>();
  generic->sizes = {"n", "m"};
  generic->buffers = {vector_buffer("x", TensorRole::kInput, 4096, {"n"}),
                      vector_buffer("y", TensorRole::kOutput, 4096, {"n"}),
                      vector_buffer("counts", TensorRole::kTemporary, 4096, {"n"}),
                      vector_buffer("partials", TensorRole::kTemporary, 512, {"m"}),
                      vector_buffer("reused", TensorRole::kTemporary, 4096, {"n"}),
                      vector_buffer("fixed", TensorRole::kTemporary, 100),
                      vector_buffer("scratch", TensorRole::kTemporary, 4096, {"n"})};
  generic->kernels = {kernel({0, 4, 6}), kernel({0, 2, 3, 5}, {2, 3, 1}),
                      kernel({4, 2, 3, 1}, {4, 5})};
  for (LoadedKernel& k : generic->kernels) {
    k.launch.block[0] = 256;
    k.points = compiler::SizeProduct{1, {"n"}};
  }
  generic->temporary_arena = plan_temporary_arena(generic->buffers, generic->kernels);  // load
  expect_same_placement(generic->temporary_arena,
                        per_launch_plan(generic->buffers, generic->kernels));
  EXPECT_EQ(generic->temporary_arena.zeroed_first, (std::vector<char>{0, 0, 1, 1, 0, 0, 0}));
  // Bindings: sizes that change every part, one that empties the m-sized temporary (it then
  // takes no part and is not zeroed at the start) and one that empties every n-sized one.
  for (const std::vector<int64_t>& values :
       {std::vector<int64_t>{4096, 512}, {7, 300}, {1000, 0}, {0, 65}}) {
    std::shared_ptr<const LoadedProgram> bound = bind_generic_program(generic, "spec", values);
    SCOPED_TRACE(std::to_string(values[0]) + ", " + std::to_string(values[1]));
    expect_same_placement(bound->temporary_arena, per_launch_plan(bound->buffers, bound->kernels));
    expect_same_placement(bound->temporary_arena,
                          plan_temporary_arena(bound->buffers, bound->kernels));
    EXPECT_EQ(bound->temporary_arena.zeroed_at_start[3], values[1] > 0 ? 1 : 0);
    EXPECT_EQ(bound->temporary_arena.zeroed_first, generic->temporary_arena.zeroed_first);
  }
  // A generic program made by hand without that plan: the binding plans it whole, the same.
  auto unplanned = std::make_shared<LoadedProgram>();
  unplanned->sizes = generic->sizes;
  unplanned->buffers = generic->buffers;
  unplanned->kernels = generic->kernels;
  EXPECT_EQ(bind_generic_program(unplanned, "spec", {7, 300})->temporary_arena,
            bind_generic_program(generic, "spec", {7, 300})->temporary_arena);
}

TEST(TemporaryArena, APlanForOtherBuffersIsAnInternalError) {
  std::vector<compiler::BufferInfo> buffers = {buffer("x", ir::TensorRole::kInput, 16)};
  EXPECT_THROW(place_temporaries(buffers, {}), Error);
}

}  // namespace
}  // namespace adjoint::runtime
