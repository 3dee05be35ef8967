// Structural equality and hashing: alpha-equivalence of reduce and domain variables (matched
// pairwise in binding order), free variables by identity, constants bit for bit, tensors by
// signature, and stage/kernel/program comparison; equal expressions must hash equally.
#include "ir/equality.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ir/builder.h"

namespace adjoint::ir {
namespace {

Tensor input_x() {
  return make_tensor("x", DType::kF32, {4, 4}, TensorRole::kInput);
}

/// Expects equality both ways and equal hashes.
void expect_equal(const Expr& a, const Expr& b) {
  EXPECT_TRUE(structurally_equal(a, b));
  EXPECT_TRUE(structurally_equal(b, a));
  EXPECT_EQ(structural_hash(a), structural_hash(b));
}

/// Expects inequality both ways (and, for these small cases, different hashes).
void expect_different(const Expr& a, const Expr& b) {
  EXPECT_FALSE(structurally_equal(a, b));
  EXPECT_FALSE(structurally_equal(b, a));
  EXPECT_NE(structural_hash(a), structural_hash(b));
}

TEST(IrEquality, BoundVariablesAreMatchedPairwise) {
  TensorRef x = input_x();
  Var k("k"), j("j"), i("i"), m("m");
  expect_equal(sum({range(k, 4)}, x(k, 0), DType::kF32), sum({range(j, 4)}, x(j, 0), DType::kF32));
  // Nested: the outer and inner variables correspond by position, whatever their names.
  Expr ij = sum({range(i, 4)}, sum({range(j, 4)}, x(i, j), DType::kF32), DType::kF32);
  Expr ji = sum({range(j, 4)}, sum({range(i, 4)}, x(j, i), DType::kF32), DType::kF32);
  Expr swapped = sum({range(i, 4)}, sum({range(j, 4)}, x(j, i), DType::kF32), DType::kF32);
  expect_equal(ij, ji);
  expect_different(ij, swapped);
  // Two axes of one reduce.
  expect_equal(sum({range(i, 4), range(j, 4)}, x(i, j), DType::kF32),
               sum({range(k, 4), range(m, 4)}, x(k, m), DType::kF32));
  expect_different(sum({range(i, 4), range(j, 4)}, x(i, j), DType::kF32),
                   sum({range(k, 4), range(m, 4)}, x(m, k), DType::kF32));
  // Sibling reduces may reuse one variable or use two.
  expect_equal(sum({range(k, 4)}, x(k, 0), DType::kF32) + sum({range(k, 2)}, x(0, k), DType::kF32),
               sum({range(i, 4)}, x(i, 0), DType::kF32) + sum({range(j, 2)}, x(0, j), DType::kF32));
}

TEST(IrEquality, FreeVariablesAreComparedByIdentity) {
  TensorRef x = input_x();
  Var i("i"), other_i("i"), k("k");
  expect_equal(x(i, 1) + 1.0, x(i, 1) + 1.0);
  expect_different(x(i, 1), x(other_i, 1));  // same name, different variable
  // sum_k x[k, i] (i free) vs sum_i x[i, i] (the inner i is bound): not equal.
  expect_different(sum({range(k, 4)}, x(k, i), DType::kF32),
                   sum({range(i, 4)}, x(i, i), DType::kF32));
  // A bound variable must not match a free one of the same node outside its scope.
  Expr uses_k_free = x(k, 0);
  EXPECT_FALSE(structurally_equal(sum({range(k, 4)}, x(k, 0), DType::kF32),
                                  sum({range(i, 4)}, uses_k_free, DType::kF32)));
}

TEST(IrEquality, ConstantsDtypesOperatorsAndShapes) {
  TensorRef x = input_x();
  Var i("i");
  expect_different(Expr(0.0), Expr(-0.0));
  expect_equal(Expr(std::nan("")), Expr(std::nan("")));
  expect_different(constant(DType::kF32, 0.5), Expr(0.5));
  expect_different(Expr(3), constant(DType::kI32, 3));
  expect_different(Expr(3), Expr(4));
  expect_different(x(i, 0) + 1.0, x(i, 0) - 1.0);
  expect_different(i < 2, i <= 2);
  expect_different(exp(x(i, 0)), log(x(i, 0)));
  expect_different(cast(DType::kF64, x(i, 0)), cast(DType::kF16, x(i, 0)));
  expect_different(select(i < 2, x(i, 0), 0), select(i < 2, 0, x(i, 0)));
  expect_different(sum({range(i, 4)}, x(i, 0), DType::kF32),
                   maximum({range(i, 4)}, x(i, 0), DType::kF32));
  expect_different(sum({range(i, 4)}, x(i, 0), DType::kF32),
                   sum({range(i, 3)}, x(i, 0), DType::kF32));
  expect_different(sum({range(i, 4)}, x(i, 0) * x(0, i), DType::kF32),
                   fma_sum({range(i, 4)}, x(i, 0), x(0, i), DType::kF32));
  expect_different(sum({range(i, 4)}, x(i, 0), DType::kF32),
                   sum({range(i, 4)}, x(i, 0), DType::kF64));
  // Tensors: another node with the same signature is the same tensor; another shape is not.
  TensorRef same_x = input_x();
  TensorRef wider_x = make_tensor("x", DType::kF32, {4, 5}, TensorRole::kInput);
  TensorRef strided_x = make_tensor("x", DType::kF32, {4, 4}, TensorRole::kInput, {1, 4});
  expect_equal(x(i, 0), same_x(i, 0));
  expect_different(x(i, 0), wider_x(i, 0));
  EXPECT_FALSE(structurally_equal(x(i, 0), strided_x(i, 0)));
  EXPECT_TRUE(structurally_equal(Expr(), Expr()));
  EXPECT_FALSE(structurally_equal(Expr(), Expr(1)));
}

/// Builds the same two-kernel program with fresh variables each time.
Program build_program(DType accumulation = DType::kF32, int block_size = 128) {
  ProgramBuilder pb("p");
  pb.attribute("mode", "nearest");
  TensorRef x = pb.input("x", DType::kF32, {4, 4});
  TensorRef t = pb.temporary("t", DType::kF32, {4});
  Tensor y = pb.output("y", DType::kF32, {2});
  Var i("i"), j("j"), k("k");
  pb.kernel("rows", {compute(t, over(t, {i}), sum({range(k, 4)}, x(i, k), DType::kF32))});
  pb.kernel(
      "pairs",
      {scatter_add(y, {j / 2}, cast(accumulation, t(j)), over({j}, {4}), accumulation, j % 2 == 0)},
      GridConfig{true, {AxisBinding::kLinear}, block_size, 1});
  return std::move(pb).build();
}

TEST(IrEquality, StagesKernelsAndPrograms) {
  Program a = build_program(), b = build_program();
  EXPECT_TRUE(structurally_equal(a, b));
  EXPECT_TRUE(structurally_equal(a.kernels[1].stages[0], b.kernels[1].stages[0]));
  EXPECT_FALSE(structurally_equal(a.kernels[0].stages[0], b.kernels[1].stages[0]));
  EXPECT_FALSE(structurally_equal(a, build_program(DType::kF64)));
  EXPECT_FALSE(structurally_equal(a.kernels[1], build_program(DType::kF32, 256).kernels[1]));

  Program unconditional = build_program();
  unconditional.kernels[1].stages[0].condition = Expr();
  EXPECT_FALSE(structurally_equal(a, unconditional));
  Program renamed = build_program();
  renamed.kernels[0].name = "rows2";
  EXPECT_FALSE(structurally_equal(a, renamed));
  Program attributed = build_program();
  attributed.attributes["mode"] = "nearest-exact";
  EXPECT_FALSE(structurally_equal(a, attributed));

  // The domain variables of two stages correspond axis by axis: a stage whose value uses a
  // variable of another stage's domain is different, even when it is the same Expr node.
  Stage first = a.kernels[0].stages[0];
  Stage second = first;
  second.domain[0].var = Var("i");
  EXPECT_FALSE(structurally_equal(first, second));
  EXPECT_TRUE(structurally_equal(first, first));
}

/// One step of a chain: next[i] = 2 prev[(i + 1) % 4] + prev[i], a stage of its own domain.
Stage chain_step(const Tensor& prev, const Tensor& next) {
  Var i("i");
  return compute(next, over(next, {i}),
                 load(prev, {(Expr(i) + 1) % 4}) * 2.0 + load(prev, {Expr(i)}));
}

TEST(IrEquality, StagesUpToARenamingOfTensors) {
  auto temp = [](const std::string& name, int64_t size = 4, DType t = DType::kF32) {
    return make_tensor(name, t, {size}, TensorRole::kTemporary);
  };
  Tensor x0 = make_tensor("x0", DType::kF32, {4}, TensorRole::kInput);
  Tensor x1 = temp("x1"), x2 = temp("x2"), x3 = temp("x3");
  // Iteration 1 and 2 compute alike: x1 -> x2 stands for x0 -> x1 (any role and name).
  TensorRenaming renaming;
  EXPECT_TRUE(structurally_equal_renaming(chain_step(x0, x1), chain_step(x1, x2), renaming));
  EXPECT_EQ(renaming.forward.at(x0.get()), x1.get());
  EXPECT_EQ(renaming.forward.at(x1.get()), x2.get());
  EXPECT_EQ(renaming.backward.at(x2.get()), x1.get());
  EXPECT_FALSE(structurally_equal(chain_step(x0, x1), chain_step(x1, x2)));  // by name
  EXPECT_EQ(structural_hash_up_to_tensors(chain_step(x0, x1)),
            structural_hash_up_to_tensors(chain_step(x1, x2)));
  // One to one: x1 cannot stand for both x0 and x1.
  TensorRenaming both;
  Var i("i");
  Stage reads_two = compute(x2, over(x2, {i}), load(x0, {Expr(i)}) + load(x1, {Expr(i)}));
  Stage reads_one = compute(x3, over(x3, {i}), load(x1, {Expr(i)}) + load(x1, {Expr(i)}));
  EXPECT_FALSE(structurally_equal_renaming(reads_two, reads_one, both));
  // Tensors of another shape or dtype never correspond.
  TensorRenaming shapes;
  Tensor wide = temp("wide", 8), wide_next = temp("wide_next", 8);
  EXPECT_FALSE(structurally_equal_renaming(chain_step(x0, x1), chain_step(wide, wide_next), shapes));
  TensorRenaming dtypes;
  Tensor d0 = temp("d0", 4, DType::kF64), d1 = temp("d1", 4, DType::kF64);
  EXPECT_FALSE(structurally_equal_renaming(chain_step(x0, x1), chain_step(d0, d1), dtypes));
  // A different computation is different whatever the tensors.
  TensorRenaming other;
  Stage shifted = compute(x2, over(x2, {i}), load(x1, {(Expr(i) + 3) % 4}) * 2.0 + load(x1, {Expr(i)}));
  EXPECT_FALSE(structurally_equal_renaming(chain_step(x0, x1), shifted, other));
  EXPECT_NE(structural_hash_up_to_tensors(chain_step(x0, x1)), structural_hash_up_to_tensors(shifted));
}

}  // namespace
}  // namespace adjoint::ir
