// ADJOINT_DUMP parsing and dump file writing.
#include "runtime/dump.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "ir/error.h"
#include "runtime/logging.h"

namespace adjoint::runtime {

DumpSettings parse_dump_settings(const std::string& stages, const std::string& directory) {
  DumpSettings s;
  s.directory = directory.empty() ? std::filesystem::path("adjoint-dump")
                                  : std::filesystem::path(directory);
  std::stringstream list(stages);
  std::string stage;
  while (std::getline(list, stage, ',')) {
    if (stage.empty()) continue;
    if (stage == "all") s.ir = s.passes = s.cuda = s.log = s.ptx = s.sass = true;
    else if (stage == "ir") s.ir = true;
    else if (stage == "passes") s.passes = true;
    else if (stage == "cuda") s.cuda = true;
    else if (stage == "log") s.log = true;
    else if (stage == "ptx") s.ptx = true;
    else if (stage == "sass") s.sass = true;
    else {
      throw Error("ADJOINT_DUMP: unknown stage '" + stage +
                  "'; valid stages are ir, passes, cuda, log, ptx, sass, all");
    }
  }
  return s;
}

const DumpSettings& dump_settings() {
  static const DumpSettings settings = [] {
    const char* stages = std::getenv("ADJOINT_DUMP");
    const char* dir = std::getenv("ADJOINT_DUMP_DIR");
    try {
      return parse_dump_settings(stages ? stages : "", dir ? dir : "");
    } catch (const Error& e) {
      logger().error("{}; dumping is off", e.what());
      return DumpSettings{};
    }
  }();
  return settings;
}

void write_dump(const DumpSettings& settings, const std::string& file_name, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(settings.directory, ec);
  std::filesystem::path path = settings.directory / file_name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) {
    logger().warn("could not write dump {}", path.string());
  } else {
    logger().info("dumped {}", path.string());
  }
}

void write_sass_dump(const DumpSettings& settings, const std::string& file_name,
                     const std::vector<char>& cubin) {
  if (cubin.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(settings.directory, ec);
  std::filesystem::path bin = settings.directory / (file_name + ".cubin");
  {
    std::ofstream out(bin, std::ios::binary | std::ios::trunc);
    out.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
  }
  std::filesystem::path sass = settings.directory / file_name;
  std::string command = "cuobjdump --dump-sass '" + bin.string() + "' > '" + sass.string() +
                        "' 2>/dev/null";
  if (std::system(command.c_str()) != 0) {
    logger().warn("SASS dump skipped: cuobjdump is not available or failed for {}", bin.string());
    std::filesystem::remove(sass, ec);
  }
  std::filesystem::remove(bin, ec);  // only the disassembly is a dump
}

}  // namespace adjoint::runtime
