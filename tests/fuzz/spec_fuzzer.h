// The spec fuzzer shared by the ctest fuzz test (tests/unit/fuzz_specs_test.cpp) and the
// libFuzzer target (tests/fuzz/libfuzzer_specs.cpp): a mutator of specialization text seeded
// from every registered op's examples, and one case runner that takes a text through the spec
// syntax, the op's builder, the verifier and lower() (the generated CUDA, no NVRTC) and
// classifies the outcome. The contract checked: every text either lowers or fails with an
// adjoint::Error that carries a message; no other exception, no crash, a bounded time.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace adjoint::fuzz {

enum class Outcome {
  kLowered,           ///< the spec was valid and lower() produced CUDA for every kernel
  kNamedError,        ///< an adjoint::Error with a non-empty message
  kUnnamedError,      ///< an adjoint::Error with an empty message (a contract violation)
  kForeignException,  ///< any other exception escaped (a contract violation)
};

struct CaseResult {
  Outcome outcome = Outcome::kLowered;
  std::string message;  ///< the error's what(), empty when lowered
  /// CPU time of the calling thread spent on the case: the work it cost, not how long a
  /// loaded 2-core CI machine took to schedule it (the watchdog bounds wall time).
  std::chrono::duration<double> seconds{0};
};

const char* outcome_name(Outcome o);

/// The seeds: every example of every registered op (ops::all_ops()).
std::vector<std::string> seed_specs();

/// One random mutation (or a few stacked) of `seed`: numbers replaced by edge values (0, -1,
/// 2^31, 2^62, 2^63-1, ...), list elements added or dropped, attributes dropped, duplicated or
/// misspelt, values of the wrong kind, other ops' names, dtypes, choices, and byte flips.
std::string mutate_spec(const std::string& seed, std::mt19937_64& rng);

/// Runs one text through parse_specialization, build_program, verify and lower(), both
/// determinism modes when the first succeeds.
CaseResult run_spec_case(const std::string& text);

}  // namespace adjoint::fuzz
