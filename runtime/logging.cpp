// Creates the "adjoint" logger once, reading ADJOINT_LOG_LEVEL.
#include "runtime/logging.h"

#include <cstdlib>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace adjoint::runtime {

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto log = std::make_shared<spdlog::logger>("adjoint", sink);
    log->set_pattern("[adjoint %L] %v");
    const char* level = std::getenv("ADJOINT_LOG_LEVEL");
    log->set_level(level ? spdlog::level::from_str(level) : spdlog::level::warn);
    return log;
  }();
  return *instance;
}

}  // namespace adjoint::runtime
