// Creates the "adjoint" logger once, reading ADJOINT_LOG_LEVEL.
#include "runtime/logging.h"

#include <cstdlib>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace adjoint::runtime {

spdlog::level::level_enum parse_log_level(const char* text, std::string* complaint) {
  if (!text || !*text) return spdlog::level::warn;
  const std::string name = text;
  // spdlog's from_str gives off for a name it does not know: tell that apart from "off".
  const spdlog::level::level_enum level = spdlog::level::from_str(name);
  if (level != spdlog::level::off || name == "off") return level;
  if (complaint) {
    *complaint = "ADJOINT_LOG_LEVEL: expected trace, debug, info, warn, error, critical or off, "
                 "got '" + name + "'; logging at warn";
  }
  return spdlog::level::warn;
}

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto log = std::make_shared<spdlog::logger>("adjoint", sink);
    log->set_pattern("[adjoint %L] %v");
    std::string complaint;
    log->set_level(parse_log_level(std::getenv("ADJOINT_LOG_LEVEL"), &complaint));
    if (!complaint.empty()) log->warn("{}", complaint);
    return log;
  }();
  return *instance;
}

}  // namespace adjoint::runtime
