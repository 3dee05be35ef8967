// split_generic_reductions: the split-reduction schedule of generic programs (lower_generic).
// A reduction over an axis whose extent is a runtime size (mHC's token sums over b < B, s < S)
// would run serially in one thread per point, B * S iterations each: at 65,536 tokens dbias' 24
// points were 24 threads. This pass gives such a reduction G partials whose count does not depend
// on the sizes, so one kernel serves every token count:
//
//   partials[g, p...] = reduce over (the other axes, u < (E - g + G - 1) / G) of body[s := g + G u]
//   target[p...]      = reduce over g < G of partials[g, p...]   (in order g = 0..G-1)
//
// where s is the split axis (the innermost reduce axis whose extent E depends on a size) and p the
// stage's domain. Partial g takes the iterations g, g + G, g + 2G, ... below E: consecutive
// partials read consecutive tokens, every iteration is in exactly one partial for every E (the
// trip count is ceil((E - g) / G), 0 when g >= E), and the order of each sum is fixed by E alone:
// bitwise the same every run, no atomics. The float results differ in the last bits from a
// specialized kernel's (another summation order), as any split does.
//
// G is the smallest power of two with (domain points x G) >= target_threads, within [2,
// max_partials]: the domain is static, so G is known when the kernel is compiled. Eligible: a
// kernel without an explicit grid whose one compute stage has a static domain and a value that is
// a sum (sum or fma_sum) over axes of which one, starting at 0, has a size-dependent extent that
// no other axis names. Each decision goes into `notes` for the dumps.
#pragma once

#include <cstdint>

#include "compiler/schedule_notes.h"
#include "ir/program.h"

namespace adjoint::compiler {

struct GenericSplitOptions {
  /// Domain points x G aimed at (threads before grouping); G doubles while below.
  int64_t target_threads = int64_t{1} << 21;
  /// The largest G (the combine sums G partials per point in one thread).
  int64_t max_partials = 1024;
  /// 0: no split (ADJOINT_TUNE_REDUCTION_SPLIT=0 also switches this off).
  bool enabled = true;
};

/// Splits the eligible reductions of generic `program` (see above); the same program when none.
ir::Program split_generic_reductions(const ir::Program& program, const GenericSplitOptions& options,
                                     ScheduleNotes* notes = nullptr);

}  // namespace adjoint::compiler
