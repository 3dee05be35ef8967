// binned_taps: finds the tap axis of a data-dependent scatter, a record axis whose value only
// shifts the target index by small constants (grid_sampler's 4, 16 or 8 interpolation taps:
// T[n, c, floor(y) + tap / 2, floor(x) + tap % 2] += w(tap) * g). The binned gather
// (lower_scatter_to_binned_gather.h, "Taps in the gather") bins one record per point by its
// base index instead of one per (point, tap), and walks a bucket per tap on the gather side.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/program.h"

namespace adjoint::compiler {

/// The tap axis of a scatter stage: every target index component j is base_j + shift_j(tap),
/// base_j free of the tap, shift_j a function of the tap alone (0 where the component does not
/// depend on it), exact wherever the component is in bounds; or, for a *clamped* component,
/// clamp(base_j + shift_j(tap), 0, extent_j - 1) (grid_sampler's bicubic under border padding,
/// which clips each tap's index on its own). A clamped component's base is stored clamped to
/// [-max_shift_j, extent_j - 1 - min_shift_j]: every base beyond that range sends every tap to
/// the same edge as the range's end does, so the clamped base gives every tap the same index.
struct BinnedTaps {
  int axis = -1;                  ///< domain position of the tap axis
  int64_t taps = 0;               ///< its extent
  std::vector<ir::Expr> base;     ///< per target component: the index without the tap (i64)
  std::vector<ir::Expr> shift;    ///< per target component: the tap's shift (i64, tap only)
  std::vector<int64_t> min_shift; ///< per target component: the smallest shift over the taps
  std::vector<int64_t> max_shift; ///< ... and the largest
  std::vector<bool> clamped;      ///< per target component: clamped to [0, extent - 1]
};

/// The tap axis of `stage` among the domain positions `candidates` (record axes; the last one
/// that qualifies), with at most `max_taps` taps, or nothing. Recognized index components:
/// `base + shift(tap)`, `base - shift(tap)` (integer), and `i64(floor(b) + f(shift(tap)))` in
/// f32 or f64 (grid_sampler's bicubic `floor(y) - 1 + tap / 4`) where the component's extent
/// is below 2^22, so that every in-bounds sum is exact; and, clamped,
/// `i64(min(max(floor(b) + f(shift(tap)), 0), extent - 1))` (max and min either way round)
/// under the same bound.
std::optional<BinnedTaps> find_binned_taps(const ir::Stage& stage,
                                           const std::vector<int>& candidates, int64_t max_taps);

}  // namespace adjoint::compiler
