// The disk cache under real conditions, without a GPU: 8 processes x 4 threads sharing one
// directory, writers killed with SIGKILL in the middle of a write, every kind of damaged entry,
// degraded directories (read-only, no permission, a full disk through RLIMIT_FSIZE), eviction
// under pressure from several processes while another reads, and the modes of what is created
// under a permissive umask. Payloads are a function of their key, so any reader can tell a
// torn or foreign entry from a good one. ADJOINT_CACHE_STRESS_SECONDS sets the concurrency
// runs' length (default 3 s).
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <thread>

#include "runtime/disk_cache.h"
#include "runtime/logging.h"

namespace adjoint::runtime {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string key_of(const std::string& name) {
  return disk_cache_key(name, {"-arch=sm_90"}, "stress", 90);
}

/// The one correct payload of `key`: its size (1 KiB .. 129 KiB) and bytes follow from the key.
std::vector<char> payload_for(const std::string& key, size_t scale = 1) {
  uint64_t h = std::hash<std::string>{}(key);
  std::vector<char> bytes((1024 + h % (128 * 1024)) * scale);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((h >> (i % 56)) + i);
  return bytes;
}

double stress_seconds() {
  const char* v = std::getenv("ADJOINT_CACHE_STRESS_SECONDS");
  return v && *v ? std::atof(v) : 3.0;
}

std::vector<std::string> temporaries_in(const fs::path& directory) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(directory)) {
    std::string name = e.path().filename().string();
    if (name.starts_with(".tmp-")) names.push_back(name);
  }
  return names;
}

uint64_t entry_bytes_in(const fs::path& directory) {
  uint64_t total = 0;
  for (const auto& e : fs::directory_iterator(directory)) {
    if (e.path().extension() == ".entry") total += e.file_size();
  }
  return total;
}

/// Waits for every child; returns the failures as text (empty when all exited 0).
std::string wait_all(const std::vector<pid_t>& children) {
  std::string failures;
  for (pid_t pid : children) {
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) {
      failures += "waitpid failed; ";
    } else if (!WIFEXITED(status)) {
      failures += "child " + std::to_string(pid) + " died of signal " +
                  std::to_string(WTERMSIG(status)) + "; ";
    } else if (WEXITSTATUS(status) != 0) {
      failures += "child " + std::to_string(pid) + " exited " +
                  std::to_string(WEXITSTATUS(status)) + "; ";
    }
  }
  return failures;
}

/// A fresh directory per test and the warnings logged while it runs.
class DiskCacheStress : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "adjoint-cache-stress-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    sink_ = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000);
    logger().sinks().push_back(sink_);
  }
  void TearDown() override {
    auto& sinks = logger().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    ::chmod(root_.c_str(), 0700);
    for (const auto& e : fs::recursive_directory_iterator(root_)) {
      if (e.is_directory()) ::chmod(e.path().c_str(), 0700);
    }
    fs::remove_all(root_);
  }
  /// The warnings logged since the last call that mention `text`.
  int warnings_mentioning(const std::string& text) {
    int count = 0;
    for (const std::string& line : sink_->last_formatted()) {
      if (line.find("warn") != std::string::npos && line.find(text) != std::string::npos) ++count;
    }
    return count;
  }
  void clear_log() {
    auto& sinks = logger().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    sink_ = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000);
    sinks.push_back(sink_);
  }
  fs::path root_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

/// 8 processes x 4 threads publish and read 24 shared keys and their own keys for a bounded
/// time: every hit has exactly its key's bytes, nothing throws, no temporary file remains.
TEST_F(DiskCacheStress, ProcessesAndThreadsShareOneDirectory) {
  constexpr int kProcesses = 8, kThreads = 4, kSharedKeys = 24;
  const fs::path directory = root_ / "shared";
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(stress_seconds()));
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid != 0) {
      children.push_back(pid);
      continue;
    }
    // Child: exit codes say what went wrong (3 wrong bytes, 4 an exception, 5 no work done).
    std::atomic<int> failure{0};
    std::atomic<long> hits{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        try {
          DiskCache cache(directory);
          std::mt19937_64 rng(p * 100 + t);
          while (std::chrono::steady_clock::now() < deadline && !failure) {
            bool shared = rng() % 4 != 0;
            std::string key = shared ? key_of("shared " + std::to_string(rng() % kSharedKeys))
                                     : key_of("own " + std::to_string(p) + " " +
                                              std::to_string(t) + " " + std::to_string(rng() % 8));
            if (rng() % 2) {
              if (auto loaded = cache.load(key)) {
                if (*loaded != payload_for(key)) failure = 3;
                ++hits;
              }
            } else {
              cache.store(key, payload_for(key));
            }
          }
        } catch (...) {
          failure = 4;
        }
      });
    }
    for (std::thread& th : threads) th.join();
    ::_exit(failure ? failure.load() : hits == 0 ? 5 : 0);
  }
  EXPECT_EQ(wait_all(children), "");
  EXPECT_EQ(temporaries_in(directory), std::vector<std::string>{});
  DiskCache cache(directory);
  int entries = 0;
  for (const auto& e : fs::directory_iterator(directory)) {
    std::string key = e.path().stem().string();
    auto loaded = cache.load(key);
    ASSERT_TRUE(loaded.has_value()) << key;
    EXPECT_EQ(*loaded, payload_for(key));
    ++entries;
  }
  EXPECT_GE(entries, kSharedKeys);
  EXPECT_EQ(warnings_mentioning("disk cache"), 0);
}

/// A writer killed (SIGKILL) at random points of large writes: a later reader gets a miss or
/// the exact bytes, never a partial entry; the dead writer's temporary file is never read and
/// is cleaned up once stale.
TEST_F(DiskCacheStress, WriterKilledMidWriteLeavesNothingAReaderAccepts) {
  const fs::path directory = root_ / "killed";
  const std::string key = key_of("killed writer");
  const std::vector<char> payload = payload_for(key, 256);  // 0.25 .. 32 MiB
  std::mt19937_64 rng(7);
  int killed_mid_write = 0, rounds = 0;
  while (rounds < 60 && killed_mid_write < 3) {
    ++rounds;
    fs::remove_all(directory);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      DiskCache cache(directory);
      for (;;) cache.store(key, payload);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500 + rng() % 20000));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!fs::exists(directory)) continue;
    if (!temporaries_in(directory).empty()) ++killed_mid_write;
    DiskCache cache(directory);
    if (auto loaded = cache.load(key)) {
      EXPECT_EQ(*loaded, payload) << "round " << rounds;
    }
  }
  EXPECT_GE(killed_mid_write, 1) << "no SIGKILL landed in a write in " << rounds << " rounds";
  // The dead writer's partial files: never an entry; removed by a store once an hour old.
  DiskCache cache(directory);
  for (const std::string& name : temporaries_in(directory)) {
    fs::last_write_time(directory / name, fs::file_time_type::clock::now() - 2h);
  }
  ASSERT_TRUE(cache.store(key, payload));
  EXPECT_EQ(temporaries_in(directory), std::vector<std::string>{});
  EXPECT_EQ(cache.load(key), payload);
}

/// Each kind of damage is detected, warned about once, and replaced by the next store.
TEST_F(DiskCacheStress, EveryKindOfDamageIsDetectedReportedOnceAndReplaced) {
  DiskCache cache(root_ / "damaged");
  struct Damage {
    std::string name;
    std::function<void(const fs::path&)> apply;
    bool needs_non_root = false;
  };
  std::vector<Damage> damages = {
      {"truncated", [](const fs::path& p) { fs::resize_file(p, fs::file_size(p) / 2); }},
      {"flipped byte",
       [](const fs::path& p) {
         std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
         f.seekg(100);
         char c = 0;
         f.read(&c, 1);
         f.seekp(100);
         c ^= 0x10;
         f.write(&c, 1);
       }},
      {"zero-filled",
       [](const fs::path& p) {
         auto size = fs::file_size(p);
         std::ofstream(p, std::ios::binary | std::ios::trunc)
             << std::string(static_cast<size_t>(size), '\0');
       }},
      {"directory",
       [](const fs::path& p) {
         fs::remove(p);
         fs::create_directories(p / "child");
       }},
      {"fifo",
       [](const fs::path& p) {
         fs::remove(p);
         ::mkfifo(p.c_str(), 0600);
       }},
      {"symlink loop",
       [](const fs::path& p) {
         fs::remove(p);
         fs::create_symlink(p.filename(), p);
       }},
      {"unreadable", [](const fs::path& p) { ::chmod(p.c_str(), 0); }, true},
  };
  for (const Damage& damage : damages) {
    if (damage.needs_non_root && ::geteuid() == 0) {
      std::printf("skipping damage '%s': root reads a mode-000 file\n", damage.name.c_str());
      continue;
    }
    SCOPED_TRACE(damage.name);
    const std::string key = key_of("damaged " + damage.name);
    const fs::path path = cache.entry_path(key);
    ASSERT_TRUE(cache.store(key, payload_for(key)));
    damage.apply(path);
    clear_log();
    EXPECT_FALSE(cache.load(key).has_value());
    EXPECT_EQ(warnings_mentioning(path.string()), 1);
    ASSERT_TRUE(cache.store(key, payload_for(key)));
    EXPECT_EQ(cache.load(key), payload_for(key));
    EXPECT_EQ(warnings_mentioning(path.string()), 1);  // none since
  }
}

/// A directory where nothing can be written or read still works without caching: every
/// store fails, every load misses, one warning in all.
TEST_F(DiskCacheStress, DegradedDirectoriesWarnOnceAndStillWork) {
  std::vector<std::pair<std::string, fs::path>> directories;
  if (::geteuid() != 0) {
    fs::create_directories(root_ / "read-only");
    ::chmod((root_ / "read-only").c_str(), 0500);
    directories.push_back({"read-only", root_ / "read-only"});
    fs::create_directories(root_ / "no-permission");
    ::chmod((root_ / "no-permission").c_str(), 0);
    directories.push_back({"no-permission", root_ / "no-permission"});
  } else {
    std::printf("running as root: a procfs directory stands in for a read-only one\n");
    directories.push_back({"procfs", "/proc/self/fdinfo"});
  }
  for (const auto& [name, directory] : directories) {
    SCOPED_TRACE(name);
    clear_log();
    DiskCache cache(directory);
    for (int i = 0; i < 5; ++i) {
      std::string key = key_of(name + std::to_string(i));
      EXPECT_FALSE(cache.load(key).has_value());
      EXPECT_FALSE(cache.store(key, payload_for(key)));
      EXPECT_FALSE(cache.load(key).has_value());
    }
    EXPECT_EQ(warnings_mentioning(directory.string()), 1);
  }
}

/// A full disk (RLIMIT_FSIZE stands in for it: writes past the limit fail with EFBIG): the
/// store fails cleanly, leaves no temporary file and no entry, warns once; small entries that
/// fit still work.
TEST_F(DiskCacheStress, FullDiskLosesNothing) {
  const fs::path directory = root_ / "full";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit {32 * 1024, 32 * 1024};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(10);
    DiskCache cache(directory);
    clear_log();
    for (int i = 0; i < 5; ++i) {
      std::string key = key_of("too big " + std::to_string(i));
      // 40 KiB .. 5 MiB: always over the 32 KiB limit (a scale of 4 gave 4 KiB .. 516 KiB, and
      // whether a payload fitted depended on the key, which hashes the embedded templates).
      if (cache.store(key, payload_for(key, 40))) ::_exit(11);
      if (cache.load(key).has_value()) ::_exit(12);
    }
    if (!temporaries_in(directory).empty()) ::_exit(13);
    if (warnings_mentioning(directory.string()) != 1) ::_exit(14);
    std::string small = key_of("small");
    std::vector<char> bytes(1000, 'x');
    if (!cache.store(small, bytes) || cache.load(small) != bytes) ::_exit(15);
    ::_exit(0);
  }
  EXPECT_EQ(wait_all({pid}), "");
}

/// Several processes fill a small cache while another keeps reading: the cap holds once the
/// writers stop, and every hit the reader gets has its key's exact bytes (an evicted file that
/// is being read stays readable through the reader's descriptor).
TEST_F(DiskCacheStress, EvictionKeepsTheCapAndNeverBreaksAReader) {
  const fs::path directory = root_ / "evicting";
  constexpr uint64_t kCap = 2 << 20;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(stress_seconds() / 2));
  std::vector<pid_t> children;
  for (int p = 0; p < 5; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid != 0) {
      children.push_back(pid);
      continue;
    }
    try {
      DiskCache cache(directory, kCap);
      std::mt19937_64 rng(p);
      long hits = 0;
      while (std::chrono::steady_clock::now() < deadline) {
        std::string key = key_of("evicted " + std::to_string(rng() % 200));
        if (p == 0) {  // the reader
          if (auto loaded = cache.load(key)) {
            if (*loaded != payload_for(key)) ::_exit(3);
            ++hits;
          }
        } else {
          cache.store(key, payload_for(key));
        }
      }
      ::_exit(p == 0 && hits == 0 ? 5 : 0);
    } catch (...) {
      ::_exit(4);
    }
  }
  EXPECT_EQ(wait_all(children), "");
  DiskCache cache(directory, kCap);
  std::string last = key_of("last");
  ASSERT_TRUE(cache.store(last, payload_for(last)));
  EXPECT_LE(entry_bytes_in(directory), kCap);
  EXPECT_EQ(cache.load(last), payload_for(last));
  EXPECT_EQ(temporaries_in(directory), std::vector<std::string>{});
}

/// Directories are 0700 and entries 0600 even under umask 000.
TEST_F(DiskCacheStress, ModesUnderAPermissiveUmask) {
  mode_t old = ::umask(0);
  DiskCache cache(root_ / "a" / "b");
  std::string key = key_of("mode");
  bool stored = cache.store(key, payload_for(key));
  ::umask(old);
  ASSERT_TRUE(stored);
  for (const fs::path& d : {root_ / "a", root_ / "a" / "b"}) {
    struct stat info {};
    ASSERT_EQ(::stat(d.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 07777, 0700u) << d;
  }
  struct stat info {};
  ASSERT_EQ(::stat(cache.entry_path(key).c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0600u);
}

}  // namespace
}  // namespace adjoint::runtime
