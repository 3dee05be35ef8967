// The disk cache: keys, miss/hit, corrupt and truncated entries, LRU eviction, directory mode,
// environment precedence, degraded I/O, and several processes (fork) racing on one key.
#include "runtime/disk_cache.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>

#include "ir/error.h"

namespace adjoint::runtime {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr uint64_t kHeaderBytes = 64;

std::vector<char> payload_of(size_t size, char seed) {
  std::vector<char> payload(size);
  for (size_t i = 0; i < size; ++i) payload[i] = static_cast<char>(seed + i * 31);
  return payload;
}

std::string key_of(const std::string& source) {
  return disk_cache_key(source, {"-arch=sm_90", "-std=c++17"}, "13.0", 90);
}

std::vector<std::string> files_in(const fs::path& directory) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

void set_age(const fs::path& path, std::chrono::seconds age) {
  fs::last_write_time(path, fs::file_time_type::clock::now() - age);
}

/// A fresh directory per test, removed afterwards.
class RuntimeDiskCache : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "adjoint-disk-cache-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

/// Sets or unsets environment variables for one scope, restoring them afterwards.
class ScopedEnvironment {
 public:
  void set(const std::string& name, const char* value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value) {
      ::setenv(name.c_str(), value, 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST(RuntimeDiskCacheKey, IsHexAndDependsOnEveryInput) {
  const std::vector<std::string> options = {"-arch=sm_90", "-std=c++17"};
  const std::string base = disk_cache_key("source", options, "13.0", 90);
  EXPECT_EQ(base.size(), 32u);
  EXPECT_EQ(base.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(base, disk_cache_key("source", options, "13.0", 90));
  EXPECT_NE(base, disk_cache_key("source ", options, "13.0", 90));
  EXPECT_NE(base, disk_cache_key("source", {"-arch=sm_90"}, "13.0", 90));
  EXPECT_NE(base, disk_cache_key("source", options, "13.1", 90));
  EXPECT_NE(base, disk_cache_key("source", options, "13.0", 80));
  // Field boundaries matter: moving text between options changes the key.
  EXPECT_NE(disk_cache_key("s", {"-a", "b"}, "13.0", 90), disk_cache_key("s", {"-ab"}, "13.0", 90));
  EXPECT_NE(disk_cache_key("s", {"-a"}, "13.0", 90), disk_cache_key("s-a", {}, "13.0", 90));
}

TEST_F(RuntimeDiskCache, MissThenHit) {
  DiskCache cache(root_ / "cache");
  ASSERT_TRUE(cache.enabled());
  const std::string key = key_of("kernel A");
  EXPECT_FALSE(cache.load(key).has_value());
  const std::vector<char> payload = payload_of(1000, 1);
  ASSERT_TRUE(cache.store(key, payload));
  std::optional<std::vector<char>> loaded = cache.load(key);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(*loaded, payload);
  EXPECT_EQ(fs::file_size(cache.entry_path(key)), kHeaderBytes + payload.size());
  EXPECT_EQ(files_in(cache.directory()), std::vector<std::string>{key + ".entry"});
  // An empty payload is a valid entry too.
  const std::string empty_key = key_of("empty");
  ASSERT_TRUE(cache.store(empty_key, std::vector<char>{}));
  ASSERT_TRUE(cache.load(empty_key).has_value());
  EXPECT_TRUE(cache.load(empty_key)->empty());
}

TEST_F(RuntimeDiskCache, TruncatedEntryIsAMissAndIsReplaced) {
  DiskCache cache(root_);
  const std::string key = key_of("kernel T");
  const std::vector<char> payload = payload_of(4096, 2);
  ASSERT_TRUE(cache.store(key, payload));
  for (uint64_t size : {kHeaderBytes + 100, kHeaderBytes, uint64_t{10}, uint64_t{0}}) {
    ASSERT_TRUE(cache.store(key, payload));
    fs::resize_file(cache.entry_path(key), size);
    EXPECT_FALSE(cache.load(key).has_value()) << "truncated to " << size;
    EXPECT_FALSE(fs::exists(cache.entry_path(key))) << "corrupt entry was not removed";
  }
  ASSERT_TRUE(cache.store(key, payload));
  ASSERT_TRUE(cache.load(key).has_value());
  EXPECT_EQ(*cache.load(key), payload);
}

TEST_F(RuntimeDiskCache, FlippedByteIsAMiss) {
  DiskCache cache(root_);
  const std::string key = key_of("kernel F");
  const std::vector<char> payload = payload_of(2048, 3);
  // Offsets into the payload and into each header field (magic, version, sizes, checksum, key).
  for (uint64_t offset : {kHeaderBytes + 0, kHeaderBytes + 1000, kHeaderBytes + 2047, uint64_t{0},
                          uint64_t{8}, uint64_t{12}, uint64_t{16}, uint64_t{24}, uint64_t{40}}) {
    ASSERT_TRUE(cache.store(key, payload));
    {
      std::fstream file(cache.entry_path(key), std::ios::in | std::ios::out | std::ios::binary);
      file.seekg(static_cast<std::streamoff>(offset));
      char byte = 0;
      file.read(&byte, 1);
      byte = static_cast<char>(byte ^ 0x20);
      file.seekp(static_cast<std::streamoff>(offset));
      file.write(&byte, 1);
    }
    EXPECT_FALSE(cache.load(key).has_value()) << "flipped byte at offset " << offset;
  }
}

TEST_F(RuntimeDiskCache, EntryUnderAnotherKeysNameIsAMiss) {
  DiskCache cache(root_);
  const std::string key_a = key_of("kernel A");
  const std::string key_b = key_of("kernel B");
  ASSERT_TRUE(cache.store(key_a, payload_of(100, 4)));
  fs::copy_file(cache.entry_path(key_a), cache.entry_path(key_b));
  EXPECT_FALSE(cache.load(key_b).has_value());
  EXPECT_TRUE(cache.load(key_a).has_value());
}

TEST_F(RuntimeDiskCache, EvictsLeastRecentlyUsedOverTheCap) {
  const size_t payload_bytes = 1000;
  const uint64_t entry_bytes = kHeaderBytes + payload_bytes;
  DiskCache cache(root_, 2 * entry_bytes + entry_bytes / 2);  // room for two entries
  const std::string a = key_of("A"), b = key_of("B"), c = key_of("C"), d = key_of("D");
  ASSERT_TRUE(cache.store(a, payload_of(payload_bytes, 'a')));
  ASSERT_TRUE(cache.store(b, payload_of(payload_bytes, 'b')));
  // A was stored first, but is used again after B: B becomes the least recently used.
  set_age(cache.entry_path(a), 100s);
  set_age(cache.entry_path(b), 50s);
  ASSERT_TRUE(cache.load(a).has_value());
  ASSERT_TRUE(cache.store(c, payload_of(payload_bytes, 'c')));
  EXPECT_TRUE(fs::exists(cache.entry_path(a)));
  EXPECT_FALSE(fs::exists(cache.entry_path(b)));
  EXPECT_TRUE(fs::exists(cache.entry_path(c)));

  // Without a hit, the oldest goes.
  set_age(cache.entry_path(a), 30s);
  set_age(cache.entry_path(c), 20s);
  ASSERT_TRUE(cache.store(d, payload_of(payload_bytes, 'd')));
  EXPECT_FALSE(fs::exists(cache.entry_path(a)));
  EXPECT_TRUE(fs::exists(cache.entry_path(c)));
  EXPECT_TRUE(fs::exists(cache.entry_path(d)));
}

TEST_F(RuntimeDiskCache, EntryLargerThanTheCapIsKeptAloneAndLoadable) {
  DiskCache cache(root_, 500);
  const std::string small = key_of("small"), large = key_of("large");
  ASSERT_TRUE(cache.store(small, payload_of(100, 1)));
  ASSERT_TRUE(cache.store(large, payload_of(1000, 2)));
  EXPECT_FALSE(fs::exists(cache.entry_path(small)));
  ASSERT_TRUE(cache.load(large).has_value());
}

TEST_F(RuntimeDiskCache, CreatesDirectoriesWithMode0700) {
  const mode_t old_umask = ::umask(0);  // a permissive umask must not widen the mode
  const fs::path directory = root_ / "outer" / "inner" / "adjoint";
  DiskCache cache(directory);
  ::umask(old_umask);
  ASSERT_TRUE(cache.enabled());
  for (const fs::path& path : {root_ / "outer", root_ / "outer" / "inner", directory}) {
    struct stat info {};
    ASSERT_EQ(::stat(path.c_str(), &info), 0) << path;
    EXPECT_EQ(info.st_mode & 0777, 0700u) << path;
  }
  // An existing directory is used as it is.
  fs::create_directory(root_ / "shared");
  fs::permissions(root_ / "shared", fs::perms::owner_all | fs::perms::group_read);
  DiskCache existing(root_ / "shared");
  EXPECT_TRUE(existing.enabled());
  EXPECT_EQ(fs::status(root_ / "shared").permissions() & fs::perms::all,
            fs::perms::owner_all | fs::perms::group_read);
  // Entries are private to the user.
  const std::string key = key_of("private");
  ASSERT_TRUE(cache.store(key, payload_of(10, 1)));
  EXPECT_EQ(fs::status(cache.entry_path(key)).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
}

TEST(RuntimeDiskCacheEnvironment, DirectoryPrecedence) {
  ScopedEnvironment environment;
  environment.set("ADJOINT_CACHE_DIR", "/explicit/cache");
  environment.set("XDG_CACHE_HOME", "/xdg");
  environment.set("HOME", "/home/someone");
  EXPECT_EQ(DiskCache::directory_from_environment(), fs::path("/explicit/cache"));
  environment.set("ADJOINT_CACHE_DIR", "");  // empty counts as unset
  EXPECT_EQ(DiskCache::directory_from_environment(), fs::path("/xdg/adjoint"));
  environment.set("ADJOINT_CACHE_DIR", nullptr);
  EXPECT_EQ(DiskCache::directory_from_environment(), fs::path("/xdg/adjoint"));
  environment.set("XDG_CACHE_HOME", "relative/xdg");  // the XDG spec says ignore relative paths
  EXPECT_EQ(DiskCache::directory_from_environment(), fs::path("/home/someone/.cache/adjoint"));
  environment.set("XDG_CACHE_HOME", nullptr);
  EXPECT_EQ(DiskCache::directory_from_environment(), fs::path("/home/someone/.cache/adjoint"));
  environment.set("HOME", nullptr);  // falls back to the password database
  const fs::path from_passwd = DiskCache::directory_from_environment();
  EXPECT_TRUE(from_passwd.empty() || from_passwd.filename() == "adjoint");
}

TEST(RuntimeDiskCacheEnvironment, MaxBytes) {
  ScopedEnvironment environment;
  environment.set("ADJOINT_CACHE_MAX_BYTES", nullptr);
  EXPECT_EQ(DiskCache::max_bytes_from_environment(), DiskCache::kDefaultMaxBytes);
  EXPECT_EQ(DiskCache::kDefaultMaxBytes, uint64_t{1} << 30);
  environment.set("ADJOINT_CACHE_MAX_BYTES", "4096");
  EXPECT_EQ(DiskCache::max_bytes_from_environment(), 4096u);
  environment.set("ADJOINT_CACHE_MAX_BYTES", "2M");
  EXPECT_EQ(DiskCache::max_bytes_from_environment(), 2u << 20);
  environment.set("ADJOINT_CACHE_MAX_BYTES", "3g");
  EXPECT_EQ(DiskCache::max_bytes_from_environment(), uint64_t{3} << 30);
  for (const char* bad : {"lots", "12Q", "-5", "M", "99999999999999999999999"}) {
    environment.set("ADJOINT_CACHE_MAX_BYTES", bad);
    EXPECT_EQ(DiskCache::max_bytes_from_environment(), DiskCache::kDefaultMaxBytes) << bad;
  }
  environment.set("ADJOINT_CACHE_MAX_BYTES", "0");
  EXPECT_EQ(DiskCache::max_bytes_from_environment(), 0u);
}

TEST_F(RuntimeDiskCache, FromEnvironmentUsesTheVariables) {
  ScopedEnvironment environment;
  environment.set("ADJOINT_CACHE_DIR", (root_ / "env").c_str());
  environment.set("ADJOINT_CACHE_MAX_BYTES", "12345");
  DiskCache cache = DiskCache::from_environment();
  EXPECT_TRUE(cache.enabled());
  EXPECT_EQ(cache.directory(), root_ / "env");
  EXPECT_EQ(cache.max_bytes(), 12345u);
  EXPECT_TRUE(fs::is_directory(root_ / "env"));

  environment.set("ADJOINT_CACHE_MAX_BYTES", "0");
  DiskCache disabled = DiskCache::from_environment();
  EXPECT_FALSE(disabled.enabled());
  EXPECT_FALSE(disabled.store(key_of("x"), payload_of(10, 1)));
}

TEST_F(RuntimeDiskCache, IoFailuresDegradeToMisses) {
  // The cache "directory" is a regular file: the cache is disabled, nothing throws.
  std::ofstream(root_ / "not_a_directory") << "x";
  DiskCache blocked(root_ / "not_a_directory");
  EXPECT_FALSE(blocked.enabled());
  EXPECT_FALSE(blocked.load(key_of("x")).has_value());
  EXPECT_FALSE(blocked.store(key_of("x"), payload_of(10, 1)));
  DiskCache below_a_file(root_ / "not_a_directory" / "cache");
  EXPECT_FALSE(below_a_file.enabled());

  // An entry path occupied by a directory: store replaces it (load reports and removes it;
  // tests/unit/runtime_disk_cache_stress_test.cpp covers that path).
  DiskCache cache(root_ / "cache");
  const std::string key = key_of("occupied");
  fs::create_directories(cache.entry_path(key) / "child");
  EXPECT_TRUE(cache.store(key, payload_of(10, 1)));
  EXPECT_TRUE(fs::is_regular_file(cache.entry_path(key)));
  EXPECT_EQ(cache.load(key), payload_of(10, 1));
  for (const std::string& name : files_in(cache.directory())) {
    EXPECT_FALSE(name.starts_with(".tmp-")) << "temporary file left behind: " << name;
  }
}

TEST_F(RuntimeDiskCache, MalformedKeyIsInvalidArgument) {
  DiskCache cache(root_);
  for (const std::string& key : {std::string("../../etc/passwd"), std::string("ABCDEF"),
                                 std::string(32, 'g'), std::string()}) {
    try {
      cache.load(key);
      FAIL() << "expected an error for key '" << key << "'";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(error.what()).find("DiskCache key"), std::string::npos);
    }
    EXPECT_THROW(cache.store(key, payload_of(1, 1)), Error);
  }
}

TEST_F(RuntimeDiskCache, StaleTemporaryFilesAreCleanedUpFreshOnesKept) {
  DiskCache cache(root_);
  const fs::path stale = root_ / ".tmp-stale-writer";
  const fs::path fresh = root_ / ".tmp-fresh-writer";
  std::ofstream(stale) << "partial";
  std::ofstream(fresh) << "partial";
  set_age(stale, 2h);
  ASSERT_TRUE(cache.store(key_of("k"), payload_of(10, 1)));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));  // may belong to a writer that is still running
}

/// Several processes store the same key into one directory at once, each re-reading after
/// every store: nobody may ever see a torn or foreign-looking entry, and the directory ends
/// with exactly one valid entry and no temporary files.
TEST_F(RuntimeDiskCache, ProcessesRacingOnOneKeyLeaveOneValidEntry) {
  constexpr int kProcesses = 4;
  constexpr int kRounds = 25;
  constexpr size_t kPayloadBytes = 256 * 1024;
  const fs::path directory = root_ / "shared";
  const std::string key = key_of("raced kernel");

  int start_pipe[2];
  ASSERT_EQ(::pipe(start_pipe), 0);
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Child: wait for the start signal (the pipe closing), then race. Exit codes say what
      // went wrong; _exit skips the parent's atexit handlers and gtest.
      ::close(start_pipe[1]);
      char byte;
      while (::read(start_pipe[0], &byte, 1) > 0) {
      }
      DiskCache cache(directory);
      const std::vector<char> mine(kPayloadBytes, static_cast<char>('A' + p));
      for (int round = 0; round < kRounds; ++round) {
        if (!cache.store(key, mine)) ::_exit(2);
        std::optional<std::vector<char>> loaded = cache.load(key);
        if (!loaded) ::_exit(3);
        if (loaded->size() != kPayloadBytes) ::_exit(4);
        const char writer = loaded->front();
        if (writer < 'A' || writer >= 'A' + kProcesses) ::_exit(5);
        if (std::count(loaded->begin(), loaded->end(), writer) !=
            static_cast<long>(kPayloadBytes)) {
          ::_exit(6);  // a mix of two writers: torn
        }
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  ::close(start_pipe[0]);
  ::close(start_pipe[1]);  // go
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "child failed with code " << WEXITSTATUS(status);
  }

  EXPECT_EQ(files_in(directory), std::vector<std::string>{key + ".entry"});
  DiskCache cache(directory);
  std::optional<std::vector<char>> loaded = cache.load(key);
  ASSERT_TRUE(loaded.has_value());
  ASSERT_EQ(loaded->size(), kPayloadBytes);
  EXPECT_EQ(std::count(loaded->begin(), loaded->end(), loaded->front()),
            static_cast<long>(kPayloadBytes));
}

}  // namespace
}  // namespace adjoint::runtime
