// runtime_logging_test: ADJOINT_LOG_LEVEL's names (runtime/logging.h). Every level spdlog
// names is taken as it is; unset or empty is warn; a name that is no level keeps warn and says
// which variable, what it accepts and what it got (before, spdlog turned such a value into
// "off" and the library went silent).
#include <string>

#include <gtest/gtest.h>

#include "runtime/logging.h"

namespace adjoint::runtime {
namespace {

TEST(LogLevel, NamesEveryLevelAndDefaultsToWarn) {
  const std::pair<const char*, spdlog::level::level_enum> names[] = {
      {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},   {"warn", spdlog::level::warn},
      {"warning", spdlog::level::warn}, {"error", spdlog::level::err},
      {"err", spdlog::level::err},     {"critical", spdlog::level::critical},
      {"off", spdlog::level::off}};
  for (const auto& [name, level] : names) {
    std::string complaint;
    EXPECT_EQ(parse_log_level(name, &complaint), level) << name;
    EXPECT_TRUE(complaint.empty()) << name << ": " << complaint;
  }
  std::string complaint;
  EXPECT_EQ(parse_log_level(nullptr, &complaint), spdlog::level::warn);
  EXPECT_EQ(parse_log_level("", &complaint), spdlog::level::warn);
  EXPECT_TRUE(complaint.empty()) << complaint;
}

TEST(LogLevel, AnUnknownNameKeepsWarnAndSaysWhatItGot) {
  for (const char* text : {"verbose", "DEBUG", "2", " info"}) {
    std::string complaint;
    EXPECT_EQ(parse_log_level(text, &complaint), spdlog::level::warn) << text;
    EXPECT_NE(complaint.find("ADJOINT_LOG_LEVEL"), std::string::npos) << complaint;
    EXPECT_NE(complaint.find("critical"), std::string::npos) << complaint;
    EXPECT_NE(complaint.find(std::string("'") + text + "'"), std::string::npos) << complaint;
  }
  EXPECT_EQ(parse_log_level("verbose", nullptr), spdlog::level::warn);
}

}  // namespace
}  // namespace adjoint::runtime
