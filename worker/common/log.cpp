// Logging to stderr or a file, one whole line per write(2) so concurrent lines never interleave.
#include "common/log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace docsync {

namespace {

std::atomic<LogLevel> min_level{LogLevel::Info};
std::atomic<LogFormat> log_format{LogFormat::Text};
std::mutex write_mutex;

// The log file: its path (set once at startup, read by the signal handler) and descriptor. The
// descriptor number never changes after set_log_file: reopen_log() dup2()s the new file onto it,
// so writers and the signal handler need no lock between them.
char log_path[4096] = {0};
std::atomic<int> log_fd{-1};
std::atomic<int> reopen_errno{0};  // set by a failed reopen_log(), reported by the next log()

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

const char* log_level_name(LogLevel level) {
    switch (level) {
        case LogLevel::Debug: return "debug";
        case LogLevel::Info: return "info";
        case LogLevel::Warning: return "warning";
        case LogLevel::Error: return "error";
    }
    return "info";
}

namespace {

// The length of the valid UTF-8 sequence starting at text[i], or 0 when it is not one.
std::size_t utf8_sequence(std::string_view text, std::size_t i) {
    auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    unsigned char c = byte(i);
    if (c < 0x80) return 1;
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) { n = 3; lo = 0xA0; }
    else if (c >= 0xE1 && c <= 0xEC) n = 3;
    else if (c == 0xED) { n = 3; hi = 0x9F; }
    else if (c >= 0xEE && c <= 0xEF) n = 3;
    else if (c == 0xF0) { n = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else if (c == 0xF4) { n = 4; hi = 0x8F; }
    else return 0;
    if (i + n > text.size()) return 0;
    if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
    for (std::size_t k = 2; k < n; ++k)
        if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
    return n;
}

// `text` with every invalid UTF-8 byte replaced by U+FFFD, so the JSON line is always valid.
std::string valid_utf8(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        std::size_t n = utf8_sequence(text, i);
        if (n == 0) {
            out += "\xEF\xBF\xBD";
            ++i;
        } else {
            out.append(text.substr(i, n));
            i += n;
        }
    }
    return out;
}

void write_all(int fd, const std::string& line) {
    const char* p = line.data();
    std::size_t left = line.size();
    while (left > 0) {
        ssize_t n = ::write(fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        p += n;
        left -= static_cast<std::size_t>(n);
    }
}

std::string now_stamp() {
    auto now = std::chrono::system_clock::now();
    auto secs = std::chrono::system_clock::to_time_t(now);
    auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char stamp[40];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    char full[48];
    std::snprintf(full, sizeof full, "%s.%03dZ", stamp, static_cast<int>(millis));
    return full;
}

int open_log(const char* path) { return ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640); }

}  // namespace

void set_log_level(LogLevel level) { min_level = level; }
bool log_enabled(LogLevel level) { return level >= min_level.load(); }

void set_log_format(LogFormat format) { log_format = format; }

std::string set_log_file(const std::string& path) {
    std::lock_guard lock(write_mutex);
    if (path.empty()) {
        int old = log_fd.exchange(-1);
        log_path[0] = '\0';
        if (old >= 0) ::close(old);
        return {};
    }
    if (path.size() >= sizeof log_path) return "path longer than " + std::to_string(sizeof log_path - 1) + " bytes";
    int fd = open_log(path.c_str());
    if (fd < 0) return std::strerror(errno);
    std::memcpy(log_path, path.c_str(), path.size() + 1);
    int old = log_fd.exchange(fd);
    if (old >= 0) ::close(old);
    return {};
}

void reopen_log() {
    int saved = errno;
    int fd = log_fd.load();
    if (fd >= 0 && log_path[0] != '\0') {
        int fresh = open_log(log_path);
        if (fresh < 0) {
            reopen_errno = errno == 0 ? EIO : errno;
        } else {
            // dup3 keeps O_CLOEXEC on the descriptor every writer uses.
            if (::dup3(fresh, fd, O_CLOEXEC) < 0) reopen_errno = errno == 0 ? EIO : errno;
            ::close(fresh);
        }
    }
    errno = saved;
}

std::string format_log_line(LogFormat format, LogLevel level, std::string_view stamp, std::string_view component,
                            std::string_view message) {
    if (format == LogFormat::Json) {
        std::string safe_component = valid_utf8(component);
        std::string safe_message = valid_utf8(message);
        rapidjson::StringBuffer buffer;
        rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
        writer.StartObject();
        writer.Key("time");
        writer.String(stamp.data(), static_cast<rapidjson::SizeType>(stamp.size()));
        writer.Key("level");
        writer.String(log_level_name(level));
        writer.Key("component");
        writer.String(safe_component.data(), static_cast<rapidjson::SizeType>(safe_component.size()));
        writer.Key("message");
        writer.String(safe_message.data(), static_cast<rapidjson::SizeType>(safe_message.size()));
        writer.EndObject();
        return std::string(buffer.GetString(), buffer.GetSize());
    }
    std::string line;
    line.reserve(48 + component.size() + message.size());
    line.append(stamp).append(" ").append(level_name(level)).append(" [").append(component).append("] ");
    // One event, one line: a message's own line breaks are shown as \n.
    for (char c : message) {
        if (c == '\n') line.append("\\n");
        else if (c == '\r') line.append("\\r");
        else line.push_back(c);
    }
    return line;
}

void log(LogLevel level, std::string_view component, std::string_view message) {
    if (int err = reopen_errno.exchange(0); err != 0) {
        std::string reason = std::string("cannot reopen the log file ") + log_path + ": " + std::strerror(err) +
                             "; still writing to the file opened before (check the directory and permissions)";
        log(LogLevel::Error, "log", reason);
    }
    if (level < min_level.load(std::memory_order_relaxed)) return;
    std::string line = format_log_line(log_format.load(std::memory_order_relaxed), level, now_stamp(), component, message);
    line.push_back('\n');
    std::lock_guard lock(write_mutex);
    int fd = log_fd.load();
    write_all(fd >= 0 ? fd : STDERR_FILENO, line);
}

}  // namespace docsync
