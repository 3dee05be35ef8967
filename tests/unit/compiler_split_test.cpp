// Tests of split_reductions: which reductions it splits and into how many partials (derived
// from the shapes, forced, switched off), the kernels and temporaries it adds, the notes the
// dumps print, the reductions it must leave serial, and that the split program interprets to
// the same values as the original (exactly, on values whose sums are exact).
#include <gtest/gtest.h>

#include <random>

#include "compiler/program_utils.h"
#include "compiler/split_reductions.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "ops/registry.h"

namespace adjoint::compiler {
namespace {

using ir::DType;
using ir::Expr;
using ir::Var;

/// out[p] = sum over `trips` of x[p, t], for `points` points.
ir::Program row_sums(int64_t points, int64_t trips, DType acc = DType::kF32) {
  ir::ProgramBuilder b("row_sums");
  ir::Tensor x = b.input("x", DType::kF32, {points, trips});
  ir::Tensor out = b.output("out", acc, {points});
  Var p("p"), t("t");
  b.kernel("sums", {ir::compute(out, ir::over(out, {p}),
                                ir::sum({ir::range(t, Expr(trips))},
                                        ir::cast(acc, ir::load(x, {p, t})), acc))});
  return std::move(b).build();
}

/// Exact inputs: multiples of 1/16 in [-8, 8].
ir::HostBuffers exact_inputs(const ir::Program& p) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> value(-128, 128);
  ir::HostBuffers in;
  for (const ir::Tensor& t : p.inputs) {
    for (int64_t i = 0; i < t->storage_elements(); ++i) in[t->name].push_back(value(rng) / 16.0);
  }
  return in;
}

TEST(SplitReductions, DerivesPartialsUntilTheDomainFillsTheGpu) {
  ir::Program p = row_sums(1024, 4096);
  ScheduleNotes notes;
  ir::Program split = split_reductions(p, {}, &notes);
  ASSERT_EQ(split.kernels.size(), 2u);
  EXPECT_EQ(split.kernels[0].name, "sums_out_partials");
  ASSERT_EQ(split.temporaries.size(), 1u);
  // 256 partials (each 16 iterations: fewer than the 1024 the 2^20-thread target asks for);
  // partials innermost (t is contiguous in x).
  EXPECT_EQ(split.temporaries[0]->shape, (std::vector<int64_t>{1024, 256}));
  EXPECT_NE(notes.at("sums").find("split into G=256 partials over t"), std::string::npos)
      << notes.at("sums");
  EXPECT_NE(notes.at("sums_out_partials").find("stage 1 of 2"), std::string::npos);
  ir::HostBuffers in = exact_inputs(p);
  EXPECT_EQ(ir::interpret(split, in).at("out"), ir::interpret(p, in).at("out"));
}

/// out[p] = max over t of x[p, t].
ir::Program row_maxima(int64_t points, int64_t trips) {
  ir::ProgramBuilder b("row_maxima");
  ir::Tensor x = b.input("x", DType::kF32, {points, trips});
  ir::Tensor out = b.output("out", DType::kF32, {points});
  Var p("p"), t("t");
  b.kernel("maxima", {ir::compute(out, ir::over(out, {p}),
                                  ir::maximum({ir::range(t, Expr(trips))}, ir::load(x, {p, t}),
                                              DType::kF32))});
  return std::move(b).build();
}

TEST(SplitReductions, ExtentsThatGDoesNotDivideSumTheirTailInTheCombine) {
  // 4099 is prime: before tails, no G >= 2 divided it and the sum stayed serial.
  ir::Program p = row_sums(1024, 4099);
  ScheduleNotes notes;
  ir::Program split = split_reductions(p, {}, &notes);
  ASSERT_EQ(split.temporaries.size(), 1u);
  EXPECT_EQ(split.temporaries[0]->shape, (std::vector<int64_t>{1024, 256}));
  EXPECT_NE(notes.at("sums").find("the tail t in [4096, 4099) summed after them in the combine"),
            std::string::npos)
      << notes.at("sums");
  ir::HostBuffers in = exact_inputs(p);
  EXPECT_EQ(ir::interpret(split, in).at("out"), ir::interpret(p, in).at("out"));
  ReductionSplitOptions divides;
  divides.tail = false;
  EXPECT_TRUE(same_program(split_reductions(p, divides), p));
  // A max joins its tail with max, not +.
  ir::Program maxima = row_maxima(16, 1031);
  ir::Program split_max = split_reductions(maxima, {});
  ASSERT_EQ(split_max.temporaries.size(), 1u);
  ir::HostBuffers values = exact_inputs(maxima);
  EXPECT_EQ(ir::interpret(split_max, values).at("out"), ir::interpret(maxima, values).at("out"));
}

TEST(SplitReductions, EveryPartialKeepsAMinimumOfIterations) {
  // One point: G stops at 4096 / 16 = 256 so that each partial still loops 16 times.
  ir::Program split = split_reductions(row_sums(1, 4096), {});
  ASSERT_EQ(split.temporaries.size(), 1u);
  EXPECT_EQ(split.temporaries[0]->shape, (std::vector<int64_t>{1, 256}));
}

TEST(SplitReductions, LeavesShortReductionsAndFullDomainsSerial) {
  ScheduleNotes notes;
  ir::Program shorter = row_sums(64, 256);
  EXPECT_TRUE(same_program(split_reductions(shorter, {}, &notes), shorter));
  EXPECT_NE(notes.at("sums").find("serial in the thread (fewer than 512"), std::string::npos);
  ir::Program full = row_sums(int64_t{1} << 20, 1024);
  EXPECT_TRUE(same_program(split_reductions(full, {}, &notes), full));
  EXPECT_NE(notes.at("sums").find("the domain alone fills the GPU"), std::string::npos);
}

TEST(SplitReductions, KnobForcesOrSwitchesOff) {
  ir::Program p = row_sums(8, 96);
  ReductionSplitOptions forced;
  forced.forced_partials = 6;
  ir::Program split = split_reductions(p, forced);
  ASSERT_EQ(split.temporaries.size(), 1u);
  EXPECT_EQ(split.temporaries[0]->shape, (std::vector<int64_t>{8, 6}));
  ir::HostBuffers in = exact_inputs(p);
  EXPECT_EQ(ir::interpret(split, in).at("out"), ir::interpret(p, in).at("out"));
  forced.forced_partials = 5;  // does not divide 96: 19 iterations each, the tail of 1 combined
  ir::Program tailed = split_reductions(p, forced);
  ASSERT_EQ(tailed.temporaries.size(), 1u);
  EXPECT_EQ(tailed.temporaries[0]->shape, (std::vector<int64_t>{8, 5}));
  EXPECT_EQ(ir::interpret(tailed, in).at("out"), ir::interpret(p, in).at("out"));
  ScheduleNotes notes;
  forced.forced_partials = 50;  // 1 iteration each would leave a tail of 46
  EXPECT_TRUE(same_program(split_reductions(p, forced, &notes), p));
  EXPECT_NE(notes.at("sums").find("leaves a tail longer than a partial"), std::string::npos);
  forced.forced_partials = 5;
  forced.tail = false;  // ADJOINT_TUNE_SPLIT_TAIL=0: G must divide
  EXPECT_TRUE(same_program(split_reductions(p, forced, &notes), p));
  EXPECT_NE(notes.at("sums").find("does not divide 96"), std::string::npos);
  ReductionSplitOptions off;
  off.forced_partials = 0;
  ir::Program big = row_sums(4, 1 << 14);
  EXPECT_TRUE(same_program(split_reductions(big, off), big));
  off.forced_partials = -2;
  EXPECT_THROW(split_reductions(big, off), Error);
  ReductionSplitOptions wider;
  wider.target_threads = 1 << 12;  // 4 points x 1024 partials
  ir::Program split_wide = split_reductions(big, wider);
  ASSERT_EQ(split_wide.temporaries.size(), 1u);
  EXPECT_EQ(split_wide.temporaries[0]->shape, (std::vector<int64_t>{4, 1024}));
  wider.target_threads = 3000;
  EXPECT_THROW(split_reductions(big, wider), Error);
}

TEST(SplitReductions, RefusesHalfAccumulatorsAndReadsOfItsOwnKernel) {
  ScheduleNotes notes;
  ir::Program half = row_sums(4, 1 << 14, DType::kBF16);
  EXPECT_TRUE(same_program(split_reductions(half, {}, &notes), half));
  EXPECT_NE(notes.at("sums").find("accumulates in bf16"), std::string::npos);

  ir::ProgramBuilder b("chained");
  ir::Tensor x = b.input("x", DType::kF32, {4});
  ir::Tensor y = b.output("y", DType::kF32, {4});
  ir::Tensor out = b.output("out", DType::kF32, {4});
  Var i("i"), p("p"), t("t");
  b.kernel("both", {ir::compute(y, ir::over(y, {i}), ir::load(x, {i}) * 2.0),
                    ir::compute(out, ir::over(out, {p}),
                                ir::sum({ir::range(t, Expr(4096))}, ir::load(y, {t % 4}),
                                        DType::kF32))});
  ir::Program chained = std::move(b).build();
  EXPECT_TRUE(same_program(split_reductions(chained, {}, &notes), chained));
  EXPECT_NE(notes.at("both").find("reads y, which its kernel writes"), std::string::npos)
      << notes.at("both");
}

TEST(SplitReductions, TokenSumsOfTheMhcBackwardPutPartialsOutermost) {
  ir::Program p = ops::parse_specialization(
                      "mhc_pre_backward batch=1 seq=4096 n=4 dim=4096 dtype=bf16")
                      .build_program();
  ScheduleNotes notes;
  ir::Program split = split_reductions(p, {}, &notes);
  ir::Tensor x_mix = split.find_tensor("x_mix_partials");
  ASSERT_TRUE(x_mix);
  EXPECT_EQ(x_mix->shape, (std::vector<int64_t>{8, 24, 4, 4096}));  // g, k, i, d
  ASSERT_TRUE(split.find_tensor("dh_pre2_partials"));
  EXPECT_EQ(split.find_tensor("dh_pre2_partials")->shape,
            (std::vector<int64_t>{1, 4096, 4, 64}));  // b, s, i, g: g strides d
  ASSERT_TRUE(split.find_tensor("dbias_partials"));
  // x_mix's 393,216 points will be tiled 24 to a thread: 8 partials pass 2^20 / 8 threads.
  EXPECT_NE(notes.at("mhc_x_mix").find("split into G=8 partials over s"), std::string::npos)
      << notes.at("mhc_x_mix");
  EXPECT_NE(notes.at("mhc_x_mix").find("a thread tile of 24"), std::string::npos);
  // Without tiles the split counts every point as a thread again.
  ReductionSplitOptions untiled;
  untiled.tiles.forced_points = 0;
  ScheduleNotes plain;
  split_reductions(p, untiled, &plain);
  EXPECT_NE(plain.at("mhc_x_mix").find("split into G=4 partials over s"), std::string::npos)
      << plain.at("mhc_x_mix");
  EXPECT_NE(notes.at("mhc_rms_grad").find("serial"), std::string::npos);
}

/// The partials count with count_vector for x_mix (mhc_pre_backward, bf16) at a shape.
int64_t counted_x_mix_partials(const std::string& spec, std::string* note = nullptr) {
  ir::Program p = ops::parse_specialization(spec).build_program();
  ReductionSplitOptions options;
  options.count_vector = true;
  options.tiles.few_parts = 0;  // the tiles these counts were written for (16 k at n = 6)
  options.tiles.long_tile_accumulators = 64;  // and R x V within 64 (not a long tile's 96)
  ScheduleNotes notes;
  ir::Program split = split_reductions(p, options, &notes);
  if (note) *note = notes.at("mhc_x_mix");
  ir::Tensor partials = split.find_tensor("x_mix_partials");
  return partials ? partials->shape.front() : 1;
}

TEST(SplitReductions, CountVectorCountsTheThreadsThePartialsKernelLaunches) {
  // n = 6: x_mix's 48 k tiled 16 at a time with groups of 4 d: G = 8 launched 36,864 threads;
  // counted, G = 16 launches 73,728 (target 2^20 / 16).
  std::string note;
  EXPECT_EQ(counted_x_mix_partials("mhc_pre_backward batch=2 seq=2048 n=6 dim=1024 dtype=bf16",
                                   &note),
            16);
  EXPECT_NE(note.find("launches 73728 threads (threads of R=16 points x V=4)"),
            std::string::npos)
      << note;
  // n = 4: R = 24 with V = 2 already launched 65,536 threads: G unchanged. At S65536 D512,
  // G = 32 would shrink the partials kernel's tile to 12 with V = 4 (32,768 threads): 64 stays.
  EXPECT_EQ(counted_x_mix_partials("mhc_pre_backward batch=1 seq=4096 n=4 dim=4096 dtype=bf16"),
            8);
  EXPECT_EQ(counted_x_mix_partials("mhc_pre_backward batch=1 seq=4096 n=4 dim=2560 dtype=bf16"),
            16);
  EXPECT_EQ(counted_x_mix_partials("mhc_pre_backward batch=1 seq=65536 n=4 dim=512 dtype=bf16"),
            64);}

}  // namespace
}  // namespace adjoint::compiler
