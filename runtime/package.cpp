// Package manifest (nlohmann-json) writing, loading and lookup.
#include "runtime/package.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "adjoint/version.h"
#include "ir/error.h"
#include "runtime/logging.h"

namespace adjoint::runtime {
namespace {

constexpr int kFormat = 1;
namespace fs = std::filesystem;

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::vector<char> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("kernel package: cannot read " + path.string());
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const fs::path& path, const char* data, size_t size) {
  fs::create_directories(path.parent_path());
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(data, static_cast<std::streamsize>(size));
    if (!out) throw Error("kernel package: cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

std::string binary_name(const std::string& key, const PackageBinary& b) {
  return "bin/" + key + (b.is_ptx ? ".compute_" : ".sm_") + std::to_string(b.arch) +
         (b.is_ptx ? ".ptx" : ".cubin");
}

}  // namespace

std::string package_kernel_key(const std::string& source) {
  XXH128_hash_t h = XXH3_128bits(source.data(), source.size());
  return hex64(h.high64) + hex64(h.low64);
}

void write_package(const fs::path& directory, const PackageContents& contents) {
  nlohmann::json manifest;
  manifest["format"] = kFormat;
  manifest["adjoint_version"] = ADJOINT_VERSION_STRING;
  manifest["archs"] = contents.archs;
  manifest["specializations"] = contents.specializations;
  manifest["kernels"] = nlohmann::json::array();
  for (const PackageKernel& k : contents.kernels) {
    std::string key = package_kernel_key(k.source);
    nlohmann::json entry;
    entry["entry"] = k.entry;
    entry["key"] = key;
    std::string source_name = "sources/" + key + ".cu";
    write_file(directory / source_name, k.source.data(), k.source.size());
    entry["source"] = {{"file", source_name}, {"size", k.source.size()},
                       {"xxh64", hex64(XXH64(k.source.data(), k.source.size(), 0))}};
    entry["binaries"] = nlohmann::json::array();
    for (const PackageBinary& b : k.binaries) {
      std::string name = binary_name(key, b);
      write_file(directory / name, b.bytes.data(), b.bytes.size());
      entry["binaries"].push_back({{"arch", b.arch}, {"ptx", b.is_ptx}, {"file", name},
                                   {"size", b.bytes.size()},
                                   {"xxh64", hex64(XXH64(b.bytes.data(), b.bytes.size(), 0))}});
    }
    manifest["kernels"].push_back(entry);
  }
  std::string text = manifest.dump(2) + "\n";
  write_file(directory / "manifest.json", text.data(), text.size());
}

Package Package::load(const fs::path& directory) {
  fs::path manifest_path = directory / "manifest.json";
  std::string where = "kernel package " + directory.string();
  if (!fs::exists(manifest_path)) throw Error(where + ": no manifest.json");
  nlohmann::json manifest;
  try {
    std::vector<char> text = read_file(manifest_path);
    manifest = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": manifest.json is not valid JSON: " + e.what());
  }
  try {
    if (manifest.at("format").get<int>() != kFormat) {
      throw Error(where + ": manifest format " + manifest.at("format").dump() + ", expected " +
                  std::to_string(kFormat));
    }
    std::string version = manifest.at("adjoint_version").get<std::string>();
    if (version != ADJOINT_VERSION_STRING) {
      throw Error(where + " was built by adjoint " + version + ", but this is adjoint " +
                  ADJOINT_VERSION_STRING + "; rebuild it with `adjoint aot`");
    }
    Package p;
    p.directory_ = directory;
    p.specializations_ = manifest.value("specializations", std::vector<std::string>{});
    auto check_file = [&](const nlohmann::json& f) {
      fs::path path = directory / f.at("file").get<std::string>();
      std::vector<char> bytes = read_file(path);
      if (bytes.size() != f.at("size").get<size_t>() ||
          hex64(XXH64(bytes.data(), bytes.size(), 0)) != f.at("xxh64").get<std::string>()) {
        throw Error(where + ": " + f.at("file").get<std::string>() +
                    " does not match the manifest (size or checksum differs); the package is "
                    "damaged or was modified");
      }
      return path;
    };
    for (const nlohmann::json& k : manifest.at("kernels")) {
      std::string key = k.at("key").get<std::string>();
      check_file(k.at("source"));
      for (const nlohmann::json& b : k.at("binaries")) {
        p.files_[key].push_back(File{b.at("arch").get<int>(), b.at("ptx").get<bool>(), check_file(b)});
      }
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": manifest.json is missing a field: " + e.what());
  }
}

std::optional<PackageBinary> Package::find(const std::string& key, int device_arch) const {
  auto it = files_.find(key);
  if (it == files_.end()) return std::nullopt;
  const File* best = nullptr;
  for (const File& f : it->second) {
    if (!f.is_ptx && f.arch == device_arch) {
      best = &f;
      break;
    }
    if (f.is_ptx && f.arch <= device_arch && (!best || f.arch > best->arch)) best = &f;
  }
  if (!best) return std::nullopt;
  return PackageBinary{best->arch, best->is_ptx, read_file(best->path)};
}

PackageRegistry& PackageRegistry::instance() {
  static PackageRegistry registry;
  return registry;
}

void PackageRegistry::load_environment_locked() {
  if (environment_loaded_) return;
  environment_loaded_ = true;
  const char* env = std::getenv("ADJOINT_PACKAGE_PATH");
  if (!env) return;
  std::stringstream list(env);
  std::string dir;
  while (std::getline(list, dir, ':')) {
    if (dir.empty()) continue;
    packages_.push_back(Package::load(dir));
    logger().info("loaded kernel package {} ({} kernels)", dir, packages_.back().kernel_count());
  }
}

void PackageRegistry::add(const fs::path& directory) {
  Package p = Package::load(directory);
  std::lock_guard<std::mutex> lock(mutex_);
  load_environment_locked();
  packages_.push_back(std::move(p));
}

std::optional<PackageBinary> PackageRegistry::find(const std::string& key, int device_arch) {
  std::lock_guard<std::mutex> lock(mutex_);
  load_environment_locked();
  for (const Package& p : packages_) {
    if (auto b = p.find(key, device_arch)) return b;
  }
  return std::nullopt;
}

bool PackageRegistry::empty() {
  std::lock_guard<std::mutex> lock(mutex_);
  load_environment_locked();
  return packages_.empty();
}

}  // namespace adjoint::runtime
