// adjoint_gpu_stress: the runtime under load on a GPU machine, one JSON line per figure.
//
//   adjoint_gpu_stress stress SECONDS THREADS [SPECS]
//     A child process (fresh disk cache) runs every spec of a pool of SPECS (default 128)
//     once, single-threaded, and writes the outputs; then this process prepares half of the
//     pool ("cached") and runs THREADS host threads, each on its own stream, launching random
//     specs of the whole pool (the other half is compiled for the first time under load) for
//     SECONDS, comparing every result bitwise with the child's. Prints launches, mismatches,
//     exceptions; exit 1 on any mismatch or exception.
//   adjoint_gpu_stress specs COUNT     prints the first COUNT specs (no GPU needed)
//   adjoint_gpu_stress memory COUNT SECONDS CAPACITY THREADS
//     Prepares up to COUNT distinct specializations (fresh disk cache: each an NVRTC compile)
//     from THREADS threads with the in-memory cache capped at CAPACITY programs, for at most
//     SECONDS; every 250 programs it prints the host RSS, the device memory in use
//     (cuMemGetInfo) and the programs cached, so the trend can be read.
//
// The specs are the upsample_nearest family (deterministic gathers: bitwise reproducible) in
// f32, f64 and bf16, numbered so that every index gives a distinct specialization.
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "adjoint/adjoint.h"
#include "runtime/driver.h"
#include "runtime/engine.h"

using namespace adjoint;
using Clock = std::chrono::steady_clock;

namespace {

struct Case {
  std::string spec;
  DType dtype;
  std::vector<int64_t> grad_output_shape, grad_input_shape;
  size_t element_bytes;
};

int64_t count(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

/// The i-th distinct specialization: op, dtype and a first spatial size that grows with i.
Case case_of(int i) {
  static const char* ops[] = {"upsample_nearest1d_backward", "upsample_nearest2d_backward",
                              "upsample_nearest3d_backward", "_upsample_nearest_exact1d_backward",
                              "_upsample_nearest_exact2d_backward",
                              "_upsample_nearest_exact3d_backward"};
  static const DType dtypes[] = {DType::kF32, DType::kF64, DType::kBF16};
  static const char* dtype_names[] = {"f32", "f64", "bf16"};
  static const size_t bytes[] = {4, 8, 2};
  const int op = i % 6, d = (i / 6) % 3, s = i / 18;
  const int rank = op % 3 + 1;
  std::vector<int64_t> in = {2, 3}, out_spatial;
  for (int a = 0; a < rank; ++a) {
    int64_t input = a == 0 ? 5 + s : 4 + (s * (a + 2)) % 7;
    in.push_back(input);
    out_spatial.push_back(a == 0 ? 3 + (s * 13) % 41 : 5 + (s * (a + 3)) % 9);
  }
  std::vector<int64_t> out = {2, 3};
  out.insert(out.end(), out_spatial.begin(), out_spatial.end());
  auto ints = [](const std::vector<int64_t>& v) {
    std::string t;
    for (size_t k = 0; k < v.size(); ++k) {
      if (k) t += ',';
      t += std::to_string(v[k]);
    }
    return t;
  };
  Case c;
  c.spec = std::string(ops[op]) + " dtype=" + dtype_names[d] + " input_size=" + ints(in) +
           " output_size=" + ints(out_spatial);
  c.dtype = dtypes[d];
  c.grad_output_shape = out;
  c.grad_input_shape = in;
  c.element_bytes = bytes[d];
  return c;
}

/// Deterministic input bytes of a case: values in [-1, 1) in its dtype.
std::vector<char> input_of(const Case& c, int seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1, 1);
  const int64_t n = count(c.grad_output_shape);
  std::vector<char> bytes(n * c.element_bytes);
  for (int64_t k = 0; k < n; ++k) {
    float f = uniform(rng);
    if (c.dtype == DType::kF32) {
      std::memcpy(&bytes[k * 4], &f, 4);
    } else if (c.dtype == DType::kF64) {
      double v = f;
      std::memcpy(&bytes[k * 8], &v, 8);
    } else {
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      uint16_t top = static_cast<uint16_t>(bits >> 16);
      std::memcpy(&bytes[k * 2], &top, 2);
    }
  }
  return bytes;
}

/// Runs case `i` on `stream` and returns grad_input's bytes.
std::vector<char> run_case(int i, CUstream stream) {
  auto& d = runtime::driver();
  Case c = case_of(i);
  std::vector<char> input = input_of(c, i);
  const size_t out_bytes = count(c.grad_input_shape) * c.element_bytes;
  CUdeviceptr go = 0, gi = 0;
  runtime::check(d.MemAlloc(&go, input.size()), "cuMemAlloc");
  runtime::check(d.MemAlloc(&gi, out_bytes), "cuMemAlloc");
  runtime::check(d.MemcpyHtoDAsync(go, input.data(), input.size(), stream), "HtoD");
  runtime::check(d.MemsetD8Async(gi, 0xA5, out_bytes, stream), "memset");  // never-written shows
  Program p = Program::prepare(c.spec);
  p.launch({{"grad_output", TensorRef{go, c.dtype, c.grad_output_shape, {}}},
            {"grad_input", TensorRef{gi, c.dtype, c.grad_input_shape, {}}}},
           stream);
  std::vector<char> out(out_bytes);
  runtime::check(d.MemcpyDtoHAsync(out.data(), gi, out_bytes, stream), "DtoH");
  runtime::check(d.StreamSynchronize(stream), "cuStreamSynchronize");
  d.MemFree(go);
  d.MemFree(gi);
  return out;
}

std::string fresh_cache_dir(const char* tag) {
  std::string pattern = std::string("/tmp/adjoint-stress-") + tag + "-XXXXXX";
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  return pattern;
}

int reference_child(const std::string& file, int specs) {
  runtime::current_context();
  std::ofstream out(file, std::ios::binary);
  for (int i = 0; i < specs; ++i) {
    std::vector<char> bytes = run_case(i, nullptr);
    uint64_t size = bytes.size();
    out.write(reinterpret_cast<const char*>(&size), sizeof size);
    out.write(bytes.data(), bytes.size());
  }
  return out ? 0 : 1;
}

int stress(double seconds, int threads, int specs, const char* self) {
  // 1. The single-threaded reference, in another process with its own disk cache.
  std::string file = fresh_cache_dir("ref") + "/reference.bin";
  auto start = Clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("ADJOINT_CACHE_DIR", fresh_cache_dir("child").c_str(), 1);
    ::execl(self, self, "reference", file.c_str(), std::to_string(specs).c_str(), nullptr);
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::printf("{\"error\": \"reference child failed\"}\n");
    return 1;
  }
  const double reference_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<std::vector<char>> reference;
  std::ifstream in(file, std::ios::binary);
  for (int i = 0; i < specs; ++i) {
    uint64_t size = 0;
    in.read(reinterpret_cast<char*>(&size), sizeof size);
    reference.emplace_back(size);
    in.read(reference.back().data(), size);
  }
  // 2. Half of the pool prepared here first ("cached"); the rest is new under load.
  runtime::current_context();
  for (int i = 0; i < specs / 2; ++i) Program::prepare(case_of(i).spec);
  std::atomic<long> launches{0}, mismatches{0}, exceptions{0}, new_first{0};
  std::atomic<bool> seen[4096] = {};
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(seconds));
  std::mutex print;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        runtime::current_context();
        CUstream stream = nullptr;
        runtime::check(runtime::driver().StreamCreate(&stream, 1), "cuStreamCreate");
        std::mt19937 rng(t);
        while (Clock::now() < deadline) {
          int i = static_cast<int>(rng() % specs);
          if (i >= specs / 2 && !seen[i].exchange(true)) ++new_first;
          if (run_case(i, stream) != reference[i]) {
            ++mismatches;
            std::lock_guard lock(print);
            std::printf("mismatch: %s (thread %d)\n", case_of(i).spec.c_str(), t);
          }
          ++launches;
        }
        runtime::driver().StreamDestroy(stream);
      } catch (const std::exception& e) {
        ++exceptions;
        std::lock_guard lock(print);
        std::printf("exception in thread %d: %s\n", t, e.what());
      }
    });
  }
  for (std::thread& th : pool) th.join();
  std::printf(
      "{\"stress\": {\"threads\": %d, \"streams\": %d, \"seconds\": %.1f, \"specs\": %d, "
      "\"cached_before\": %d, \"new_under_load\": %ld, \"launches\": %ld, \"mismatches\": %ld, "
      "\"exceptions\": %ld, \"reference_child_s\": %.1f}}\n",
      threads, threads, seconds, specs, specs / 2, new_first.load(), launches.load(),
      mismatches.load(), exceptions.load(), reference_s);
  return mismatches == 0 && exceptions == 0 && launches > 0 ? 0 : 1;
}

long rss_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

int memory(int total, double seconds, size_t capacity, int threads) {
  ::setenv("ADJOINT_CACHE_DIR", fresh_cache_dir("memory").c_str(), 1);
  runtime::current_context();
  runtime::Engine::instance().set_program_cache_capacity(capacity);
  std::atomic<int> next{0}, done{0};
  std::atomic<long> failures{0};
  std::mutex print;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(seconds));
  auto sample = [&](int prepared) {
    size_t free_bytes = 0, total_bytes = 0;
    runtime::driver().MemGetInfo(&free_bytes, &total_bytes);
    std::printf("{\"memory\": {\"prepared\": %d, \"seconds\": %.1f, \"rss_mib\": %.1f, "
                "\"device_used_mib\": %.1f, \"cached_programs\": %zu}}\n",
                prepared, std::chrono::duration<double>(Clock::now() - start).count(),
                rss_kib() / 1024.0, (total_bytes - free_bytes) / 1048576.0,
                runtime::Engine::instance().cached_programs());
    std::fflush(stdout);
  };
  sample(0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      runtime::current_context();
      for (int i; (i = next++) < total && Clock::now() < deadline;) {
        try {
          Program::prepare(case_of(i).spec);
        } catch (const std::exception& e) {
          ++failures;
          std::lock_guard lock(print);
          std::printf("prepare failed: %s: %s\n", case_of(i).spec.c_str(), e.what());
        }
        int n = ++done;
        if (n % 250 == 0) {
          std::lock_guard lock(print);
          sample(n);
        }
      }
    });
  }
  for (std::thread& th : pool) th.join();
  sample(done.load());
  std::printf("{\"memory_summary\": {\"asked\": %d, \"prepared\": %d, \"failures\": %ld, "
              "\"capacity\": %zu, \"threads\": %d}}\n",
              total, done.load(), failures.load(), capacity, threads);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "specs" && argc == 3) {  // the pool, for checking it without a GPU
      for (int i = 0; i < std::atoi(argv[2]); ++i) std::printf("%s\n", case_of(i).spec.c_str());
      return 0;
    }
    if (mode == "reference" && argc == 4) return reference_child(argv[2], std::atoi(argv[3]));
    if (mode == "stress" && argc >= 4) {
      int specs = argc > 4 ? std::atoi(argv[4]) : 128;
      return stress(std::atof(argv[2]), std::atoi(argv[3]), std::min(specs, 4096), argv[0]);
    }
    if (mode == "memory" && argc == 6) {
      return memory(std::atoi(argv[2]), std::atof(argv[3]), std::strtoull(argv[4], nullptr, 10),
                    std::atoi(argv[5]));
    }
    std::fprintf(stderr,
                 "usage: adjoint_gpu_stress stress SECONDS THREADS [SPECS]\n"
                 "       adjoint_gpu_stress memory COUNT SECONDS CAPACITY THREADS\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "adjoint_gpu_stress: %s\n", e.what());
    return 1;
  }
}
