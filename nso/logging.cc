#include "nso/logging.h"

#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace cohort::nso {
namespace {

struct LogSettings {
  std::mutex mu;
  spdlog::level::level_enum level = spdlog::level::info;
  std::string pattern = "%Y-%m-%d %H:%M:%S.%e %^%l%$ [%n] %v";
};

LogSettings& Settings() {
  static LogSettings* settings = new LogSettings();
  return *settings;
}

}  // namespace

void ConfigureLogging(const std::string& level, const std::string& format, const std::string& node) {
  LogSettings& s = Settings();
  std::lock_guard<std::mutex> lock(s.mu);
  s.level = spdlog::level::from_str(level);
  if (format == "json") {
    s.pattern = R"({"time":"%Y-%m-%dT%H:%M:%S.%e","level":"%l","node":")" + node +
                R"(","component":"%n","msg":"%v"})";
  } else {
    s.pattern = "%Y-%m-%d %H:%M:%S.%e %^%l%$ " + node + " [%n] %v";
  }
  spdlog::apply_all([&](std::shared_ptr<spdlog::logger> logger) {
    logger->set_level(s.level);
    logger->set_pattern(s.pattern);
  });
}

std::shared_ptr<spdlog::logger> Log(const std::string& component) {
  LogSettings& s = Settings();
  std::lock_guard<std::mutex> lock(s.mu);
  if (auto existing = spdlog::get(component)) return existing;
  auto logger = spdlog::stderr_color_mt(component);
  logger->set_level(s.level);
  logger->set_pattern(s.pattern);
  return logger;
}

}  // namespace cohort::nso
