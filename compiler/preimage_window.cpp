// Preimage windows: the starts of a monotone map's preimages and the floor-line that fits them.
#include "compiler/preimage_window.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>

#include "ir/bounds.h"

namespace adjoint::compiler {

std::vector<int64_t> preimage_starts(const std::vector<int64_t>& image, int64_t target_extent) {
  std::vector<int64_t> starts(static_cast<size_t>(target_extent) + 1, 0);
  // image is non-decreasing: walk it once.
  size_t o = 0;
  for (int64_t t = 0; t <= target_extent; ++t) {
    while (o < image.size() && image[o] < t) ++o;
    starts[static_cast<size_t>(t)] = static_cast<int64_t>(o);
  }
  return starts;
}

int64_t PreimageWindow::line(int64_t t) const {
  return std::clamp<int64_t>(ir::floor_div(a * t + b, c), 0, source_extent);
}
int64_t PreimageWindow::lo(int64_t t) const {
  return std::max<int64_t>(line(t) + lo_offset, 0);
}
int64_t PreimageWindow::hi(int64_t t) const {
  return std::min<int64_t>(line(t + 1) + hi_offset, source_extent);
}

namespace {

constexpr int64_t kNone = std::numeric_limits<int64_t>::min();

/// The range of intercepts b for which the clamped line reproduces every start exactly.
struct InterceptRange {
  int64_t lo = std::numeric_limits<int64_t>::min() / 4;
  int64_t hi = std::numeric_limits<int64_t>::max() / 4;
};

InterceptRange exact_intercepts(const std::vector<int64_t>& starts, int64_t e, int64_t a,
                                int64_t c) {
  InterceptRange r;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t t = static_cast<int64_t>(i), s = starts[i];
    if (s > 0) r.lo = std::max(r.lo, c * s - a * t);          // floor_div(a*t + b, c) >= s
    if (s < e) r.hi = std::min(r.hi, c * s + c - 1 - a * t);  // floor_div(a*t + b, c) <= s
  }
  return r;
}

/// The window of line (a, b, c) with offsets covering every preimage.
PreimageWindow window_for(const std::vector<int64_t>& starts, int64_t e, int64_t a, int64_t b,
                          int64_t c) {
  PreimageWindow w{a, b, c, 0, 0, e, false};
  const int64_t s = static_cast<int64_t>(starts.size()) - 1;
  int64_t lo_offset = std::numeric_limits<int64_t>::max(),
          hi_offset = std::numeric_limits<int64_t>::min();
  for (int64_t t = 0; t < s; ++t) {
    lo_offset = std::min(lo_offset, starts[t] - w.line(t));
    hi_offset = std::max(hi_offset, starts[t + 1] - w.line(t + 1));
  }
  // lo(t) <= L(t) + err(t) == start(t) and hi(t) >= start(t + 1): every preimage is covered.
  w.lo_offset = s > 0 ? lo_offset : 0;
  w.hi_offset = s > 0 ? hi_offset : 0;
  w.exact = true;
  for (int64_t t = 0; t < s && w.exact; ++t)
    w.exact = w.lo(t) == starts[t] && w.hi(t) == starts[t + 1];
  return w;
}

/// Candidate slopes a/c: the average over the whole range and over the interior (where the
/// starts are strictly inside (0, E)), each also with a doubled denominator.
std::vector<std::pair<int64_t, int64_t>> candidate_slopes(const std::vector<int64_t>& starts,
                                                          int64_t e) {
  std::vector<std::pair<int64_t, int64_t>> slopes;
  auto add = [&](int64_t rise, int64_t run) {
    if (run <= 0 || rise <= 0) return;
    int64_t g = std::gcd(rise, run);
    for (int64_t k : {1, 2}) {
      std::pair<int64_t, int64_t> s{k * rise / g, k * run / g};
      if (std::find(slopes.begin(), slopes.end(), s) == slopes.end()) slopes.push_back(s);
    }
  };
  const int64_t s = static_cast<int64_t>(starts.size()) - 1;
  add(starts[s] - starts[0], s);
  int64_t first = kNone, last = kNone;
  for (int64_t t = 0; t <= s; ++t) {
    if (starts[t] > 0 && starts[t] < e) {
      if (first == kNone) first = t;
      last = t;
    }
  }
  if (first != kNone && last > first) add(starts[last] - starts[first], last - first);
  return slopes;
}

}  // namespace

PreimageWindow fit_preimage_window(const std::vector<int64_t>& starts, int64_t source_extent) {
  const int64_t e = source_extent;
  std::optional<PreimageWindow> best;
  for (auto [a, c] : candidate_slopes(starts, e)) {
    InterceptRange r = exact_intercepts(starts, e, a, c);
    std::vector<int64_t> intercepts = {r.lo, r.hi, r.lo + (r.hi - r.lo) / 2};
    for (int64_t b : intercepts) {
      PreimageWindow w = window_for(starts, e, a, b, c);
      if (w.exact) return w;
      if (!best || w.slack() < best->slack()) best = w;
    }
  }
  // No slope to try (an empty source or target): the constant line 0 fits.
  return best ? *best : window_for(starts, e, 0, 0, 1);
}

}  // namespace adjoint::compiler
