// The library's logger: spdlog, named "adjoint", writing to stderr. The level comes from
// ADJOINT_LOG_LEVEL (trace, debug, info, warn, error, critical, off; default warn).
#pragma once

#include <memory>

#include <spdlog/spdlog.h>

namespace adjoint::runtime {

/// The shared logger, created on first use.
spdlog::logger& logger();

}  // namespace adjoint::runtime
