// `adjoint demo`, the README's main job: for each seed op at its first example specialization,
// print the IR, check the interpreter against the op's plain-loop reference, lower it to CUDA and
// compile every kernel with NVRTC, and, where a GPU is present, run it through the public API and
// check the device against the interpreter.
#include <cmath>
#include <iostream>

#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "adjoint/adjoint.h"
#include "compiler/lower.h"
#include "ops/registry.h"
#include "runtime/driver.h"
#include "runtime/engine.h"
#include "runtime/host_transfer.h"
#include "runtime/nvrtc.h"
#include "reference/reference.h"
#include "tools/commands.h"

namespace adjoint::tools {
namespace {

/// Largest |a - b| / (atol + rtol * |b|) over all outputs; <= 1 passes.
/// Tolerances scale with the output dtype (a reference rounded to bf16 may sit one ulp away).
double worst_ratio(const ir::Program& program, const ir::HostBuffers& got,
                   const ir::HostBuffers& want, std::string* where) {
  double worst = 0;
  for (const auto& [name, expected] : want) {
    ir::Tensor t = program.find_tensor(name);
    double tol = 1e-5;
    if (t && t->dtype == ir::DType::kBF16) tol = 8e-3;
    if (t && t->dtype == ir::DType::kF16) tol = 1e-3;
    double atol = tol, rtol = tol;
    auto it = got.find(name);
    if (it == got.end() || it->second.size() != expected.size()) {
      *where = name + " (missing or wrong size)";
      return INFINITY;
    }
    for (size_t i = 0; i < expected.size(); ++i) {
      double r = std::fabs(it->second[i] - expected[i]) / (atol + rtol * std::fabs(expected[i]));
      if (!(r <= worst)) {
        worst = r;
        *where = name + "[" + std::to_string(i) + "]";
      }
    }
  }
  return worst;
}

/// Lowers the program and compiles each kernel with NVRTC for sm_90; false if a compile failed.
bool compile_with_nvrtc(const ir::Program& program) {
  compiler::CompiledProgram compiled =
      compiler::lower(program, runtime::lower_options(compiler::Determinism::kDefault, 90));
  std::cout << "   lowered to " << compiled.kernels.size() << " CUDA kernel(s)"
            << (compiled.deterministic ? ", deterministic" : ", with atomics") << "\n";
  runtime::Nvrtc* nvrtc = nullptr;
  try {
    nvrtc = &runtime::Nvrtc::instance();
  } catch (const Error& e) {
    std::cout << "   NVRTC not available, compile skipped: " << e.what() << "\n";
    return true;
  }
  bool ok = true;
  for (const compiler::CompiledKernel& k : compiled.kernels) {
    try {
      runtime::CompileResult r = nvrtc->compile({k.source, k.entry + ".cu", 90});
      std::cout << "   NVRTC " << nvrtc->version() << " sm_90: " << k.entry << " -> "
                << r.cubin.size() << "-byte cubin in " << r.milliseconds << " ms\n";
    } catch (const Error& e) {
      std::cout << "   NVRTC failed on " << k.entry << ": " << e.what() << "\n";
      ok = false;
    }
  }
  return ok;
}

bool gpu_present() {
  if (!runtime::driver_available()) return false;
  int count = 0;
  return runtime::driver().DeviceGetCount(&count) == CUDA_SUCCESS && count > 0;
}

/// Runs the specialization on the GPU through adjoint::run; compares with the interpreter.
bool run_on_gpu(const ops::Specialization& spec, const ir::Program& program,
                const ir::HostBuffers& inputs, const ir::HostBuffers& interpreted) {
  runtime::current_context();
  runtime::DeviceBuffers buffers(program, inputs);
  adjoint::run(spec.to_string(), buffers.bindings(), nullptr);
  ir::HostBuffers expected;  // the interpreter also returns temporaries: compare outputs only
  for (const ir::Tensor& t : program.outputs) expected[t->name] = interpreted.at(t->name);
  std::string where;
  double ratio = worst_ratio(program, buffers.download_outputs(), expected, &where);
  bool ok = ratio <= 1.0;
  std::cout << "   GPU vs interpreter: " << (ok ? "PASS" : "FAIL") << " (worst " << ratio
            << (where.empty() ? "" : " at " + where) << ")\n";
  return ok;
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", "Show each seed op's IR and check it by interpretation");
  cmd->callback([] {
    int failures = 0;
    for (const char* name :
         {"upsample_nearest2d_backward", "grid_sampler_2d_backward", "mhc_pre_backward"}) {
      const ops::OpDefinition* op = &ops::find_op(name);  // throws, listing the ops, if absent
      if (op->examples.empty()) {
        std::cout << "== " << name << ": has no example specialization\n";
        ++failures;
        continue;
      }
      ops::Specialization spec = ops::parse_specialization(op->examples.front());
      ir::Program program = spec.build_program(runtime::build_options());
      ir::verify(program);
      std::cout << "== " << spec.to_string() << "\n" << ir::to_string(program);
      auto reference = reference::find(name);
      if (!reference) {
        std::cout << "   no reference for " << name << "\n";
        ++failures;
        continue;
      }
      ir::HostBuffers inputs = reference::make_inputs(spec, program);
      ir::HostBuffers got = ir::interpret(program, inputs);
      ir::HostBuffers want = reference(spec, inputs);
      std::string where;
      double ratio = worst_ratio(program, got, want, &where);
      bool ok = ratio <= 1.0;
      failures += !ok;
      std::cout << "   interpreter vs reference: " << (ok ? "PASS" : "FAIL")
                << " (worst |err|/(tol + tol|ref|) = " << ratio
                << (where.empty() ? "" : " at " + where) << ")\n";
      failures += !compile_with_nvrtc(program);
      if (gpu_present()) {
        failures += !run_on_gpu(spec, program, inputs, got);
      } else {
        std::cout << "   no GPU on this machine: the device run is skipped\n";
      }
      std::cout << "\n";
    }
    if (failures) throw adjoint::Error(std::to_string(failures) + " demo check(s) failed");
    std::cout << "all demo checks passed\n";
  });
}

}  // namespace adjoint::tools
