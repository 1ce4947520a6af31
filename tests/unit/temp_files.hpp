#pragma once
// A fresh temporary directory for a test, removed at scope end, and reading a file back whole or by
// lines: what the JSONL sink tests share.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

namespace docsync::testing {

// A fresh directory under the system temp dir named `docsync-PREFIX-XXXXXX`, removed at scope end.
struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const char* prefix = "test") {
        std::string tmpl =
            (std::filesystem::temp_directory_path() / (std::string("docsync-") + prefix + "-XXXXXX"))
                .string();
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        path = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
};

inline std::vector<std::string> read_lines(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

inline std::string read_all(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace docsync::testing
