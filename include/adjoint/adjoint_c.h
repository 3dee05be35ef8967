/* The C API of adjoint, for embedding from any language (Python's ctypes, Rust, C).
 *
 * Every function returns an adjoint_status; on failure adjoint_last_error() returns the
 * message (thread-local, valid until the next call on the same thread) saying what was wrong:
 * the op and argument, expected vs given, or for a failed compile the NVRTC log and the path of
 * the source. Device memory is the caller's: tensors are raw CUdeviceptr values with dtype,
 * shape and strides (in elements). Work is queued on the caller's CUstream with no hidden
 * synchronization; the current CUDA context of the calling thread is used (the device's primary
 * context is made current if none is).
 *
 * A program handle is one op specialization compiled and loaded: prepare once, launch many
 * times. adjoint_run() does both, with an in-memory cache, for one-off calls.
 */
#ifndef ADJOINT_ADJOINT_C_H_
#define ADJOINT_ADJOINT_C_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum adjoint_status {
  ADJOINT_OK = 0,
  ADJOINT_ERROR_INVALID_ARGUMENT = 1,
  ADJOINT_ERROR_INVALID_PROGRAM = 2,
  ADJOINT_ERROR_COMPILE_FAILED = 3,
  ADJOINT_ERROR_CUDA = 4,
  ADJOINT_ERROR_NOT_AVAILABLE = 5,
  ADJOINT_ERROR_INTERNAL = 6,
} adjoint_status;

/* Element types; values match adjoint::ir::DType. */
typedef enum adjoint_dtype {
  ADJOINT_F16 = 0,
  ADJOINT_BF16 = 1,
  ADJOINT_F32 = 2,
  ADJOINT_F64 = 3,
  ADJOINT_I32 = 4,
  ADJOINT_I64 = 5,
  ADJOINT_BOOL = 6,
} adjoint_dtype;

typedef enum adjoint_determinism {
  /* Bitwise reproducible unless a kernel has no deterministic strategy (then atomics). */
  ADJOINT_DETERMINISM_DEFAULT = 0,
  /* Atomics allowed where they are faster. */
  ADJOINT_DETERMINISM_ALLOW_ATOMICS = 1,
} adjoint_determinism;

#define ADJOINT_MAX_RANK 8

/* A device tensor: data is a CUdeviceptr; strides are in elements. */
typedef struct adjoint_tensor {
  uint64_t data;
  int32_t dtype; /* adjoint_dtype */
  int32_t rank;
  int64_t shape[ADJOINT_MAX_RANK];
  int64_t strides[ADJOINT_MAX_RANK];
} adjoint_tensor;

typedef struct adjoint_program adjoint_program; /* opaque */

/* Library version, e.g. "0.1.0". */
const char* adjoint_version(void);
/* The message of the last failed call on this thread ("" if none). */
const char* adjoint_last_error(void);

/* Compiles (or finds in the caches) and loads the specialization `spec`, e.g.
 * "upsample_nearest2d_backward dtype=bf16 input_size=8,64,128,128 output_size=256,256",
 * for the current context. */
adjoint_status adjoint_prepare(const char* spec, int determinism, adjoint_program** out);
/* Number of tensors the program binds, and the name/role of each (role: 0 input, 1 output). */
adjoint_status adjoint_program_tensors(const adjoint_program* program, int* count);
adjoint_status adjoint_program_tensor_info(const adjoint_program* program, int index,
                                           const char** name, int* role, adjoint_tensor* expected);
/* 1 if every kernel of the program is run-to-run deterministic, else 0. */
adjoint_status adjoint_program_is_deterministic(const adjoint_program* program, int* result);
/* Queues the program on `stream` (a CUstream, 0 for the legacy default stream). `tensors[i]`
 * binds the tensor named `names[i]`; every input and output must be bound, with the dtype,
 * shape and strides the specialization expects. */
adjoint_status adjoint_launch(adjoint_program* program, int count, const char* const* names,
                              const adjoint_tensor* tensors, void* stream);
adjoint_status adjoint_program_release(adjoint_program* program);

/* prepare + launch through the in-memory cache. */
adjoint_status adjoint_run(const char* spec, int determinism, int count, const char* const* names,
                           const adjoint_tensor* tensors, void* stream);

/* ATen-shaped entry point: grad_input = upsample_nearest2d_backward(grad_output, output_size,
 * input_size, scales_h, scales_w). output_size has 2 values, input_size 4; a scale <= 0 or NaN
 * means "not given". grad_input must be allocated by the caller with input_size and the layout
 * of grad_output (contiguous or channels-last). */
adjoint_status adjoint_upsample_nearest2d_backward(const adjoint_tensor* grad_output,
                                                   const adjoint_tensor* grad_input,
                                                   const int64_t* output_size,
                                                   const int64_t* input_size, double scales_h,
                                                   double scales_w, void* stream);

/* Kernel packages (ahead-of-time): a package directory built by `adjoint aot`. Calls it
 * covers use its binaries and never load NVRTC. */
adjoint_status adjoint_load_package(const char* path);
/* 1 (default): a call no package covers is compiled with NVRTC; 0: such a call fails with an
 * error that names the specialization. */
adjoint_status adjoint_set_jit_enabled(int enabled);

/* The dynamic-shape policy, as ADJOINT_DYNAMIC: "never", "batch" (the default), "auto" or
 * "always" (docs/dynamic_shapes.md). */
adjoint_status adjoint_set_dynamic_shapes(const char* mode);

/* What the engine has built since start (or adjoint_reset_compile_stats). */
typedef struct adjoint_compile_stats {
  uint64_t specialized_programs; /* specialized programs built (any binary source) */
  uint64_t generic_programs;     /* generic programs built */
  uint64_t specialized_compiles; /* of those, compiled by NVRTC */
  uint64_t generic_compiles;
  uint64_t generic_bindings;  /* specializations served by a generic program */
  uint64_t generic_fallbacks; /* generic programs the compiler refused (specialized instead) */
} adjoint_compile_stats;
adjoint_status adjoint_get_compile_stats(adjoint_compile_stats* stats);
adjoint_status adjoint_reset_compile_stats(void);

#ifdef __cplusplus
}
#endif

#endif /* ADJOINT_ADJOINT_C_H_ */
