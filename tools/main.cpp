// Entry point of the `adjoint` CLI: builds the CLI11 app from the subcommands and turns any
// exception (adjoint::Error, std::bad_alloc, std::length_error, anything else) into a one-line
// message and exit status 1; it never lets one reach std::terminate.
#include <exception>
#include <iostream>
#include <new>

#include "ir/error.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"adjoint: a JIT compiler for the backward passes of neural-network operators"};
  app.require_subcommand(1);
  adjoint::tools::add_demo_command(app);
  adjoint::tools::add_ops_command(app);
  adjoint::tools::add_ir_command(app);
  adjoint::tools::add_cuda_command(app);
  adjoint::tools::add_compile_command(app);
  adjoint::tools::add_aot_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const adjoint::Error& e) {
    std::cerr << "adjoint: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "adjoint: error: out of memory (std::bad_alloc)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "adjoint: internal error: " << e.what() << "\n";
    return 1;
  } catch (...) {
    std::cerr << "adjoint: internal error: an exception of unknown type\n";
    return 1;
  }
  return 0;
}
