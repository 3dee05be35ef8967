// The loader's library search replayed without loading anything: RTLD_NOLOAD for loaded
// objects, RTLD_DI_SERINFO for the search directories, a reader of the ld.so.cache table, and an
// ELF reader that stops after the notes.
#include "runtime/library_search.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace adjoint::runtime {
namespace {

namespace fs = std::filesystem;

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#elif defined(__powerpc64__)
constexpr uint16_t kHostMachine = EM_PPC64;
#else
constexpr uint16_t kHostMachine = EM_NONE;  // accept any machine
#endif

/// Note segments larger than this are not searched for a build-id (real ones are tens of bytes).
constexpr uint64_t kMaxNoteBytes = 64 * 1024;

/// Closes a file descriptor when leaving scope.
class ReadOnlyFile {
 public:
  explicit ReadOnlyFile(const std::string& path)
      : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~ReadOnlyFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  bool is_open() const { return fd_ >= 0; }
  bool read_at(void* data, size_t size, uint64_t offset) const {
    return ::pread(fd_, data, size, static_cast<off_t>(offset)) == static_cast<ssize_t>(size);
  }

 private:
  int fd_;
};

size_t padded_to_4(uint32_t size) {
  return (static_cast<size_t>(size) + 3) & ~size_t{3};
}

/// The GNU build-id among the ELF notes in `notes`, as hex, or empty.
std::string build_id_in_notes(const std::vector<char>& notes) {
  size_t offset = 0;
  while (offset + sizeof(Elf64_Nhdr) <= notes.size()) {
    Elf64_Nhdr note;
    std::memcpy(&note, notes.data() + offset, sizeof note);
    const size_t name_at = offset + sizeof note;
    const size_t description_at = name_at + padded_to_4(note.n_namesz);
    const size_t next = description_at + padded_to_4(note.n_descsz);
    if (next > notes.size()) break;
    if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
        std::memcmp(notes.data() + name_at, "GNU", 4) == 0 && note.n_descsz > 0) {
      std::string hex;
      for (uint32_t i = 0; i < note.n_descsz; ++i) {
        hex += fmt::format("{:02x}", static_cast<unsigned char>(notes[description_at + i]));
      }
      return hex;
    }
    offset = next;
  }
  return "";
}

uint32_t read_u32(std::string_view bytes, size_t offset) {
  uint32_t value = 0;
  if (offset + sizeof value <= bytes.size()) {
    std::memcpy(&value, bytes.data() + offset, sizeof value);
  }
  return value;
}

uint64_t read_u64(std::string_view bytes, size_t offset) {
  uint64_t value = 0;
  if (offset + sizeof value <= bytes.size()) {
    std::memcpy(&value, bytes.data() + offset, sizeof value);
  }
  return value;
}

/// The NUL-terminated string at `offset`, or empty when it runs past the end.
std::string_view string_at(std::string_view bytes, size_t offset) {
  if (offset >= bytes.size()) return {};
  const size_t end = bytes.find('\0', offset);
  return end == std::string_view::npos ? std::string_view() : bytes.substr(offset, end - offset);
}

std::string absolute(const std::string& path) {
  std::error_code error;
  fs::path result = fs::absolute(path, error);
  return error ? path : result.lexically_normal().string();
}

/// /lib*, /usr/lib* and their subdirectories (multiarch, legacy hwcaps): where glibc's built-in
/// system directories live on every distribution.
bool is_system_library_directory(const std::string& text) {
  const fs::path path(text);
  auto component = path.begin();
  const auto end = path.end();
  if (component == end || *component != "/") return false;
  if (++component != end && component->string() == "usr") ++component;
  return component != end && component->string().starts_with("lib");
}

/// Whether the path of some loaded object contains `text` (vendored copies keep the stem, as in
/// libnvrtc-b51b459d.so.12).
bool loaded_object_mentions(const std::string& text) {
  auto visit = [](struct dl_phdr_info* info, size_t, void* data) -> int {
    const auto* wanted = static_cast<const std::string*>(data);
    return info->dlpi_name != nullptr && std::strstr(info->dlpi_name, wanted->c_str()) != nullptr;
  };
  return dl_iterate_phdr(visit, const_cast<std::string*>(&text)) != 0;
}

/// Whether `path` is a library dlopen would accept; records why not in `tried`.
bool accept(const std::string& path, std::string& tried) {
  if (inspect_elf(path).loadable) return true;
  struct stat info {};
  tried += "\n  " + path +
           (::stat(path.c_str(), &info) != 0 ? ": not found"
                                             : ": not a 64-bit shared library for this machine");
  return false;
}

}  // namespace

ElfFacts inspect_elf(const std::string& path) {
  ElfFacts facts;
  ReadOnlyFile file(path);
  Elf64_Ehdr header;
  if (!file.is_open() || !file.read_at(&header, sizeof header, 0)) return facts;
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_type != ET_DYN || (kHostMachine != EM_NONE && header.e_machine != kHostMachine)) {
    return facts;
  }
  facts.loadable = true;
  if (header.e_phentsize != sizeof(Elf64_Phdr) || header.e_phnum == 0 ||
      header.e_phnum == PN_XNUM) {
    return facts;
  }
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  if (!file.read_at(segments.data(), segments.size() * sizeof(Elf64_Phdr), header.e_phoff)) {
    return facts;
  }
  for (const Elf64_Phdr& segment : segments) {
    if (segment.p_type != PT_NOTE || segment.p_filesz > kMaxNoteBytes) continue;
    std::vector<char> notes(segment.p_filesz);
    if (!file.read_at(notes.data(), notes.size(), segment.p_offset)) continue;
    facts.build_id = build_id_in_notes(notes);
    if (!facts.build_id.empty()) break;
  }
  return facts;
}

std::string file_identity(const std::string& path) {
  if (std::string build_id = inspect_elf(path).build_id; !build_id.empty()) {
    return "build-id:" + build_id;
  }
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return "";
  std::error_code error;
  const fs::path canonical = fs::canonical(path, error);
  const long long mtime_ns =
      static_cast<long long>(info.st_mtim.tv_sec) * 1000000000LL + info.st_mtim.tv_nsec;
  return fmt::format("file:{}:{}:{}", error ? path : canonical.string(),
                     static_cast<long long>(info.st_size), mtime_ns);
}

std::optional<std::string> already_loaded_path(const std::string& name) {
  // dlopen(RTLD_NOLOAD) of a bare name searches the file system before it compares inodes; skip
  // it (the common case) when no loaded object's path even mentions the name's stem.
  if (!loaded_object_mentions(name.substr(0, name.find(".so")))) return std::nullopt;
  void* handle = dlopen(name.c_str(), RTLD_NOLOAD | RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) {
    dlerror();  // clear the message
    return std::nullopt;
  }
  std::string path;
  struct link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
    path = map->l_name;
  }
  dlclose(handle);
  if (path.empty()) return std::nullopt;
  return absolute(path);
}

LoaderDirectories loader_directories() {
  LoaderDirectories directories;
  void* self = nullptr;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&loader_directories), &info) != 0 &&
      info.dli_fname != nullptr) {
    self = dlopen(info.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
  }
  if (self == nullptr) self = dlopen(nullptr, RTLD_LAZY);  // the executable
  if (self == nullptr) return directories;
  Dl_serinfo sizes{};
  if (dlinfo(self, RTLD_DI_SERINFOSIZE, &sizes) == 0 && sizes.dls_size >= sizeof(Dl_serinfo)) {
    std::vector<uint64_t> buffer((sizes.dls_size + sizeof(uint64_t) - 1) / sizeof(uint64_t));
    auto* search = reinterpret_cast<Dl_serinfo*>(buffer.data());
    search->dls_size = sizes.dls_size;
    search->dls_cnt = sizes.dls_cnt;
    if (dlinfo(self, RTLD_DI_SERINFO, search) == 0) {
      for (unsigned i = 0; i < search->dls_cnt; ++i) {
        const Dl_serpath& entry = search->dls_serpath[i];
        if (entry.dls_name != nullptr && *entry.dls_name != '\0') {
          directories.before_cache.push_back(absolute(entry.dls_name));
        }
      }
    }
  }
  dlclose(self);
  // glibc lists the system directories last but leaves dls_flags 0 (its add_path ignores the
  // flags), so they are recognised as the trailing run of /lib* and /usr/lib* directories.
  while (!directories.before_cache.empty() &&
         is_system_library_directory(directories.before_cache.back())) {
    directories.system.insert(directories.system.begin(), directories.before_cache.back());
    directories.before_cache.pop_back();
  }
  return directories;
}

std::vector<std::string> ld_cache_paths(std::string_view cache_bytes, std::string_view name) {
  // Layouts from glibc's sysdeps/generic/dl-cache.h: the old header is magic[11] + u32 count
  // (16 bytes) with 12-byte entries; the new header is 48 bytes with 24-byte entries
  // {i32 flags, u32 key, u32 value, u32 osversion, u64 hwcap}; the new table starts 8-aligned.
  constexpr std::string_view kOldMagic = "ld.so-1.7.0";
  constexpr std::string_view kNewMagic = "glibc-ld.so.cache1.1";
  constexpr size_t kOldHeaderBytes = 16, kOldEntryBytes = 12;
  constexpr size_t kNewHeaderBytes = 48, kNewEntryBytes = 24;
  size_t table = 0;
  if (cache_bytes.starts_with(kOldMagic)) {
    const size_t old_entries = read_u32(cache_bytes, kOldMagic.size() + 1);
    table = (kOldHeaderBytes + old_entries * kOldEntryBytes + 7) & ~size_t{7};
  }
  if (table >= cache_bytes.size() || !cache_bytes.substr(table).starts_with(kNewMagic)) return {};
  const std::string_view data = cache_bytes.substr(table);  // string offsets count from here
  const size_t entries = read_u32(data, kNewMagic.size());
  std::vector<std::string> paths;
  for (size_t i = 0; i < entries; ++i) {
    const size_t entry = kNewHeaderBytes + i * kNewEntryBytes;
    if (entry + kNewEntryBytes > data.size()) break;
    if (read_u64(data, entry + 16) != 0) continue;  // a glibc-hwcaps variant
    if (string_at(data, read_u32(data, entry + 4)) != name) continue;
    const std::string_view path = string_at(data, read_u32(data, entry + 8));
    if (!path.empty()) paths.emplace_back(path);
  }
  return paths;
}

std::optional<FoundLibrary> find_like_loader(const std::string& name,
                                             const LoaderDirectories& directories,
                                             std::string_view ld_cache, std::string& tried) {
  for (const std::string& directory : directories.before_cache) {
    if (std::string path = directory + "/" + name; accept(path, tried)) {
      return FoundLibrary{path, "loader search path"};
    }
  }
  const std::vector<std::string> cached = ld_cache_paths(ld_cache, name);
  for (const std::string& path : cached) {
    if (accept(path, tried)) return FoundLibrary{absolute(path), "/etc/ld.so.cache"};
  }
  if (cached.empty()) tried += "\n  " + name + ": not in /etc/ld.so.cache";
  for (const std::string& directory : directories.system) {
    if (std::string path = directory + "/" + name; accept(path, tried)) {
      return FoundLibrary{path, "system directory"};
    }
  }
  return std::nullopt;
}

}  // namespace adjoint::runtime
