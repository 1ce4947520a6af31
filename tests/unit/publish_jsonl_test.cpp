// The JSONL sinks and the envelope: whole lines under concurrency, embedded JSON, group commit,
// torn-tail repair, read-back, and clear startup errors for unusable paths. Also --sink parsing.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <rapidjson/document.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "envelope/envelope.hpp"
#include "publish/jsonl_sink.hpp"
#include "publish/sink.hpp"
#include "temp_files.hpp"

namespace fs = std::filesystem;
using docsync::DocVersion;
using docsync::Error;
using docsync::publish::JsonlSink;
using docsync::testing::read_all;
using docsync::testing::read_lines;
using docsync::testing::TempDir;

namespace {

// Throws the Error the callable throws and returns its message; fails the test when it does not throw.
template <typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    FAIL("expected a docsync::Error");
    return {};
}

}  // namespace

TEST_CASE("an envelope embeds the doc as JSON, compacted, with its version") {
    auto line = docsync::publish::make_envelope("db:order:42", std::string("{\"id\": 42,\n \"items\": [1, 2]}"),
                                                DocVersion{3, 0x16B3F28});
    CHECK(line == R"({"channel":"db:order:42","doc":{"id":42,"items":[1,2]},"generation":3,"lsn":"0/16B3F28"})");
    CHECK(line.find('\n') == std::string::npos);

    // A null doc, and a channel whose text needs JSON escaping.
    CHECK(docsync::publish::make_envelope("db:q:a\"b", std::nullopt, DocVersion{1, (7ull << 32) | 1}) ==
          R"({"channel":"db:q:a\"b","doc":null,"generation":1,"lsn":"7/1"})");

    // Numbers travel digit for digit (a numeric column beyond double precision stays exact), strings
    // keep their escapes, and unicode passes through.
    auto exact = docsync::publish::make_envelope(
        "db:n:1", std::string(R"({"big": 123456789012345678901234567890.000000000000000001, "s": "a\nb\u00e9", "e": 1e400})"),
        DocVersion{1, 1});
    CHECK(exact.find(R"("big":123456789012345678901234567890.000000000000000001)") != std::string::npos);
    CHECK(exact.find(R"("e":1e400)") != std::string::npos);
    CHECK(exact.find(R"("s":"a\nb)") != std::string::npos);

    // Channels with control bytes and non-ASCII text round-trip; a channel that is not UTF-8 is refused.
    for (std::string channel : {std::string("db:q:\x01\x7f\"\\/"), std::string("db:q:\xc3\xa9\xf0\x9f\x98\x80")}) {
        auto back = docsync::publish::parse_envelope(docsync::publish::make_envelope(channel, std::nullopt, DocVersion{1, 1}));
        REQUIRE(back);
        CHECK(back->channel == channel);
    }
    CHECK(docsync::publish::parse_envelope(R"({"channel":"db:\u00e9\ud83d\ude00\n","doc":null,"generation":1,"lsn":"0/1"})")
              ->channel == "db:\xc3\xa9\xf0\x9f\x98\x80\n");
    CHECK(error_of([] { docsync::publish::make_envelope("db:q:\xff", std::nullopt, DocVersion{1, 1}); })
              .find("not valid UTF-8") != std::string::npos);

    // The envelope reads back.
    auto head = docsync::publish::parse_envelope(line);
    REQUIRE(head);
    CHECK(head->channel == "db:order:42");
    CHECK(head->version == DocVersion{3, 0x16B3F28});
    CHECK_FALSE(docsync::publish::parse_envelope(R"({"channel":"db:x","generation":1,"lsn":"0/1"})"));
    CHECK_FALSE(docsync::publish::parse_envelope(R"({"channel":"db:x","doc":1,"generation":-1,"lsn":"0/1"})"));
    CHECK_FALSE(docsync::publish::parse_envelope(R"({"channel":"db:x","doc":1,"generation":1,"lsn":"zz"})"));
    CHECK_FALSE(docsync::publish::parse_envelope("not json"));
}

TEST_CASE("a doc that is not one valid JSON value is refused with a clear, permanent error") {
    for (const std::string& bad : std::vector<std::string>{"{\"a\": }", "[1, 2", "1 2", "", "\"unterminated", std::string("{}\0{}", 5),
                            std::string("\"\xff\"")}) {
        CAPTURE(bad);
        auto message = error_of([&] { docsync::publish::make_envelope("db:q:1", bad, DocVersion{1, 1}); });
        CHECK(message.find("the doc for db:q:1 is not valid JSON") != std::string::npos);
    }
    try {
        docsync::publish::make_envelope("db:q:1", std::string("{"), DocVersion{1, 1});
    } catch (const Error& e) {
        CHECK_FALSE(e.transient());
    }
    // Strict UTF-8 and grammar: overlong forms, surrogates, bad escapes, leading zeros.
    for (const std::string& bad : std::vector<std::string>{"\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\\x\"", "01",
                                                            "[1,]", "{\"a\" 1}", "{1:2}", "-", "1.", "1e", "tru"}) {
        CAPTURE(bad);
        CHECK_THROWS_AS(docsync::publish::compact_json(bad), Error);
    }
    // A numeric beyond double range (PostgreSQL prints 1e400 as 401 digits) is kept, and so is the
    // doc in a file that is read back.
    std::string huge = "1" + std::string(400, '0');
    CHECK(docsync::publish::compact_json("[ " + huge + " , -0.5e-400 ]") == "[" + huge + ",-0.5e-400]");
    auto with_huge = docsync::publish::make_envelope("db:h:1", huge, DocVersion{1, 1});
    CHECK(docsync::publish::parse_envelope(with_huge));
    // Deep nesting is parsed without recursion: no stack overflow, just a valid doc.
    std::string deep(100000, '[');
    deep += std::string(100000, ']');
    CHECK(docsync::publish::compact_json(deep).size() == deep.size());
}

TEST_CASE("file sink: lines from concurrent publishers are whole, valid JSON and all there, fsync'd in groups") {
    TempDir dir("publish");
    auto path = dir.path / "docs.jsonl";
    constexpr int kThreads = 8, kPerThread = 300;
    std::uint64_t syncs = 0;
    {
        auto sink = JsonlSink::open_file(path.string());
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&, t] {
                // Docs of very different sizes, so a torn or interleaved write would show.
                for (int i = 0; i < kPerThread; ++i) {
                    std::string doc = "{\"t\":" + std::to_string(t) + ",\"i\":" + std::to_string(i) + ",\"pad\":\"" +
                                      std::string(static_cast<std::size_t>((i * 97 + t * 1013) % 20000), 'x') + "\"}";
                    sink->publish("db:t" + std::to_string(t) + ":" + std::to_string(i), doc,
                                  DocVersion{2, static_cast<std::uint64_t>(i + 1)});
                }
            });
        }
        for (auto& th : threads) th.join();
        syncs = sink->sync_count();
        CHECK(sink->retained_channels().size() == kThreads * kPerThread);
        CHECK(sink->max_generation() == 2);
    }
    auto content = read_all(path);
    REQUIRE(!content.empty());
    CHECK(content.back() == '\n');
    auto lines = read_lines(path);
    REQUIRE(lines.size() == kThreads * kPerThread);
    std::set<std::string> channels;
    for (const auto& line : lines) {
        rapidjson::Document d;
        d.Parse(line.c_str(), line.size());
        REQUIRE_MESSAGE(!d.HasParseError(), line.substr(0, 200));
        REQUIRE(d.IsObject());
        REQUIRE(d["doc"].IsObject());  // embedded, not a quoted string
        std::string channel = d["channel"].GetString();
        CHECK(channel == "db:t" + std::to_string(d["doc"]["t"].GetInt()) + ":" + std::to_string(d["doc"]["i"].GetInt()));
        CHECK(d["generation"].GetUint64() == 2);
        channels.insert(channel);
    }
    CHECK(channels.size() == kThreads * kPerThread);
    // Group commit: at least one fsync, and with 8 publishers far fewer than one per doc.
    CHECK(syncs >= 1);
    CHECK(syncs < kThreads * kPerThread);
    MESSAGE("fsyncs for " << kThreads * kPerThread << " docs: " << syncs);
}

TEST_CASE("file sink: publish_many writes every doc and waits for one fsync for them all") {
    TempDir dir("publish");
    auto path = dir.path / "docs.jsonl";
    auto sink = JsonlSink::open_file(path.string());
    std::vector<std::string> channels;
    std::vector<std::optional<std::string>> docs;
    for (int i = 0; i < 100; ++i) {
        channels.push_back("db:b:" + std::to_string(i));
        docs.push_back(i == 7 ? std::optional<std::string>("not json") : std::optional<std::string>("{}"));
    }
    std::vector<docsync::Publication> publications;
    for (std::size_t i = 0; i < channels.size(); ++i) publications.push_back({&channels[i], &docs[i], DocVersion{1, 5}});
    auto before = sink->sync_count();
    auto out = sink->publish_many(publications);
    REQUIRE(out.size() == 100);
    for (std::size_t i = 0; i < out.size(); ++i) CHECK(out[i].has_value() == (i == 7));
    CHECK_FALSE(out[7]->transient());  // refused for good, as publish would
    CHECK(sink->sync_count() == before + 1);
    CHECK(read_lines(path).size() == 99);
}

TEST_CASE("file sink: an incomplete last line is cut at start and what the file holds is read back") {
    TempDir dir("publish");
    auto path = dir.path / "docs.jsonl";
    {
        std::ofstream out(path, std::ios::binary);
        out << R"({"channel":"db:a:1","doc":{"x":1},"generation":4,"lsn":"0/10"})" << "\n";
        out << R"({"channel":"db:b:2","doc":null,"generation":7,"lsn":"1/0"})" << "\n";
        out << R"({"channel":"db:a:1","doc":{"x":2},"generation":7,"lsn":"1/8"})" << "\n";
        out << R"({"channel":"db:c:3","doc":{"x":)";  // a crash cut this write short
    }
    auto sink = JsonlSink::open_file(path.string());
    CHECK(sink->repaired_bytes() == std::string(R"({"channel":"db:c:3","doc":{"x":)").size());
    auto channels = sink->retained_channels();
    CHECK(std::set<std::string>(channels.begin(), channels.end()) == std::set<std::string>{"db:a:1", "db:b:2"});
    CHECK(sink->max_generation() == 7);
    CHECK(sink->max_version() == DocVersion{7, (1ULL << 32) + 8});  // the high-water mark (restores)

    // New lines land right after the last whole one.
    sink->publish("db:c:3", std::string("{\"x\":3}"), DocVersion{8, 1});
    auto lines = read_lines(path);
    REQUIRE(lines.size() == 4);
    CHECK(lines[3] == R"({"channel":"db:c:3","doc":{"x":3},"generation":8,"lsn":"0/1"})");
    CHECK(sink->max_generation() == 8);
    CHECK(sink->max_version() == DocVersion{8, 1});
    sink.reset();

    // Reopening a clean file repairs nothing and reads everything back.
    auto again = JsonlSink::open_file(path.string());
    CHECK(again->repaired_bytes() == 0);
    CHECK(again->retained_channels().size() == 3);
    CHECK(again->max_generation() == 8);
    CHECK(again->max_version() == DocVersion{8, 1});
}

TEST_CASE("file sink: read_back gives each channel's newest line, indexed at open and at every append") {
    TempDir dir("publish");
    auto path = dir.path / "docs.jsonl";
    {
        std::ofstream out(path, std::ios::binary);
        out << R"({"channel":"db:a:1","doc":{"x":1},"generation":4,"lsn":"0/10"})" << "\n";
        out << R"({"channel":"db:b:2","doc":null,"generation":7,"lsn":"1/0"})" << "\n";
        out << R"({"channel":"db:a:1","doc":{"x":2},"generation":7,"lsn":"1/8"})" << "\n";
    }
    auto sink = JsonlSink::open_file(path.string());
    CHECK(sink->retains());
    auto a = sink->read_back("db:a:1");
    REQUIRE(a);
    CHECK(a->doc == std::optional<std::string>("{\"x\":2}"));
    CHECK(a->version == DocVersion{7, 0x100000008});
    auto b = sink->read_back("db:b:2");
    REQUIRE(b);
    CHECK_FALSE(b->doc);  // a tombstone
    CHECK(b->version == DocVersion{7, 0x100000000});
    CHECK_FALSE(sink->read_back("db:c:3"));

    // Appends move the index: the doc as the envelope holds it (compact), with its version.
    sink->publish("db:c:3", std::string("{\"y\": [1, 2]}"), DocVersion{8, 1});
    std::string channel = "db:a:1";
    std::optional<std::string> doc = "{\"x\": 3}";
    sink->publish_many({docsync::Publication{&channel, &doc, DocVersion{8, 2}}});
    CHECK(sink->read_back("db:c:3")->doc == std::optional<std::string>("{\"y\":[1,2]}"));
    CHECK(sink->read_back("db:a:1")->doc == std::optional<std::string>("{\"x\":3}"));
    CHECK(sink->read_back("db:a:1")->version == DocVersion{8, 2});
    sink.reset();
    auto again = JsonlSink::open_file(path.string());
    CHECK(again->read_back("db:a:1")->doc == std::optional<std::string>("{\"x\":3}"));
    CHECK(again->read_back("db:c:3")->version == DocVersion{8, 1});
}

TEST_CASE("file sink: read_back sees a line changed in place, restore never writes behind a newer version") {
    TempDir dir("publish");
    auto path = dir.path / "docs.jsonl";
    auto sink = JsonlSink::open_file(path.string());
    sink->publish("db:a:1", std::string("{\"x\":1}"), DocVersion{2, 0x20});
    sink->publish("db:b:1", std::string("{\"x\":5}"), DocVersion{2, 0x21});
    {
        // The same bytes but one: the doc of db:a:1's line, as a hand edit or a bad disk leaves it.
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        std::string text = read_all(path);
        auto at = text.find("\"x\":1");
        REQUIRE(at != std::string::npos);
        f.seekp(static_cast<std::streamoff>(at + 4));
        f.put('9');
    }
    CHECK_FALSE(sink->lost_docs());  // same file, same size
    CHECK(sink->read_back("db:a:1")->doc == std::optional<std::string>("{\"x\":9}"));
    CHECK(sink->read_back("db:b:1")->doc == std::optional<std::string>("{\"x\":5}"));

    // Restoring at an equal or newer version appends; an older one changes nothing.
    sink->restore("db:a:1", std::string("{\"x\":1}"), DocVersion{2, 0x20});
    CHECK(sink->read_back("db:a:1")->doc == std::optional<std::string>("{\"x\":1}"));
    sink->publish("db:a:1", std::string("{\"x\":2}"), DocVersion{2, 0x30});
    sink->restore("db:a:1", std::string("{\"x\":1}"), DocVersion{2, 0x25});
    CHECK(sink->read_back("db:a:1")->doc == std::optional<std::string>("{\"x\":2}"));
    CHECK(read_lines(path).size() == 4);

    // A file truncated under the sink: where the lines are is no longer known, and read_back says so.
    std::filesystem::resize_file(path, 0);
    REQUIRE(sink->lost_docs());
    CHECK_THROWS_WITH_AS(sink->read_back("db:a:1"), doctest::Contains("replaced or shrank"), Error);
    sink->publish("db:a:1", std::string("{\"x\":4}"), DocVersion{2, 0x40});
    CHECK(sink->read_back("db:a:1")->doc == std::optional<std::string>("{\"x\":4}"));
}

TEST_CASE("an envelope's doc and version are read back as the sink holds them") {
    using docsync::publish::retained_doc;
    auto doc = retained_doc(R"({"channel":"db:a:1","doc":{"s":"a,\"generation\":1"},"generation":3,"lsn":"0/2A"})",
                            "db:a:1");
    REQUIRE(doc);
    CHECK(doc->doc == std::optional<std::string>(R"({"s":"a,\"generation\":1"})"));
    CHECK(doc->version == DocVersion{3, 0x2A});
    CHECK_FALSE(retained_doc(R"({"channel":"db:a:1","doc":null,"generation":3,"lsn":"0/2A"})", "db:a:1")->doc);
    CHECK_FALSE(retained_doc(R"({"channel":"db:a:1","doc":{},"generation":3,"lsn":"0/2A"})", "db:a:2"));
    CHECK_FALSE(retained_doc("garbage", "db:a:1"));
}

TEST_CASE("file sink: a file that holds something else is refused, naming the line") {
    TempDir dir("publish");
    auto path = dir.path / "notes.txt";
    {
        std::ofstream out(path, std::ios::binary);
        out << R"({"channel":"db:a:1","doc":{},"generation":1,"lsn":"0/1"})" << "\n" << "hello world\n";
    }
    auto message = error_of([&] { JsonlSink::open_file(path.string()); });
    CHECK(message.find("line 2 is not a docsync doc line") != std::string::npos);
    CHECK(message.find(path.string()) != std::string::npos);
    CHECK(read_all(path).find("hello world") != std::string::npos);  // nothing was cut or changed
}

TEST_CASE("file sink: a missing directory or a read-only path is a clear startup error") {
    TempDir dir("publish");
    auto missing = dir.path / "no" / "such" / "docs.jsonl";
    auto message = error_of([&] { JsonlSink::open_file(missing.string()); });
    CHECK(message.find(missing.string()) != std::string::npos);
    CHECK(message.find("create the directory") != std::string::npos);

    // Read-only for everyone, root included: an immutable directory (chattr +i) when the filesystem
    // supports it, else a directory without write permission for an unprivileged user.
    auto ro = dir.path / "ro";
    fs::create_directory(ro);
    bool immutable = std::system(("chattr +i '" + ro.string() + "' 2>/dev/null").c_str()) == 0;
    if (!immutable) fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    if (immutable || ::geteuid() != 0) {
        auto ro_message = error_of([&] { JsonlSink::open_file((ro / "docs.jsonl").string()); });
        CHECK(ro_message.find("read-only") != std::string::npos);
        CHECK(ro_message.find((ro / "docs.jsonl").string()) != std::string::npos);
    } else {
        MESSAGE("skipped the read-only case: root on a filesystem without chattr +i");
    }
    if (immutable) std::system(("chattr -i '" + ro.string() + "'").c_str());
}

// A small tmpfs mounted under a temporary directory for a test's lifetime; `mounted` is false (and
// the test is skipped) where mounting needs a privilege the test does not have.
struct SmallTmpfs {
    TempDir dir{"publish"};
    fs::path mnt = dir.path / "small";
    bool mounted = false;
    explicit SmallTmpfs(const char* size) {
        fs::create_directory(mnt);
        mounted = ::mount("docsync-test", mnt.c_str(), "tmpfs", 0, (std::string("size=") + size).c_str()) == 0;
        if (!mounted) MESSAGE("skipped: mounting a small tmpfs needs root (CAP_SYS_ADMIN)");
    }
    ~SmallTmpfs() {
        if (mounted) ::umount2(mnt.c_str(), MNT_DETACH);
    }
};

TEST_CASE("file sink: a full filesystem is a clear startup error") {
    SmallTmpfs tmpfs("256k");
    if (!tmpfs.mounted) return;
    const fs::path& mnt = tmpfs.mnt;
    {
        std::ofstream fill(mnt / "fill", std::ios::binary);
        std::string block(4096, 'x');
        for (int i = 0; i < 1024 && fill.good(); ++i) fill << block;
    }
    auto message = error_of([&] { JsonlSink::open_file((mnt / "docs.jsonl").string()); });
    CHECK(message.find("is full") != std::string::npos);
    CHECK(message.find((mnt / "docs.jsonl").string()) != std::string::npos);
}

TEST_CASE("file sink: a disk that fills up mid-stream leaves whole lines, and only this sink's lines") {
    SmallTmpfs tmpfs("2m");
    if (!tmpfs.mounted) return;
    auto path = (tmpfs.mnt / "docs.jsonl").string();
    auto sink = JsonlSink::open_file(path);
    // the other writer that shared the file before is refused now, so the sink's size is the file's
    CHECK_THROWS_WITH_AS(JsonlSink::open_file(path), doctest::Contains("already written"), Error);
    std::string pad(40000, 'p');
    int published = 0, failed = 0;
    for (int i = 0; i < 200 && failed < 3; ++i) {
        try {
            sink->publish("db:a:" + std::to_string(i), "{\"pad\":\"" + pad + "\"}", docsync::DocVersion{1, static_cast<docsync::Lsn>(i + 1)});
            ++published;
        } catch (const Error& e) {
            CHECK(e.transient());  // held and retried, never acknowledged
            ++failed;
        }
    }
    CHECK(published > 10);
    CHECK(failed == 3);
    std::ifstream in(path, std::ios::binary);
    std::string line;
    int lines = 0;
    while (std::getline(in, line)) {
        CHECK(line.find('\0') == std::string::npos);
        rapidjson::Document d;
        d.Parse<rapidjson::kParseIterativeFlag>(line.c_str());
        CHECK_FALSE(d.HasParseError());
        ++lines;
    }
    CHECK(lines == published);  // the failed writes were cut back to where they began
}

TEST_CASE("file sink: a second writer of the same file is refused, a truncated or replaced file is noticed") {
    TempDir dir("publish");
    auto path = dir.path / "docs.jsonl";
    auto sink = JsonlSink::open_file(path.string());
    CHECK_THROWS_WITH_AS(JsonlSink::open_file(path.string()),
                         doctest::Contains("is already written by another docsync-worker"), Error);
    CHECK_FALSE(sink->lost_docs());
    sink->publish("db:a:1", std::string("{\"x\":1}"), DocVersion{1, 1});
    CHECK_FALSE(sink->lost_docs());
    std::filesystem::resize_file(path, 0);  // truncated by hand
    auto shrank = sink->lost_docs();
    REQUIRE(shrank);
    CHECK(shrank->find("shrank from") != std::string::npos);
    CHECK_FALSE(sink->lost_docs());
    std::filesystem::remove(path);  // replaced: the sink writes to the new file, and locks it
    { std::ofstream(path) << ""; }
    auto replaced = sink->lost_docs();
    REQUIRE(replaced);
    CHECK(replaced->find("removed or replaced") != std::string::npos);
    sink->publish("db:a:1", std::string("{\"x\":2}"), DocVersion{1, 2});
    std::ifstream in(path);
    std::string line;
    REQUIRE(std::getline(in, line));
    CHECK(line.find("\"x\":2") != std::string::npos);
    CHECK_THROWS_WITH_AS(JsonlSink::open_file(path.string()), doctest::Contains("already written"), Error);
}

TEST_CASE("stdout sink: a reader that went away (EPIPE) is fatal, and the publish is not counted") {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    ::close(fds[0]);
    auto sink = JsonlSink::open_stdout(fds[1]);
    CHECK_FALSE(sink->fatal());
    try {
        sink->publish("db:a:1", std::string("{}"), DocVersion{1, 1});
        FAIL("a publish to a pipe nobody reads succeeded");
    } catch (const Error& e) {
        CHECK(e.transient());  // held, never acknowledged
    }
    auto fatal = sink->fatal();
    REQUIRE(fatal);
    CHECK(fatal->find("went away (EPIPE)") != std::string::npos);
    ::close(fds[1]);
}

TEST_CASE("a sink leaves SIGPIPE's disposition to the program's main()") {
    // Library code sets nothing process-wide: docsync-worker's main() (and this binary's) ignores
    // SIGPIPE; a sink opened under another disposition keeps it.
    struct sigaction previous {};
    REQUIRE(::sigaction(SIGPIPE, nullptr, &previous) == 0);
    std::signal(SIGPIPE, SIG_DFL);
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    {
        auto sink = JsonlSink::open_stdout(fds[1]);
        struct sigaction now {};
        REQUIRE(::sigaction(SIGPIPE, nullptr, &now) == 0);
        bool left_default = now.sa_handler == SIG_DFL;
        CHECK(left_default);
    }
    ::close(fds[0]);
    ::close(fds[1]);
    REQUIRE(::sigaction(SIGPIPE, &previous, nullptr) == 0);
}

TEST_CASE("stdout sink: concurrent lines reach the descriptor whole and it holds nothing") {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    std::string received;
    std::thread reader([&] {
        char buf[65536];
        ssize_t n;
        while ((n = ::read(fds[0], buf, sizeof buf)) > 0) received.append(buf, static_cast<std::size_t>(n));
    });
    {
        auto sink = JsonlSink::open_stdout(fds[1]);
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t)
            threads.emplace_back([&, t] {
                for (int i = 0; i < 200; ++i)
                    sink->publish("db:s:" + std::to_string(t * 1000 + i),
                                  i % 5 ? std::optional<std::string>("[\"" + std::string(static_cast<std::size_t>(i * 300), 'y') + "\"]")
                                        : std::nullopt,
                                  DocVersion{1, static_cast<std::uint64_t>(i)});
            });
        for (auto& th : threads) th.join();
        CHECK(sink->retained_channels().empty());
        CHECK(sink->max_generation() == 0);
        CHECK_FALSE(sink->retains());  // nothing to read back: the continuous audit is off
        CHECK_FALSE(sink->read_back("db:a:1"));
    }
    ::close(fds[1]);
    reader.join();
    ::close(fds[0]);
    std::istringstream in(received);
    std::string line;
    int count = 0, nulls = 0;
    while (std::getline(in, line)) {
        rapidjson::Document d;
        d.Parse(line.c_str(), line.size());
        REQUIRE_MESSAGE(!d.HasParseError(), line.substr(0, 120));
        if (d["doc"].IsNull()) ++nulls;
        ++count;
    }
    CHECK(count == 800);
    CHECK(nulls == 160);
}

TEST_CASE("--sink values parse, and bad ones name the accepted forms") {
    using docsync::publish::parse_sink;
    using Kind = docsync::publish::SinkSpec::Kind;
    CHECK(parse_sink("stdout").kind == Kind::Stdout);
    auto file = parse_sink("file:/var/lib/docsync/docs.jsonl");
    CHECK(file.kind == Kind::File);
    CHECK(file.path == "/var/lib/docsync/docs.jsonl");
    auto redis = parse_sink("redis://10.0.0.5:6380/2");
    CHECK(redis.kind == Kind::Redis);
    CHECK(redis.redis.host == "10.0.0.5");
    CHECK(redis.redis.port == 6380);
    CHECK(redis.redis.db == 2);
    auto plain = parse_sink("redis://cache");
    CHECK(plain.redis.port == 6379);
    CHECK(plain.redis.db == 0);
    auto auth = parse_sink("redis://app:s3cret@[::1]:7000/1?tombstone-ttl=60");
    CHECK(auth.redis.host == "::1");
    CHECK(auth.redis.port == 7000);
    CHECK(auth.redis.user == "app");
    CHECK(auth.redis.password == "s3cret");
    CHECK(auth.redis.tombstone_ttl == std::chrono::seconds(60));
    CHECK(auth.redis.display().find("s3cret") == std::string::npos);

    CHECK(error_of([] { parse_sink("kafka://x"); }).find("use stdout, file:PATH") != std::string::npos);
    CHECK(error_of([] { parse_sink("file:"); }).find("needs a path") != std::string::npos);
    CHECK(error_of([] { parse_sink("redis://host:99999"); }).find("is not 1-65535") != std::string::npos);
    CHECK(error_of([] { parse_sink("redis://host:6379/abc"); }).find("is not a number") != std::string::npos);
    CHECK(error_of([] { parse_sink("redis://:6379"); }).find("host is missing") != std::string::npos);
    CHECK(error_of([] { parse_sink("redis://h?ttl=1"); }).find("unknown parameter 'ttl'") != std::string::npos);
    CHECK(error_of([] { parse_sink("redis://h?tombstone-ttl=0"); }).find("tombstone-ttl") != std::string::npos);
    // The worker names its setting and the value; the Redis client, shared with the gateway, names neither.
    CHECK(error_of([] { parse_sink("redis-cluster://10.0.0.1"); })
              .rfind("--sink redis-cluster://10.0.0.1: the host 10.0.0.1 needs its :PORT", 0) == 0);
    CHECK(error_of([] { docsync::redis::parse_redis_url("redis://h?ttl=1"); }).find("--sink") == std::string::npos);
}

TEST_CASE("--live subscribers with a JSONL sink is refused with the fix") {
    auto spec = docsync::publish::parse_sink("stdout");
    docsync::publish::LivenessCallbacks callbacks{[](const std::vector<std::string>&, bool) {},
                                                   [](const std::string&) {}, [](const std::string&) {}};
    auto message = error_of([&] { docsync::publish::make_liveness(spec, callbacks); });
    CHECK(message.find("--live subscribers needs a Redis sink") != std::string::npos);
    CHECK(message.find("--live all") != std::string::npos);
}

TEST_CASE("file sink: after kill -9 mid-stream every acknowledged doc is in the file, as whole lines") {
    TempDir dir("publish");
    auto path = dir.path / "docs.jsonl";
    int acks[2];
    REQUIRE(::pipe(acks) == 0);
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // The child publishes until it is killed and reports each publish that returned.
        ::close(acks[0]);
        try {
            auto sink = JsonlSink::open_file(path.string());
            for (std::uint32_t i = 1; i < 1000000; ++i) {
                sink->publish("db:k:" + std::to_string(i), "{\"i\":" + std::to_string(i) + ",\"pad\":\"" +
                                                                std::string(i % 3000, 'p') + "\"}",
                              DocVersion{1, i});
                if (::write(acks[1], &i, sizeof i) != sizeof i) ::_exit(3);
            }
        } catch (...) {
            ::_exit(2);
        }
        ::_exit(0);
    }
    ::close(acks[1]);
    std::uint32_t last = 0, got = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (last < 300 && std::chrono::steady_clock::now() < deadline && ::read(acks[0], &got, sizeof got) == sizeof got)
        last = got;
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    while (::read(acks[0], &got, sizeof got) == sizeof got) last = got;  // acks sent before the kill
    ::close(acks[0]);
    REQUIRE(last >= 300);

    auto sink = JsonlSink::open_file(path.string());  // repairs whatever the kill left
    auto lines = read_lines(path);
    REQUIRE(lines.size() >= last);
    for (std::size_t n = 0; n < lines.size(); ++n) {
        auto head = docsync::publish::parse_envelope(lines[n]);
        REQUIRE_MESSAGE(head, "line " << n + 1);
        CHECK(head->channel == "db:k:" + std::to_string(n + 1));
    }
}
