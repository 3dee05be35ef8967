// Finding a shared library the way the dynamic loader would, without loading it, and naming a
// library file by its contents without reading all of it. The runtime uses both to key the disk
// cache on the NVRTC that compiles, so that a cache hit costs a few stat/read calls instead of a
// dlopen of the ~100 MB libnvrtc.
//
// The loader's order for dlopen("libfoo.so.N") from this code is: an object of that name already
// loaded; DT_RPATH, LD_LIBRARY_PATH and DT_RUNPATH directories; /etc/ld.so.cache; the system
// directories (glibc's dl-load.c). The directory list comes from the loader itself
// (dlinfo RTLD_DI_SERINFO); the cache file is read here. Whatever this finds is what the caller
// then dlopens by absolute path, so the file identified is always the file loaded, even where
// this search and the loader's would differ (glibc-hwcaps variants are skipped; the system
// directories are told apart by their /lib*, /usr/lib* names, as glibc does not flag them).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace adjoint::runtime {

/// What the search needs to know about a candidate file.
struct ElfFacts {
  bool loadable = false;  ///< a 64-bit ELF shared object for this machine (what dlopen accepts)
  std::string build_id;   ///< its NT_GNU_BUILD_ID note as lowercase hex; empty when it has none
};

/// Reads the ELF header, program headers and note segments of `path` (a few KiB). A missing or
/// non-ELF file gives `loadable == false`.
ElfFacts inspect_elf(const std::string& path);

/// What identifies the contents of the file at `path` without hashing it: "build-id:<hex>" from
/// its ELF build-id note (the linker's hash of the contents), else
/// "file:<canonical path>:<size>:<mtime in ns>". Empty when the file does not exist.
std::string file_identity(const std::string& path);

/// The path of the object named `name` (e.g. "libnvrtc.so.12") if this process has already
/// loaded it, by its file name or soname; nothing otherwise. Loads nothing (RTLD_NOLOAD).
std::optional<std::string> already_loaded_path(const std::string& name);

/// The directories dlopen searches for a library this code opens, split where the loader
/// consults /etc/ld.so.cache.
struct LoaderDirectories {
  std::vector<std::string> before_cache;  ///< DT_RPATH, LD_LIBRARY_PATH, DT_RUNPATH, in order
  std::vector<std::string> system;        ///< the system directories, searched after the cache
};

/// The loader's directories for this code's object (libadjoint.so, or the executable it is
/// linked into), from dlinfo(RTLD_DI_SERINFO); `system` is the trailing run of /lib* and
/// /usr/lib* directories of that list.
LoaderDirectories loader_directories();

/// The paths an ld.so.cache image (`cache_bytes`, the file's contents) lists for `name`, in
/// file order. Reads the "glibc-ld.so.cache1.1" table, alone or after an old "ld.so-1.7.0"
/// table; entries for glibc-hwcaps subdirectories are skipped. Malformed input gives nothing.
std::vector<std::string> ld_cache_paths(std::string_view cache_bytes, std::string_view name);

/// A library file found by `find_like_loader`.
struct FoundLibrary {
  std::string path;      ///< absolute path of a loadable file
  std::string found_by;  ///< "loader search path", "/etc/ld.so.cache" or "system directory"
};

/// The first loadable file named `name` in the loader's order after already-loaded objects:
/// `directories.before_cache`, then `ld_cache` (the contents of /etc/ld.so.cache, possibly
/// empty), then `directories.system`. Every rejected candidate is appended to `tried`, one
/// "\n  <path>: <why>" line each.
std::optional<FoundLibrary> find_like_loader(const std::string& name,
                                             const LoaderDirectories& directories,
                                             std::string_view ld_cache, std::string& tried);

}  // namespace adjoint::runtime
