#pragma once
// What a sink should hold, recorded in PostgreSQL outside the sink (docs/design.md, "sink checks"):
//   - docsync.sink_state: the highest doc version this slot's worker read back from the sink. At
//     start, a sink whose own highest version (Publisher::max_version) is below it lost docs while
//     no worker watched it (restored from an older snapshot, flushed, restarted without
//     persistence, a file truncated or replaced): check() says so.
//   - docsync.live_journal (UNLOGGED): with --live all, the channels the engine keeps current
//     (LiveJournal): named when a change first names a doc, before it is ever published; forgotten
//     when the engine drops the doc. The start and valve recomputes cover it and what the sink holds.
// Both go through the --dsn role (the pool may be a read-only standby), on a connection of its own.
//
// Threads: check() and load() run on the caller's thread before start(); named() and forgotten()
// from any thread (the engine's, under its mutex: they only queue); the writer thread (start() to
// stop()) owns the connection from then on.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/lsn.hpp"
#include "engine/seams.hpp"
#include "pg/connection.hpp"

namespace docsync {

struct SinkRecordOptions {
    // How often the sink's highest version is read and, when it moved, recorded.
    std::chrono::milliseconds confirm_interval{2000};
    // How long the writer gathers named channels before writing them (one statement per batch).
    std::chrono::milliseconds batch_delay{20};
    std::size_t max_batch = 5000;  // channels per statement
};

class SinkRecord final : public LiveJournal {
public:
    // `sink`: the sink as its display names it (the record's key with the slot). Connects at once
    // (throws docsync::Error naming --dsn when it cannot).
    SinkRecord(std::string dsn, std::string slot, std::string sink, SinkRecordOptions options = {});
    ~SinkRecord() override;  // stop()
    SinkRecord(const SinkRecord&) = delete;
    SinkRecord& operator=(const SinkRecord&) = delete;

    // Why the record cannot be kept (the extension lacks its functions, or the --dsn role may not
    // run them), with the fix; nullopt when it can. The caller warns and goes without.
    std::optional<std::string> unusable();
    // Compares the version the sink holds now with the recorded one: the reason the sink lost docs,
    // or nullopt (no record yet, or the sink holds at least as much).
    std::optional<std::string> check(DocVersion held);

    std::vector<std::string> load() override;
    void named(const std::string& channel) override;
    void forgotten(const std::string& channel) override;

    // Starts the writer: journal batches as they are queued, and every confirm_interval the sink's
    // highest version (`read_version`, which may throw while the sink is down) when it moved.
    void start(std::function<DocVersion()> read_version);
    // Writes what is queued (one try), then ends the writer. Idempotent.
    void stop();

private:
    void run();
    // One round: the queued channels, then the version when due. Throws docsync::Error.
    // One queued change of the journal: a channel named (true) or forgotten (false).
    using JournalOp = std::pair<bool, std::string>;
    void write_round(std::vector<JournalOp>& ops, bool confirm_due);
    void write_channels(const char* function, const std::vector<std::string>& channels);
    pg::Connection& connection();

    const std::string dsn_;
    const std::string slot_;
    const std::string sink_;
    const SinkRecordOptions options_;
    std::optional<pg::Connection> conn_;  // the caller's before start(), the writer's after
    std::function<DocVersion()> read_version_;
    std::optional<DocVersion> recorded_;  // the writer's: what sink_state holds

    std::mutex mutex_;
    std::condition_variable wake_;
    std::vector<JournalOp> queued_;  // for the writer, in order
    bool stopping_ = false;
    std::thread writer_;
};

// The SQL text[] literal of `values` ({"a","b\"c"}), for a text parameter cast to text[].
std::string text_array_literal(const std::vector<std::string>& values);

}  // namespace docsync
