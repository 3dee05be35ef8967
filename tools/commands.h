// The subcommands of the `adjoint` CLI; each registers itself on the CLI11 app in main.cpp.
#pragma once

#include <CLI/CLI.hpp>

namespace adjoint::tools {

/// `adjoint demo`: each seed op's IR, then the interpreter checked against its reference.
void add_demo_command(CLI::App& app);
/// `adjoint ops`: every op with its attributes, dtypes and defaults.
void add_ops_command(CLI::App& app);
/// `adjoint ir SPEC`: the IR of a specialization.
void add_ir_command(CLI::App& app);
/// `adjoint cuda SPEC [--after-all]`: the CUDA source of each lowered kernel (and the IR after
/// every pass).
void add_cuda_command(CLI::App& app);

}  // namespace adjoint::tools
