// adjoint_compile_worker: compiles the CUDA translation units a process running adjoint sends
// it over its standard input (a socket), with the NVRTC file that process located, until EOF
// (runtime/compile_worker.h, ADJOINT_COMPILE_PROCESSES). Not meant to be run by hand.
#include <dlfcn.h>

#include <cstring>
#include <string>

#include "runtime/compile_worker.h"
#include "runtime/nvrtc.h"

int main(int argc, char** argv) {
  std::string path, identity;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--nvrtc") == 0) path = argv[i + 1];
    if (std::strcmp(argv[i], "--identity") == 0) identity = argv[i + 1];
  }
  if (path.empty() || identity.empty()) return 2;
  // Loaded first, the file is what locate_nvrtc() finds ("already loaded"): the very library
  // the parent keys its disk cache on. Anything else ends the worker (the parent then compiles
  // in-process).
  if (dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) == nullptr) return 3;
  try {
    if (adjoint::runtime::locate_nvrtc().identity != identity) return 3;
    adjoint::runtime::Nvrtc::instance();
  } catch (...) {
    return 3;
  }
  return adjoint::runtime::serve_compile_requests(0, 0);
}
