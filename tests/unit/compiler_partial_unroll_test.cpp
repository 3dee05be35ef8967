// LowerOptions::partial_unroll: loops with a constant trip count above the full-unrolling
// limit get `#pragma unroll N` when asked for (and nothing by default, leaving NVVM's choice);
// fully unrolled short loops keep their plain pragma; out-of-range factors are named errors.
// (With the unroll policy off, LowerOptions::unroll_budget = 0: compiler_unroll_policy_test
// covers the policy.)
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "compiler/lower.h"
#include "ir/error.h"
#include "ops/registry.h"

namespace adjoint::compiler {
namespace {

/// The program below with the direct token sums and dvecx recomputed in dgamma, the mhc IR
/// this test was written for (ADJOINT_TUNE_MHC_X_MIX=0 ADJOINT_TUNE_MHC_DVECX=0).
constexpr ops::BuildOptions kDirectTokenSums{.mhc_x_mix_counts_phi = false,
                                             .mhc_store_dvecx = false};

/// mhc_pre_backward at a small shape: its dgamma kernel sums over b (2) and s (3) with
/// constant loops unrolled completely, and over k (24) with a longer constant loop.
std::string all_sources(int partial_unroll) {
  LowerOptions options;
  options.partial_unroll = partial_unroll;
  options.unroll_budget = 0;  // partial_unroll applies with the unroll policy off
  CompiledProgram program = lower(
      ops::parse_specialization("mhc_pre_backward batch=2 seq=3 n=4 dim=12")
          .build_program(kDirectTokenSums),
      options);
  std::string text;
  for (const CompiledKernel& kernel : program.kernels) text += kernel.source;
  return text;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(PartialUnroll, DefaultLeavesLongLoopsToNvvm) {
  const std::string text = all_sources(LowerOptions{}.partial_unroll);
  EXPECT_EQ(LowerOptions{}.partial_unroll, 0);
  EXPECT_EQ(text.find("#pragma unroll 4"), std::string::npos);
  EXPECT_NE(text.find("for (int k = 0; k < 24; ++k)"), std::string::npos);
}

TEST(PartialUnroll, LongConstantLoopsGetTheFactor) {
  const std::string text = all_sources(4);
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(#pragma unroll 4\n *for \(int k = 0; k < 24;)")))
      << text;
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(#pragma unroll 4\n *for \(int d = 0; d < 12;)")));
  // Every partially unrolled loop has a constant trip count above 8.
  const std::regex pragma_loop(R"(#pragma unroll 4\n *for \(int \w+ = 0; \w+ < (\d+);)");
  size_t loops = 0;
  for (std::sregex_iterator it(text.begin(), text.end(), pragma_loop), end; it != end; ++it) {
    EXPECT_GT(std::stoi((*it)[1]), 8) << (*it)[0];
    ++loops;
  }
  EXPECT_EQ(loops, count(text, "#pragma unroll 4"));
  // The short loops (2 and 3 trips) stay written for complete unrolling.
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(#pragma unroll\n *for \(int b = 0; b < 2;)")));
  EXPECT_EQ(count(text, "#pragma unroll 4"), count(all_sources(7), "#pragma unroll 7"));
  // Only the loop pragmas differ from the default output.
  std::string stripped = text;
  for (size_t at; (at = stripped.find("#pragma unroll 4\n")) != std::string::npos;) {
    const size_t line_start = stripped.rfind('\n', at) + 1;
    stripped.erase(line_start, at + 17 - line_start);
  }
  EXPECT_EQ(stripped, all_sources(0));
}

TEST(PartialUnroll, OutOfRangeFactorIsANamedError) {
  for (int bad : {-1, 65}) {
    try {
      all_sources(bad);
      ADD_FAILURE() << bad << ": expected an error";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(error.what()).find("partial_unroll"), std::string::npos);
      EXPECT_NE(std::string(error.what()).find(std::to_string(bad)), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace adjoint::compiler
