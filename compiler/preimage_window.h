// Inverting a monotone integer index map at compile time, for the scatter-to-gather pass.
//
// A scatter `T[f(o)] += v[o]` with f monotone non-decreasing over o in [0, E) becomes, for each
// target index t in [0, S), a sum over the preimage of t, which is an interval: [start(t),
// start(t + 1)) with start(t) = the first o with f(o) >= t. Shapes are constants, so f is
// evaluated for every o on the host (exactly as the interpreter would) and the starts are exact.
//
// The pass needs the interval as an IR expression of t. It fits the starts with a clamped
// floor-line, L(t) = clamp(floor_div(a*t + b, c), 0, E), searched among the rational slopes the
// data suggests (the whole range and its interior, and their halves, which covers floor(o*r) and
// floor((o + 0.5)*r) maps). When no line is exact (e.g. f32 rounding makes floor(o * r) step one
// place early at a few o), the window is widened by the largest deviations:
//   lo(t) = max(L(t) + lo_offset, 0),  hi(t) = min(L(t + 1) + hi_offset, E)
// and the pass keeps a membership test f(o) == t in the sum, so the result stays exact. No table
// of starts is ever materialized: the kernel needs no extra buffer and the IR no new node.
#pragma once

#include <cstdint>
#include <vector>

namespace adjoint::compiler {

/// start(t) for t in [0, target_extent] of a non-decreasing map given by its values
/// image[o] in [0, target_extent): start(t) = number of o with image[o] < t.
std::vector<int64_t> preimage_starts(const std::vector<int64_t>& image, int64_t target_extent);

/// A closed-form window [lo(t), hi(t)) that contains the preimage of every t (see file comment).
struct PreimageWindow {
  int64_t a = 0, b = 0, c = 1;  ///< the line floor_div(a*t + b, c); c > 0
  int64_t lo_offset = 0;
  int64_t hi_offset = 0;
  int64_t source_extent = 0;  ///< E
  bool exact = false;         ///< lo(t) == start(t) and hi(t) == start(t + 1) for every t

  /// Extra source points a window may hold beyond the preimage.
  int64_t slack() const { return hi_offset - lo_offset; }
  int64_t line(int64_t t) const;  ///< L(t)
  int64_t lo(int64_t t) const;
  int64_t hi(int64_t t) const;
};

/// Fits a window to `starts` (from preimage_starts); the window with the least slack among the
/// candidate lines, exact whenever one of them is.
PreimageWindow fit_preimage_window(const std::vector<int64_t>& starts, int64_t source_extent);

}  // namespace adjoint::compiler
