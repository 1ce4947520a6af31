// The JSONL sinks with --patches on (docs/patches.md): a patch line only right after its base's
// line, a reader applying them holds each doc; the file sink reads patch chains back at open (a good
// chain is held, a broken one leaves its channel retained but not held).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "envelope/envelope.hpp"
#include "patch/json_patch.hpp"
#include "publish/jsonl_sink.hpp"
#include "publish/patcher.hpp"
#include "temp_files.hpp"

namespace fs = std::filesystem;
using docsync::DocVersion;
using docsync::publish::EnvelopeKind;
using docsync::publish::JsonlSink;
using docsync::publish::Patcher;
using docsync::publish::PatcherOptions;
using docsync::testing::read_lines;
using docsync::testing::TempDir;

namespace {

std::shared_ptr<Patcher> patcher() { return std::make_shared<Patcher>(PatcherOptions{1 << 20, 64}); }

// A doc of a few hundred bytes whose score is `score`.
std::string board(int score, int game = 7) {
    return R"({"game":)" + std::to_string(game) + R"(,"score":)" + std::to_string(score) + R"(,"players":[)" +
           R"("ann","bob","cid","dan","eve","fay","gus","hal","ivy","jon","kim","lea","max","ned","oda","pia"],)" +
           R"("note":")" + std::string(200, 'n') + "\"}";
}

// A reader of JSONL output: applies each patch line to the doc it holds for the channel when it
// holds the base, and otherwise waits for the channel's next whole line (docs/sinks.md).
struct Reader {
    std::map<std::string, std::pair<std::string, DocVersion>> held;
    int patches = 0;
    void take(const std::string& line) {
        auto head = docsync::publish::parse_envelope(line);
        REQUIRE_MESSAGE(head, line);
        std::string body = line.substr(head->doc_at, head->doc_size);
        if (!head->is_patch()) {
            held[head->channel] = {body, head->version};
            return;
        }
        auto it = held.find(head->channel);
        REQUIRE_MESSAGE(it != held.end(), "a patch line before any whole line of " << head->channel);
        REQUIRE(it->second.second == *head->base);
        it->second.first = docsync::patch::apply(
            it->second.first, {head->kind == EnvelopeKind::JsonPatch ? docsync::patch::Form::JsonPatch
                                                                     : docsync::patch::Form::MergePatch,
                               body});
        it->second.second = head->version;
        ++patches;
    }
};

}  // namespace

TEST_CASE("jsonl patches: the file holds patch lines only after their base's line, and reads back at open") {
    TempDir dir("patch");
    const auto path = dir.path / "docs.jsonl";
    {
        auto sink = JsonlSink::open_file(path.string(), patcher());
        sink->publish("db:board:7", board(1), {1, 0x100});
        sink->publish("db:board:8", board(1, 8), {1, 0x110});
        sink->publish("db:board:7", board(2), {1, 0x200});
        sink->publish("db:board:8", board(2, 8), {1, 0x210});
        sink->publish("db:board:7", board(3), {1, 0x300});
        sink->publish("db:tiny:1", std::string("{\"a\":1}"), {1, 0x310});  // below --patch-min-bytes
        sink->publish("db:tiny:1", std::string("{\"a\":2}"), {1, 0x320});
        // read_back rebuilds from the whole line and the patch lines after it.
        auto back = sink->read_back("db:board:7");
        REQUIRE(back);
        CHECK(*back->doc == board(3));
        CHECK(back->version == DocVersion{1, 0x300});
    }
    auto lines = read_lines(path);
    REQUIRE(lines.size() == 7);
    std::vector<bool> patch_lines;
    Reader reader;
    for (const auto& line : lines) {
        patch_lines.push_back(docsync::publish::parse_envelope(line)->is_patch());
        reader.take(line);
    }
    CHECK(patch_lines == std::vector<bool>{false, false, true, true, true, false, false});
    CHECK(reader.held["db:board:7"].first == board(3));
    CHECK(reader.held["db:board:8"].first == board(2, 8));

    // At open the chains are read back: every channel held, at its newest version.
    auto again = JsonlSink::open_file(path.string(), patcher());
    auto channels = again->retained_channels();
    CHECK(channels.size() == 3);
    auto seven = again->read_back("db:board:7");
    REQUIRE(seven);
    CHECK(*seven->doc == board(3));
    CHECK(seven->version == DocVersion{1, 0x300});
    CHECK(*again->read_back("db:board:8")->doc == board(2, 8));
    CHECK(again->max_version() == DocVersion{1, 0x320});
    // A new process holds no base: its first line of a channel is whole, the next a patch again.
    again->publish("db:board:7", board(4), {1, 0x400});
    again->publish("db:board:7", board(5), {1, 0x500});
    lines = read_lines(path);
    CHECK_FALSE(docsync::publish::parse_envelope(lines[7])->is_patch());
    CHECK(docsync::publish::parse_envelope(lines[8])->is_patch());
    CHECK(*again->read_back("db:board:7")->doc == board(5));
}

TEST_CASE("jsonl patches: a patch line that does not follow its base leaves its channel retained, not held") {
    TempDir dir("patch");
    const auto path = dir.path / "docs.jsonl";
    const std::string patch = R"([{"op":"replace","path":"/score","value":2}])";
    {
        std::ofstream out(path, std::ios::binary);
        // db:board:7: a good chain. db:board:8: its patch's base (0/105) is not its line before (0/110).
        out << docsync::publish::make_envelope("db:board:7", board(1), {1, 0x100}) << "\n";
        out << docsync::publish::make_envelope("db:board:8", board(1, 8), {1, 0x110}) << "\n";
        out << docsync::publish::make_patch_envelope("db:board:7", EnvelopeKind::JsonPatch, patch, {1, 0x100}, {1, 0x200})
            << "\n";
        out << docsync::publish::make_patch_envelope("db:board:8", EnvelopeKind::JsonPatch, patch, {1, 0x105}, {1, 0x210})
            << "\n";
        // db:board:9: a patch with no line before it at all.
        out << docsync::publish::make_patch_envelope("db:board:9", EnvelopeKind::JsonPatch, patch, {1, 0x50}, {1, 0x220})
            << "\n";
    }
    auto sink = JsonlSink::open_file(path.string(), patcher());
    auto channels = sink->retained_channels();
    std::sort(channels.begin(), channels.end());
    CHECK(channels == std::vector<std::string>{"db:board:7", "db:board:8", "db:board:9"});  // all kept live
    CHECK(*sink->read_back("db:board:7")->doc == board(2));
    CHECK_FALSE(sink->read_back("db:board:8"));  // not held: recomputed and written whole
    CHECK_FALSE(sink->read_back("db:board:9"));
    CHECK(sink->max_version() == DocVersion{1, 0x220});
    // restore() still never writes an older version than the file's newest line.
    sink->restore("db:board:8", board(0, 8), {1, 0x200});
    CHECK(read_lines(path).size() == 5);
    // The recompute's whole line makes it held again.
    sink->publish("db:board:8", board(3, 8), {1, 0x300});
    CHECK(*sink->read_back("db:board:8")->doc == board(3, 8));
    // A patch line after a broken chain is not held either; a later whole line is.
    sink.reset();
    {
        std::ofstream out(path, std::ios::binary | std::ios::app);
        out << docsync::publish::make_patch_envelope("db:board:9", EnvelopeKind::JsonPatch, patch, {1, 0x220}, {1, 0x230})
            << "\n";
    }
    sink = JsonlSink::open_file(path.string(), patcher());
    CHECK_FALSE(sink->read_back("db:board:9"));
    CHECK(*sink->read_back("db:board:8")->doc == board(3, 8));
}

TEST_CASE("jsonl patches: stdout writes a patch only after its base, restore and tombstones are whole") {
    TempDir dir("patch");
    const auto path = dir.path / "out.jsonl";
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    {
        auto sink = JsonlSink::open_stdout(fd, patcher());
        sink->publish("db:board:7", board(1), {1, 0x100});
        sink->publish("db:board:7", board(2), {1, 0x200});
        sink->publish("db:board:7", std::nullopt, {1, 0x300});  // a tombstone: whole, no base after it
        sink->publish("db:board:7", board(3), {1, 0x400});
        sink->publish("db:board:7", board(4), {1, 0x500});
        sink->restore("db:board:7", board(5), {1, 0x600});  // a repair's whole line
        sink->publish("db:board:7", board(6), {1, 0x700});
        sink->publish("db:board:7", board(7), {1, 0x800});
    }
    ::close(fd);
    auto lines = read_lines(path);
    REQUIRE(lines.size() == 8);
    std::vector<bool> patch_lines;
    Reader reader;
    for (const auto& line : lines) {
        patch_lines.push_back(docsync::publish::parse_envelope(line)->is_patch());
        reader.take(line);
    }
    CHECK(patch_lines == std::vector<bool>{false, true, false, false, true, false, false, true});
    CHECK(reader.held["db:board:7"].first == board(7));
    CHECK(reader.patches == 3);
}

TEST_CASE("jsonl: without a patcher every line is whole, as before") {
    TempDir dir("patch");
    const auto path = dir.path / "docs.jsonl";
    auto sink = JsonlSink::open_file(path.string());
    sink->publish("db:board:7", board(1), {1, 0x100});
    sink->publish("db:board:7", board(2), {1, 0x200});
    for (const auto& line : read_lines(path)) CHECK_FALSE(docsync::publish::parse_envelope(line)->is_patch());
}

TEST_CASE("jsonl patches: a channel is written whole again once its whole line lies kMaxPatchSpan back") {
    TempDir dir("patch");
    const auto path = dir.path / "docs.jsonl";
    auto sink = JsonlSink::open_file(path.string(), patcher());
    sink->publish("db:board:7", board(1), {1, 1});
    sink->publish("db:board:7", board(2), {1, 2});  // a patch line
    // Other channels' lines push the whole line back: big docs unlike each other, so each is whole.
    const std::size_t big = 200 * 1024;
    std::uint64_t lsn = 3;
    for (std::size_t written = 0; written <= JsonlSink::kMaxPatchSpan; written += big, ++lsn)
        sink->publish("db:big:" + std::to_string(lsn % 2), R"({"fill":")" + std::string(big, static_cast<char>('a' + lsn % 26)) + "\"}",
                      {1, lsn});
    sink->publish("db:board:7", board(3), {1, lsn + 1});
    auto lines = read_lines(path);
    CHECK_FALSE(docsync::publish::parse_envelope(lines.back())->is_patch());  // whole: the span was passed
    sink->publish("db:board:7", board(4), {1, lsn + 2});
    CHECK(docsync::publish::parse_envelope(read_lines(path).back())->is_patch());  // and patches from there
    CHECK(*sink->read_back("db:board:7")->doc == board(4));
}

TEST_CASE("jsonl patches: a version written again with another text is a base only as its later line") {
    // A doc computed twice at one version with different text, the cache entry of the first evicted
    // in between: a reader takes the later whole line (the later line wins), so the patch after it,
    // made from the later text, applies to what the reader holds; the file reads back the same.
    TempDir dir("patch");
    const auto path = dir.path / "out.jsonl";
    auto other = [](int score) { return board(score, 8); };
    auto reordered = R"({"game":7,"score":1,"players":["bob","ann"],"note":")" + std::string(300, 'n') + "\"}";
    auto next = R"({"game":7,"score":2,"players":["bob","ann"],"note":")" + std::string(300, 'n') + "\"}";
    {
        auto sink = JsonlSink::open_file(path.string(), std::make_shared<Patcher>(PatcherOptions{800, 64}));
        sink->publish("db:board:7", board(1), {1, 0x100});
        sink->publish("db:board:8", other(1), {1, 0x100});  // evicts db:board:7's entry
        sink->publish("db:board:7", reordered, {1, 0x100});
        sink->publish("db:board:7", next, {1, 0x200});
        auto back = sink->read_back("db:board:7");
        REQUIRE(back);
        CHECK(back->doc == next);
    }
    auto lines = read_lines(path);
    REQUIRE(lines.size() == 4);
    Reader reader;
    for (const auto& line : lines) reader.take(line);
    CHECK(docsync::publish::parse_envelope(lines[3])->is_patch());
    CHECK(reader.held["db:board:7"].first == next);
    // Read back at open: the chain from the later whole line.
    auto sink = JsonlSink::open_file(path.string(), patcher());
    auto back = sink->read_back("db:board:7");
    REQUIRE(back);
    CHECK(back->doc == next);
}
