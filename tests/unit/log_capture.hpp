#pragma once
// Sends the process-wide log to a temporary file for the life of a test, then back to stderr at
// level info.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

#include "common/log.hpp"

namespace docsync::test {

struct LogCapture {
    std::string path = "/tmp/docsync-log-capture-" + std::to_string(::getpid()) + ".log";
    LogCapture() {
        std::remove(path.c_str());
        REQUIRE(set_log_file(path).empty());
    }
    ~LogCapture() {
        set_log_file("");
        set_log_level(LogLevel::Info);
        std::remove(path.c_str());
    }
    LogCapture(const LogCapture&) = delete;
    LogCapture& operator=(const LogCapture&) = delete;

    std::string text() const {
        std::ifstream in(path);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }
    // How many lines contain `needle`.
    int count(const std::string& needle) const {
        std::istringstream in(text());
        int n = 0;
        for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
        return n;
    }
};

}  // namespace docsync::test
