// temporary_arena: one allocation for a launch's temporaries, the zeroed ones first.
#include "runtime/temporary_arena.h"

namespace adjoint::runtime {

TemporaryArena plan_temporary_arena(const std::vector<compiler::BufferInfo>& buffers,
                                    const std::vector<LoadedKernel>& kernels) {
  constexpr size_t kAlignment = 256;
  const size_t n = buffers.size();
  TemporaryArena arena;
  arena.offsets.assign(n, 0);
  arena.zeroed_at_start.assign(n, 0);
  auto placed = [&](size_t i) {
    return buffers[i].role == ir::TensorRole::kTemporary && buffers[i].bytes > 0;
  };
  std::vector<char> used(n, 0);
  for (const LoadedKernel& k : kernels) {
    for (int z : k.zero_before) {
      if (placed(static_cast<size_t>(z)) && !used[z]) arena.zeroed_at_start[z] = 1;
    }
    for (int p : k.params) used[p] = 1;
  }
  for (bool zeroed : {true, false}) {
    for (size_t i = 0; i < n; ++i) {
      if (!placed(i) || (arena.zeroed_at_start[i] != 0) != zeroed) continue;
      arena.offsets[i] = arena.bytes;
      arena.bytes += (static_cast<size_t>(buffers[i].bytes) + kAlignment - 1) / kAlignment *
                     kAlignment;
    }
    if (zeroed) arena.zeroed_bytes = arena.bytes;
  }
  return arena;
}

}  // namespace adjoint::runtime
