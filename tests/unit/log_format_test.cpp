// Log lines: one line per event as text or JSON, the level filter, the log file and its reopen.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <rapidjson/document.h>

#include "common/log.hpp"

using namespace docsync;

namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

struct TempDir {
    std::string path;
    TempDir() {
        char tmpl[] = "/tmp/docsync-log-XXXXXX";
        REQUIRE(mkdtemp(tmpl) != nullptr);
        path = tmpl;
    }
    ~TempDir() {
        std::remove((path + "/worker.log").c_str());
        std::remove((path + "/worker.log.1").c_str());
        rmdir(path.c_str());
    }
};

// Restores the process-wide logging state after a test.
struct LogReset {
    ~LogReset() {
        set_log_file("");
        set_log_format(LogFormat::Text);
        set_log_level(LogLevel::Info);
    }
};

}  // namespace

TEST_CASE("text lines carry time, level, component and message on one line") {
    CHECK(format_log_line(LogFormat::Text, LogLevel::Warning, "2026-11-29T18:01:13.123Z", "stream", "slot lag 1GB") ==
          "2026-11-29T18:01:13.123Z WARNING [stream] slot lag 1GB");
    CHECK(format_log_line(LogFormat::Text, LogLevel::Error, "T", "pg", "line one\nline two") ==
          "T ERROR [pg] line one\\nline two");
}

TEST_CASE("JSON lines are one valid object with time, level, component and message") {
    std::string line = format_log_line(LogFormat::Json, LogLevel::Info, "2026-11-29T18:01:13.123Z", "engine",
                                       "doc \"order:1\"\n\ttoo big \xff\xfe end");
    CHECK(line.find('\n') == std::string::npos);
    rapidjson::Document doc;
    doc.Parse(line.c_str());
    REQUIRE_FALSE(doc.HasParseError());
    REQUIRE(doc.IsObject());
    CHECK(doc.MemberCount() == 4);
    CHECK(std::string(doc["time"].GetString()) == "2026-11-29T18:01:13.123Z");
    CHECK(std::string(doc["level"].GetString()) == "info");
    CHECK(std::string(doc["component"].GetString()) == "engine");
    CHECK(std::string(doc["message"].GetString()) == "doc \"order:1\"\n\ttoo big \xEF\xBF\xBD\xEF\xBF\xBD end");
}

TEST_CASE("the log file receives lines at or above the level, and reopen_log follows a rotation") {
    TempDir dir;
    LogReset reset;
    std::string path = dir.path + "/worker.log";
    REQUIRE(set_log_file(path).empty());
    set_log_level(LogLevel::Warning);
    log_info("test", "filtered out");
    log_warning("test", "first");
    CHECK(read_file(path).find("filtered out") == std::string::npos);
    CHECK(read_file(path).find("WARNING [test] first\n") != std::string::npos);

    // logrotate moves the file; lines go to the old one until the reopen, then to a new file.
    REQUIRE(std::rename(path.c_str(), (path + ".1").c_str()) == 0);
    log_error("test", "second");
    reopen_log();
    set_log_format(LogFormat::Json);
    log_error("test", "third");
    std::string rotated = read_file(path + ".1");
    std::string fresh = read_file(path);
    CHECK(rotated.find("second") != std::string::npos);
    CHECK(rotated.find("third") == std::string::npos);
    CHECK(fresh.find("\"level\":\"error\",\"component\":\"test\",\"message\":\"third\"}\n") != std::string::npos);
    CHECK(fresh.find("second") == std::string::npos);
}

TEST_CASE("an unopenable log file is refused with the reason") {
    LogReset reset;
    CHECK(set_log_file("/nonexistent-dir/worker.log") == "No such file or directory");
    reopen_log();  // logging to stderr: nothing to reopen
}

namespace {
void on_sighup(int) { reopen_log(); }
}  // namespace

TEST_CASE("a SIGHUP handler calling reopen_log moves the log to a fresh file") {
    TempDir dir;
    LogReset reset;
    std::string path = dir.path + "/worker.log";
    REQUIRE(set_log_file(path).empty());
    struct sigaction action {};
    struct sigaction previous {};
    action.sa_handler = on_sighup;
    sigemptyset(&action.sa_mask);
    REQUIRE(sigaction(SIGHUP, &action, &previous) == 0);
    log_warning("test", "before");
    REQUIRE(std::rename(path.c_str(), (path + ".1").c_str()) == 0);
    REQUIRE(raise(SIGHUP) == 0);
    log_warning("test", "after");
    sigaction(SIGHUP, &previous, nullptr);
    CHECK(read_file(path + ".1").find("before") != std::string::npos);
    CHECK(read_file(path).find("WARNING [test] after") != std::string::npos);
    CHECK(read_file(path).find("before") == std::string::npos);
}
