// The dynamic-shape policy without a GPU (runtime/dynamic_policy.h): the decisions of never,
// auto and always, the keys of generic programs (which axes, which index width), the fallback
// to specialization outside a generic program's bounds, the compile counts of size sweeps as
// the engine's cache resolves them (a specialization already prepared is a hit; a new one asks
// the policy), the binding of a generic program to a specialization's sizes, and NVRTC
// accepting the generic kernels (skipped when NVRTC is missing).
#include <gtest/gtest.h>

#include <set>

#include "compiler/lower.h"
#include "compiler/lower_token_pair.h"
#include "ir/error.h"
#include "ops/registry.h"
#include "runtime/dynamic_policy.h"
#include "runtime/engine.h"
#include "runtime/nvrtc.h"

namespace adjoint::runtime {
namespace {

std::string upsample2d(int64_t n, int64_t in, int64_t out) {
  return "upsample_nearest2d_backward dtype=f16 input_size=" + std::to_string(n) + ",16," +
         std::to_string(in) + "," + std::to_string(in) + " output_size=" + std::to_string(out) +
         "," + std::to_string(out);
}

/// The engine's resolution of a sequence of specializations: each new specialization text asks
/// the policy; the programs built are the specialized texts and the generic keys (each once).
struct Sweep {
  DynamicPolicy policy;
  std::set<std::string> prepared, built;
  std::vector<ProgramChoice> choices;
  void call(const std::string& text, DynamicMode mode) {
    if (!prepared.insert(text).second) return;  // an in-memory cache hit
    ProgramChoice choice = choose_program(ops::parse_specialization(text), policy, mode);
    built.insert(choice.generic ? choice.key : text);
    choices.push_back(std::move(choice));
  }
};

TEST(DynamicPolicy, AutoSpecializesTheFirstSizeAndGoesGenericOnTheSecond) {
  DynamicPolicy policy;
  const ops::DynamicOp& op = *ops::find_dynamic_op("upsample_nearest2d_backward");
  auto observe = [&](const std::string& text) {
    return policy.observe(ops::parse_specialization(text), op, DynamicMode::kAuto);
  };
  EXPECT_TRUE(observe(upsample2d(4, 32, 64)).empty());
  EXPECT_TRUE(observe(upsample2d(4, 32, 64)).empty());  // the same size again
  EXPECT_EQ(observe(upsample2d(8, 32, 64)), std::vector<std::string>{"input_size[0]"});
  EXPECT_EQ(observe(upsample2d(4, 16, 64)),
            (std::vector<std::string>{"input_size[0]", "input_size[2]", "input_size[3]"}));
  // Another family (another dtype) starts afresh.
  EXPECT_TRUE(policy
                  .observe(ops::parse_specialization("upsample_nearest2d_backward dtype=f32 "
                                                     "input_size=9,16,32,32 output_size=64,64"),
                           op, DynamicMode::kAuto)
                  .empty());
  EXPECT_TRUE(policy.observe(ops::parse_specialization(upsample2d(3, 8, 8)), op,
                             DynamicMode::kNever)
                  .empty());
  EXPECT_EQ(policy.observe(ops::parse_specialization(upsample2d(5, 8, 8)), op,
                           DynamicMode::kAlways)
                .size(),
            5u);
}

TEST(DynamicPolicy, ModesParseAndNameTheVariableOnError) {
  EXPECT_EQ(parse_dynamic_mode("never", "X"), DynamicMode::kNever);
  EXPECT_EQ(parse_dynamic_mode("always", "X"), DynamicMode::kAlways);
  EXPECT_EQ(parse_dynamic_mode("batch", "X"), DynamicMode::kBatch);
  EXPECT_EQ(parse_dynamic_mode("auto", "X"), DynamicMode::kAuto);
  EXPECT_STREQ(dynamic_mode_name(DynamicMode::kBatch), "batch");
  try {
    parse_dynamic_mode("sometimes", "ADJOINT_DYNAMIC");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "ADJOINT_DYNAMIC: expected never, batch, auto or always, got 'sometimes'");
  }
}

TEST(DynamicPolicy, GenericKeysNameTheGenericAxesAndTheIndexWidth) {
  DynamicPolicy policy;
  ProgramChoice small = choose_program(ops::parse_specialization(upsample2d(2, 8, 16)), policy,
                                       DynamicMode::kAlways);
  ASSERT_TRUE(small.generic);
  EXPECT_EQ(small.key,
            "generic upsample_nearest2d_backward dtype=f16 input_size=?,16,?,? output_size=?,? "
            "scales_h=none scales_w=none layout=contiguous |index32");
  EXPECT_EQ(small.size_values, (std::vector<int64_t>{2, 8, 8, 16, 16}));
  ProgramChoice large = choose_program(
      ops::parse_specialization(upsample2d(40000, 8, 1024)), policy, DynamicMode::kAlways);
  EXPECT_NE(large.key.find("|index64"), std::string::npos);  // 40000*16*1024^2 elements
  // Beyond the generic program's bound on spatial sizes (2^22): specialized.
  ProgramChoice beyond = choose_program(
      ops::parse_specialization("upsample_nearest1d_backward dtype=f32 input_size=1,1,5 "
                                "output_size=5000000"),
      policy, DynamicMode::kAlways);
  EXPECT_FALSE(beyond.generic);
  // A grad_output read in place with strides of its own: specialized.
  ProgramChoice strided = choose_program(
      ops::parse_specialization(upsample2d(2, 8, 16) + " grad_output_strides=8192,256,16,1"),
      policy, DynamicMode::kAlways);
  EXPECT_FALSE(strided.generic);
}

TEST(DynamicPolicy, FiftyBatchesTimesThreeSpatialSizesBuildAtMostThreePrograms) {
  for (bool batch_outer : {true, false}) {
    Sweep sweep;
    const int64_t spatial[] = {16, 32, 64};
    for (int i = 0; i < 50 * 3; ++i) {
      int64_t n = 1 + (batch_outer ? i / 3 : i % 50);
      int64_t s = spatial[batch_outer ? i % 3 : i / 50];
      sweep.call(upsample2d(n, s, 2 * s), DynamicMode::kAuto);
    }
    EXPECT_LE(sweep.built.size(), 3u) << (batch_outer ? "batch outer" : "spatial outer");
    EXPECT_EQ(sweep.prepared.size(), 150u);
    Sweep never;
    for (int i = 0; i < 150; ++i)
      never.call(upsample2d(1 + i % 50, spatial[i / 50], 2 * spatial[i / 50]), DynamicMode::kNever);
    EXPECT_EQ(never.built.size(), 150u);
  }
}

/// Mode batch (the default): auto over the batch only. Spatial sizes stay specialized; the
/// family (every dynamic axis blanked) pools the batches seen at every spatial size. So a sweep
/// of 50 batches x 3 spatial sizes builds one program generic in the batch per spatial size,
/// and a specialized one for each call before a second batch was seen: 3 when the batch is
/// the outer loop (batch 1 at each spatial size), 1 when it is the inner one.
TEST(DynamicPolicy, BatchModeMakesOnlyTheBatchGeneric) {
  for (bool batch_outer : {true, false}) {
    Sweep sweep;
    const int64_t spatial[] = {16, 32, 64};
    for (int i = 0; i < 50 * 3; ++i) {
      int64_t n = 1 + (batch_outer ? i / 3 : i % 50);
      int64_t s = spatial[batch_outer ? i % 3 : i / 50];
      sweep.call(upsample2d(n, s, 2 * s), DynamicMode::kBatch);
    }
    EXPECT_EQ(sweep.built.size(), batch_outer ? 6u : 4u) << (batch_outer ? "batch outer" : "spatial outer");
    size_t generic = 0;
    for (const ProgramChoice& c : sweep.choices) {
      if (!c.generic) continue;
      ++generic;
      EXPECT_EQ(c.axes, std::vector<std::string>{"input_size[0]"});
      EXPECT_TRUE(c.require_outer_batch);
      EXPECT_NE(c.key.find("input_size=?,16,"), std::string::npos) << c.key;
      EXPECT_NE(c.key.find("|index32"), std::string::npos) << c.key;
    }
    EXPECT_EQ(generic, batch_outer ? 147u : 149u);
  }
  // Storage past the 32-bit bound: the batch-generic program would be 64-bit, which
  // lower_outer_generic does not take, so mode batch specializes.
  DynamicPolicy policy;
  EXPECT_FALSE(choose_program(ops::parse_specialization(upsample2d(40000, 8, 1024)), policy,
                              DynamicMode::kBatch)
                   .generic);
  EXPECT_FALSE(choose_program(ops::parse_specialization(upsample2d(40001, 8, 1024)), policy,
                              DynamicMode::kBatch)
                   .generic);
  ProgramChoice auto_choice = choose_program(ops::parse_specialization(upsample2d(3, 8, 16)),
                                             policy, DynamicMode::kAlways);
  EXPECT_FALSE(auto_choice.require_outer_batch);
}

/// The token axes of every mHC op (scalar attributes batch and seq, ops/mhc_token_axes.h):
/// under auto, 100 distinct token counts B*S build one specialized program and one generic in
/// batch and seq (issue 12's target of at most 2); the key blanks both; mode batch makes the
/// per-token ops' pair generic (DynamicAxis::token_pair) and keeps mhc_pre and mhc_pre_backward
/// specialized; the binding has the specialization's shapes.
TEST(DynamicPolicy, MhcTokenCountsUnderAutoBuildTwoPrograms) {
  const std::vector<std::pair<std::string, std::string>> family = {
      {"mhc_pre_backward", "n=4 dim=64 dtype=bf16"},
      {"mhc_pre", "n=4 dim=64 dtype=bf16"},
      {"mhc_post", "n=4 dim=64"},
      {"mhc_post_backward", "n=6 dim=32"},
      {"mhc_sinkhorn", "n=4"},
      {"mhc_sinkhorn_backward", "n=4 t_max=3"}};
  for (const auto& [op, attributes] : family) {
    SCOPED_TRACE(op);
    auto mhc = [&](int64_t b, int64_t s) {
      return op + " batch=" + std::to_string(b) + " seq=" + std::to_string(s) + " " + attributes;
    };
    Sweep sweep;
    std::set<int64_t> tokens;
    for (int i = 0; tokens.size() < 100; ++i) {
      const int64_t b = 1 + i % 3, s = 1 + (i * 37) % 997;
      if (!tokens.insert(b * s).second) continue;
      sweep.call(mhc(b, s), DynamicMode::kAuto);
    }
    EXPECT_EQ(sweep.built.size(), 2u);
    for (const ProgramChoice& c : sweep.choices) {
      if (!c.generic) continue;
      EXPECT_EQ(c.axes, (std::vector<std::string>{"batch", "seq"}));
      EXPECT_NE(c.key.find("batch=? "), std::string::npos) << c.key;
      EXPECT_NE(c.key.find("seq=? "), std::string::npos) << c.key;
    }
    // Mode batch: the per-token ops are a token pair (both axes generic once either varies,
    // lowered as one token axis); mhc_pre and mhc_pre_backward stay specialized.
    const bool pair = op != "mhc_pre" && op != "mhc_pre_backward";
    Sweep batch;
    for (int64_t s = 1; s <= 20; ++s) batch.call(mhc(1, s), DynamicMode::kBatch);
    for (int64_t b = 2; b <= 5; ++b) batch.call(mhc(b, 20), DynamicMode::kBatch);
    EXPECT_EQ(batch.built.size(), pair ? 2u : 24u);
    for (const ProgramChoice& c : batch.choices) {
      if (!c.generic) continue;
      EXPECT_EQ(c.axes, (std::vector<std::string>{"batch", "seq"}));
      EXPECT_TRUE(c.require_outer_batch);
      EXPECT_EQ(compiler::token_pair_refusal(c.program), "");
      // What the engine then requires of every kernel (else it specializes).
      for (const compiler::CompiledKernel& k : compiler::lower(c.program, {}).kernels)
        EXPECT_TRUE(k.one_index_per_thread) << k.entry;
    }

    DynamicPolicy policy;
    ProgramChoice choice =
        choose_program(ops::parse_specialization(mhc(3, 5)), policy, DynamicMode::kAlways);
    ASSERT_TRUE(choice.generic);
    EXPECT_EQ(choice.size_values, (std::vector<int64_t>{3, 5}));
    compiler::CompiledProgram compiled = compiler::lower(choice.program, {});
    auto generic = std::make_shared<LoadedProgram>();
    generic->sizes = compiled.sizes;
    generic->buffers = compiled.buffers;
    std::shared_ptr<const LoadedProgram> bound = bind_generic_program(generic, "spec", {7, 11});
    ir::Program specialized = ops::parse_specialization(mhc(7, 11)).build_program();
    for (const compiler::BufferInfo& b : bound->buffers) {
      ir::Tensor t = specialized.find_tensor(b.name);
      if (!t) continue;  // the partials of the split token sums
      EXPECT_EQ(b.shape, t->shape) << b.name;
      EXPECT_EQ(b.strides, t->strides) << b.name;
    }
  }
}

TEST(DynamicPolicy, ABindingOfAGenericProgramHasTheSpecializationsShapesAndGrid) {
  DynamicPolicy policy;
  ProgramChoice choice = choose_program(
      ops::parse_specialization(upsample2d(3, 5, 7) + " layout=channels_last"), policy,
      DynamicMode::kAlways);
  ASSERT_TRUE(choice.generic);
  compiler::CompiledProgram compiled = compiler::lower(choice.program, {});
  auto generic = std::make_shared<LoadedProgram>();
  generic->sizes = compiled.sizes;
  generic->buffers = compiled.buffers;
  for (const compiler::CompiledKernel& k : compiled.kernels) {
    LoadedKernel loaded;
    loaded.launch = k.launch;
    loaded.size_params = k.size_params;
    loaded.size_param_bytes = k.size_param_bytes;
    loaded.points = k.points;
    generic->kernels.push_back(loaded);
  }
  std::shared_ptr<const LoadedProgram> bound =
      bind_generic_program(generic, "spec", {6, 9, 9, 20, 20});
  ir::Program specialized = ops::parse_specialization(upsample2d(6, 9, 20) +
                                                      " layout=channels_last").build_program();
  ASSERT_EQ(bound->buffers.size(), 2u);
  for (const compiler::BufferInfo& b : bound->buffers) {
    ir::Tensor t = specialized.find_tensor(b.name);
    EXPECT_EQ(b.shape, t->shape) << b.name;
    EXPECT_EQ(b.strides, t->strides) << b.name;
    EXPECT_EQ(b.bytes, t->storage_elements() * 2) << b.name;
  }
  ASSERT_EQ(bound->kernels.size(), 1u);
  EXPECT_EQ(bound->kernels[0].size_args, (std::vector<int64_t>{6, 9, 9, 20, 20}));
  EXPECT_EQ(bound->kernels[0].launch.grid[0], (6 * 16 * 9 * 9 + 255) / 256);
  EXPECT_EQ(bound->kernels[0].size_param_bytes, 4);
}

TEST(DynamicPolicy, NvrtcCompilesTheGenericKernels) {
  try {
    Nvrtc::instance();
  } catch (const Error& e) {
    GTEST_SKIP() << "NVRTC is not available: " << e.what();
  }
  DynamicPolicy policy;
  for (const char* text :
       {"upsample_nearest1d_backward dtype=f32 input_size=2,3,7 output_size=17",
        "_upsample_nearest_exact2d_backward dtype=bf16 input_size=2,16,32,32 output_size=64,64 "
        "layout=channels_last",
        "upsample_nearest3d_backward dtype=f64 input_size=1,2,3,4,5 output_size=6,7,3 scales_d=2"}) {
    ProgramChoice choice = choose_program(ops::parse_specialization(text), policy,
                                          DynamicMode::kAlways);
    ASSERT_TRUE(choice.generic) << text;
    for (const compiler::CompiledKernel& k : compiler::lower(choice.program, {}).kernels) {
      CompileRequest request;
      request.source = k.source;
      request.name = k.entry + ".cu";
      request.arch = 90;
      CompileResult result = Nvrtc::instance().compile(request);
      EXPECT_FALSE(result.cubin.empty()) << text;
      EXPECT_EQ(result.log.find("warning"), std::string::npos) << result.log << k.source;
    }
  }
}

}  // namespace
}  // namespace adjoint::runtime
