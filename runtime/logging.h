// The library's logger: spdlog, named "adjoint", writing to stderr. The level comes from
// ADJOINT_LOG_LEVEL (trace, debug, info, warn, error, critical, off; default warn). A value
// that names no level keeps the default and says so once, naming the variable, what it accepts
// and what it got (a logger never throws: it is used where errors are being reported).
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace adjoint::runtime {

/// The level `text` names (spdlog's names and its short forms: trace, debug, info, warn or
/// warning, error or err, critical, off); null or empty is warn. A name it does not know gives
/// warn and sets `*complaint` to a message naming ADJOINT_LOG_LEVEL, the valid names and `text`.
spdlog::level::level_enum parse_log_level(const char* text, std::string* complaint);

/// The shared logger, created on first use.
spdlog::logger& logger();

}  // namespace adjoint::runtime
