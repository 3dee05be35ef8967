// The disk cache's key, entry format, atomic publication, verification and LRU eviction. POSIX
// calls are used directly where the exact semantics matter (O_EXCL temporary files, fsync,
// rename, inode comparison before removing a corrupt entry); every failure is a logged miss.
#include "runtime/disk_cache.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <adjoint/version.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <set>

#include <fmt/format.h>

#include "compiler/embedded_templates.h"
#include "ir/error.h"
#include "runtime/logging.h"

namespace adjoint::runtime {
namespace {

namespace fs = std::filesystem;

constexpr std::array<char, 8> kMagic = {'A', 'D', 'J', 'C', 'A', 'C', 'H', 'E'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kKeyLength = 32;
constexpr const char* kEntrySuffix = ".entry";
constexpr const char* kTemporaryPrefix = ".tmp-";
/// A temporary file this old belongs to a writer that died; eviction removes it.
constexpr std::chrono::seconds kStaleTemporaryAge{3600};

/// The fixed-size header in front of every payload. All fields are native-endian: a cache
/// directory is only ever shared between processes of one machine.
struct EntryHeader {
  std::array<char, 8> magic;
  uint32_t format_version;
  uint32_t header_bytes;
  uint64_t payload_bytes;
  uint64_t payload_checksum;  ///< XXH64 (seed 0) of the payload
  std::array<char, kKeyLength> key;
};
static_assert(sizeof(EntryHeader) == 64, "EntryHeader must have no padding");

uint64_t checksum(std::span<const char> payload) {
  return XXH64(payload.data(), payload.size(), 0);
}

bool is_valid_key(const std::string& key) {
  return key.size() == kKeyLength && std::all_of(key.begin(), key.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

void require_valid_key(const std::string& key) {
  if (!is_valid_key(key)) {
    throw Error("DiskCache key: expected 32 lowercase hex digits (from disk_cache_key), got '" +
                key + "'");
  }
}

/// Appends a length-prefixed field, so that no two different field lists serialize alike.
void append_field(std::string& buffer, std::string_view field) {
  const uint64_t length = field.size();
  buffer.append(reinterpret_cast<const char*>(&length), sizeof(length));
  buffer.append(field);
}

std::string errno_text() {
  return std::strerror(errno);
}

/// Closes a file descriptor when leaving scope.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  /// Closes now, reporting whether close succeeded (it can report deferred write errors).
  bool close() {
    int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t written = ::write(fd, data, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    data += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

bool read_all(int fd, char* data, size_t size) {
  while (size > 0) {
    ssize_t got = ::read(fd, data, size);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    data += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

/// Why `file` is not a valid entry for `key`, or an empty string when it is.
std::string entry_problem(const std::vector<char>& file, const std::string& key) {
  if (file.size() < sizeof(EntryHeader)) {
    return fmt::format("{} bytes, shorter than the {}-byte header", file.size(),
                       sizeof(EntryHeader));
  }
  EntryHeader header;
  std::memcpy(&header, file.data(), sizeof(header));
  if (header.magic != kMagic) return "bad magic";
  if (header.format_version != kFormatVersion) {
    return fmt::format("format version {}, expected {}", header.format_version, kFormatVersion);
  }
  if (header.header_bytes != sizeof(EntryHeader)) return "bad header size";
  if (std::string_view(header.key.data(), header.key.size()) != key) return "key mismatch";
  const uint64_t payload_bytes = file.size() - sizeof(EntryHeader);
  if (header.payload_bytes != payload_bytes) {
    return fmt::format("payload is {} bytes, header says {}", payload_bytes, header.payload_bytes);
  }
  if (checksum(std::span(file).subspan(sizeof(EntryHeader))) != header.payload_checksum) {
    return "checksum mismatch";
  }
  return "";
}

/// Removes `path` if it is still the file described by `seen` (another process may have
/// published a fresh entry under the same name since it was read).
void remove_if_unchanged(const fs::path& path, const struct stat& seen) {
  struct stat now {};
  if (::stat(path.c_str(), &now) == 0 && now.st_ino == seen.st_ino && now.st_dev == seen.st_dev) {
    ::unlink(path.c_str());
  }
}

/// Creates `directory` and its missing parents with mode 0700. Returns an error text, or an
/// empty string on success (also when it already exists as a directory).
std::string create_private_directory(const fs::path& directory) {
  fs::path partial;
  for (const fs::path& component : directory) {
    partial /= component;
    if (::mkdir(partial.c_str(), 0700) == 0) {
      ::chmod(partial.c_str(), 0700);  // the umask must not loosen or tighten it
      continue;
    }
    if (errno != EEXIST) return "cannot create " + partial.string() + ": " + errno_text();
  }
  std::error_code error;
  if (!fs::is_directory(directory, error)) return directory.string() + " is not a directory";
  return "";
}

/// A name no other writer, thread or process, will use at the same time.
std::string temporary_name(const std::string& key) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t process_nonce = std::random_device{}();
  return fmt::format("{}{}-{}-{:x}-{}", kTemporaryPrefix, key, ::getpid(), process_nonce,
                     counter.fetch_add(1));
}

/// A file in the cache directory as eviction sees it.
struct CachedFile {
  fs::path path;
  std::string key;
  uint64_t bytes;
  struct timespec modified;
};

bool older(const CachedFile& a, const CachedFile& b) {
  if (a.modified.tv_sec != b.modified.tv_sec) return a.modified.tv_sec < b.modified.tv_sec;
  return a.modified.tv_nsec < b.modified.tv_nsec;
}

/// What a K, M or G suffix (KiB, MiB, GiB; either case) multiplies by; 1 for anything else.
uint64_t suffix_multiplier(char suffix) {
  switch (std::tolower(static_cast<unsigned char>(suffix))) {
    case 'k':
      return uint64_t{1} << 10;
    case 'm':
      return uint64_t{1} << 20;
    case 'g':
      return uint64_t{1} << 30;
    default:
      return 1;
  }
}

std::optional<uint64_t> parse_byte_count(std::string text) {
  const uint64_t multiplier = text.empty() ? 1 : suffix_multiplier(text.back());
  if (multiplier != 1) text.pop_back();
  if (text.empty() ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE || value > UINT64_MAX / multiplier) return std::nullopt;
  return value * multiplier;
}

/// Logs a failure of the cache's environment (a read-only or unreadable directory, a full
/// disk) at warning level the first time `kind` happens for `directory` in this process, and
/// at debug level afterwards: a degraded cache keeps working without caching, with one warning
/// instead of one per kernel.
template <typename... Args>
void warn_once(const fs::path& directory, const std::string& kind,
               fmt::format_string<Args...> format, Args&&... args) {
  static std::mutex mutex;
  static std::set<std::string> reported;
  bool first;
  {
    std::lock_guard lock(mutex);
    first = reported.insert(directory.string() + '\n' + kind).second;
  }
  std::string message = fmt::format(format, std::forward<Args>(args)...);
  if (first) {
    logger().warn("{} (further '{}' failures in this directory are logged at debug level)",
                  message, kind);
  } else {
    logger().debug("{}", message);
  }
}

/// Removes what occupies an entry's name when it is not a regular file (a directory, a FIFO, a
/// socket), if it is still the object described by `seen`.
void remove_non_file_if_unchanged(const fs::path& path, const struct stat& seen) {
  struct stat now {};
  if (::lstat(path.c_str(), &now) != 0 || now.st_ino != seen.st_ino || now.st_dev != seen.st_dev)
    return;
  std::error_code ignored;
  fs::remove_all(path, ignored);
}

const char* non_empty_env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

}  // namespace

std::string disk_cache_key(std::string_view source, const std::vector<std::string>& compile_inputs,
                           std::string_view nvrtc_identity, int arch) {
  std::string buffer;
  buffer.reserve(source.size() + 4096);
  append_field(buffer, "adjoint disk cache key v2");
  append_field(buffer, ADJOINT_VERSION_STRING);
  append_field(buffer, nvrtc_identity);
  append_field(buffer, std::to_string(arch));
  append_field(buffer, std::to_string(compile_inputs.size()));
  for (const std::string& input : compile_inputs) append_field(buffer, input);
  append_field(buffer, source);
  const auto& templates = compiler::embedded_templates();
  append_field(buffer, std::to_string(templates.size()));
  for (const auto& [name, text] : templates) {
    append_field(buffer, name);
    append_field(buffer, text);
  }
  const XXH128_hash_t hash = XXH3_128bits(buffer.data(), buffer.size());
  return fmt::format("{:016x}{:016x}", hash.high64, hash.low64);
}

DiskCache::DiskCache(fs::path directory, uint64_t max_bytes)
    : directory_(std::move(directory)), max_bytes_(max_bytes) {
  if (max_bytes_ == 0) {
    logger().info("disk cache disabled (size cap 0)");
    return;
  }
  if (directory_.empty()) {
    logger().warn("disk cache disabled: no cache directory (set ADJOINT_CACHE_DIR)");
    return;
  }
  const std::string problem = create_private_directory(directory_);
  if (!problem.empty()) {
    logger().warn("disk cache disabled: {}", problem);
    return;
  }
  enabled_ = true;
}

DiskCache DiskCache::from_environment() {
  return DiskCache(directory_from_environment(), max_bytes_from_environment());
}

fs::path DiskCache::directory_from_environment() {
  if (const char* explicit_dir = non_empty_env("ADJOINT_CACHE_DIR")) return explicit_dir;
  if (const char* xdg = non_empty_env("XDG_CACHE_HOME"); xdg && fs::path(xdg).is_absolute()) {
    return fs::path(xdg) / "adjoint";
  }
  const char* home = non_empty_env("HOME");
  if (home == nullptr) {
    const struct passwd* user = ::getpwuid(::getuid());
    home = user != nullptr && user->pw_dir != nullptr && *user->pw_dir ? user->pw_dir : nullptr;
  }
  return home ? fs::path(home) / ".cache" / "adjoint" : fs::path();
}

uint64_t DiskCache::max_bytes_from_environment() {
  const char* text = non_empty_env("ADJOINT_CACHE_MAX_BYTES");
  if (text == nullptr) return kDefaultMaxBytes;
  if (std::optional<uint64_t> bytes = parse_byte_count(text)) return *bytes;
  logger().warn(
      "ADJOINT_CACHE_MAX_BYTES: expected a byte count such as 1073741824 or 512M, "
      "got '{}'; using {} bytes",
      text, kDefaultMaxBytes);
  return kDefaultMaxBytes;
}

fs::path DiskCache::entry_path(const std::string& key) const {
  return directory_ / (key + kEntrySuffix);
}

std::optional<std::vector<char>> DiskCache::load(const std::string& key) const {
  require_valid_key(key);
  if (!enabled_) return std::nullopt;
  const fs::path path = entry_path(key);
  // O_NONBLOCK: a FIFO at an entry's name must be a discarded entry, not a reader blocked
  // forever; it changes nothing for regular files.
  FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (file.get() < 0) {
    // Unreadable (EACCES, ELOOP, ...): a miss; the store after the compile renames a fresh
    // entry over it.
    if (errno != ENOENT) {
      const std::string reason = errno_text();
      // One warning per unreadable entry, or one in all when the directory itself is.
      const bool directory_readable = ::access(directory_.c_str(), R_OK | X_OK) == 0;
      warn_once(directory_, directory_readable ? "open " + key : "open",
                "disk cache: cannot open {}: {}", path.string(), reason);
    }
    return std::nullopt;
  }
  struct stat info {};
  if (::fstat(file.get(), &info) != 0) {
    logger().warn("disk cache: cannot stat {}: {}", path.string(), errno_text());
    return std::nullopt;
  }
  std::string problem;
  std::vector<char> bytes;
  if (!S_ISREG(info.st_mode)) {
    problem = S_ISDIR(info.st_mode) ? "a directory, not a file" : "not a regular file";
  } else {
    bytes.resize(static_cast<size_t>(info.st_size));
    problem = read_all(file.get(), bytes.data(), bytes.size()) ? entry_problem(bytes, key)
                                                               : "read failed: " + errno_text();
  }
  if (!problem.empty()) {
    logger().warn("disk cache: discarding corrupt entry {} ({})", path.string(), problem);
    if (S_ISREG(info.st_mode)) {
      remove_if_unchanged(path, info);
    } else {
      remove_non_file_if_unchanged(path, info);
    }
    return std::nullopt;
  }
  // Mark as recently used for eviction; failing to do so only makes eviction less exact.
  ::futimens(file.get(), nullptr);
  bytes.erase(bytes.begin(), bytes.begin() + sizeof(EntryHeader));
  return bytes;
}

bool DiskCache::store(const std::string& key, std::span<const char> payload) const {
  require_valid_key(key);
  if (!enabled_) return false;
  EntryHeader header{};
  header.magic = kMagic;
  header.format_version = kFormatVersion;
  header.header_bytes = sizeof(EntryHeader);
  header.payload_bytes = payload.size();
  header.payload_checksum = checksum(payload);
  std::memcpy(header.key.data(), key.data(), kKeyLength);

  const fs::path temporary = directory_ / temporary_name(key);
  const fs::path destination = entry_path(key);
  auto fail = [&](const std::string& what) {
    const std::string reason = errno_text();
    warn_once(directory_, "store", "disk cache: cannot store {}: {} failed: {}",
              destination.string(), what, reason);
    ::unlink(temporary.c_str());
    return false;
  };
  FileDescriptor file(
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, S_IRUSR | S_IWUSR));
  if (file.get() < 0) return fail("creating " + temporary.string());
  if (!write_all(file.get(), reinterpret_cast<const char*>(&header), sizeof(header)) ||
      !write_all(file.get(), payload.data(), payload.size())) {
    return fail("writing");
  }
  if (::fsync(file.get()) != 0) return fail("fsync");
  if (!file.close()) return fail("close");
  if (::rename(temporary.c_str(), destination.c_str()) != 0) {
    // A directory occupying the entry's name (EISDIR, ENOTEMPTY, EEXIST) is damage: remove it
    // and publish once more.
    struct stat occupant {};
    if (::lstat(destination.c_str(), &occupant) != 0 || !S_ISDIR(occupant.st_mode)) {
      return fail("rename");
    }
    logger().warn("disk cache: replacing a directory found at {}", destination.string());
    remove_non_file_if_unchanged(destination, occupant);
    if (::rename(temporary.c_str(), destination.c_str()) != 0) return fail("rename");
  }
  // Make the rename itself durable; a failure here loses at most this entry on a crash.
  FileDescriptor directory(::open(directory_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (directory.get() >= 0) ::fsync(directory.get());
  evict_least_recently_used(key);
  return true;
}

void DiskCache::evict_least_recently_used(const std::string& keep_key) const {
  std::vector<CachedFile> entries;
  uint64_t total_bytes = 0;
  const auto stale_before = std::chrono::system_clock::now() - kStaleTemporaryAge;
  std::error_code error;
  for (fs::directory_iterator it(directory_, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    struct stat info {};
    if (::lstat(it->path().c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    if (name.starts_with(kTemporaryPrefix)) {
      if (std::chrono::system_clock::from_time_t(info.st_mtim.tv_sec) < stale_before) {
        ::unlink(it->path().c_str());
      }
      continue;
    }
    if (!name.ends_with(kEntrySuffix)) continue;
    const std::string key = name.substr(0, name.size() - std::strlen(kEntrySuffix));
    if (!is_valid_key(key)) continue;
    entries.push_back({it->path(), key, static_cast<uint64_t>(info.st_size), info.st_mtim});
    total_bytes += static_cast<uint64_t>(info.st_size);
  }
  if (error) {
    logger().warn("disk cache: cannot list {}: {}", directory_.string(), error.message());
    return;
  }
  if (total_bytes <= max_bytes_) return;
  std::sort(entries.begin(), entries.end(), older);
  for (const CachedFile& entry : entries) {
    if (total_bytes <= max_bytes_) break;
    if (entry.key == keep_key) continue;
    if (::unlink(entry.path.c_str()) == 0 || errno == ENOENT) {
      total_bytes -= entry.bytes;
      logger().debug("disk cache: evicted {} ({} bytes)", entry.path.string(), entry.bytes);
    }
  }
}

}  // namespace adjoint::runtime
