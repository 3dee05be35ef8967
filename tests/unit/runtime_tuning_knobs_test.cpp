// runtime_tuning_knobs_test: the ADJOINT_TUNE_* variables (runtime/tuning_knobs.h). Unset, they
// must leave the compiler and the ops at their own defaults (the lowered kernels of every op
// family are the ones LowerOptions{} gives, character for character, and the programs the ones
// ops::BuildOptions{} builds); set, they parse as documented; invalid, they fail with an error
// that names the variable, what it accepts and what it got.
#include "runtime/tuning_knobs.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "compiler/compiled_program.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "ops/registry.h"

namespace adjoint::runtime {
namespace {

EnvironmentLookup environment(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const char* name) -> const char* {
    auto it = values.find(name);
    return it == values.end() ? nullptr : it->second.c_str();
  };
}

std::string all_sources(const compiler::CompiledProgram& program) {
  std::string text;
  for (const compiler::CompiledKernel& k : program.kernels) text += k.source;
  return text;
}

TEST(TuningKnobs, UnsetKnobsLeaveTheCompilersDefaults) {
  const TuningKnobs knobs = read_tuning_knobs(environment({}));
  compiler::LowerOptions from_knobs;
  apply_tuning_knobs(knobs, from_knobs);
  for (const char* spec :
       {"upsample_nearest2d_backward dtype=bf16 input_size=2,3,16,16 output_size=32,24",
        "grid_sampler_2d_backward dtype=f32 input_size=2,3,5,7 output_size=40,36 "
        "interpolation_mode=bicubic",
        "grid_sampler_2d_backward dtype=bf16 input_size=1,4,3,4 output_size=64,48",
        "mhc_pre_backward dtype=bf16 batch=1 seq=512 n=4 dim=1024",
        "mhc_sinkhorn_backward dtype=f32 batch=1 seq=64 n=4"}) {
    const ir::Program program = ops::parse_specialization(spec).build_program();
    EXPECT_EQ(all_sources(compiler::lower(program, compiler::LowerOptions{})),
              all_sources(compiler::lower(program, from_knobs)))
        << spec;
  }
  EXPECT_TRUE(knobs.temporary_arena);
  EXPECT_EQ(knobs.programmatic_launch, 2);
}

/// mhc_pre_backward at `tokens` = B S (B = 1): x_mix from 4 on, dvecx below (docs/mhc.md).
std::string mhc_backward(int tokens) {
  return "mhc_pre_backward dtype=bf16 batch=1 seq=" + std::to_string(tokens) + " n=4 dim=64";
}

bool has_temporary(const ir::Program& program, const std::string& name) {
  for (const ir::Tensor& t : program.temporaries) {
    if (t->name == name) return true;
  }
  return false;
}

TEST(TuningKnobs, UnsetKnobsLeaveTheOpsDefaultPrograms) {
  ops::BuildOptions from_knobs;
  apply_tuning_knobs(read_tuning_knobs(environment({})), from_knobs);
  EXPECT_EQ(from_knobs, ops::BuildOptions{});
  for (int tokens : {1, 3, 4, 512}) {
    const ops::Specialization spec = ops::parse_specialization(mhc_backward(tokens));
    EXPECT_EQ(ir::to_string(spec.build_program(from_knobs)), ir::to_string(spec.build_program()))
        << tokens;
  }
}

TEST(TuningKnobs, TheMhcKnobsChooseTheBackwardsProgram) {
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"ADJOINT_TUNE_MHC_X_MIX", "0"},
                                                        {"ADJOINT_TUNE_MHC_X_MIX", "1"},
                                                        {"ADJOINT_TUNE_MHC_DVECX", "0"},
                                                        {"ADJOINT_TUNE_MHC_DVECX", "1"}}) {
    ops::BuildOptions options;
    apply_tuning_knobs(read_tuning_knobs(environment({{name, value}})), options);
    const bool on = value == "1";
    const bool x_mix_knob = name == "ADJOINT_TUNE_MHC_X_MIX";
    EXPECT_EQ(options.mhc_x_mix_counts_phi, x_mix_knob ? on : true) << name << "=" << value;
    EXPECT_EQ(options.mhc_store_dvecx, x_mix_knob ? true : on) << name << "=" << value;
    // B S = 4 goes through x_mix only when the direct dgamma's phi loads count; B S = 1 stores
    // dvecx unless told not to.
    const ir::Program four = ops::parse_specialization(mhc_backward(4)).build_program(options);
    const ir::Program one = ops::parse_specialization(mhc_backward(1)).build_program(options);
    EXPECT_EQ(has_temporary(four, "x_mix"), options.mhc_x_mix_counts_phi) << name << "=" << value;
    EXPECT_EQ(has_temporary(one, "dvecx"), options.mhc_store_dvecx) << name << "=" << value;
  }
}

TEST(TuningKnobs, SetKnobsParseAsDocumented) {
  const TuningKnobs knobs = read_tuning_knobs(environment({
      {"ADJOINT_TUNE_STREAMING", "2"},
      {"ADJOINT_TUNE_BINNED_GATHER_CHUNK", "-1"},
      {"ADJOINT_TUNE_BINNED_SUBBUCKET", "0"},
      {"ADJOINT_TUNE_BINNED_PACKED_KEYS", "0"},
      {"ADJOINT_TUNE_BINNED_RANKED_COUNT", "0"},
      {"ADJOINT_TUNE_BINNED_OVER_ATOMICS", "0"},
      {"ADJOINT_TUNE_TEMPORARY_ARENA", "0"},
      {"ADJOINT_TUNE_REDUCTION", "serial"},
      {"ADJOINT_TUNE_SPLIT_THREADS", "12"},
      {"ADJOINT_TUNE_WHOLE_AXIS_GROUPS", "0"},
      {"ADJOINT_TUNE_DIRECT_STORE", "0"},
      {"ADJOINT_TUNE_BINNED_SPARSE_CHANNELS_LAST", "0"},
      {"ADJOINT_TUNE_LANE_SPANS", "0"},
      {"ADJOINT_TUNE_LANE_SPAN_UNROLL", "2"},
      {"ADJOINT_TUNE_TILE_ACCUMULATORS", "64"},
      {"ADJOINT_TUNE_BINNED_REREAD_STREAMING", "1"},
      {"ADJOINT_TUNE_GATHERED_ROWS_SPARSE", "1"},
      {"ADJOINT_TUNE_SCAN_GATHER", "0"},
      {"ADJOINT_TUNE_SCAN_GATHER_LENGTH", "64"},
      {"ADJOINT_TUNE_SCAN_GATHER_UNROLL", "0"},
  }));
  EXPECT_FALSE(knobs.streaming_loads);
  EXPECT_TRUE(knobs.streaming_stores);
  EXPECT_FALSE(knobs.temporary_arena);
  compiler::LowerOptions options;
  apply_tuning_knobs(knobs, options);
  EXPECT_EQ(options.binned_gather_chunk, -1);
  EXPECT_EQ(options.scan_gather_work_max, 0);
  EXPECT_EQ(options.scan_gather_length_max, 64);
  EXPECT_EQ(options.scan_gather_unroll_budget, 0);
  EXPECT_EQ(options.binned_subbucket_records, 0);
  EXPECT_FALSE(options.binned_packed_keys);
  EXPECT_FALSE(options.binned_ranked_count);
  EXPECT_FALSE(options.binned_over_atomics);
  EXPECT_EQ(options.reduction_schedule, "serial");
  EXPECT_EQ(options.split_target_threads, int64_t{1} << 12);
  EXPECT_EQ(options.binned_whole_axis_records_max, 0);
  EXPECT_FALSE(options.direct_transposed_store);
  EXPECT_EQ(options.binned_sparse_channels_last_min, 0);
  EXPECT_EQ(options.lane_spans, 0);
  EXPECT_EQ(options.lane_span_unroll, 2);
  EXPECT_EQ(options.tile_accumulators, 64);
  EXPECT_TRUE(options.binned_reread_streaming);
  EXPECT_TRUE(options.gathered_rows_skip_sparse);
  compiler::LowerOptions defaults;
  apply_tuning_knobs(read_tuning_knobs(environment({})), defaults);
  EXPECT_EQ(defaults.binned_sparse_channels_last_min, 4);
  EXPECT_EQ(defaults.lane_spans, 16);
  EXPECT_EQ(defaults.lane_span_unroll, 0);
  EXPECT_EQ(defaults.tile_accumulators, 96);
  EXPECT_FALSE(defaults.binned_reread_streaming);
  EXPECT_FALSE(defaults.gathered_rows_skip_sparse);
  EXPECT_TRUE(defaults.binned_over_atomics);
  EXPECT_THROW(read_tuning_knobs(environment({{"ADJOINT_TUNE_BINNED_REREAD_STREAMING", "2"}})),
               Error);
  EXPECT_THROW(read_tuning_knobs(environment({{"ADJOINT_TUNE_BINNED_OVER_ATOMICS", "2"}})),
               Error);
  EXPECT_THROW(read_tuning_knobs(environment({{"ADJOINT_TUNE_LANE_SPANS", "4"}})), Error);
}

/// ADJOINT_TUNE_BINNED_SCAN: 2 (default) the scan on warp lanes, 1 by digits, 0 chained; and
/// ADJOINT_TUNE_BINNED_SCAN_TOP, the lane scan's top (default 32, in [1, 1024]).
TEST(TuningKnobs, TheBinnedScanKnobsChooseTheScan) {
  compiler::LowerOptions defaults;
  apply_tuning_knobs(read_tuning_knobs(environment({})), defaults);
  EXPECT_TRUE(defaults.binned_scan_digits && defaults.binned_scan_lanes);
  EXPECT_EQ(defaults.binned_scan_top_loads, 32);
  for (const auto& [value, digits, lanes] :
       std::vector<std::tuple<std::string, bool, bool>>{{"2", true, true}, {"1", true, false},
                                                        {"0", false, false}}) {
    compiler::LowerOptions options;
    apply_tuning_knobs(read_tuning_knobs(environment({{"ADJOINT_TUNE_BINNED_SCAN", value},
                                                      {"ADJOINT_TUNE_BINNED_SCAN_TOP", "8"}})),
                       options);
    EXPECT_EQ(options.binned_scan_digits, digits) << value;
    EXPECT_EQ(options.binned_scan_lanes, lanes) << value;
    EXPECT_EQ(options.binned_scan_top_loads, 8);
  }
  for (const char* bad : {"3", "-1"})
    EXPECT_THROW(read_tuning_knobs(environment({{"ADJOINT_TUNE_BINNED_SCAN", bad}})), Error);
  for (const char* bad : {"0", "1025"})
    EXPECT_THROW(read_tuning_knobs(environment({{"ADJOINT_TUNE_BINNED_SCAN_TOP", bad}})), Error);
}

/// The ADJOINT_TUNE_GENERIC_* knobs reach LowerOptions: 0 the generic schedules of before, unset
/// the defaults (docs/dynamic_shapes.md, "The compiler"; cli_dynamic.test checks the kernels).
TEST(TuningKnobs, TheGenericKnobsRestoreTheGenericKernelsOfBefore) {
  const TuningKnobs knobs = read_tuning_knobs(environment({
      {"ADJOINT_TUNE_GENERIC_TWIN", "0"},
      {"ADJOINT_TUNE_GENERIC_LANE_GROUPS", "0"},
      {"ADJOINT_TUNE_GENERIC_SPANS", "0"},
      {"ADJOINT_TUNE_GENERIC_MIN_GROUPS", "0"},
      {"ADJOINT_TUNE_GENERIC_INTERLEAVE", "0"},
      {"ADJOINT_TUNE_GENERIC_STREAMING", "0"},
  }));
  compiler::LowerOptions options;
  apply_tuning_knobs(knobs, options);
  EXPECT_FALSE(options.generic_aligned_twin);
  EXPECT_FALSE(options.generic_lane_groups);
  EXPECT_FALSE(options.generic_evaluated_spans);
  EXPECT_EQ(options.generic_min_vector_groups, 0);
  EXPECT_FALSE(options.generic_interleave);
  EXPECT_FALSE(options.generic_streaming);
  const TuningKnobs defaults = read_tuning_knobs(environment({}));
  compiler::LowerOptions from_defaults;
  apply_tuning_knobs(defaults, from_defaults);
  EXPECT_TRUE(from_defaults.generic_aligned_twin && from_defaults.generic_lane_groups &&
              from_defaults.generic_evaluated_spans && from_defaults.generic_interleave &&
              from_defaults.generic_streaming);
  EXPECT_EQ(from_defaults.generic_min_vector_groups, int64_t{1} << 15);
}

TEST(TuningKnobs, InvalidValuesNameTheVariableTheRangeAndTheValue) {
  const std::map<std::string, std::string> invalid = {
      {"ADJOINT_TUNE_BINNED_SUBBUCKET", "-1"},
      {"ADJOINT_TUNE_BINNED_GATHER_CHUNK", "-2"},
      {"ADJOINT_TUNE_TEMPORARY_ARENA", "2"},
      {"ADJOINT_TUNE_PROGRAMMATIC_LAUNCH", "yes"},
      {"ADJOINT_TUNE_BLOCK_SIZE", "100"},
      {"ADJOINT_TUNE_SPLIT_TAIL", "1x"},
      {"ADJOINT_TUNE_WHOLE_AXIS_GROUPS", "-1"},
      {"ADJOINT_TUNE_DIRECT_STORE", "-1"},
      {"ADJOINT_TUNE_BINNED_SPARSE_CHANNELS_LAST", "-1"},
      {"ADJOINT_TUNE_MHC_X_MIX", "2"},
      {"ADJOINT_TUNE_MHC_DVECX", "yes"},
      {"ADJOINT_TUNE_GENERIC_TWIN", "2"},
      {"ADJOINT_TUNE_GENERIC_MIN_GROUPS", "-1"},
      {"ADJOINT_TUNE_TILE_ACCUMULATORS", "8"},
  };
  for (const auto& [name, value] : invalid) {
    try {
      read_tuning_knobs(environment({{name, value}}));
      ADD_FAILURE() << name << "=" << value << " was accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(name + ": expected "), std::string::npos) << what;
      EXPECT_NE(what.find("got '" + value + "'"), std::string::npos) << what;
    }
  }
  EXPECT_THROW(read_tuning_knobs(environment({{"ADJOINT_TUNE_REDUCTION", "sideways"}})), Error);
}

}  // namespace
}  // namespace adjoint::runtime
