// libFuzzer entry point over the specialization syntax, for long local runs (docs/testing.md):
// each input is taken as the text of a spec; anything but a lowering or a named adjoint::Error
// (a non-adjoint exception, an empty message) aborts so that libFuzzer records the input, and
// crashes, hangs and leaks are libFuzzer's and AddressSanitizer's to report. Seed the corpus
// with tests/fuzz/corpus/seeds (one example spec per file).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz/spec_fuzzer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  adjoint::fuzz::CaseResult r = adjoint::fuzz::run_spec_case(text);
  if (r.outcome != adjoint::fuzz::Outcome::kLowered &&
      r.outcome != adjoint::fuzz::Outcome::kNamedError) {
    std::fprintf(stderr, "%s for '%s': %s\n", adjoint::fuzz::outcome_name(r.outcome),
                 text.c_str(), r.message.c_str());
    std::abort();
  }
  return 0;
}
