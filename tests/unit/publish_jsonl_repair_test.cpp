// The file sink after its file was cut or replaced under it (docs/sinks.md): a line cut short is cut
// back to the last newline before anything is appended, so the file stays whole envelope lines that
// a reader and the next worker start take, patch lines included.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "envelope/envelope.hpp"
#include "publish/jsonl_sink.hpp"
#include "publish/patcher.hpp"
#include "temp_files.hpp"

namespace fs = std::filesystem;
using docsync::DocVersion;
using docsync::publish::JsonlSink;
using docsync::publish::Patcher;
using docsync::publish::PatcherOptions;
using docsync::testing::read_all;
using docsync::testing::TempDir;

namespace {

// Every line of the file is an envelope, and the file ends with a newline.
void check_whole_lines(const fs::path& path) {
    std::string text = read_all(path);
    REQUIRE(!text.empty());
    CHECK(text.back() == '\n');
    for (std::size_t start = 0; start < text.size();) {
        std::size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(start, end - start);
        CHECK_MESSAGE(docsync::publish::parse_envelope(line), line);
        start = end + 1;
    }
}

// The envelope of the text's last line.
std::optional<docsync::publish::EnvelopeHead> last_line(const std::string& text) {
    std::size_t start = text.rfind('\n', text.size() - 2);
    start = start == std::string::npos ? 0 : start + 1;
    return docsync::publish::parse_envelope(text.substr(start, text.size() - 1 - start));
}

std::string board(int score) {
    return R"({"game":7,"score":)" + std::to_string(score) + R"(,"note":")" + std::string(300, 'n') + "\"}";
}

}  // namespace

TEST_CASE("file sink: a file cut inside a line is cut back to its last newline before the next write") {
    TempDir dir("repair");
    auto path = dir.path / "docs.jsonl";
    {
        auto sink = JsonlSink::open_file(path.string());
        sink->publish("db:a:1", std::string(R"({"x":1})"), DocVersion{1, 1});
        sink->publish("db:b:1", std::string(R"({"x":2})"), DocVersion{1, 2});
        sink->publish("db:c:1", std::string(R"({"x":3})"), DocVersion{1, 3});
        CHECK_FALSE(sink->lost_docs());
        std::string text = read_all(path);
        std::size_t second_end = text.find('\n', text.find('\n') + 1);
        fs::resize_file(path, second_end + 10);  // into the third line
        auto shrank = sink->lost_docs();
        REQUIRE(shrank);
        CHECK(shrank->find("shrank from") != std::string::npos);
        CHECK(fs::file_size(path) == second_end + 1);
        CHECK_FALSE(sink->lost_docs());
        sink->publish("db:c:1", std::string(R"({"x":4})"), DocVersion{1, 4});
        sink->publish("db:a:1", std::string(R"({"x":5})"), DocVersion{1, 5});
        CHECK(sink->read_back("db:c:1")->doc == std::optional<std::string>(R"({"x":4})"));
        check_whole_lines(path);
    }
    // The next start takes the file as it is, cutting nothing.
    auto again = JsonlSink::open_file(path.string());
    CHECK(again->repaired_bytes() == 0);
    CHECK(again->read_back("db:b:1")->doc == std::optional<std::string>(R"({"x":2})"));
    CHECK(again->read_back("db:c:1")->doc == std::optional<std::string>(R"({"x":4})"));
    CHECK(again->read_back("db:a:1")->doc == std::optional<std::string>(R"({"x":5})"));
}

TEST_CASE("file sink: a file cut inside its first line, or replaced by one ending mid-line, is repaired too") {
    TempDir dir("repair");
    auto path = dir.path / "docs.jsonl";
    {
        auto sink = JsonlSink::open_file(path.string());
        sink->publish("db:a:1", std::string(R"({"x":1})"), DocVersion{1, 1});
        fs::resize_file(path, 12);  // no newline left at all
        REQUIRE(sink->lost_docs());
        CHECK(fs::file_size(path) == 0);
        sink->publish("db:a:1", std::string(R"({"x":2})"), DocVersion{1, 2});
        check_whole_lines(path);

        // Replaced: a copy of the file made while a line was being written (one whole line, then half).
        std::string whole = read_all(path);
        fs::remove(path);
        { std::ofstream(path, std::ios::binary) << whole << whole.substr(0, whole.size() / 2); }
        auto replaced = sink->lost_docs();
        REQUIRE(replaced);
        CHECK(replaced->find("removed or replaced") != std::string::npos);
        CHECK(fs::file_size(path) == whole.size());
        sink->publish("db:a:1", std::string(R"({"x":3})"), DocVersion{1, 3});
        check_whole_lines(path);
    }
    auto again = JsonlSink::open_file(path.string());
    CHECK(again->repaired_bytes() == 0);
    CHECK(again->read_back("db:a:1")->doc == std::optional<std::string>(R"({"x":3})"));
}

TEST_CASE("file sink with patches: a patch line cut short is gone, and the channel is written whole after") {
    TempDir dir("repair");
    auto path = dir.path / "docs.jsonl";
    auto patcher = std::make_shared<Patcher>(PatcherOptions{1 << 20, 64});
    {
        auto sink = JsonlSink::open_file(path.string(), patcher);
        sink->publish("db:g:7", board(1), DocVersion{1, 1});
        sink->publish("db:g:7", board(2), DocVersion{1, 2});
        std::string text = read_all(path);
        REQUIRE(last_line(text)->is_patch());
        fs::resize_file(path, text.size() - 20);
        REQUIRE(sink->lost_docs());
        sink->publish("db:g:7", board(3), DocVersion{1, 3});
        CHECK_FALSE(last_line(read_all(path))->is_patch());  // its base's line is gone: written whole
        check_whole_lines(path);
    }
    auto again = JsonlSink::open_file(path.string(), patcher);
    CHECK(again->read_back("db:g:7")->doc == std::optional<std::string>(board(3)));
}
