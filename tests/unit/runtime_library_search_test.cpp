// The loader's search replayed without loading: ELF facts and build-ids, file identities,
// ld.so.cache tables (synthetic new and old+new layouts, and this machine's file), objects
// already loaded, the loader's directories (LD_LIBRARY_PATH checked in a re-executed child,
// since the loader reads it at start-up), and the search order of find_like_loader.
#include "runtime/library_search.h"

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

namespace adjoint::runtime {
namespace {

namespace fs = std::filesystem;

/// A fresh directory per test, removed afterwards.
class RuntimeLibrarySearch : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "adjoint-library-search-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

/// The C library this process runs with: a real, loadable shared object to experiment on.
std::string libc_path() {
  std::optional<std::string> path = already_loaded_path("libc.so.6");
  return path ? *path : "";
}

void append_u32(std::string& bytes, uint32_t value) {
  bytes.append(reinterpret_cast<const char*>(&value), sizeof value);
}

void append_u64(std::string& bytes, uint64_t value) {
  bytes.append(reinterpret_cast<const char*>(&value), sizeof value);
}

struct CacheEntry {
  std::string name;
  std::string path;
  uint64_t hwcap = 0;
};

/// A "glibc-ld.so.cache1.1" table holding `entries`; string offsets count from its start.
std::string new_cache_table(const std::vector<CacheEntry>& entries) {
  constexpr size_t kHeaderBytes = 48, kEntryBytes = 24;
  std::string strings;
  std::vector<std::pair<uint32_t, uint32_t>> offsets;
  const size_t strings_at = kHeaderBytes + entries.size() * kEntryBytes;
  for (const CacheEntry& entry : entries) {
    const uint32_t key = static_cast<uint32_t>(strings_at + strings.size());
    strings += entry.name + '\0';
    const uint32_t value = static_cast<uint32_t>(strings_at + strings.size());
    strings += entry.path + '\0';
    offsets.emplace_back(key, value);
  }
  std::string table = "glibc-ld.so.cache1.1";
  append_u32(table, static_cast<uint32_t>(entries.size()));
  append_u32(table, static_cast<uint32_t>(strings.size()));
  table.append(20, '\0');  // flags, padding, extension offset, unused
  for (size_t i = 0; i < entries.size(); ++i) {
    append_u32(table, 0x0303);  // ELF libc6, x86-64
    append_u32(table, offsets[i].first);
    append_u32(table, offsets[i].second);
    append_u32(table, 0);
    append_u64(table, entries[i].hwcap);
  }
  return table + strings;
}

TEST_F(RuntimeLibrarySearch, InspectElfAcceptsSharedLibrariesOnly) {
  const std::string libc = libc_path();
  ASSERT_FALSE(libc.empty());
  const ElfFacts facts = inspect_elf(libc);
  EXPECT_TRUE(facts.loadable);
  EXPECT_EQ(facts.build_id.find_first_not_of("0123456789abcdef"), std::string::npos);

  std::ofstream(root_ / "text.so") << "not an ELF file at all, but long enough to hold a header";
  EXPECT_FALSE(inspect_elf((root_ / "text.so").string()).loadable);
  EXPECT_FALSE(inspect_elf((root_ / "missing.so").string()).loadable);
  std::ofstream(root_ / "short.so") << "\x7f"
                                       "ELF";
  EXPECT_FALSE(inspect_elf((root_ / "short.so").string()).loadable);
}

TEST_F(RuntimeLibrarySearch, IdentityFollowsContentsNotNames) {
  const std::string libc = libc_path();
  ASSERT_FALSE(libc.empty());
  const std::string identity = file_identity(libc);
  ASSERT_FALSE(identity.empty());
  // A copy elsewhere is the same library.
  fs::copy_file(libc, root_ / "copy.so");
  EXPECT_EQ(file_identity((root_ / "copy.so").string()), identity);
  if (identity.starts_with("build-id:")) {
    EXPECT_EQ(identity, "build-id:" + inspect_elf(libc).build_id);
  }

  // Without a build-id: canonical path, size and mtime, so any rewrite changes it.
  const fs::path plain = root_ / "plain.so";
  std::ofstream(plain) << "version 1";
  const std::string before = file_identity(plain.string());
  EXPECT_TRUE(before.starts_with("file:" + fs::canonical(plain).string() + ":9:")) << before;
  std::ofstream(plain) << "version 22";
  EXPECT_NE(file_identity(plain.string()), before);
  fs::create_symlink(plain, root_ / "link.so");
  EXPECT_EQ(file_identity((root_ / "link.so").string()), file_identity(plain.string()));
  EXPECT_EQ(file_identity((root_ / "missing.so").string()), "");
}

TEST(RuntimeLibrarySearchCache, NewFormatTable) {
  const std::string cache = new_cache_table({{"libbar.so", "/x/libbar.so"},
                                             {"libfoo.so.1", "/opt/hw/libfoo.so.1", 1ull << 40},
                                             {"libfoo.so.1", "/opt/a/libfoo.so.1"},
                                             {"libfoo.so.1", "/opt/b/libfoo.so.1"}});
  EXPECT_EQ(ld_cache_paths(cache, "libfoo.so.1"),
            (std::vector<std::string>{"/opt/a/libfoo.so.1", "/opt/b/libfoo.so.1"}));
  EXPECT_EQ(ld_cache_paths(cache, "libbar.so"), std::vector<std::string>{"/x/libbar.so"});
  EXPECT_TRUE(ld_cache_paths(cache, "libfoo.so").empty());  // exact names only
  EXPECT_TRUE(ld_cache_paths(cache, "libnone.so").empty());
}

TEST(RuntimeLibrarySearchCache, NewTableAfterOldTable) {
  // Old header: "ld.so-1.7.0", padding, u32 count; then count 12-byte entries; then the new
  // table at the next multiple of 8, whose string offsets count from its own start.
  std::string cache = "ld.so-1.7.0";
  cache += '\0';
  append_u32(cache, 3);
  cache.append(3 * 12, '\0');
  ASSERT_EQ(cache.size(), 52u);
  cache.append(4, '\0');  // align to 56
  cache += new_cache_table({{"libnvrtc.so.12", "/usr/lib/libnvrtc.so.12"}});
  EXPECT_EQ(ld_cache_paths(cache, "libnvrtc.so.12"),
            std::vector<std::string>{"/usr/lib/libnvrtc.so.12"});
}

TEST(RuntimeLibrarySearchCache, MalformedInputGivesNothing) {
  const std::string cache = new_cache_table({{"libfoo.so.1", "/opt/a/libfoo.so.1"}});
  for (size_t size = 0; size < cache.size(); size += 7) {
    // Truncated tables never read past the end; they may only lose entries.
    const std::vector<std::string> paths = ld_cache_paths(cache.substr(0, size), "libfoo.so.1");
    EXPECT_TRUE(paths.empty() || paths == std::vector<std::string>{"/opt/a/libfoo.so.1"});
  }
  EXPECT_TRUE(ld_cache_paths("garbage", "libfoo.so.1").empty());
  std::string lying = cache;
  lying[20] = '\xff';  // entry count far beyond the file
  EXPECT_EQ(ld_cache_paths(lying, "libfoo.so.1"), std::vector<std::string>{"/opt/a/libfoo.so.1"});
}

TEST(RuntimeLibrarySearchCache, ThisMachinesCacheListsTheCLibrary) {
  std::ifstream file("/etc/ld.so.cache", std::ios::binary);
  if (!file) GTEST_SKIP() << "no /etc/ld.so.cache";
  const std::string cache((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const std::vector<std::string> paths = ld_cache_paths(cache, "libc.so.6");
  ASSERT_FALSE(paths.empty());
  bool found_this_one = false;
  for (const std::string& path : paths) {
    EXPECT_TRUE(fs::exists(path)) << path;
    found_this_one |= fs::equivalent(path, libc_path());
  }
  EXPECT_TRUE(found_this_one);
}

TEST(RuntimeLibrarySearchLoaded, FindsLoadedObjectsOnly) {
  const std::optional<std::string> libc = already_loaded_path("libc.so.6");
  ASSERT_TRUE(libc.has_value());
  EXPECT_TRUE(fs::path(*libc).is_absolute());
  EXPECT_TRUE(fs::exists(*libc));
  EXPECT_FALSE(already_loaded_path("libadjoint-never-loaded.so.7").has_value());
}

TEST(RuntimeLibrarySearchLoader, SystemDirectoriesAreListed) {
  const LoaderDirectories directories = loader_directories();
  ASSERT_FALSE(directories.system.empty());
  bool any_exists = false;
  for (const std::string& directory : directories.system) any_exists |= fs::is_directory(directory);
  EXPECT_TRUE(any_exists);
}

/// The loader reads LD_LIBRARY_PATH when the process starts: this test re-executes itself with
/// the variable set and the child (the same test, told so by ADJOINT_TEST_EXPECT_LIBRARY_DIR)
/// checks that the directory comes before the cache.
TEST(RuntimeLibrarySearchLoader, LdLibraryPathComesBeforeTheCache) {
  if (const char* expected = std::getenv("ADJOINT_TEST_EXPECT_LIBRARY_DIR")) {
    const LoaderDirectories directories = loader_directories();
    // glibc may list hwcap subdirectories of it too; the directory itself must be there.
    EXPECT_NE(std::find(directories.before_cache.begin(), directories.before_cache.end(),
                        std::string(expected)),
              directories.before_cache.end());
    return;
  }
  const fs::path directory =
      fs::temp_directory_path() / ("adjoint-ld-path-" + std::to_string(::getpid()));
  fs::create_directories(directory);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("LD_LIBRARY_PATH", directory.c_str(), 1);
    ::setenv("ADJOINT_TEST_EXPECT_LIBRARY_DIR", directory.c_str(), 1);
    ::execl("/proc/self/exe", "runtime_library_search_test",
            "--gtest_filter=RuntimeLibrarySearchLoader.LdLibraryPathComesBeforeTheCache",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  fs::remove_all(directory);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(RuntimeLibrarySearch, FindLikeLoaderFollowsTheLoadersOrder) {
  const std::string libc = libc_path();
  ASSERT_FALSE(libc.empty());
  const fs::path wrong = root_ / "wrong", right = root_ / "right", cached = root_ / "cached";
  for (const fs::path& d : {wrong, right, cached}) fs::create_directories(d);
  std::ofstream(wrong / "libfake.so.1") << "a text file where a library should be";
  fs::copy_file(libc, right / "libfake.so.1");
  fs::copy_file(libc, cached / "libfake.so.1");
  const std::string cache = new_cache_table({{"libfake.so.1", (cached / "libfake.so.1").string()}});

  std::string tried;
  LoaderDirectories directories{{wrong.string(), right.string()}, {}};
  std::optional<FoundLibrary> found = find_like_loader("libfake.so.1", directories, cache, tried);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->path, (right / "libfake.so.1").string());
  EXPECT_EQ(found->found_by, "loader search path");
  EXPECT_NE(tried.find((wrong / "libfake.so.1").string() + ": not a 64-bit shared library"),
            std::string::npos)
      << tried;

  // Not on the search path: the cache comes before the system directories.
  directories = {{wrong.string()}, {right.string()}};
  found = find_like_loader("libfake.so.1", directories, cache, tried);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->path, (cached / "libfake.so.1").string());
  EXPECT_EQ(found->found_by, "/etc/ld.so.cache");

  found = find_like_loader("libfake.so.1", directories, "", tried);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->path, (right / "libfake.so.1").string());
  EXPECT_EQ(found->found_by, "system directory");

  tried.clear();
  EXPECT_FALSE(find_like_loader("libabsent.so.3", directories, cache, tried).has_value());
  EXPECT_NE(tried.find("libabsent.so.3: not in /etc/ld.so.cache"), std::string::npos) << tried;
  EXPECT_NE(tried.find((right / "libabsent.so.3").string() + ": not found"), std::string::npos);
}

}  // namespace
}  // namespace adjoint::runtime
