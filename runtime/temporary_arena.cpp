// temporary_arena: one allocation for a launch's temporaries, the zeroed ones first.
#include "runtime/temporary_arena.h"

#include <string>

#include "ir/error.h"
#include "runtime/engine.h"

namespace adjoint::runtime {

TemporaryArena plan_temporary_arena(const std::vector<compiler::BufferInfo>& buffers,
                                    const std::vector<LoadedKernel>& kernels) {
  const size_t n = buffers.size();
  std::vector<char> zeroed_first(n, 0), used(n, 0);
  for (const LoadedKernel& k : kernels) {
    for (int z : k.zero_before) {
      if (buffers[z].role == ir::TensorRole::kTemporary && !used[z]) zeroed_first[z] = 1;
    }
    for (int p : k.params) used[p] = 1;
  }
  return place_temporaries(buffers, zeroed_first);
}

TemporaryArena place_temporaries(const std::vector<compiler::BufferInfo>& buffers,
                                 const std::vector<char>& zeroed_first) {
  constexpr size_t kAlignment = 256;
  const size_t n = buffers.size();
  if (zeroed_first.size() != n) {
    throw Error("temporary arena: a plan of " + std::to_string(zeroed_first.size()) +
                    " buffers placed for " + std::to_string(n),
                ErrorCode::kInternal);
  }
  TemporaryArena arena;
  arena.offsets.assign(n, 0);
  arena.zeroed_at_start.assign(n, 0);
  arena.zeroed_first = zeroed_first;
  auto placed = [&](size_t i) {
    return buffers[i].role == ir::TensorRole::kTemporary && buffers[i].bytes > 0;
  };
  for (size_t i = 0; i < n; ++i) arena.zeroed_at_start[i] = placed(i) && zeroed_first[i] != 0;
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
