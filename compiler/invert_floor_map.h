// lower_scatter_to_gather_generic: the gather inversion of generic programs, whose extents are
// size parameters (ir/dynamic_sizes.h) that the host cannot enumerate.
//
// A scatter T[f(o)] += v[o] is inverted when every target index is either a domain variable
// whose extent is the target's dimension, or a floor map of the form PyTorch's nearest
// upsampling uses:
//   f(o) = min(i64(floor((f32(o) + c) * R)), T_k - 1),   c >= 0 a constant, R > 0 free of o,
// with R a positive constant or f32(size) / f32(size). f is non-decreasing, so the preimage of
// a target index t is an interval [start(t), start(t + 1)) (the last index takes every o up to
// the domain's extent E), start(t) = the first o with f(o) >= t. The kernel computes start(t)
// from the runtime extents: an estimate e = ceil(f64(t) * (1 / f64(R)) - c) (clamped to
// [0, E + 3]), then
//   start(t) = (e - 2) + #{ j in 0..2 : f(e - 2 + j) < t }
// with f(x) < t tested as (f32(x) + c) * R < f32(t) by the very f32 operations of the forward
// (floor(y) < t exactly when y < t for an integer t), so the window is exact (no membership
// test) and holds the same points, summed in the same order, as the window the specialized
// compile tabulates on the host: results are bitwise identical. Everything but the estimate is
// bounded by E + 3, so 32-bit kernels narrow it to i32.
//
// Why three probes suffice: with o + c and t exact in f32 and the f32 product within a factor
// 1 +- 2^-24 of (o + c) * R, the true start lies in {o* - 1, o*} for o* = ceil(t / R - c)
// whenever t <= R * 2^24, and the f64 estimate is o* or one off. The pass therefore refuses
// (throws) unless E's and T_k's upper bounds are at most 2^22 and, for a constant R, T_k's upper
// bound is at most R * 2^24 (for R = f32(I) / f32(O) it follows from O <= 2^22).
//
// Scatters it cannot invert are an adjoint::Error (kInvalidProgram) naming the stage and the
// index: a generic program has no atomic fallback, and the runtime then keeps specialized
// kernels.
#pragma once

#include "ir/program.h"

namespace adjoint::compiler {

/// Replaces each scatter_add of a generic program by the equivalent gather (see above).
ir::Program lower_scatter_to_gather_generic(const ir::Program& program);

}  // namespace adjoint::compiler
