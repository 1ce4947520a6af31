// Logging to stderr, one whole line per write.
#include "common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace docsync {

namespace {

std::atomic<LogLevel> min_level{LogLevel::Info};
std::mutex write_mutex;

const char* level_name(LogLevel level) {
    switch (level) {
        case LogLevel::Debug: return "DEBUG";
        case LogLevel::Info: return "INFO";
        case LogLevel::Warning: return "WARNING";
        case LogLevel::Error: return "ERROR";
    }
    return "INFO";
}

}  // namespace

void set_log_level(LogLevel level) { min_level = level; }

void log(LogLevel level, std::string_view component, std::string_view message) {
    if (level < min_level.load(std::memory_order_relaxed)) return;
    auto now = std::chrono::system_clock::now();
    auto secs = std::chrono::system_clock::to_time_t(now);
    auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char stamp[40];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    std::string line;
    line.reserve(64 + component.size() + message.size());
    line.append(stamp).append(".");
    char ms[8];
    std::snprintf(ms, sizeof ms, "%03d", static_cast<int>(millis));
    line.append(ms).append("Z ").append(level_name(level)).append(" [").append(component).append("] ");
    line.append(message).push_back('\n');
    std::lock_guard lock(write_mutex);
    const char* p = line.data();
    std::size_t left = line.size();
    while (left > 0) {
        ssize_t n = ::write(STDERR_FILENO, p, left);
        if (n <= 0) break;
        p += n;
        left -= static_cast<std::size_t>(n);
    }
}

}  // namespace docsync
