// Structural equality and hashing: both walk the expression with a stack of bound variables.
// Equality pushes (a-variable, b-variable) pairs as it enters a binder in both expressions and
// compares a variable by the position of its innermost binding; hashing pushes the variable and
// hashes that position, so the two agree.
#include "ir/equality.h"

#include <bit>
#include <vector>

namespace adjoint::ir {
namespace {

bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a == b) return true;
  if (!a || !b) return false;
  return a->name == b->name && a->dtype == b->dtype && a->shape == b->shape &&
         a->strides == b->strides && a->role == b->role;
}

class EqualityChecker {
 public:
  EqualityChecker() = default;
  explicit EqualityChecker(TensorRenaming* renaming) : renaming_(renaming) {}

  /// Same tensor, or with a renaming, tensors that correspond (recording a new pair).
  bool tensors_match(const Tensor& a, const Tensor& b) {
    if (!renaming_) return same_tensor(a, b);
    if (!a || !b) return a == b;
    auto fwd = renaming_->forward.find(a.get());
    auto bwd = renaming_->backward.find(b.get());
    if (fwd != renaming_->forward.end() || bwd != renaming_->backward.end()) {
      return fwd != renaming_->forward.end() && fwd->second == b.get();
    }
    if (a->dtype != b->dtype || a->shape != b->shape || a->strides != b->strides ||
        a->is_dynamic() || b->is_dynamic()) {
      return false;
    }
    renaming_->forward[a.get()] = b.get();
    renaming_->backward[b.get()] = a.get();
    return true;
  }

  bool equal(const Expr& a, const Expr& b) {
    if (!a.defined() || !b.defined()) return a.defined() == b.defined();
    // One node is equal to itself, unless variables are renamed or tensors must be matched
    // (the tensors it loads must then correspond to themselves).
    if (a.same_as(b) && renamed_pairs_ == 0 && !renaming_) return true;
    if (a.kind() != b.kind() || a.dtype() != b.dtype()) return false;
    switch (a.kind()) {
      case ExprKind::kIntConst:
        return a.as<IntConstNode>()->value == b.as<IntConstNode>()->value;
      case ExprKind::kFloatConst:
        return std::bit_cast<uint64_t>(a.as<FloatConstNode>()->value) ==
               std::bit_cast<uint64_t>(b.as<FloatConstNode>()->value);
      case ExprKind::kVar:
        return same_var(a.as<VarNode>(), b.as<VarNode>());
      case ExprKind::kLoad: {
        auto *x = a.as<LoadNode>(), *y = b.as<LoadNode>();
        return tensors_match(x->tensor, y->tensor) && equal(x->indices, y->indices);
      }
      case ExprKind::kUnary: {
        auto *x = a.as<UnaryNode>(), *y = b.as<UnaryNode>();
        return x->op == y->op && equal(x->operand, y->operand);
      }
      case ExprKind::kBinary: {
        auto *x = a.as<BinaryNode>(), *y = b.as<BinaryNode>();
        return x->op == y->op && equal(x->a, y->a) && equal(x->b, y->b);
      }
      case ExprKind::kCompare: {
        auto *x = a.as<CompareNode>(), *y = b.as<CompareNode>();
        return x->op == y->op && equal(x->a, y->a) && equal(x->b, y->b);
      }
      case ExprKind::kSelect: {
        auto *x = a.as<SelectNode>(), *y = b.as<SelectNode>();
        return equal(x->condition, y->condition) && equal(x->true_value, y->true_value) &&
               equal(x->false_value, y->false_value);
      }
      case ExprKind::kCast:
        return equal(a.as<CastNode>()->value, b.as<CastNode>()->value);
      case ExprKind::kReduce: {
        auto *x = a.as<ReduceNode>(), *y = b.as<ReduceNode>();
        if (x->op != y->op || !equal_axes(x->axes, y->axes)) return false;
        bool body_equal = equal(x->body, y->body);
        unbind(x->axes.size());
        return body_equal;
      }
    }
    return false;
  }

  bool equal(const std::vector<Expr>& a, const std::vector<Expr>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!equal(a[i], b[i])) return false;
    }
    return true;
  }

  /// Compares the axes' starts and extents in the enclosing scope, then, when they match,
  /// binds the axes' variables pairwise (the caller unbinds them).
  bool equal_axes(const std::vector<Axis>& a, const std::vector<Axis>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!equal(a[i].start, b[i].start) || !equal(a[i].extent, b[i].extent)) return false;
    }
    for (size_t i = 0; i < a.size(); ++i) bind(a[i].var.get(), b[i].var.get());
    return true;
  }

  void unbind(size_t count) {
    for (size_t i = 0; i < count; ++i) {
      renamed_pairs_ -= bound_.back().first != bound_.back().second;
      bound_.pop_back();
    }
  }

 private:
  void bind(const VarNode* a, const VarNode* b) {
    bound_.emplace_back(a, b);
    renamed_pairs_ += a != b;
  }

  /// Bound variables match when their innermost bindings are the same pair; free ones when
  /// they are the same node.
  bool same_var(const VarNode* a, const VarNode* b) const {
    int innermost_a = -1, innermost_b = -1;
    for (int i = static_cast<int>(bound_.size()) - 1; i >= 0; --i) {
      if (innermost_a < 0 && bound_[i].first == a) innermost_a = i;
      if (innermost_b < 0 && bound_[i].second == b) innermost_b = i;
    }
    if (innermost_a < 0 && innermost_b < 0) return a == b;
    return innermost_a == innermost_b;
  }

  std::vector<std::pair<const VarNode*, const VarNode*>> bound_;
  int renamed_pairs_ = 0;  // bound pairs of two different variables
  TensorRenaming* renaming_ = nullptr;
};

uint64_t mix(uint64_t h, uint64_t value) {
  // splitmix64's finalizer over an order-dependent combination.
  uint64_t x = h ^ (value + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash_string(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

class Hasher {
 public:
  Hasher() = default;
  /// With `by_shape`, a tensor hashes by its dtype and shape alone (not its name).
  explicit Hasher(bool by_shape) : by_shape_(by_shape) {}

  uint64_t tensor(uint64_t h, const TensorNode& t) const {
    if (!by_shape_) h = mix(h, hash_string(t.name));
    h = mix(h, static_cast<uint64_t>(t.dtype));
    for (int64_t n : t.shape) h = mix(h, static_cast<uint64_t>(n));
    return h;
  }

  void bind(const std::vector<Axis>& axes) {
    for (const Axis& ax : axes) bound_.push_back(ax.var.get());
  }

  uint64_t hash(const Expr& e) {
    if (!e.defined()) return 0;
    uint64_t h = mix(static_cast<uint64_t>(e.kind()), static_cast<uint64_t>(e.dtype()));
    switch (e.kind()) {
      case ExprKind::kIntConst:
        return mix(h, static_cast<uint64_t>(e.as<IntConstNode>()->value));
      case ExprKind::kFloatConst:
        return mix(h, std::bit_cast<uint64_t>(e.as<FloatConstNode>()->value));
      case ExprKind::kVar:
        return mix(h, var_hash(e.as<VarNode>()));
      case ExprKind::kLoad: {
        h = tensor(h, *e.as<LoadNode>()->tensor);
        for (const Expr& i : e.as<LoadNode>()->indices) h = mix(h, hash(i));
        return h;
      }
      case ExprKind::kUnary: {
        auto* u = e.as<UnaryNode>();
        return mix(mix(h, static_cast<uint64_t>(u->op)), hash(u->operand));
      }
      case ExprKind::kBinary: {
        auto* b = e.as<BinaryNode>();
        return mix(mix(mix(h, static_cast<uint64_t>(b->op)), hash(b->a)), hash(b->b));
      }
      case ExprKind::kCompare: {
        auto* c = e.as<CompareNode>();
        return mix(mix(mix(h, static_cast<uint64_t>(c->op)), hash(c->a)), hash(c->b));
      }
      case ExprKind::kSelect: {
        auto* s = e.as<SelectNode>();
        return mix(mix(mix(h, hash(s->condition)), hash(s->true_value)), hash(s->false_value));
      }
      case ExprKind::kCast:
        return mix(h, hash(e.as<CastNode>()->value));
      case ExprKind::kReduce: {
        auto* r = e.as<ReduceNode>();
        h = mix(h, static_cast<uint64_t>(r->op));
        for (const Axis& ax : r->axes) h = mix(mix(h, hash(ax.start)), hash(ax.extent));
        for (const Axis& ax : r->axes) bound_.push_back(ax.var.get());
        h = mix(h, hash(r->body));
        bound_.resize(bound_.size() - r->axes.size());
        return h;
      }
    }
    return h;
  }

 private:
  uint64_t var_hash(const VarNode* v) const {
    for (size_t i = bound_.size(); i-- > 0;) {
      if (bound_[i] == v) return mix(0x626f756e64ull, i);  // "bound" at depth i
    }
    return mix(0x66726565ull, reinterpret_cast<uintptr_t>(v));  // "free"
  }

  std::vector<const VarNode*> bound_;
  bool by_shape_ = false;
};

bool same_grid(const GridConfig& a, const GridConfig& b) {
  if (a.is_set != b.is_set || a.reduction_lanes != b.reduction_lanes) return false;
  if (a.tile_points != b.tile_points || (a.tile_points > 1 && a.tile_axis != b.tile_axis))
    return false;
  if (a.tile_block_rows != b.tile_block_rows) return false;
  if (a.rows_per_block != b.rows_per_block || a.row_per_thread != b.row_per_thread) return false;
  return !a.is_set || (a.bindings == b.bindings && a.block_size == b.block_size &&
                       a.vector_width == b.vector_width);
}

bool same_tensors(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!same_tensor(a[i], b[i])) return false;
  }
  return true;
}

}  // namespace

bool structurally_equal(const Expr& a, const Expr& b) {
  return EqualityChecker().equal(a, b);
}

bool structurally_equal(const Stage& a, const Stage& b) {
  if (a.kind != b.kind || !same_tensor(a.target, b.target)) return false;
  if (a.kind == StageKind::kScatterAdd && a.accumulation != b.accumulation) return false;
  EqualityChecker checker;
  if (!checker.equal_axes(a.domain, b.domain)) return false;
  return checker.equal(a.indices, b.indices) && checker.equal(a.value, b.value) &&
         checker.equal(a.condition, b.condition);
}

bool structurally_equal_renaming(const Stage& a, const Stage& b, TensorRenaming& renaming) {
  if (a.kind != b.kind) return false;
  if (a.kind == StageKind::kScatterAdd && a.accumulation != b.accumulation) return false;
  EqualityChecker checker(&renaming);
  if (!checker.tensors_match(a.target, b.target) || !checker.equal_axes(a.domain, b.domain))
    return false;
  return checker.equal(a.indices, b.indices) && checker.equal(a.value, b.value) &&
         checker.equal(a.condition, b.condition);
}

bool structurally_equal(const Kernel& a, const Kernel& b) {
  if (a.name != b.name || !same_grid(a.grid, b.grid) || a.row_axes != b.row_axes ||
      a.stages.size() != b.stages.size()) {
    return false;
  }
  for (size_t i = 0; i < a.stages.size(); ++i) {
    if (!structurally_equal(a.stages[i], b.stages[i])) return false;
  }
  return true;
}

bool structurally_equal(const Program& a, const Program& b) {
  if (a.name != b.name || a.attributes != b.attributes || !same_tensors(a.inputs, b.inputs) ||
      !same_tensors(a.outputs, b.outputs) || !same_tensors(a.temporaries, b.temporaries) ||
      a.kernels.size() != b.kernels.size()) {
    return false;
  }
  for (size_t i = 0; i < a.kernels.size(); ++i) {
    if (!structurally_equal(a.kernels[i], b.kernels[i])) return false;
  }
  return true;
}

uint64_t structural_hash(const Expr& e) {
  return Hasher().hash(e);
}

uint64_t structural_hash_up_to_tensors(const Stage& s) {
  Hasher hasher(true);
  uint64_t h = mix(static_cast<uint64_t>(s.kind), static_cast<uint64_t>(s.accumulation));
  h = hasher.tensor(h, *s.target);
  for (const Axis& ax : s.domain) h = mix(mix(h, hasher.hash(ax.start)), hasher.hash(ax.extent));
  hasher.bind(s.domain);
  for (const Expr& i : s.indices) h = mix(h, hasher.hash(i));
  h = mix(h, hasher.hash(s.value));
  return mix(h, hasher.hash(s.condition));
}

}  // namespace adjoint::ir
