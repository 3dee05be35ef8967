// Stage dumps for debugging a host application: with ADJOINT_DUMP set to a comma-separated
// subset of ir,passes,cuda,log,ptx,sass (or "all"), every program the runtime compiles writes
// those stages under ADJOINT_DUMP_DIR (default ./adjoint-dump), in files named by the program's
// key: <key>.ir.txt, <key>.passes.txt, <key>.<entry>.cu, .log, .ptx, .sass (SASS where
// cuobjdump is on PATH).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace adjoint::runtime {

struct DumpSettings {
  bool ir = false, passes = false, cuda = false, log = false, ptx = false, sass = false;
  std::filesystem::path directory;
  bool any() const { return ir || passes || cuda || log || ptx || sass; }
};

/// The settings from the environment, read once.
const DumpSettings& dump_settings();
/// Parses an ADJOINT_DUMP value; throws adjoint::Error listing the valid stage names.
DumpSettings parse_dump_settings(const std::string& stages, const std::string& directory);

/// Writes `text` to <directory>/<file_name>, creating the directory; failures are warnings.
void write_dump(const DumpSettings& settings, const std::string& file_name, const std::string& text);
/// Disassembles `cubin` with cuobjdump (when found) into <directory>/<file_name>.
void write_sass_dump(const DumpSettings& settings, const std::string& file_name,
                     const std::vector<char>& cubin);

}  // namespace adjoint::runtime
