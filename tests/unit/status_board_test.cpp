// The status board and its seqlock: what the writer puts in the file is what a reader (the same
// pread/seq/CRC logic as the extension's, via shared/docsync_status.h) gets, never a torn mix; a
// corrupt or foreign file is reported, not trusted; a second board for one slot is refused.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/error.hpp"
#include "log_capture.hpp"
#include "status/status_board.hpp"
#include "status/status_reader.hpp"

using namespace docsync;
using namespace docsync::status;
using docsync::test::LogCapture;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    fs::path path;
    TempDir() {
        char tmpl[] = "/tmp/docsync-status-test.XXXXXX";
        REQUIRE(::mkdtemp(tmpl) != nullptr);
        path = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

BoardOptions quiet() {
    BoardOptions o;
    o.log = false;
    return o;
}

// Overwrites bytes of a file at an offset.
void poke(const fs::path& file, std::size_t offset, const void* bytes, std::size_t len) {
    int fd = ::open(file.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    REQUIRE(::pwrite(fd, bytes, len, static_cast<off_t>(offset)) == static_cast<ssize_t>(len));
    ::close(fd);
}

}  // namespace

TEST_CASE("a published snapshot reads back field by field") {
    TempDir dir;
    StatusBoard board(dir.path, "app", "docsync", quiet());
    StatusSnapshot s;
    s.state = WorkerState::Streaming;
    s.generation = 7;
    s.received_lsn = 0x16B3F28;
    s.acked_lsn = 0x16B3F00;
    s.acked_at = std::chrono::system_clock::now();
    s.open_txns = 3;
    s.dirty_depth = 12;
    s.in_flight = 2;
    s.live_docs = 1000;
    s.totals.changes = 5000;
    s.totals.recomputes = 4000;
    s.totals.publishes = 3999;
    s.totals.permanent_failures = 1;
    s.totals.transient_retries = 4;
    s.totals.valve_resets = 0;
    s.totals.not_visible_retries = 9;
    s.totals.audit_samples = 250;
    s.totals.audit_divergences = 1;
    auto started = std::chrono::system_clock::now() - std::chrono::seconds(10);
    s.recompute = {DOCSYNC_RECOMPUTE_VALVE, 2, 10000, 4000, started, {}, true};
    s.last_error = "query \"order\": division by zero (22012)";
    s.last_error_at = std::chrono::system_clock::now();
    s.queries.push_back({"order", 4000, 1, 8000000, "division by zero (22012)", std::chrono::system_clock::now(),
                         "doc query \"order\": its batched form failed where each doc alone runs"});
    board.publish(s);

    auto r = read_status_file(board.file_path());
    REQUIRE(r.check == DOCSYNC_STATUS_OK);
    CHECK_FALSE(r.abandoned_update);
    const auto& b = r.file.body;
    CHECK(b.pid == ::getpid());
    CHECK(b.state == DOCSYNC_STATE_STREAMING);
    CHECK(std::string(b.database) == "app");
    CHECK(std::string(b.slot) == "docsync");
    CHECK(b.generation == 7);
    CHECK(b.received_lsn == 0x16B3F28);
    CHECK(b.acked_lsn == 0x16B3F00);
    CHECK(b.acked_us > 0);
    CHECK(b.open_txns == 3);
    CHECK(b.dirty_depth == 12);
    CHECK(b.in_flight == 2);
    CHECK(b.live_docs == 1000);
    CHECK(b.changes == 5000);
    CHECK(b.recomputes == 4000);
    CHECK(b.publishes == 3999);
    CHECK(b.permanent_failures == 1);
    CHECK(b.transient_retries == 4);
    CHECK(b.not_visible_retries == 9);
    CHECK(b.audit_samples == 250);
    CHECK(b.audit_divergences == 1);
    CHECK(b.recompute_reason == DOCSYNC_RECOMPUTE_VALVE);
    CHECK(b.recompute_flags == DOCSYNC_STATUS_RECOMPUTE_GAP);
    CHECK(b.recompute_total == 10000);
    CHECK(b.recompute_done == 4000);
    CHECK(b.recompute_started_us ==
          std::chrono::duration_cast<std::chrono::microseconds>(started.time_since_epoch()).count());
    CHECK(b.recompute_finished_us == 0);
    CHECK(std::string(b.last_error) == s.last_error);
    CHECK(b.query_count == 1);
    CHECK(b.queries_omitted == 0);
    CHECK(std::string(b.queries[0].name) == "order");
    CHECK(b.queries[0].recomputes == 4000);
    CHECK(b.queries[0].permanent_failures == 1);
    CHECK(b.queries[0].compute_us_total == 8000000);
    CHECK(std::string(b.queries[0].last_error) == "division by zero (22012)");
    CHECK(std::string(b.queries[0].batch_set_aside) == "doc query \"order\": its batched form failed where each doc alone runs");
    auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count();
    CHECK(b.heartbeat_us <= now_us);
    CHECK(b.heartbeat_us > now_us - 10'000'000);
    CHECK(b.started_us <= b.heartbeat_us);
    CHECK(r.file.seq % 2 == 0);
}

TEST_CASE("a recompute's progress line: done of total, the mean rate, the time left at that rate") {
    auto start = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
    RecomputeStatus r{DOCSYNC_RECOMPUTE_STARTUP, 1, 10000, 0, start, {}};
    CHECK(describe_recompute(r, start + std::chrono::seconds(1)) ==
          "startup recompute: 0 of 10000 live docs (0%), 0 docs/s, time left unknown");
    r.done = 4000;
    CHECK(describe_recompute(r, start + std::chrono::seconds(10)) ==
          "startup recompute: 4000 of 10000 live docs (40%), 400 docs/s, about 15 s left");
    CHECK(describe_recompute(r, start + std::chrono::seconds(400)) ==
          "startup recompute: 4000 of 10000 live docs (40%), 10 docs/s, about 10 min left");
    r.reason = DOCSYNC_RECOMPUTE_VALVE;
    r.done = 10000;
    r.finished_at = start + std::chrono::milliseconds(8300);
    CHECK(describe_recompute(r, start + std::chrono::seconds(60)) ==
          "WAL safety valve recompute done: 10000 live docs in 8.3 s (1205 docs/s)");
    RecomputeStatus none{DOCSYNC_RECOMPUTE_STARTUP, 1, 0, 0, start, start};
    CHECK(describe_recompute(none, start) == "startup recompute done: 0 live docs in 0.0 s");
}

TEST_CASE("the board logs a recompute when it starts, at the progress interval, and once when done") {
    LogCapture log;
    TempDir dir;
    BoardOptions options;
    options.summary_interval = std::chrono::seconds(0);
    options.recompute_interval = std::chrono::seconds(3600);
    StatusBoard board(dir.path, "app", "docsync", options);
    StatusSnapshot s;
    s.state = WorkerState::Streaming;
    auto start = std::chrono::system_clock::now();
    s.recompute = {DOCSYNC_RECOMPUTE_STARTUP, 1, 100, 0, start, {}};
    for (int i = 0; i < 3; ++i) {  // snapshots every 500 ms; the start time may differ by rounding
        s.recompute.done = static_cast<std::uint64_t>(i) * 10;
        s.recompute.started_at = start + std::chrono::microseconds(i);
        board.publish(s);
    }
    CHECK(log.count("startup recompute: ") == 1);
    s.recompute.done = 100;
    s.recompute.finished_at = start + std::chrono::seconds(2);
    board.publish(s);
    board.publish(s);
    CHECK(log.count("startup recompute done: 100 live docs") == 1);
    // The next one (the valve fired) is logged anew.
    s.recompute = {DOCSYNC_RECOMPUTE_VALVE, 2, 50, 0, start + std::chrono::seconds(5), {}};
    board.publish(s);
    CHECK(log.count("WAL safety valve recompute: 0 of 50 live docs") == 1);
}

TEST_CASE("the file is world-readable, the directory is created 0755, the name escapes the database") {
    TempDir dir;
    fs::path status_dir = dir.path / "run" / "docsync";
    StatusBoard board(status_dir, "we/ird%db", "s1", quiet());
    struct stat st{};
    REQUIRE(::stat(status_dir.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0755);
    REQUIRE(::stat(board.file_path().c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0644);
    CHECK(st.st_size == static_cast<off_t>(sizeof(DocsyncStatusFile)));
    CHECK(board.file_path().filename() == "we%2Fird%25db.s1.status");
    CHECK(fs::exists(status_dir / "we%2Fird%25db.s1.lock"));
    CHECK(status_file_name(".hidden", "s") == "%2Ehidden.s.status");
    auto r = read_status_file(board.file_path());
    REQUIRE(r.check == DOCSYNC_STATUS_OK);
    CHECK(std::string(r.file.body.database) == "we/ird%db");  // the body keeps the real name
    CHECK(r.file.body.state == DOCSYNC_STATE_STARTING);
}

TEST_CASE("a second board for the same slot is refused, naming the pid that holds it") {
    TempDir dir;
    {
        StatusBoard first(dir.path, "app", "docsync", quiet());
        try {
            StatusBoard second(dir.path, "app", "docsync", quiet());
            FAIL("a second board took the slot");
        } catch (const Error& e) {
            std::string msg = e.what();
            CHECK(msg.find("pid " + std::to_string(::getpid())) != std::string::npos);
            CHECK(msg.find("already served by another docsync-worker") != std::string::npos);
        }
        StatusBoard other_slot(dir.path, "app", "docsync2", quiet());  // another slot is fine
        // Opening and closing the lock file elsewhere in the process does not drop a flock.
        { std::ifstream peek(dir.path / "app.docsync.lock"); }
        CHECK_THROWS_AS(StatusBoard(dir.path, "app", "docsync", quiet()), Error);
    }
    StatusBoard again(dir.path, "app", "docsync", quiet());  // released with its owner
}

TEST_CASE("a clean shutdown leaves state stopped with the last values, seq keeps growing across restarts") {
    TempDir dir;
    fs::path file;
    std::uint64_t seq_before = 0;
    {
        StatusBoard board(dir.path, "app", "docsync", quiet());
        StatusSnapshot s;
        s.state = WorkerState::Streaming;
        s.live_docs = 42;
        board.publish(s);
        file = board.file_path();
        seq_before = board.sequence();
    }
    auto r = read_status_file(file);
    REQUIRE(r.check == DOCSYNC_STATUS_OK);
    CHECK(r.file.body.state == DOCSYNC_STATE_STOPPED);
    CHECK(r.file.body.live_docs == 42);
    CHECK(r.file.seq > seq_before);
    StatusBoard again(dir.path, "app", "docsync", quiet());
    CHECK(again.sequence() > r.file.seq);
}

TEST_CASE("a starting board says its sink is unchecked until the worker says otherwise") {
    TempDir dir;
    StatusBoard board(dir.path, "app", "docsync", quiet());
    auto flags = [&] {
        auto r = read_status_file(board.file_path());
        REQUIRE(r.check == DOCSYNC_STATUS_OK);
        return r.file.body.recompute_flags;
    };
    CHECK(flags() == DOCSYNC_STATUS_SINK_UNCHECKED);  // waits hold while it starts
    board.set_sink_unchecked(false);
    CHECK(flags() == 0u);
    board.set_sink_unchecked(true);
    CHECK(flags() == DOCSYNC_STATUS_SINK_UNCHECKED);
    StatusSnapshot s;
    s.state = WorkerState::Streaming;
    board.publish(s);
    CHECK(flags() == 0u);
}

TEST_CASE("a recompute that covered a gap and did not finish is inherited by the next board, and shown") {
    TempDir dir;
    fs::path file;
    auto started = std::chrono::system_clock::now() - std::chrono::seconds(30);
    {
        StatusBoard board(dir.path, "app", "docsync", quiet());
        StatusSnapshot s;
        s.state = WorkerState::Streaming;
        s.recompute = {DOCSYNC_RECOMPUTE_VALVE, 1, 100, 40, started, {}, true};
        board.publish(s);
        file = board.file_path();
        CHECK_FALSE(board.inherited_gap());
    }  // the worker stops (or dies) mid-way
    {
        StatusBoard board(dir.path, "app", "docsync", quiet());
        CHECK(board.inherited_gap());
        // Until its first publish the file goes on showing the open gap.
        auto r = read_status_file(file);
        REQUIRE(r.check == DOCSYNC_STATUS_OK);
        CHECK(r.file.body.recompute_reason == DOCSYNC_RECOMPUTE_VALVE);
        // (and, starting, that its sink is not checked yet)
        CHECK(r.file.body.recompute_flags == (DOCSYNC_STATUS_RECOMPUTE_GAP | DOCSYNC_STATUS_SINK_UNCHECKED));
        CHECK(r.file.body.recompute_finished_us == 0);
        CHECK(r.file.body.recompute_done == 40);
        // It finishes.
        StatusSnapshot s;
        s.state = WorkerState::Streaming;
        s.recompute = {DOCSYNC_RECOMPUTE_STARTUP, 1, 100, 100, started, std::chrono::system_clock::now(), true};
        board.publish(s);
    }
    // Finished, or covering no gap: nothing to inherit.
    {
        StatusBoard board(dir.path, "app", "docsync", quiet());
        CHECK_FALSE(board.inherited_gap());
        StatusSnapshot s;
        s.recompute = {DOCSYNC_RECOMPUTE_STARTUP, 1, 100, 10, started, {}, false};
        board.publish(s);
    }
    StatusBoard board(dir.path, "app", "docsync", quiet());
    CHECK_FALSE(board.inherited_gap());
}

TEST_CASE("a reader racing the writer never trusts a torn body") {
    TempDir dir;
    StatusBoard board(dir.path, "app", "docsync", quiet());
    std::atomic<bool> done{false};
    std::thread writer([&] {
        StatusSnapshot s;
        s.state = WorkerState::Streaming;
        s.queries.resize(DOCSYNC_STATUS_MAX_QUERIES);
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
        for (std::uint64_t i = 1; !done && std::chrono::steady_clock::now() < until; ++i) {
            // Every field carries i: a mix of two updates shows as unequal fields.
            s.received_lsn = s.acked_lsn = s.dirty_depth = s.live_docs = s.totals.changes = i;
            for (auto& q : s.queries) q.name = "q" + std::to_string(i), q.recomputes = i;
            board.publish(s);
        }
    });
    int ok = 0, retried = 0;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (std::chrono::steady_clock::now() < until && ok < 20000) {
        auto r = read_status_file(board.file_path(), 1);  // one attempt: see the in-progress states too
        if (r.check == DOCSYNC_STATUS_RETRY) {
            ++retried;
            continue;
        }
        REQUIRE(r.check == DOCSYNC_STATUS_OK);
        ++ok;
        const auto& b = r.file.body;
        auto i = b.received_lsn;
        bool consistent = b.acked_lsn == i && b.dirty_depth == i && b.live_docs == i && b.changes == i;
        for (const auto& q : b.queries)
            consistent = consistent && (i == 0 ? q.recomputes == 0 : q.recomputes == i && std::string(q.name) == "q" + std::to_string(i));
        REQUIRE(consistent);
    }
    done = true;
    writer.join();
    CHECK(ok > 100);
    MESSAGE("consistent reads: " << ok << ", reads that saw an update in progress: " << retried);
    // With retries the reader always gets a whole body.
    CHECK(read_status_file(board.file_path()).check == DOCSYNC_STATUS_OK);
}

TEST_CASE("a corrupted, foreign, short or alien file is reported and not trusted") {
    TempDir dir;
    fs::path file;
    {
        StatusBoard board(dir.path, "app", "docsync", quiet());
        file = board.file_path();
    }
    REQUIRE(read_status_file(file).check == DOCSYNC_STATUS_OK);

    SUBCASE("a flipped body byte fails the CRC") {
        unsigned char x = 0x5A;
        poke(file, offsetof(DocsyncStatusFile, body) + offsetof(DocsyncStatusBody, live_docs), &x, 1);
        auto r = read_status_file(file);
        CHECK(r.check == DOCSYNC_STATUS_BAD_CRC);
        CHECK(describe(r) == "status file body fails its CRC check");
    }
    SUBCASE("another layout version is reported with its number") {
        std::uint32_t v = DOCSYNC_STATUS_LAYOUT_VERSION + 1;
        poke(file, offsetof(DocsyncStatusFile, layout_version), &v, sizeof v);
        auto r = read_status_file(file);
        CHECK(r.check == DOCSYNC_STATUS_FOREIGN_VERSION);
        CHECK(r.layout_version == v);
        CHECK(describe(r) == "status file layout version " + std::to_string(v));
    }
    SUBCASE("a wrong magic is not a status file") {
        std::uint32_t m = 0x12345678;
        poke(file, 0, &m, sizeof m);
        CHECK(read_status_file(file).check == DOCSYNC_STATUS_BAD_MAGIC);
    }
    SUBCASE("a truncated file is short or the wrong size") {
        REQUIRE(::truncate(file.c_str(), 8) == 0);
        CHECK(read_status_file(file).check == DOCSYNC_STATUS_SHORT);
        REQUIRE(::truncate(file.c_str(), 1000) == 0);
        CHECK(read_status_file(file).check == DOCSYNC_STATUS_BAD_SIZE);
    }
    SUBCASE("a writer that died mid-update: trusted only when the body it left matches its CRC") {
        auto r0 = read_status_file(file);
        std::uint64_t odd = r0.file.seq + 1;
        poke(file, DOCSYNC_STATUS_SEQ_OFFSET, &odd, sizeof odd);
        auto r = read_status_file(file, 20);
        CHECK(r.check == DOCSYNC_STATUS_OK);
        CHECK(r.abandoned_update);
        CHECK(r.attempts == 20);
        unsigned char x = 0x5A;
        poke(file, offsetof(DocsyncStatusFile, body) + offsetof(DocsyncStatusBody, live_docs), &x, 1);
        CHECK(read_status_file(file, 20).check == DOCSYNC_STATUS_RETRY);
    }
    SUBCASE("a missing file is an open error") {
        auto r = read_status_file(dir.path / "nope.status");
        CHECK(r.error.find("cannot open") != std::string::npos);
    }
}

TEST_CASE("text fields are cut at a character boundary, invalid UTF-8 replaced") {
    char field[8];
    copy_field(field, sizeof field, "abcdefghij");
    CHECK(std::string(field) == "abcdefg");
    copy_field(field, sizeof field, "abcde\xC3\xA9xyz");  // é would straddle the end
    CHECK(std::string(field) == "abcde\xC3\xA9");
    copy_field(field, sizeof field, "abcdef\xC3\xA9");
    CHECK(std::string(field) == "abcdef");
    copy_field(field, sizeof field, std::string_view("a\xFF" "b\0c", 5));
    CHECK(std::string(field) == "a?b?c");
    CHECK(field[7] == '\0');
}

TEST_CASE("more queries than the layout holds are counted, not written past the end") {
    TempDir dir;
    StatusBoard board(dir.path, "app", "docsync", quiet());
    StatusSnapshot s;
    for (int i = 0; i < DOCSYNC_STATUS_MAX_QUERIES + 5; ++i) s.queries.push_back({"q" + std::to_string(i)});
    board.publish(s);
    auto r = read_status_file(board.file_path());
    REQUIRE(r.check == DOCSYNC_STATUS_OK);
    CHECK(r.file.body.query_count == DOCSYNC_STATUS_MAX_QUERIES);
    CHECK(r.file.body.queries_omitted == 5);
    CHECK(std::string(r.file.body.queries[DOCSYNC_STATUS_MAX_QUERIES - 1].name) == "q63");
}

TEST_CASE("the CRC is CRC-32C") {
    CHECK(docsync_status_crc32c("123456789", 9) == 0xE3069283u);
    CHECK(docsync_status_crc32c("", 0) == 0u);
}

TEST_CASE("a file left by another layout or garbage is replaced whole, never shown half-created") {
    TempDir dir;
    fs::path file = dir.path / status_file_name("app", "docsync");
    {
        std::ofstream junk(file, std::ios::binary);
        junk << "left over by something else";
    }
    {
        StatusBoard board(dir.path, "app", "docsync", quiet());
        auto r = read_status_file(file);
        REQUIRE(r.check == DOCSYNC_STATUS_OK);
        CHECK(r.file.body.state == DOCSYNC_STATE_STARTING);
        CHECK_FALSE(fs::exists(dir.path / (file.filename().string() + ".tmp")));
    }
    std::uint32_t v = 9;
    poke(file, offsetof(DocsyncStatusFile, layout_version), &v, sizeof v);
    REQUIRE(read_status_file(file).check == DOCSYNC_STATUS_FOREIGN_VERSION);
    StatusBoard board(dir.path, "app", "docsync", quiet());
    CHECK(read_status_file(file).check == DOCSYNC_STATUS_OK);
}
