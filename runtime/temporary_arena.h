// temporary_arena: where a launch puts its program's temporaries. Instead of one stream-ordered
// allocation and one memset per temporary, a launch makes one allocation for all of them, each
// part 256-byte aligned, and places first the temporaries that must start zeroed and that no
// kernel touches before its zeroing, so that one memset ahead of the first kernel zeroes them
// all: fewer driver calls per launch, and no memset between two kernels (a memset there ends
// a chain of programmatic dependent launches). ADJOINT_TUNE_TEMPORARY_ARENA=0 restores one
// allocation and one in-place memset per temporary (docs/runtime.md). The plan is made once
// per loaded program (engine.cpp), not per launch: which temporaries go first depends on the
// kernels alone, where they go on the sizes (a binding of a generic program re-places them).
#pragma once

#include <cstddef>
#include <vector>

#include "compiler/compiled_program.h"

namespace adjoint::runtime {

struct LoadedKernel;  // runtime/engine.h

struct TemporaryArena {
  size_t bytes = 0;                  ///< the allocation; 0: no temporaries
  size_t zeroed_bytes = 0;           ///< [0, zeroed_bytes) zeroed before the first kernel
  std::vector<size_t> offsets;       ///< per buffer: its part's offset (temporaries only)
  std::vector<char> zeroed_at_start;  ///< per buffer: zeroed by that memset, not in place
  /// Per buffer: a temporary that a kernel's zero_before names before any kernel has it among
  /// its parameters, whatever its size (zeroed_at_start is this where the buffer has bytes).
  /// It depends on the kernels alone: what a binding to other sizes places again with.
  std::vector<char> zeroed_first;

  bool operator==(const TemporaryArena&) const = default;
};

/// The arena of a program's temporaries (buffers of role kTemporary with bytes > 0). A
/// temporary that a kernel's zero_before names is zeroed at the start when no earlier kernel
/// has it among its parameters; every other zeroing stays where zero_before puts it.
TemporaryArena plan_temporary_arena(const std::vector<compiler::BufferInfo>& buffers,
                                    const std::vector<LoadedKernel>& kernels);

/// The same arena for other sizes of the same kernels: `buffers` as bound, `zeroed_first` the
/// plan's (TemporaryArena::zeroed_first, one per buffer: otherwise an internal error). No
/// kernel is looked at.
TemporaryArena place_temporaries(const std::vector<compiler::BufferInfo>& buffers,
                                 const std::vector<char>& zeroed_first);

}  // namespace adjoint::runtime
