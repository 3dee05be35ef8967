// NVRTC compiles in helper processes (ADJOINT_COMPILE_PROCESSES, issue 12). NVRTC programs
// compiled on many threads of one process each take 2-4x their time alone on the H100 host
// (docs/runtime.md, "Grouped units"), while the same compiles in separate processes do not
// slow each other down: the threads wait on something the process shares (a lock inside NVRTC
// or the kernel's memory map). With the knob on, a batch of several units is compiled by
// `adjoint_compile_worker` processes (tools/compile_worker/), spawned on first use and kept
// for the life of the process, one per compile thread; each loads exactly the NVRTC file this
// process located (so a cubin is the same bytes and the disk-cache key stays true) and runs
// Nvrtc::compile on the request it receives over a socket. A worker that cannot be spawned or
// dies is replaced by an in-process compile of that unit (logged once), so the knob can never
// make a compile fail that would have succeeded in-process.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/nvrtc.h"

namespace adjoint::runtime {

/// ADJOINT_COMPILE_PROCESSES: 0 (compile on threads of this process, as before) or 1
/// (several units at once go to worker processes); unset or empty: the default, 0. Anything
/// else is an error naming the variable.
bool compile_processes_from_environment();

/// The worker executable: $ADJOINT_COMPILE_WORKER when set, else `adjoint_compile_worker`
/// beside the file holding this code (build/bin for the tools, lib/../bin for libadjoint.so);
/// nullopt when none is executable. Computed once per process.
const std::optional<std::string>& compile_worker_executable();

/// Compiles `request` in a worker process taken from a process-wide pool (spawning one when
/// none is idle), exactly as Nvrtc::instance().compile(request) would: same result, same
/// adjoint::Error for a rejected source. Falls back to the in-process compile when no worker
/// can be had or the worker is lost mid-request. Thread-safe.
CompileResult compile_in_worker(const CompileRequest& request);

/// The worker's side: serves requests read from `in_fd`, answering on `out_fd`, until EOF.
/// Returns the process exit status.
int serve_compile_requests(int in_fd, int out_fd);

/// Wire format of a request and a response (both directions are this process's own build).
std::string encode_request(const CompileRequest& request);
std::optional<CompileRequest> decode_request(const std::string& bytes);
std::string encode_result(const CompileResult& result);
std::string encode_error(int code, const std::string& message);

}  // namespace adjoint::runtime
