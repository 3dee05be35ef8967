// Binary acquisition for the engine: a disk-cache hit in a fresh process returns the stored bytes
// without loading NVRTC; a program's kernels compile as one translation unit in which same-named
// helpers cannot collide and diagnostics name each kernel's own file and line; the cache key
// needs no NVRTC and changes with every input; JIT disabled without a package is an error.
//
// Everything that loads NVRTC runs in a forked child, so the parent stays NVRTC-free and every
// child starts like a fresh process that has not loaded it.
#include "runtime/kernel_binary.h"
#include "runtime/compile_huge_pages.h"
#include "runtime/compile_worker.h"

#include <elf.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <functional>
#include <map>
#include <thread>

#include "ir/error.h"

namespace adjoint::runtime {
namespace {

namespace fs = std::filesystem;

const char* kKernelA = R"(// kernel a
#include "adjoint_types.cuh"

__device__ float scaled(float x) { return 2.0f * x; }
extern "C" __global__ void unit_test_a(float* out) { out[threadIdx.x] = scaled(out[threadIdx.x]); }
)";

const char* kKernelB = R"(// kernel b
#include "adjoint_types.cuh"
#include "adjoint_math.cuh"

__device__ float scaled(float x) { return adjoint::sigmoid(x) * 3.0f; }
extern "C" __global__ void unit_test_b(float* out) { out[threadIdx.x] = scaled(out[threadIdx.x]); }
)";

/// Line 6 of this source (after its own two lines of includes) is the broken statement.
const char* kBrokenKernel = R"(// broken
#include "adjoint_types.cuh"
#include "adjoint_math.cuh"

extern "C" __global__ void unit_test_broken(float* out) {
  out[0] = undeclared_identifier_xyz;
}
)";

bool is_elf(const std::vector<char>& image) {
  return image.size() > 4 && image[0] == '\x7f' && image[1] == 'E' && image[2] == 'L' &&
         image[3] == 'F';
}

bool contains(const std::vector<char>& bytes, const std::string& text) {
  return std::search(bytes.begin(), bytes.end(), text.begin(), text.end()) != bytes.end();
}

BinaryRequest request_of(std::vector<KernelSource> kernels) {
  BinaryRequest request;
  request.program = "unit_test_program";
  request.kernels = std::move(kernels);
  request.arch = 90;
  request.spec = "unit_test_program (test)";
  request.dump_key = "unit_test";
  return request;
}

/// Runs `body` in a forked child and returns its exit code (or 100 + signal). The child leaves
/// with _exit, skipping gtest's and the parent's exit handlers.
int run_in_child(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 99;
    try {
      code = body();
    } catch (const std::exception& error) {
      std::fprintf(stderr, "child threw: %s\n", error.what());
      code = 98;
    }
    ::_exit(code);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

/// A fresh cache directory per test, removed afterwards.
class RuntimeKernelBinary : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "adjoint-kernel-binary-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    ASSERT_FALSE(nvrtc_loaded()) << "a test loaded NVRTC in the parent process";
  }
  void TearDown() override { fs::remove_all(root_); }

  /// The message of the compile failure (an adjoint::Error of code kCompileFailed) that
  /// acquiring `request`'s images throws in a forked child; `also` then runs in that child and
  /// must hold too. A child that fails otherwise is a test failure (its message is then empty).
  std::string compile_failure_in_child(const BinaryRequest& request, const DiskCache& cache,
                                       const std::function<bool()>& also = [] { return true; }) {
    const fs::path message_file = root_ / "message.txt";
    const int code = run_in_child([&] {
      try {
        acquire_kernel_images(request, cache);
      } catch (const Error& error) {
        std::ofstream(message_file) << error.what();
        if (error.code() != ErrorCode::kCompileFailed) return 2;
        return also() ? 0 : 4;
      }
      return 3;
    });
    EXPECT_EQ(code, 0) << "2: another error, 3: no error, 4: the child's other check failed";
    std::ifstream in(message_file);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  fs::path root_;
};

/// What every compile failure of kBrokenKernel says: its own file and line, and where the
/// unit that failed was written.
void expect_names_the_broken_kernel(const std::string& message) {
  EXPECT_NE(message.find("unit_test_broken.cu(6)"), std::string::npos) << message;
  EXPECT_NE(message.find("written to "), std::string::npos) << message;
}

/// In a child: 0 when `images` are `request`'s units `groups`, freshly compiled (each image
/// its unit's kernels, an ELF naming their entries, under the unit's cache key); else the
/// code of the first check that fails (3 to 6).
int check_compiled_units(const std::vector<KernelImage>& images, const BinaryRequest& request,
                         const std::vector<std::vector<size_t>>& groups) {
  for (size_t u = 0; u < groups.size(); ++u) {
    if (images[u].kernels != groups[u]) return 3;
    if (images[u].source != BinarySource::kCompiled || !is_elf(images[u].bytes)) return 4;
    for (size_t k : groups[u]) {
      if (!contains(images[u].bytes, request.kernels[k].entry)) return 5;
    }
    if (images[u].disk_cache_key !=
        unit_cache_key(unit_compile_request(request, groups[u]), locate_nvrtc())) {
      return 6;
    }
  }
  return 0;
}

/// In a fresh child: `request`'s images are its `units` units, every one a disk-cache hit,
/// and NVRTC is not loaded. Returns the child's exit code (0 when so).
int all_disk_hits_in_child(const BinaryRequest& request, const DiskCache& cache, size_t units) {
  return run_in_child([&] {
    std::vector<KernelImage> images = acquire_kernel_images(request, cache);
    if (images.size() != units || nvrtc_loaded()) return 2;
    for (const KernelImage& image : images) {
      if (image.source != BinarySource::kDiskCache) return 3;
    }
    return 0;
  });
}

TEST(RuntimeKernelBinaryUnit, OneKernelIsItsOwnSource) {
  EXPECT_EQ(combined_translation_unit({{"unit_test_a", kKernelA}}), kKernelA);
}

TEST(RuntimeKernelBinaryUnit, SeveralKernelsGetNamespacesLineDirectivesAndIncludesOnce) {
  const std::string unit =
      combined_translation_unit({{"unit_test_a", kKernelA}, {"unit_test_b", kKernelB}});
  // Each distinct include once, before any kernel.
  const size_t types = unit.find("#include \"adjoint_types.cuh\"");
  const size_t math = unit.find("#include \"adjoint_math.cuh\"");
  ASSERT_NE(types, std::string::npos);
  ASSERT_NE(math, std::string::npos);
  EXPECT_EQ(unit.find("#include \"adjoint_types.cuh\"", types + 1), std::string::npos);
  EXPECT_EQ(unit.find("#include", math + 1), std::string::npos);
  const size_t first = unit.find("namespace adjoint_kernel_0 {\n#line 1 \"unit_test_a.cu\"\n");
  const size_t second = unit.find("namespace adjoint_kernel_1 {\n#line 1 \"unit_test_b.cu\"\n");
  ASSERT_NE(first, std::string::npos) << unit;
  ASSERT_NE(second, std::string::npos) << unit;
  EXPECT_LT(math, first);
  EXPECT_LT(first, second);
  // Line numbers hold: the helper of kernel b is still on line 5 after its #line directive.
  const size_t body_b = unit.find('\n', unit.find("#line 1 \"unit_test_b.cu\"")) + 1;
  const size_t helper_b = unit.find("__device__ float scaled", body_b);
  EXPECT_EQ(std::count(unit.begin() + body_b, unit.begin() + helper_b, '\n'), 4);
}

TEST_F(RuntimeKernelBinary, CacheKeyNeedsNoNvrtcAndCoversEveryInput) {
  const NvrtcLocation& location = locate_nvrtc();
  BinaryRequest request = request_of({{"unit_test_a", kKernelA}, {"unit_test_b", kKernelB}});
  const CompileRequest both = unit_compile_request(request, {0, 1});
  const std::string key = unit_cache_key(both, location);
  EXPECT_EQ(key.size(), 32u);
  EXPECT_EQ(key, unit_cache_key(unit_compile_request(request, {0, 1}), location));
  EXPECT_NE(key, unit_cache_key(unit_compile_request(request, {0}), location));
  CompileRequest other = both;
  other.arch = 80;
  EXPECT_NE(key, unit_cache_key(other, location));
  other = both;
  other.want_cubin = false;
  EXPECT_NE(key, unit_cache_key(other, location));
  other = both;
  other.extra_options = {"-DX=1"};
  EXPECT_NE(key, unit_cache_key(other, location));
  other = both;
  other.name = "renamed.cu";  // -lineinfo records the file name in the cubin
  EXPECT_NE(key, unit_cache_key(other, location));
  NvrtcLocation other_library = location;
  other_library.identity = "build-id:0123";
  EXPECT_NE(key, unit_cache_key(both, other_library));
  other_library = location;
  other_library.include_dir = "/elsewhere/include";
  EXPECT_NE(key, unit_cache_key(both, other_library));
  EXPECT_FALSE(nvrtc_loaded());
}

/// The acceptance test of the disk cache's design: one child compiles and stores a program, a
/// second (fresh) child gets the same bytes from the cache without loading NVRTC.
TEST_F(RuntimeKernelBinary, DiskHitInFreshProcessDoesNotLoadNvrtc) {
  const DiskCache cache(root_ / "cache");
  for (const BinaryRequest& request :
       {request_of({{"unit_test_a", kKernelA}}),
        request_of({{"unit_test_a", kKernelA}, {"unit_test_b", kKernelB}})}) {
    const size_t kernels = request.kernels.size();
    const int compiled = run_in_child([&] {
      std::vector<KernelImage> images = acquire_kernel_images(request, cache);
      if (images.size() != 1) return 2;
      if (images[0].source != BinarySource::kCompiled || !nvrtc_loaded()) return 3;
      if (!is_elf(images[0].bytes) || images[0].kernels.size() != kernels) return 4;
      for (const KernelSource& kernel : request.kernels) {
        if (!contains(images[0].bytes, kernel.entry)) return 5;
      }
      return 0;
    });
    ASSERT_EQ(compiled, 0) << kernels << " kernel(s)";

    const int hit = run_in_child([&] {
      std::vector<KernelImage> images = acquire_kernel_images(request, cache);
      if (images.size() != 1 || images[0].source != BinarySource::kDiskCache) return 2;
      if (nvrtc_loaded()) return 3;  // the point of the test
      std::optional<std::vector<char>> stored = cache.load(images[0].disk_cache_key);
      if (!stored || *stored != images[0].bytes || !is_elf(images[0].bytes)) return 4;
      if (images[0].kernels.size() != kernels || images[0].compile_milliseconds != 0) return 5;
      return 0;
    });
    EXPECT_EQ(hit, 0) << kernels << " kernel(s)";
  }
  EXPECT_FALSE(nvrtc_loaded());
}

TEST_F(RuntimeKernelBinary, CombinedUnitWithSameNamedHelpersCompiles) {
  const DiskCache cache(root_ / "cache");
  const BinaryRequest request = request_of({{"unit_test_a", kKernelA}, {"unit_test_b", kKernelB}});
  EXPECT_EQ(run_in_child([&] {
              std::vector<KernelImage> images = acquire_kernel_images(request, cache);
              if (images.size() != 1 || images[0].kernels != std::vector<size_t>{0, 1}) return 2;
              return contains(images[0].bytes, "unit_test_a") &&
                             contains(images[0].bytes, "unit_test_b")
                         ? 0
                         : 3;
            }),
            0);
}

TEST_F(RuntimeKernelBinary, CompileErrorNamesTheKernelFileAndLineAndWritesTheUnit) {
  const DiskCache cache(root_ / "cache");
  const BinaryRequest request =
      request_of({{"unit_test_a", kKernelA}, {"unit_test_broken", kBrokenKernel}});
  const std::string message = compile_failure_in_child(request, cache);
  expect_names_the_broken_kernel(message);
  EXPECT_NE(message.find("undeclared_identifier_xyz"), std::string::npos) << message;
  EXPECT_NE(message.find("unit_test_program (test)"), std::string::npos) << message;
  const size_t at = message.find("written to ");
  ASSERT_NE(at, std::string::npos) << message;
  const std::string path = message.substr(at + 11, message.find(' ', at + 11) - at - 11);
  std::ifstream written(path);
  const std::string unit((std::istreambuf_iterator<char>(written)),
                         std::istreambuf_iterator<char>());
  EXPECT_EQ(unit, combined_translation_unit(request.kernels)) << path;
  fs::remove(path);
}

/// With compile threads, every kernel is its own unit, compiled concurrently and cached on its
/// own; a fresh process then hits every entry without loading NVRTC.
TEST_F(RuntimeKernelBinary, ConcurrentUnitsOnePerKernelAreCachedEach) {
  const DiskCache cache(root_ / "cache");
  BinaryRequest request = request_of({{"unit_test_a", kKernelA}, {"unit_test_b", kKernelB}});
  request.compile_threads = 2;
  EXPECT_EQ(run_in_child([&] {
              AcquireProfile profile;
              std::vector<KernelImage> images = acquire_kernel_images(request, cache, &profile);
              if (images.size() != 2 || profile.units_compiled != 2 || profile.threads != 2) {
                return 2;
              }
              if (int failed = check_compiled_units(images, request, {{0}, {1}})) return failed;
              return profile.compile_wall_ms > 0 && profile.compile_sum_ms > 0 ? 0 : 7;
            }),
            0);
  EXPECT_EQ(all_disk_hits_in_child(request, cache, 2), 0);
}

/// A failed kernel among concurrent units: the error still names its file and line and the
/// written source, after the other unit has finished (and been cached).
TEST_F(RuntimeKernelBinary, ConcurrentUnitFailureNamesTheKernel) {
  const DiskCache cache(root_ / "cache");
  BinaryRequest request =
      request_of({{"unit_test_a", kKernelA}, {"unit_test_broken", kBrokenKernel}});
  request.compile_threads = 4;
  expect_names_the_broken_kernel(compile_failure_in_child(request, cache, [&] {
    // the good kernel's unit finished and was stored
    return cache.load(unit_cache_key(unit_compile_request(request, {0}), locate_nvrtc()))
        .has_value();
  }));
}

/// ADJOINT_COMPILE_PROCESSES: units compiled in adjoint_compile_worker processes are the same
/// bytes under the same keys as in-process compiles, this process never loads NVRTC for them,
/// and a rejected source gives the same error (file and line of the kernel).
TEST_F(RuntimeKernelBinary, WorkerProcessesGiveTheSameBinariesAndErrors) {
  ASSERT_TRUE(compile_worker_executable().has_value())
      << "adjoint_compile_worker is built beside the tests";
  BinaryRequest request = request_of({{"unit_test_a", kKernelA}, {"unit_test_b", kKernelB}});
  request.compile_threads = 2;
  const fs::path same_file = root_ / "same.txt";
  EXPECT_EQ(run_in_child([&] {
              request.compile_processes = true;
              AcquireProfile profile;
              std::vector<KernelImage> workers =
                  acquire_kernel_images(request, DiskCache(root_ / "workers"), &profile);
              if (!profile.processes || profile.units_compiled != 2) return 2;
              if (nvrtc_loaded()) return 3;  // the workers compiled, not a fallback here
              request.compile_processes = false;
              std::vector<KernelImage> threads =
                  acquire_kernel_images(request, DiskCache(root_ / "threads"));
              if (workers.size() != 2 || threads.size() != 2) return 4;
              for (size_t k = 0; k < 2; ++k) {
                if (!is_elf(workers[k].bytes) || workers[k].bytes != threads[k].bytes) return 5;
                if (workers[k].disk_cache_key != threads[k].disk_cache_key) return 6;
                if (workers[k].compile_milliseconds <= 0) return 7;
              }
              return 0;
            }),
            0);
  BinaryRequest broken =
      request_of({{"unit_test_a", kKernelA}, {"unit_test_broken", kBrokenKernel}});
  broken.compile_threads = 2;
  broken.compile_processes = true;
  expect_names_the_broken_kernel(compile_failure_in_child(
      broken, DiskCache(root_ / "broken"), [] { return !nvrtc_loaded(); }));
}

/// Workers stay for the life of the process and serve its later compiles; a fork of the
/// process spawns its own instead of sharing its parent's sockets.
TEST_F(RuntimeKernelBinary, WorkersAreKeptAndNotSharedWithAFork) {
  BinaryRequest first = request_of({{"unit_test_a", kKernelA}, {"unit_test_b", kKernelB}});
  first.compile_threads = 2;
  first.compile_processes = true;
  BinaryRequest second = request_of({{"unit_test_b", kKernelB}, {"unit_test_c", R"(// c
#include "adjoint_types.cuh"
extern "C" __global__ void unit_test_c(float* out) { out[threadIdx.x] += 1.0f; }
)"}});
  second.compile_threads = 2;
  second.compile_processes = true;
  EXPECT_EQ(run_in_child([&] {
              if (acquire_kernel_images(first, DiskCache(root_ / "one")).size() != 2) return 2;
              const int forked = run_in_child([&] {
                std::vector<KernelImage> images =
                    acquire_kernel_images(second, DiskCache(root_ / "fork"));
                return images.size() == 2 && is_elf(images[1].bytes) && !nvrtc_loaded() ? 0 : 1;
              });
              if (forked != 0) return 10 + forked;
              std::vector<KernelImage> images =
                  acquire_kernel_images(second, DiskCache(root_ / "two"));
              return images.size() == 2 && is_elf(images[1].bytes) && !nvrtc_loaded() ? 0 : 3;
            }),
            0);
}

TEST(CompileProcesses, EnvironmentIsCheckedAndOffByDefault) {
  unsetenv("ADJOINT_COMPILE_PROCESSES");
  EXPECT_FALSE(compile_processes_from_environment());
  ASSERT_EQ(setenv("ADJOINT_COMPILE_PROCESSES", "1", 1), 0);
  EXPECT_TRUE(compile_processes_from_environment());
  ASSERT_EQ(setenv("ADJOINT_COMPILE_PROCESSES", "0", 1), 0);
  EXPECT_FALSE(compile_processes_from_environment());
  for (const char* bad : {"2", "on", "-1"}) {
    ASSERT_EQ(setenv("ADJOINT_COMPILE_PROCESSES", bad, 1), 0);
    try {
      compile_processes_from_environment();
      ADD_FAILURE() << bad << ": expected an error";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(error.what()).find("ADJOINT_COMPILE_PROCESSES"), std::string::npos);
    }
  }
  unsetenv("ADJOINT_COMPILE_PROCESSES");
}

TEST(CompileWorkerWire, RequestsRoundTrip) {
  CompileRequest request;
  request.source = std::string("int x;\0tail", 11);
  request.name = "n.cu";
  request.arch = 86;
  request.want_cubin = false;
  request.also_ptx = true;
  request.extra_options = {"-a", "", "-b=c"};
  std::optional<CompileRequest> back = decode_request(encode_request(request));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->source, request.source);
  EXPECT_EQ(back->name, request.name);
  EXPECT_EQ(back->arch, 86);
  EXPECT_FALSE(back->want_cubin);
  EXPECT_TRUE(back->also_ptx);
  EXPECT_EQ(back->extra_options, request.extra_options);
  const std::string bytes = encode_request(request);
  EXPECT_FALSE(decode_request(bytes.substr(0, bytes.size() - 1)).has_value());
  EXPECT_FALSE(decode_request(bytes + "x").has_value());
}

const char* kKernelC = R"(// kernel c
#include "adjoint_types.cuh"

extern "C" __global__ void unit_test_c(float* out) { out[threadIdx.x] += 1.0f; }
)";

/// With compile units, a program's kernels are grouped into that many units, each compiled
/// (with -split-compile when it holds several kernels) and cached on its own; a fresh process
/// forms the same units and hits every entry without loading NVRTC.
TEST_F(RuntimeKernelBinary, GroupedUnitsAreCachedEachAndFoundAgain) {
  const DiskCache cache(root_ / "cache");
  BinaryRequest request = request_of(
      {{"unit_test_a", kKernelA}, {"unit_test_b", kKernelB}, {"unit_test_c", kKernelC}});
  request.compile_threads = 2;
  request.compile_units = 2;
  request.split_compile = 2;
  std::vector<size_t> sizes;
  for (const KernelSource& kernel : request.kernels) sizes.push_back(kernel.source.size());
  const std::vector<std::vector<size_t>> groups = kernel_groups({0, 1, 2}, sizes, 2);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(run_in_child([&] {
              AcquireProfile profile;
              std::vector<KernelImage> images = acquire_kernel_images(request, cache, &profile);
              if (images.size() != 2 || profile.units_compiled != 2 || profile.threads != 2) {
                return 2;
              }
              return check_compiled_units(images, request, groups);
            }),
            0);
  EXPECT_EQ(all_disk_hits_in_child(request, cache, 2), 0);
}

/// The `.text.<kernel>` sections (each kernel's machine code) of a 64-bit ELF cubin.
std::map<std::string, std::string> text_sections(const std::vector<char>& cubin) {
  std::map<std::string, std::string> texts;
  if (cubin.size() < sizeof(Elf64_Ehdr)) return texts;
  Elf64_Ehdr header;
  std::memcpy(&header, cubin.data(), sizeof header);
  auto section = [&](size_t i) {
    Elf64_Shdr s;
    std::memcpy(&s, cubin.data() + header.e_shoff + i * header.e_shentsize, sizeof s);
    return s;
  };
  const Elf64_Shdr names = section(header.e_shstrndx);
  for (size_t i = 0; i < header.e_shnum; ++i) {
    const Elf64_Shdr s = section(i);
    const std::string name(cubin.data() + names.sh_offset + s.sh_name);
    if (name.rfind(".text.", 0) == 0 && s.sh_type != SHT_NOBITS) {
      texts[name] = std::string(cubin.data() + s.sh_offset, s.sh_size);
    }
  }
  return texts;
}

/// Grouping changes no code: every kernel of a unit of three has the machine code it has when
/// compiled alone.
TEST_F(RuntimeKernelBinary, GroupedKernelsKeepTheirMachineCodeAlone) {
  const BinaryRequest request = request_of(
      {{"unit_test_a", kKernelA}, {"unit_test_b", kKernelB}, {"unit_test_c", kKernelC}});
  EXPECT_EQ(run_in_child([&] {
              const Nvrtc& nvrtc = Nvrtc::instance();
              std::map<std::string, std::string> alone;
              for (size_t k = 0; k < 3; ++k) {
                for (auto& [name, text] :
                     text_sections(nvrtc.compile(unit_compile_request(request, {k})).cubin)) {
                  alone[name] = text;
                }
              }
              const std::map<std::string, std::string> grouped =
                  text_sections(nvrtc.compile(unit_compile_request(request, {0, 1, 2})).cubin);
              if (alone.size() != 3) return 2;
              return grouped == alone ? 0 : 3;
            }),
            0);
}

TEST(KernelGroups, BalancedBySourceSizeDeterministicAndInProgramOrder) {
  // Sizes 50, 10, 40, 30, 20: largest first into the lightest group.
  const std::vector<size_t> kernels = {0, 1, 2, 3, 4};
  const std::vector<size_t> sizes = {50, 10, 40, 30, 20};
  // 0 (50) -> first, 2 (40) -> second, 3 (30) -> second (70), 4 (20) -> first (70), 1 (10)
  // -> first (a tie goes to the earlier group).
  EXPECT_EQ(kernel_groups(kernels, sizes, 2),
            (std::vector<std::vector<size_t>>{{0, 1, 4}, {2, 3}}));
  EXPECT_EQ(kernel_groups(kernels, sizes, 1),
            (std::vector<std::vector<size_t>>{{0, 1, 2, 3, 4}}));
  EXPECT_EQ(kernel_groups(kernels, sizes, 0),
            (std::vector<std::vector<size_t>>{{0}, {1}, {2}, {3}, {4}}));
  EXPECT_EQ(kernel_groups(kernels, sizes, 9), kernel_groups(kernels, sizes, 0));
  // The indices given are what the groups hold (e.g. the kernels no package covers).
  EXPECT_EQ(kernel_groups({3, 7, 8}, {5, 5, 5}, 2),
            (std::vector<std::vector<size_t>>{{3, 8}, {7}}));
  // Every kernel exactly once, whatever the count.
  for (int units = 0; units <= 6; ++units) {
    std::vector<size_t> seen;
    for (const auto& group : kernel_groups(kernels, sizes, units)) {
      EXPECT_FALSE(group.empty());
      EXPECT_TRUE(std::is_sorted(group.begin(), group.end()));
      seen.insert(seen.end(), group.begin(), group.end());
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, kernels) << units;
  }
}

TEST(KernelGroups, SplitCompileOnlyForUnitsOfSeveralKernels) {
  BinaryRequest request = request_of({{"unit_test_a", kKernelA}, {"unit_test_b", kKernelB}});
  request.split_compile = 4;
  EXPECT_EQ(unit_compile_request(request, {0, 1}).extra_options,
            (std::vector<std::string>{"-split-compile=4"}));
  EXPECT_TRUE(unit_compile_request(request, {1}).extra_options.empty());
  request.split_compile = 1;
  EXPECT_TRUE(unit_compile_request(request, {0, 1}).extra_options.empty());
}

TEST(CompileUnits, EnvironmentIsCheckedAndDefaultsToOnePerKernelOnEightThreadsOrMore) {
  unsetenv("ADJOINT_COMPILE_UNITS");
  EXPECT_EQ(compile_units_from_environment(16), 0);  // one unit per kernel
  EXPECT_EQ(compile_units_from_environment(2), 1);   // one combined unit
  ASSERT_EQ(setenv("ADJOINT_COMPILE_UNITS", "auto", 1), 0);
  EXPECT_EQ(compile_units_from_environment(8), 0);
  EXPECT_EQ(compile_units_from_environment(7), 1);
  ASSERT_EQ(setenv("ADJOINT_COMPILE_UNITS", "kernel", 1), 0);
  EXPECT_EQ(compile_units_from_environment(16), 0);
  ASSERT_EQ(setenv("ADJOINT_COMPILE_UNITS", "3", 1), 0);
  EXPECT_EQ(compile_units_from_environment(16), 3);
  for (const char* bad : {"0", "-1", "x", "4x", "257"}) {
    ASSERT_EQ(setenv("ADJOINT_COMPILE_UNITS", bad, 1), 0);
    try {
      compile_units_from_environment(16);
      ADD_FAILURE() << bad << ": expected an error";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(error.what()).find("ADJOINT_COMPILE_UNITS"), std::string::npos);
      EXPECT_NE(std::string(error.what()).find(bad), std::string::npos);
    }
  }
  unsetenv("ADJOINT_COMPILE_UNITS");

  unsetenv("ADJOINT_TUNE_SPLIT_COMPILE");
  EXPECT_EQ(split_compile_from_environment(), 1);
  ASSERT_EQ(setenv("ADJOINT_TUNE_SPLIT_COMPILE", "4", 1), 0);
  EXPECT_EQ(split_compile_from_environment(), 4);
  for (const char* bad : {"0", "65", "two"}) {
    ASSERT_EQ(setenv("ADJOINT_TUNE_SPLIT_COMPILE", bad, 1), 0);
    EXPECT_THROW(split_compile_from_environment(), Error) << bad;
  }
  unsetenv("ADJOINT_TUNE_SPLIT_COMPILE");
}

TEST(CompileThreads, EnvironmentIsCheckedAndDefaultsToTheHardware) {
  ASSERT_EQ(setenv("ADJOINT_COMPILE_THREADS", "3", 1), 0);
  EXPECT_EQ(compile_threads_from_environment(), 3);
  ASSERT_EQ(setenv("ADJOINT_COMPILE_THREADS", "0", 1), 0);
  const int hardware = compile_threads_from_environment();
  EXPECT_GE(hardware, 1);
  EXPECT_LE(hardware, 16);
  for (const char* bad : {"-1", "x", "4x", "257"}) {
    ASSERT_EQ(setenv("ADJOINT_COMPILE_THREADS", bad, 1), 0);
    try {
      compile_threads_from_environment();
      ADD_FAILURE() << bad << ": expected an error";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(error.what()).find("ADJOINT_COMPILE_THREADS"), std::string::npos);
      EXPECT_NE(std::string(error.what()).find(bad), std::string::npos);
    }
  }
  unsetenv("ADJOINT_COMPILE_THREADS");
  EXPECT_EQ(compile_threads_from_environment(), hardware);
}

TEST(CompileHugePages, EnvironmentIsCheckedAndTheScopeFinishesOnce) {
  unsetenv("ADJOINT_TUNE_COMPILE_HUGE_PAGES");
  EXPECT_FALSE(compile_huge_pages_from_environment());  // off by default, docs/runtime.md
  ASSERT_EQ(setenv("ADJOINT_TUNE_COMPILE_HUGE_PAGES", "1", 1), 0);
  EXPECT_TRUE(compile_huge_pages_from_environment());
  for (const char* bad : {"2", "-1", "on"}) {
    ASSERT_EQ(setenv("ADJOINT_TUNE_COMPILE_HUGE_PAGES", bad, 1), 0);
    try {
      compile_huge_pages_from_environment();
      ADD_FAILURE() << bad << ": expected an error";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(error.what()).find("ADJOINT_TUNE_COMPILE_HUGE_PAGES"),
                std::string::npos);
    }
  }
  unsetenv("ADJOINT_TUNE_COMPILE_HUGE_PAGES");
  {
    CompileHugePagesScope off(false);
    EXPECT_FALSE(off.active());
    EXPECT_EQ(off.finish(), 0.0);
  }
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  CompileHugePagesScope on(true);
#if defined(__GLIBC__)
  EXPECT_EQ(on.active(), tunables == nullptr || *tunables == '\0');  // the user's tunables win
#endif
  std::thread thread([&] {  // a thread's heap, as a compile thread's
    on.prepare_thread();
    std::vector<std::vector<char>> blocks;
    for (int i = 0; i < 16; ++i) blocks.emplace_back(size_t{4} << 20, static_cast<char>(i));
  });
  thread.join();
  EXPECT_GE(on.finish(), 0.0);
  EXPECT_FALSE(on.active());
  EXPECT_EQ(on.finish(), 0.0);  // once only
}

TEST(NvrtcOptions, EnvironmentIsSplitCheckedAndKeyed) {
  unsetenv("ADJOINT_TUNE_NVRTC_OPTIONS");
  unsetenv("ADJOINT_TUNE_BF16_CVT");
  EXPECT_TRUE(nvrtc_options_from_environment().empty());
  ASSERT_EQ(setenv("ADJOINT_TUNE_NVRTC_OPTIONS", " -Ofc=mid  -Xptxas=-O2 ", 1), 0);
  EXPECT_EQ(nvrtc_options_from_environment(),
            (std::vector<std::string>{"-Ofc=mid", "-Xptxas=-O2"}));
  // The options reach the unit's compile request and change its disk-cache key.
  BinaryRequest request = request_of({{"unit_test_a", kKernelA}});
  const std::string plain = unit_cache_key(unit_compile_request(request, {0}), locate_nvrtc());
  request.nvrtc_options = nvrtc_options_from_environment();
  const CompileRequest tuned = unit_compile_request(request, {0});
  EXPECT_EQ(tuned.extra_options, request.nvrtc_options);
  EXPECT_NE(unit_cache_key(tuned, locate_nvrtc()), plain);
  ASSERT_EQ(setenv("ADJOINT_TUNE_NVRTC_OPTIONS", "-Ofc=mid mid", 1), 0);
  try {
    nvrtc_options_from_environment();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("ADJOINT_TUNE_NVRTC_OPTIONS"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("'mid'"), std::string::npos);
  }
  unsetenv("ADJOINT_TUNE_NVRTC_OPTIONS");
  // ADJOINT_TUNE_BF16_CVT: 1 (the template's default) adds nothing; 0 defines
  // ADJOINT_BF16_CVT after the other options; anything else (2, the experiment of before
  // bfloat16's NaN became 0x7fff, included) is refused.
  ASSERT_EQ(setenv("ADJOINT_TUNE_BF16_CVT", "1", 1), 0);
  EXPECT_TRUE(nvrtc_options_from_environment().empty());
  ASSERT_EQ(setenv("ADJOINT_TUNE_NVRTC_OPTIONS", "-Ofc=mid", 1), 0);
  ASSERT_EQ(setenv("ADJOINT_TUNE_BF16_CVT", "0", 1), 0);
  EXPECT_EQ(nvrtc_options_from_environment(),
            (std::vector<std::string>{"-Ofc=mid", "-DADJOINT_BF16_CVT=0"}));
  unsetenv("ADJOINT_TUNE_NVRTC_OPTIONS");
  for (const char* refused : {"2", "3"}) {
    ASSERT_EQ(setenv("ADJOINT_TUNE_BF16_CVT", refused, 1), 0);
    try {
      nvrtc_options_from_environment();
      ADD_FAILURE() << "expected an error for " << refused;
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(error.what()).find("ADJOINT_TUNE_BF16_CVT"), std::string::npos);
      EXPECT_NE(std::string(error.what()).find(std::string("got '") + refused + "'"),
                std::string::npos);
    }
  }
  unsetenv("ADJOINT_TUNE_BF16_CVT");
}

TEST_F(RuntimeKernelBinary, JitDisabledWithoutPackageIsNotAvailable) {
  const DiskCache cache(root_ / "cache");
  BinaryRequest request = request_of({{"unit_test_a", kKernelA}});
  request.jit_enabled = false;
  try {
    acquire_kernel_images(request, cache);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kNotAvailable);
    EXPECT_NE(std::string(error.what()).find("unit_test_a"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("JIT compilation is disabled"), std::string::npos);
  }
  EXPECT_FALSE(nvrtc_loaded());
}

TEST_F(RuntimeKernelBinary, ProgramWithoutKernelsNeedsNothing) {
  const DiskCache cache(root_ / "cache");
  EXPECT_TRUE(acquire_kernel_images(request_of({}), cache).empty());
  EXPECT_FALSE(nvrtc_loaded());
}

}  // namespace
}  // namespace adjoint::runtime
