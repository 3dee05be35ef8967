// adjoint_jit_bench: measures the JIT path on a GPU machine and prints one JSON object.
//  - cold compile: NVRTC time per kernel (-no-cache), median over the first example of every
//    registered op, each kernel compiled alone; and per program as the engine compiles it (all
//    its kernels in one translation unit), with the time per kernel that amortizes to;
//  - disk-cache hit: a fresh process (this binary re-executed) loading a cached program and
//    running it to completion; and, in other fresh processes, the same split into steps (parse,
//    locate NVRTC, build IR, lower, binaries, module load, launch and synchronize), with proof
//    that the hit left NVRTC unloaded;
//  - cold prepare (issue 12): per op, a fresh process with empty adjoint and CUDA caches, one
//    unit, one unit per kernel and the default grouping (or ADJOINT_BENCH_COLD_SETTINGS),
//    split into phases (IR, emission, NVRTC load, NVRTC compile wall and summed, module
//    load) with the process's CPU time (user, system), page faults and context switches, then that
//    program's disk hit (`--cold-prepare-only [WORDS]` measures only that, for the ops whose
//    label contains one of the comma-separated WORDS; the ADJOINT_TUNE_* knobs of the parent
//    reach every child); `--cold-compile-child SPEC` does the compile part alone without a
//    GPU, as a process's second cold compile when ADJOINT_BENCH_WARM_SPEC names a spec to
//    compile first;
//  - in-memory hit: the typed API call up to launch submission, against a raw cuLaunchKernel of
//    the same cubin with the same arguments, per call, in batches that never fill the queue.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sys/resource.h>
#include <unistd.h>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "adjoint/adjoint.h"
#include "compiler/lower.h"
#include "ops/registry.h"
#include "runtime/compile_huge_pages.h"
#include "runtime/compile_worker.h"
#include "runtime/driver.h"
#include "runtime/engine.h"
#include "runtime/kernel_binary.h"
#include "runtime/nvrtc.h"
#include "runtime/prepare_profile.h"

using Clock = std::chrono::steady_clock;
using namespace adjoint;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

const char* kSmallSpec =
    "upsample_nearest2d_backward dtype=f32 input_size=2,3,32,32 output_size=64,64";

/// Child mode: prepare (disk hit expected) + launch + synchronize, timed from the first call.
int disk_hit_child() {
  auto& d = runtime::driver();
  CUdeviceptr a = 0, b = 0;
  runtime::current_context();
  runtime::check(d.MemAlloc(&a, 2 * 3 * 64 * 64 * 4), "alloc");
  runtime::check(d.MemAlloc(&b, 2 * 3 * 32 * 32 * 4), "alloc");
  auto start = Clock::now();
  Program p = Program::prepare(kSmallSpec);
  p.launch({{"grad_output", TensorRef{a, DType::kF32, {2, 3, 64, 64}, {}}},
            {"grad_input", TensorRef{b, DType::kF32, {2, 3, 32, 32}, {}}}},
           nullptr);
  runtime::check(d.StreamSynchronize(nullptr), "sync");
  std::printf("%.4f\n", ms_since(start));
  return 0;
}

/// Child mode: the disk hit of disk_hit_child split into steps, as one JSON line. The steps
/// inside the engine's build come from its PrepareProfile.
int disk_hit_breakdown_child() {
  auto& d = runtime::driver();
  CUdeviceptr a = 0, b = 0;
  runtime::current_context();
  runtime::check(d.MemAlloc(&a, 2 * 3 * 64 * 64 * 4), "alloc");
  runtime::check(d.MemAlloc(&b, 2 * 3 * 32 * 32 * 4), "alloc");
  nlohmann::json out;
  const auto start = Clock::now();
  auto step = start;
  ops::Specialization spec = ops::parse_specialization(kSmallSpec);
  out["parse_ms"] = ms_since(step);
  step = Clock::now();
  runtime::locate_nvrtc();
  out["locate_nvrtc_ms"] = ms_since(step);
  step = Clock::now();
  auto program = runtime::Engine::instance().prepare(spec, compiler::Determinism::kDefault);
  const double prepare_ms = ms_since(step);
  const runtime::PrepareProfile& profile = runtime::last_prepare_profile();
  out["build_ir_ms"] = profile.build_ir_ms;
  out["lower_ms"] = profile.lower_ms;
  out["binaries_ms"] = profile.binaries_ms;
  out["load_modules_ms"] = profile.load_modules_ms;
  out["prepare_other_ms"] = prepare_ms - profile.total_ms;
  step = Clock::now();
  program->launch({{"grad_output", a, ir::DType::kF32, {2, 3, 64, 64}, {}},
                   {"grad_input", b, ir::DType::kF32, {2, 3, 32, 32}, {}}},
                  nullptr);
  runtime::check(d.StreamSynchronize(nullptr), "sync");
  out["launch_sync_ms"] = ms_since(step);
  out["total_ms"] = ms_since(start);
  out["from_disk_cache"] = profile.source == runtime::BinarySource::kDiskCache;
  out["nvrtc_loaded"] = runtime::nvrtc_loaded();
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

std::string run_child(const char* self, const char* mode, bool raw_self = false);

/// The cold-prepare cases of issue 12: a fresh process, an empty disk cache, one op.
const std::vector<std::pair<const char*, const char*>> kColdPrepareSpecs = {
    {"upsample_nearest2d_backward",
     "upsample_nearest2d_backward dtype=f32 input_size=1,3,101,67 output_size=203,134"},
    {"grid_sampler_2d_backward bicubic",
     "grid_sampler_2d_backward dtype=f32 input_size=8,64,128,128 output_size=128,128 "
     "interpolation_mode=bicubic padding_mode=zeros align_corners=false"},
    {"mhc_pre_backward",
     "mhc_pre_backward batch=1 seq=4096 n=4 dim=2560 dtype=bf16"},
};

/// Child mode: with the context already made, prepares the spec given on the command line
/// (ADJOINT_CACHE_DIR names the cache, empty or not) and prints where the time went as one JSON
/// line: the prepare's wall time and the engine's phases.
int cold_prepare_child(const std::string& spec_text) {
  runtime::current_context();
  ops::Specialization spec = ops::parse_specialization(spec_text);
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  const auto start = Clock::now();
  auto program = runtime::Engine::instance().prepare(spec, compiler::Determinism::kDefault);
  const double prepare_ms = ms_since(start);
  getrusage(RUSAGE_SELF, &after);
  const runtime::PrepareProfile& profile = runtime::last_prepare_profile();
  nlohmann::json out;
  out["prepare_ms"] = prepare_ms;
  // what the process cost the machine meanwhile: CPU time in user and kernel mode, page faults
  // and context switches (waits on locks are voluntary switches)
  auto cpu_ms = [](const timeval& a, const timeval& b) {
    return (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_usec - a.tv_usec) / 1e3;
  };
  out["user_cpu_ms"] = cpu_ms(before.ru_utime, after.ru_utime);
  out["system_cpu_ms"] = cpu_ms(before.ru_stime, after.ru_stime);
  out["minor_faults"] = after.ru_minflt - before.ru_minflt;
  out["voluntary_switches"] = after.ru_nvcsw - before.ru_nvcsw;
  out["involuntary_switches"] = after.ru_nivcsw - before.ru_nivcsw;
  out["build_ir_ms"] = profile.build_ir_ms;
  out["emission_ms"] = profile.lower_ms;
  out["nvrtc_load_ms"] = profile.nvrtc_load_ms;
  out["nvrtc_compile_wall_ms"] = profile.compile_wall_ms;
  out["nvrtc_compile_sum_ms"] = profile.compile_ms;
  out["binaries_ms"] = profile.binaries_ms;
  out["memory_release_ms"] = profile.memory_release_ms;
  out["module_load_ms"] = profile.load_modules_ms;
  out["kernels"] = profile.kernels;
  out["units_compiled"] = profile.units_compiled;
  out["compile_threads"] = profile.compile_threads;
  out["modules"] = profile.images;
  out["source"] = profile.source == runtime::BinarySource::kCompiled    ? "compiled"
                  : profile.source == runtime::BinarySource::kDiskCache ? "disk cache"
                                                                        : "package";
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

/// The engine's compile request for `spec_text` at sm_90, its settings from the environment.
runtime::BinaryRequest cold_compile_request(const std::string& spec_text) {
  ops::Specialization spec = ops::parse_specialization(spec_text);
  compiler::CompiledProgram cp = compiler::lower(
      spec.build_program(runtime::build_options()),
      runtime::lower_options(compiler::Determinism::kDefault, 90));
  runtime::BinaryRequest request;
  request.program = spec.op_name();
  request.arch = 90;
  request.spec = spec_text;
  request.compile_threads = runtime::compile_threads_from_environment();
  request.compile_units = runtime::compile_units_from_environment(request.compile_threads);
  request.split_compile = runtime::split_compile_from_environment();
  request.nvrtc_options = runtime::nvrtc_options_from_environment();
  request.compile_huge_pages = runtime::compile_huge_pages_from_environment();
  request.compile_processes = runtime::compile_processes_from_environment();
  for (const compiler::CompiledKernel& k : cp.kernels) request.kernels.push_back({k.entry, k.source});
  return request;
}

/// Child mode without a GPU: the compile part of a cold prepare of the spec on the command line
/// for sm_90, as the engine does it (its compile threads, units and knobs from the environment,
/// the disk cache at ADJOINT_CACHE_DIR, which should be empty), as one JSON line with the
/// process's CPU time and page faults: how the environment's settings change a cold compile
/// where only NVRTC is installed.
int cold_compile_child(const std::string& spec_text) {
  // ADJOINT_BENCH_WARM_SPEC: compile that spec first, unmeasured, so that the measured compile
  // is a process's second cold one (NVRTC loaded and set up, compile workers already running).
  if (const char* warm = std::getenv("ADJOINT_BENCH_WARM_SPEC"); warm && *warm) {
    runtime::acquire_kernel_images(cold_compile_request(warm),
                                   runtime::DiskCache::from_environment());
  }
  runtime::BinaryRequest request = cold_compile_request(spec_text);
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  const auto start = Clock::now();
  runtime::AcquireProfile profile;
  runtime::acquire_kernel_images(request, runtime::DiskCache::from_environment(), &profile);
  const double compile_ms = ms_since(start);
  getrusage(RUSAGE_SELF, &after);
  auto cpu_ms = [](const timeval& a, const timeval& b) {
    return (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_usec - a.tv_usec) / 1e3;
  };
  nlohmann::json out = {{"compile_ms", compile_ms},
                        {"nvrtc_load_ms", profile.nvrtc_load_ms},
                        {"nvrtc_compile_wall_ms", profile.compile_wall_ms},
                        {"nvrtc_compile_sum_ms", profile.compile_sum_ms},
                        {"memory_release_ms", profile.memory_release_ms},
                        {"units_compiled", profile.units_compiled},
                        {"compile_threads", profile.threads},
                        {"compile_processes", profile.processes},
                        {"user_cpu_ms", cpu_ms(before.ru_utime, after.ru_utime)},
                        {"system_cpu_ms", cpu_ms(before.ru_stime, after.ru_stime)},
                        {"minor_faults", after.ru_minflt - before.ru_minflt},
                        {"voluntary_switches", after.ru_nvcsw - before.ru_nvcsw}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

/// Cold prepare per op in fresh processes, each with an empty adjoint cache directory and an
/// empty CUDA compute cache (NVRTC 13 keeps its own cache of compiles there, across processes,
/// whenever a driver is present: without a fresh CUDA_CACHE_PATH a "cold" compile would be one
/// of its hits), 3 repetitions each (median), in several settings: one compile thread (one unit
/// for the program), one unit per kernel on the default thread count (the default before the
/// grouped units), and the default; or the settings ADJOINT_BENCH_COLD_SETTINGS names, as
/// "label=VAR=value VAR=value;label=..." (each child gets those assignments); then that
/// program's disk hit in another fresh process.
nlohmann::json cold_prepare_figures(const char* self, const std::string& only = "") {
  nlohmann::json result = nlohmann::json::array();
  const std::string root =
      (std::filesystem::temp_directory_path() / ("adjoint_cold_" + std::to_string(getpid())))
          .string();
  struct Setting {
    std::string label;
    std::string environment;
  };
  std::vector<Setting> settings = {{"one unit", "ADJOINT_COMPILE_THREADS=1"},
                                   {"one unit per kernel", "ADJOINT_COMPILE_UNITS=kernel"},
                                   {"default", ""}};
  if (const char* text = std::getenv("ADJOINT_BENCH_COLD_SETTINGS"); text && *text) {
    settings.clear();
    std::istringstream entries(text);
    for (std::string entry; std::getline(entries, entry, ';');) {
      const size_t equals = entry.find('=');
      if (equals == std::string::npos) continue;
      settings.push_back({entry.substr(0, equals), entry.substr(equals + 1)});
    }
  }
  int run = 0;
  for (const auto& [label, spec] : kColdPrepareSpecs) {
    if (!only.empty()) {  // a comma-separated list of words, one of which the label contains
      bool wanted = false;
      std::istringstream words(only);
      for (std::string word; std::getline(words, word, ',');)
        wanted = wanted || (!word.empty() && std::string(label).find(word) != std::string::npos);
      if (!wanted) continue;
    }
    for (const Setting& setting : settings) {
      std::vector<nlohmann::json> runs;
      std::string directory, environment;
      const std::string mode = std::string("--cold-prepare-child '") + spec + "'";
      for (int r = 0; r < 3; ++r) {
        directory = root + "/" + std::to_string(run++);
        environment = "ADJOINT_CACHE_DIR='" + directory + "/adjoint' CUDA_CACHE_PATH='" +
                      directory + "/cuda' " + setting.environment + " ";
        try {
          runs.push_back(nlohmann::json::parse(
              run_child((environment + "'" + self + "'").c_str(), mode.c_str(), true)));
        } catch (const nlohmann::json::exception&) {
        }
      }
      if (runs.empty()) continue;
      std::vector<double> all;
      for (const nlohmann::json& r : runs) all.push_back(r.value("prepare_ms", 0.0));
      std::sort(runs.begin(), runs.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
        return a.value("prepare_ms", 0.0) < b.value("prepare_ms", 0.0);
      });
      nlohmann::json entry = runs[runs.size() / 2];
      entry["op"] = label;
      entry["spec"] = spec;
      entry["setting"] = setting.label;
      entry["environment"] = setting.environment;
      entry["prepare_ms_runs"] = all;
      try {
        entry["disk_hit"] = nlohmann::json::parse(
            run_child((environment + "'" + self + "'").c_str(), mode.c_str(), true));
      } catch (const nlohmann::json::exception&) {
      }
      result.push_back(entry);
    }
  }
  std::filesystem::remove_all(root);
  return result;
}

runtime::CompileRequest compile_request(const std::string& source, const std::string& name,
                                        int arch) {
  runtime::CompileRequest request;
  request.source = source;
  request.name = name;
  request.arch = arch;
  return request;
}

/// Cold compile, NVRTC's own cache off: each kernel alone, then each program as the engine
/// compiles it (one translation unit for all its kernels). Needs NVRTC, not a GPU.
void add_cold_compile_figures(nlohmann::json& out, int arch) {
  runtime::Nvrtc& nvrtc = runtime::Nvrtc::instance();
  auto median_compile_ms = [&](runtime::CompileRequest request) {
    request.extra_options = {"-no-cache"};
    std::vector<double> runs;
    for (int r = 0; r < 3; ++r) runs.push_back(nvrtc.compile(request).milliseconds);
    return median(runs);
  };
  std::vector<double> compile_ms, amortized_ms;
  nlohmann::json per_kernel = nlohmann::json::array(), per_program = nlohmann::json::array();
  for (const ops::OpDefinition& op : ops::all_ops()) {
    ops::Specialization spec = ops::parse_specialization(op.examples.front());
    compiler::CompiledProgram cp =
        compiler::lower(spec.build_program(runtime::build_options()),
                        runtime::lower_options(compiler::Determinism::kDefault, arch));
    runtime::BinaryRequest request;
    request.program = spec.op_name();
    request.arch = arch;
    std::vector<size_t> all;
    double alone_sum = 0;
    for (const compiler::CompiledKernel& k : cp.kernels) {
      const double ms = median_compile_ms(compile_request(k.source, k.entry + ".cu", arch));
      compile_ms.push_back(ms);
      alone_sum += ms;
      per_kernel.push_back({{"op", op.name}, {"kernel", k.entry}, {"ms", ms}});
      all.push_back(request.kernels.size());
      request.kernels.push_back({k.entry, k.source});
    }
    if (cp.kernels.empty()) continue;
    const double unit_ms = cp.kernels.size() == 1
                               ? alone_sum
                               : median_compile_ms(runtime::unit_compile_request(request, all));
    for (size_t i = 0; i < cp.kernels.size(); ++i)
      amortized_ms.push_back(unit_ms / cp.kernels.size());
    per_program.push_back({{"op", op.name},
                           {"kernels", cp.kernels.size()},
                           {"one_unit_ms", unit_ms},
                           {"kernels_alone_ms", alone_sum}});
  }
  out["nvrtc"] = nvrtc.version() + " (" + runtime::locate_nvrtc().path + ")";
  out["nvrtc_options"] = nvrtc.options_for(compile_request("x", "x.cu", arch));
  out["cold_compile_ms_median"] = median(compile_ms);
  out["cold_compile_ms_max"] =
      compile_ms.empty() ? 0 : *std::max_element(compile_ms.begin(), compile_ms.end());
  out["cold_compile_kernels"] = per_kernel;
  out["cold_compile_amortized_ms_median"] = median(amortized_ms);
  out["cold_compile_programs"] = per_program;
}

/// Runs this binary with `mode` in a fresh process and returns what it printed.
/// With `raw_self`, `self` is used as written (it may carry environment assignments).
std::string run_child(const char* self, const char* mode, bool raw_self) {
  std::string command = (raw_self ? std::string(self) : std::string("'") + self + "'") + " " + mode;
  std::string output;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[4096];
    while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
    pclose(pipe);
  }
  return output;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--disk-hit-child") return disk_hit_child();
  if (argc > 2 && std::string(argv[1]) == "--cold-compile-child") {
    return cold_compile_child(argv[2]);
  }
  if (argc > 2 && std::string(argv[1]) == "--cold-prepare-child") {
    return cold_prepare_child(argv[2]);
  }
  if (argc > 1 && std::string(argv[1]) == "--cold-prepare-only") {
    if (!runtime::driver_available()) return 1;
    nlohmann::json out;
    out["cold_prepare"] = cold_prepare_figures(argv[0], argc > 2 ? argv[2] : "");
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--disk-hit-breakdown-child") {
    return disk_hit_breakdown_child();
  }
  nlohmann::json out;
  if (!runtime::driver_available()) {
    out["error"] = "no GPU: only the cold compile figures (sm_90), which need NVRTC alone";
    out["arch"] = 90;
    add_cold_compile_figures(out, 90);
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  auto& d = runtime::driver();
  runtime::current_context();
  CUdevice dev;
  runtime::check(d.CtxGetDevice(&dev), "dev");
  int arch = runtime::compute_capability(dev);
  char name[256] = {};
  d.DeviceGetName(name, sizeof name, dev);
  out["device"] = name;
  out["arch"] = arch;

  add_cold_compile_figures(out, arch);

  out["cold_prepare"] = cold_prepare_figures(argv[0]);

  // Warm the disk cache, then time fresh processes.
  Program warm = Program::prepare(kSmallSpec);
  std::vector<double> disk;
  for (int r = 0; r < 5; ++r) {
    std::string cmd = std::string("'") + argv[0] + "' --disk-hit-child";
    FILE* pipe = popen(cmd.c_str(), "r");
    double v = -1;
    if (pipe && std::fscanf(pipe, "%lf", &v) == 1) disk.push_back(v);
    if (pipe) pclose(pipe);
  }
  out["disk_hit_first_call_ms_median"] = median(disk);
  out["disk_hit_first_call_ms_all"] = disk;
  // The same hit split into steps; per step, the median over the fresh processes.
  std::vector<nlohmann::json> breakdowns;
  for (int r = 0; r < 5; ++r) {
    try {
      breakdowns.push_back(nlohmann::json::parse(run_child(argv[0], "--disk-hit-breakdown-child")));
    } catch (const nlohmann::json::exception&) {
    }
  }
  if (!breakdowns.empty()) {
    nlohmann::json steps;
    for (auto& [key, value] : breakdowns.front().items()) {
      if (!value.is_number()) {  // flags: every process's value
        for (const nlohmann::json& b : breakdowns)
          steps[key].push_back(b.value(key, nlohmann::json()));
        continue;
      }
      std::vector<double> values;
      for (const nlohmann::json& b : breakdowns) values.push_back(b.value(key, 0.0));
      steps[key] = median(values);
    }
    out["disk_hit_breakdown_median"] = steps;
  }

  // In-memory hit vs raw cuLaunchKernel.
  CUdeviceptr a = 0, b = 0;
  runtime::check(d.MemAlloc(&a, 2 * 3 * 64 * 64 * 4), "alloc");
  runtime::check(d.MemAlloc(&b, 2 * 3 * 32 * 32 * 4), "alloc");
  CUstream stream;
  runtime::check(d.StreamCreate(&stream, CU_STREAM_NON_BLOCKING), "stream");
  TensorRef go{a, DType::kF32, {2, 3, 64, 64}, {}}, gi{b, DType::kF32, {2, 3, 32, 32}, {}};
  auto typed_call = [&] {
    upsample_nearest2d_backward(go, gi, {64, 64}, {2, 3, 32, 32}, std::nullopt, std::nullopt,
                                stream);
  };
  auto loaded = runtime::Engine::instance().prepare(kSmallSpec, compiler::Determinism::kDefault);
  const runtime::LoadedKernel& k = loaded->kernels.front();
  CUdeviceptr values[16];
  void* args[16];
  for (size_t p = 0; p < k.params.size(); ++p) {
    values[p] = loaded->buffers[k.params[p]].name == "grad_output" ? a : b;
    args[p] = &values[p];
  }
  auto raw_call = [&] {
    runtime::check(d.LaunchKernel(k.function, k.launch.grid[0], k.launch.grid[1], k.launch.grid[2],
                                  k.launch.block[0], k.launch.block[1], k.launch.block[2],
                                  k.launch.shared_bytes, stream, args, nullptr),
                   "launch");
  };
  auto per_call_us = [&](auto&& call) {
    std::vector<double> batches;
    for (int batch = 0; batch < 40; ++batch) {
      constexpr int kCalls = 200;
      auto t = Clock::now();
      for (int i = 0; i < kCalls; ++i) call();
      batches.push_back(ms_since(t) * 1000.0 / kCalls);
      runtime::check(d.StreamSynchronize(stream), "sync");
    }
    return median(batches);
  };
  typed_call();
  raw_call();
  runtime::check(d.StreamSynchronize(stream), "sync");
  double raw_us = per_call_us(raw_call);
  double api_us = per_call_us(typed_call);
  double raw_us2 = per_call_us(raw_call);
  out["raw_launch_us"] = std::min(raw_us, raw_us2);
  out["api_call_us"] = api_us;
  out["api_added_us"] = api_us - std::min(raw_us, raw_us2);

  // A prepared program's launch through the engine's view path (what the C API and Python's
  // compiled launcher use), next to the raw launch it wraps.
  const int64_t go_shape[4] = {2, 3, 64, 64}, gi_shape[4] = {2, 3, 32, 32};
  const runtime::TensorView views[2] = {{"grad_output", a, ir::DType::kF32, 4, go_shape, nullptr},
                                        {"grad_input", b, ir::DType::kF32, 4, gi_shape, nullptr}};
  auto program_call = [&] { loaded->launch(views, 2, stream); };
  out["program_launch_us"] = per_call_us(program_call);
  out["program_added_us"] = per_call_us(program_call) - std::min(raw_us, raw_us2);

  // Warm calls to kernel completion for the small case (issue 5's latency target): the typed
  // function, the prepared program, and the raw launch + synchronize floor under both.
  auto completion_us = [&](auto&& call) {
    std::vector<double> complete;
    for (int r = 0; r < 200; ++r) {
      auto t = Clock::now();
      call();
      runtime::check(d.StreamSynchronize(stream), "sync");
      complete.push_back(ms_since(t) * 1000.0);
    }
    return median(complete);
  };
  out["small_call_to_completion_us_median"] = completion_us(typed_call);
  out["program_launch_to_completion_us_median"] = completion_us(program_call);
  out["raw_launch_to_completion_us_median"] = completion_us(raw_call);
  out["synchronize_only_us_median"] = completion_us([] {});
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
