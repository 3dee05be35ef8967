// The on-disk, content-addressed store of compiled kernels (cubins or PTX), shared by every
// process of a user. An entry's name is the 128-bit hash of everything that can change the
// binary; its file is a 64-byte header (magic, format version, payload size, XXH64 of the
// payload, the key) followed by the payload. Entries are published atomically (unique temporary
// file in the same directory, fsync, rename), so a reader never sees a torn file, and verified
// on load, so a corrupt or truncated one is a miss that gets removed. Total size is capped; the
// least recently used entries (by mtime, refreshed on every hit) are evicted after a store.
//
// The cache is an optimisation only: every I/O failure is logged as a warning and becomes a
// miss (load) or a no-op (store); nothing here throws for I/O. See docs/runtime.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace adjoint::runtime {

/// The cache key of one compile: XXH3-128 over the CUDA source, what decides the NVRTC options
/// (`compile_inputs`, from compile_cache_inputs), the identity of the NVRTC library file
/// (NvrtcLocation::identity), the architecture, the adjoint version and the embedded device
/// templates (which the source includes by name), as 32 lowercase hex digits. Computing it
/// needs no NVRTC: a hit never loads the library.
std::string disk_cache_key(std::string_view source, const std::vector<std::string>& compile_inputs,
                           std::string_view nvrtc_identity, int arch);

/// A cache directory and its size cap. Safe to use from many threads and processes at once.
class DiskCache {
 public:
  /// The cap when ADJOINT_CACHE_MAX_BYTES is unset: 1 GiB.
  static constexpr uint64_t kDefaultMaxBytes = uint64_t{1} << 30;

  /// Uses `directory`, creating it (and missing parents) with mode 0700. A directory that cannot
  /// be created is reported once and leaves the cache disabled. `max_bytes` 0 disables it.
  explicit DiskCache(std::filesystem::path directory, uint64_t max_bytes = kDefaultMaxBytes);

  /// A cache at `directory_from_environment()` capped at `max_bytes_from_environment()`.
  static DiskCache from_environment();

  /// $ADJOINT_CACHE_DIR, else $XDG_CACHE_HOME/adjoint (when absolute), else
  /// $HOME/.cache/adjoint (HOME from the password database when unset); empty when none.
  static std::filesystem::path directory_from_environment();

  /// $ADJOINT_CACHE_MAX_BYTES (bytes, optionally with a K, M or G suffix for KiB, MiB, GiB;
  /// 0 disables the cache), else kDefaultMaxBytes. A malformed value is warned about and
  /// ignored.
  static uint64_t max_bytes_from_environment();

  /// The payload stored under `key`, or nothing on a miss. A corrupt, truncated or mislabelled
  /// entry is logged, removed and reported as a miss. A hit marks the entry recently used.
  /// Throws adjoint::Error(kInvalidArgument) only for a key that is not 32 lowercase hex digits.
  std::optional<std::vector<char>> load(const std::string& key) const;

  /// Publishes `payload` under `key` (replacing any entry), then evicts least recently used
  /// entries other than this one while the directory exceeds the cap. Returns whether the
  /// entry was written.
  bool store(const std::string& key, std::span<const char> payload) const;

  /// Whether the directory is usable and the cap is non-zero.
  bool enabled() const { return enabled_; }
  const std::filesystem::path& directory() const { return directory_; }
  uint64_t max_bytes() const { return max_bytes_; }

  /// Where the entry for `key` lives (whether or not it exists).
  std::filesystem::path entry_path(const std::string& key) const;

 private:
  void evict_least_recently_used(const std::string& keep_key) const;

  std::filesystem::path directory_;
  uint64_t max_bytes_;
  bool enabled_ = false;
};

}  // namespace adjoint::runtime
