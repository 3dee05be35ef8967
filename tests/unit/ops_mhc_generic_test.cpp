// The mHC family generic in its token axes (ops/mhc_token_axes.h), without a GPU: every op is
// in the dynamic table with the axes batch and seq; its generic program, interpreted at token
// counts other than the specialization's (1, odd, B > 1, S = 1), gives exactly the specialized
// program's outputs at those counts (the same IR over runtime extents); its per-token tensors
// are [B, S, row...] with the specialization's rows and dtypes; an unknown axis is refused,
// naming the op; the generic key blanks the generic axes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ops/dynamic_ops.h"
#include "ops/registry.h"
#include "reference/reference.h"

namespace adjoint {
namespace {

/// One op of the family, the attributes other than batch and seq.
struct FamilyCase {
  std::string op, attributes;
};

const std::vector<FamilyCase> kFamily = {
    {"mhc_pre", "n=4 dim=12 dtype=bf16"},
    {"mhc_pre", "n=6 dim=7 dtype=f32"},
    {"mhc_post", "n=4 dim=12 dtype=bf16"},
    {"mhc_post_backward", "n=6 dim=7 dtype=f16"},
    {"mhc_sinkhorn", "n=4 t_max=3"},
    {"mhc_sinkhorn_backward", "n=6 t_max=2 eps=0.01 dtype=f64"},
};

std::string spec_text(const FamilyCase& c, int64_t batch, int64_t seq) {
  return c.op + " batch=" + std::to_string(batch) + " seq=" + std::to_string(seq) + " " +
         c.attributes;
}

TEST(MhcGeneric, EveryOpOfTheFamilyDeclaresTheTokenAxes) {
  for (const char* op : {"mhc_pre", "mhc_pre_backward", "mhc_post", "mhc_post_backward",
                         "mhc_sinkhorn", "mhc_sinkhorn_backward"}) {
    const ops::DynamicOp* dynamic = ops::find_dynamic_op(op);
    ASSERT_NE(dynamic, nullptr) << op;
    ASSERT_EQ(dynamic->axes.size(), 2u) << op;
    EXPECT_EQ(dynamic->axes[0].name(), "batch") << op;
    EXPECT_EQ(dynamic->axes[1].name(), "seq") << op;
    EXPECT_FALSE(dynamic->axes[0].outer_batch || dynamic->axes[1].outer_batch) << op;
  }
}

TEST(MhcGeneric, InterpreterOfTheGenericProgramIsTheSpecializedProgramAtEveryTokenCount) {
  const std::vector<std::vector<std::string>> axis_sets = {{"batch", "seq"}, {"seq"}, {"batch"}};
  for (const FamilyCase& c : kFamily) {
    for (const std::vector<std::string>& axes : axis_sets) {
      const ops::Specialization base = ops::parse_specialization(spec_text(c, 2, 3));
      const ir::Program generic = ops::find_dynamic_op(c.op)->build_generic(base, axes);
      ASSERT_EQ(generic.sizes.size(), axes.size()) << c.op;
      for (auto [batch, seq] :
           std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 5}, {1, 7}, {4, 1}, {2, 3}}) {
        // An axis that is not generic keeps the specialization's value.
        if (axes.size() == 1 && axes[0] == "seq") batch = 2;
        if (axes.size() == 1 && axes[0] == "batch") seq = 3;
        std::vector<int64_t> sizes;
        for (const std::string& a : axes) sizes.push_back(a == "batch" ? batch : seq);
        const std::string text = spec_text(c, batch, seq);
        const ir::Program specialized = ops::parse_specialization(text).build_program();
        const ir::HostBuffers in =
            reference::make_inputs(ops::parse_specialization(text), specialized, 11);
        EXPECT_EQ(ir::interpret(generic, sizes, in), ir::interpret(specialized, in)) << text;
        EXPECT_EQ(ops::size_values(generic, ops::parse_specialization(text)), sizes) << text;
      }
    }
  }
}

TEST(MhcGeneric, PerTokenTensorsAreDynamicWithTheSpecializationsRows) {
  for (const FamilyCase& c : kFamily) {
    const ops::Specialization base = ops::parse_specialization(spec_text(c, 2, 3));
    const ir::Program specialized = base.build_program();
    const ir::Program generic = ops::find_dynamic_op(c.op)->build_generic(base, {"batch", "seq"});
    const std::string text = ir::to_string(generic);
    EXPECT_NE(text.find("size B = batch in [1, 2147483647]"), std::string::npos) << text;
    EXPECT_NE(text.find("size S = seq in [1, 2147483647]"), std::string::npos) << text;
    ASSERT_EQ(generic.inputs.size(), specialized.inputs.size()) << c.op;
    ASSERT_EQ(generic.outputs.size(), specialized.outputs.size()) << c.op;
    for (const auto* list : {&specialized.inputs, &specialized.outputs}) {
      for (const ir::Tensor& t : *list) {
        const ir::Tensor g = generic.find_tensor(t->name);
        ASSERT_TRUE(g) << c.op << " " << t->name;
        EXPECT_EQ(g->dtype, t->dtype) << c.op << " " << t->name;
        // Per-token tensors ([2, 3, ...] here) are dynamic; the parameters (phi, ...) are not.
        const bool per_token = t->shape.size() >= 2 && t->shape[0] == 2 && t->shape[1] == 3;
        EXPECT_EQ(g->is_dynamic(), per_token) << c.op << " " << t->name;
      }
    }
  }
}

TEST(MhcGeneric, UnknownAxesAreRefusedAndKeysBlankTheGenericOnes) {
  for (const FamilyCase& c : kFamily) {
    const ops::Specialization s = ops::parse_specialization(spec_text(c, 2, 3));
    try {
      ops::find_dynamic_op(c.op)->build_generic(s, {"n"});
      ADD_FAILURE() << c.op << ": generic in n was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.op + ": generic axis 'n'"), std::string::npos)
          << e.what();
    }
    const std::string key = ops::generic_key(s, {"batch", "seq"});
    EXPECT_EQ(key.rfind(c.op + " batch=? seq=? ", 0), 0u) << key;
  }
}

}  // namespace
}  // namespace adjoint
