#pragma once
// The JSONL sinks: `--sink stdout` and `--sink file:PATH`. One envelope (envelope/envelope.hpp) per
// line, written whole with one write(2) under a lock, so lines from concurrent publishers never
// interleave.
//
// File sink durability: a publish returns only after its line is fsync'd. Publishers that arrive
// while an fsync runs queue behind it and the next fsync covers all of them (group commit: one
// fsync per group, not per doc). At open the sink cuts an incomplete last line (a crash mid-write
// leaves at most one, at the end), then reads every line back: the channels it holds and the highest
// generation are `retained_channels()` and `max_generation()`. A write that fails part way is cut
// back, so the file never holds a torn line while the worker runs either.
//
// The file sink keeps, per channel, where its newest line lies (offset and length) and that line's
// version, from the read at open and from every append since: `read_back()` reads that one line
// with pread(2), and `restore()` appends a doc only when no newer version of its channel is in the
// file. About 32 bytes per channel beside its name.
//
// The stdout sink writes each line with write(2) (no user-space buffer) and holds nothing:
// `retained_channels()` is empty, `max_generation()` is 0 and nothing can be read back.
//
// With a patcher (--patches on, docs/patches.md) both write a patch line (the same envelope as a
// Redis message) when the channel's previous line in this output holds the patch's base: the
// patcher's claim() decides under the write lock, in write order. The file sink also keeps where the
// channel's newest whole line lies: read_back() applies the patch lines after it, and a channel's
// line is written whole again once its newest whole line lies kMaxPatchSpan bytes back, so a read
// back never reads more than that. At open, a patch line whose base is not the channel's line just
// before it (a hand-edited file, lines of two outputs mixed) leaves the channel not held: it is
// still retained (kept live and recomputed at start, which writes it whole) but read_back() returns
// nothing for it until then.
//
// Thread-safety: every member may be called from any thread, concurrently. A program that uses
// them ignores SIGPIPE in its main() (a closed reader must be an error, not the end of the worker).

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "engine/seams.hpp"
#include "publish/patcher.hpp"

namespace docsync::publish {

class JsonlSink final : public Publisher {
public:
    // The stdout sink (or any already open descriptor that the sink does not own, for tests).
    static std::unique_ptr<JsonlSink> open_stdout(int fd = 1, std::shared_ptr<Patcher> patcher = nullptr);
    // The file sink: creates the file when missing, repairs a torn tail and reads it back. Throws
    // docsync::Error naming the path, the cause and the fix when the path cannot be written (missing
    // directory, read-only file or filesystem, no space left) or holds lines that are not docsync
    // envelopes.
    static std::unique_ptr<JsonlSink> open_file(const std::string& path, std::shared_ptr<Patcher> patcher = nullptr);

    // A channel's newest whole line lies at most this far back from the end of the file when a patch
    // line is written after it.
    static constexpr std::uint64_t kMaxPatchSpan = 4u << 20;

    ~JsonlSink() override;
    JsonlSink(const JsonlSink&) = delete;
    JsonlSink& operator=(const JsonlSink&) = delete;

    void publish(const std::string& channel, const std::optional<std::string>& doc, DocVersion version) override;
    // Writes every line, then waits for one fsync covering them all.
    std::vector<std::optional<Error>> publish_many(const std::vector<Publication>& docs) override;
    std::vector<std::string> retained_channels() override;
    std::uint64_t max_generation() override;
    // The highest version of any line the file holds (read at open, raised by every durable line).
    DocVersion max_version() override;
    // The file sink: the file was removed or replaced (it is reopened) or shrank below what this sink
    // wrote. The stdout sink never knows.
    std::optional<std::string> lost_docs() override;
    // Set once a write failed with EPIPE: the reader went away.
    std::optional<std::string> fatal() override;
    // The file sink (on a regular file) only.
    bool retains() const override { return durable_; }
    // The channel's newest line. Throws docsync::Error when it cannot be read, or when its place is
    // unknown because the file was replaced or shrank under the sink (every live doc is then
    // recomputed and written again).
    std::optional<RetainedDoc> read_back(const std::string& channel) override;
    void restore(const std::string& channel, const std::optional<std::string>& doc, DocVersion version) override;

    // The number of fsyncs so far (group commit makes it far smaller than the number of docs).
    std::uint64_t sync_count() const;
    // Bytes cut from the end of the file at open (an incomplete last line), 0 when none.
    std::uint64_t repaired_bytes() const { return repaired_bytes_; }

private:
    // Where a channel's newest line lies in the file, and its version. size 0: not known (the file
    // was replaced or shrank since that line was written).
    struct Line {
        std::uint64_t offset = 0;
        std::uint32_t size = 0;  // without the newline
        // The newest whole line's size (0: the newest line is whole) and offset: a patch line's doc is
        // that line's with the channel's patch lines after it applied.
        std::uint32_t whole_size = 0;
        std::uint64_t whole_offset = 0;
        DocVersion version;
        bool held = true;  // false: a patch line at open did not follow its base (not held)
    };

    JsonlSink(int fd, bool owns_fd, bool durable, std::string name, std::shared_ptr<Patcher> patcher);
    // Reads the whole file once at open: repairs a torn tail and indexes every line.
    void read_file();
    // Under mutex_: records a channel's newest line (the file sink only); `patch_base`: a patch line,
    // from that version.
    void index_line(const std::string& channel, std::uint64_t offset, std::size_t size, DocVersion version,
                    std::optional<DocVersion> patch_base = std::nullopt);
    // Under mutex_: `count` bytes of the file at `offset`; throws (transient) naming `what`.
    std::string read_at(std::uint64_t offset, std::size_t count, const std::string& what);
    // Under mutex_: a channel's doc whose newest line is a patch: its whole line with the patch lines
    // after it applied.
    std::optional<RetainedDoc> rebuild(const std::string& channel, const Line& at);
    // The line to write for a planned doc (the patch when the patcher claims it), under mutex_.
    std::string claim_line(const std::string& channel, const PatchPlan& plan, bool& patch);
    // Under mutex_: the file was replaced or shrank, so no indexed place holds any more.
    void forget_lines();
    // Under mutex_: cuts the file open as `fd`, `size` bytes long, back to its last newline (a line
    // cut short would otherwise be continued by the next write); returns its new size. Logs a cut,
    // naming `when`; throws (transient) when it cannot read or cut.
    std::uint64_t cut_to_whole_lines(int fd, std::uint64_t size, const char* when);
    void write_line(const std::string& line);
    // A doc's line: its envelope and a newline.
    static std::string line_of(const std::string& channel, const std::optional<std::string>& doc, DocVersion version);
    // Under mutex_: writes a doc's line and returns its sequence number.
    std::uint64_t append(const std::string& line, const std::string& channel, DocVersion version,
                         std::optional<DocVersion> patch_base = std::nullopt);
    // Under mutex_ (held in `lock`): returns once lines first … last are covered by an fsync (at
    // once for stdout); throws when an fsync that covered any of them failed.
    void wait_durable(std::unique_lock<std::mutex>& lock, std::uint64_t first, std::uint64_t last);

    int fd_;
    const bool owns_fd_;
    const bool durable_;      // a regular file: fsync before a publish counts
    const std::string name_;  // "stdout" or the path, for messages
    const std::shared_ptr<Patcher> patcher_;  // --patches on, else null
    std::uint64_t repaired_bytes_ = 0;

    mutable std::mutex mutex_;
    std::condition_variable synced_cv_;
    std::uint64_t size_ = 0;            // bytes of whole lines in the file
    bool torn_ = false;                 // a failed write could not be cut back yet
    std::uint64_t written_seq_ = 0;     // lines written
    std::uint64_t synced_seq_ = 0;      // lines covered by a successful fsync
    std::uint64_t failed_from_ = 1;     // lines failed_from_ … failed_seq_ were covered by a failed
    std::uint64_t failed_seq_ = 0;      // fsync: their publishes fail
    std::string sync_error_;            // the last fsync failure
    std::string fatal_;                 // why nothing can be published any more (EPIPE)
    bool syncing_ = false;              // an fsync is running (outside the lock)
    std::uint64_t syncs_ = 0;
    std::unordered_map<std::string, Line> lines_;  // per channel (the file sink only)
    std::uint64_t max_generation_ = 0;
    DocVersion max_version_;
    dev_t dev_ = 0;  // the file's identity at open (file sink), to notice a replaced file
    ino_t ino_ = 0;
};

}  // namespace docsync::publish
