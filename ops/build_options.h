// build_options: the choices of an op's IR that no attribute of its specialization names. The
// ops layer never reads the environment: the runtime fills these from its ADJOINT_TUNE_*
// knobs (runtime/tuning_knobs.h, runtime::build_options()), and whatever builds a program for
// the runtime to run or for a package (the engine, the CLI's ir, cuda, compile, aot and demo,
// the JIT benchmark) passes them to Specialization::build_program. A default-constructed
// BuildOptions is the ops' own default: what the knobs give when unset.
#pragma once

namespace adjoint::ops {

struct BuildOptions {
  /// mhc_pre_backward (ops/mhc.cpp, uses_x_mix): the parameter gradients go through x_mix
  /// where the direct dgamma would load more, its phi loads counted; false counts only its
  /// loads of x, the rule before (ADJOINT_TUNE_MHC_X_MIX).
  bool mhc_x_mix_counts_phi = true;
  /// mhc_pre_backward without x_mix: dvecx = dh_mix . phi stored once for dx and dgamma;
  /// false recomputes it in both (ADJOINT_TUNE_MHC_DVECX). The same bits either way.
  bool mhc_store_dvecx = true;

  bool operator==(const BuildOptions&) const = default;
};

}  // namespace adjoint::ops
