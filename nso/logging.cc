#include "nso/logging.h"

#include <memory>
#include <mutex>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace cohort::nso {
namespace {

struct LogSettings {
  std::mutex mu;
  spdlog::level::level_enum level = spdlog::level::info;
  std::string pattern = "%Y-%m-%d %H:%M:%S.%e %^%l%$ [%n] %v";
  bool json = false;
};

// log_format json: the message (flag %*) as the contents of a JSON string, so that every line
// is one JSON object whatever the message holds (group names and errors in quotes, a peer's
// bytes).
class JsonMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string escaped = JsonEscaped(std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(escaped.data(), escaped.data() + escaped.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessage>();
  }
};

std::unique_ptr<spdlog::formatter> MakeFormatter(const LogSettings& s) {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  if (s.json) formatter->add_flag<JsonMessage>('*');
  formatter->set_pattern(s.pattern);
  return formatter;
}

// `text` as it must appear in an spdlog pattern to print as itself.
std::string PatternLiteral(const std::string& text) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '%') out += '%';
  }
  return out;
}

// The length of the well-formed UTF-8 sequence at the start of `s` (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF), or 0.
size_t Utf8Length(std::string_view s) {
  const auto byte = [&s](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the bounds of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

LogSettings& Settings() {
  static LogSettings* settings = new LogSettings();
  return *settings;
}

}  // namespace

std::string JsonEscaped(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 16);
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t length = Utf8Length(text.substr(i));
      if (length == 0) {
        out += "\\ufffd";  // not UTF-8: the replacement character
        ++i;
      } else {
        out.append(text.substr(i, length));
        i += length;
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

std::string FormatLogLine(const std::string& component, spdlog::level::level_enum level,
                          std::string_view text) {
  LogSettings& s = Settings();
  std::unique_ptr<spdlog::formatter> formatter;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    formatter = MakeFormatter(s);
  }
  spdlog::details::log_msg message(component, level,
                                   spdlog::string_view_t(text.data(), text.size()));
  spdlog::memory_buf_t line;
  formatter->format(message, line);
  return std::string(line.data(), line.size());
}

void ConfigureLogging(const std::string& level, const std::string& format, const std::string& node) {
  LogSettings& s = Settings();
  std::lock_guard<std::mutex> lock(s.mu);
  s.level = spdlog::level::from_str(level);
  s.json = format == "json";
  if (s.json) {
    s.pattern = R"({"time":"%Y-%m-%dT%H:%M:%S.%e","level":"%l","node":")" +
                PatternLiteral(JsonEscaped(node)) + R"(","component":"%n","msg":"%*"})";
  } else {
    s.pattern = "%Y-%m-%d %H:%M:%S.%e %^%l%$ " + PatternLiteral(node) + " [%n] %v";
  }
  spdlog::apply_all([&](std::shared_ptr<spdlog::logger> logger) {
    logger->set_level(s.level);
    logger->set_formatter(MakeFormatter(s));
  });
}

std::shared_ptr<spdlog::logger> Log(const std::string& component) {
  LogSettings& s = Settings();
  std::lock_guard<std::mutex> lock(s.mu);
  if (auto existing = spdlog::get(component)) return existing;
  auto logger = spdlog::stderr_color_mt(component);
  logger->set_level(s.level);
  logger->set_formatter(MakeFormatter(s));
  return logger;
}

}  // namespace cohort::nso
