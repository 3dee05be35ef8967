// The subcommands of the `adjoint` CLI; each registers itself on the CLI11 app in main.cpp.
#pragma once

#include <CLI/CLI.hpp>

namespace adjoint::tools {

/// `adjoint demo`: each seed op's IR, then the interpreter checked against its reference.
void add_demo_command(CLI::App& app);
/// `adjoint ops`: every op with its attributes, dtypes and defaults.
void add_ops_command(CLI::App& app);
/// `adjoint ir SPEC [--after-all]`: the IR of a specialization (and after every pass).
void add_ir_command(CLI::App& app);
/// `adjoint cuda SPEC [--after-all]`: the CUDA source of each lowered kernel (and the IR after
/// every pass).
void add_cuda_command(CLI::App& app);
/// `adjoint compile SPEC --arch sm_90 [-o DIR] [--ptx]`: NVRTC compile times, registers, spills.
void add_compile_command(CLI::App& app);
/// `adjoint aot SPECFILE --arch sm_80,sm_90 -o PKG`: a kernel package for deployment.
void add_aot_command(CLI::App& app);

}  // namespace adjoint::tools
