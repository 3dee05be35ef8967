// StructuralIds: a signature string per node (kind, dtype, payload, children's ids) interned
// into a dense id.
#include "compiler/structural_ids.h"

#include <cstdint>
#include <cstring>

#include "ir/visitor.h"

namespace adjoint::compiler {

int StructuralIds::id(const ir::Expr& e) {
  auto it = memo_.find(e.get());
  if (it != memo_.end()) return it->second.second;
  std::string sig = std::to_string(static_cast<int>(e.kind())) + "/" +
                    std::to_string(static_cast<int>(e.dtype()));
  auto addr = [](const void* p) { return std::to_string(reinterpret_cast<uintptr_t>(p)); };
  if (auto* c = e.as<ir::IntConstNode>()) sig += "/" + std::to_string(c->value);
  if (auto* f = e.as<ir::FloatConstNode>()) {
    uint64_t bits;
    std::memcpy(&bits, &f->value, sizeof bits);
    sig += "/" + std::to_string(bits);
  }
  if (e.kind() == ir::ExprKind::kVar || e.kind() == ir::ExprKind::kReduce)
    sig += "/" + addr(e.get());
  if (auto* l = e.as<ir::LoadNode>()) sig += "/" + addr(l->tensor.get());
  if (auto* u = e.as<ir::UnaryNode>()) sig += "/" + std::to_string(static_cast<int>(u->op));
  if (auto* b = e.as<ir::BinaryNode>()) sig += "/" + std::to_string(static_cast<int>(b->op));
  if (auto* c = e.as<ir::CompareNode>()) sig += "/" + std::to_string(static_cast<int>(c->op));
  if (e.kind() != ir::ExprKind::kReduce) {
    ir::for_each_child(e, [&](const ir::Expr& child) { sig += "," + std::to_string(id(child)); });
  }
  int result = ids_.emplace(sig, static_cast<int>(ids_.size())).first->second;
  memo_[e.get()] = {e, result};
  return result;
}

}  // namespace adjoint::compiler
