// The JSONL sinks: whole-line writes, group-commit fsync, torn-tail repair and read-back.
#include "publish/jsonl_sink.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/log.hpp"
#include "envelope/envelope.hpp"
#include "patch/json_patch.hpp"

namespace docsync::publish {

namespace {

// Below this much free space the file sink refuses to start: it could not write a single large doc.
constexpr std::uint64_t kMinFreeBytes = 1u << 20;

std::string errno_text(int err) { return std::strerror(err); }

[[noreturn]] void open_failed(const std::string& path, int err) {
    std::string fix;
    switch (err) {
        case ENOENT: fix = "create the directory first, or choose a path in an existing one"; break;
        case EACCES:
        case EPERM:
        case EROFS: fix = "the path is read-only: choose a writable path or fix its permissions"; break;
        case ENOSPC:
        case EDQUOT: fix = "free space on that filesystem or choose another one"; break;
        case EISDIR: fix = "name a file, not a directory"; break;
        default: fix = "choose a writable file path"; break;
    }
    throw Error("cannot open the JSONL sink file " + path + " (--sink file:" + path + "): " + errno_text(err) +
                "; " + fix);
}

// One writer per file: another process appending behind this sink's back would make its idea of the
// file's size wrong, and cutting a partial line after a failed write would then cut their lines.
void lock_exclusively(int fd, const std::string& path) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return;
    int err = errno;
    if (err == EWOULDBLOCK)
        throw Error("the JSONL sink file " + path + " is already written by another docsync-worker (it holds the "
                    "file's lock): a file takes one writer; give each worker its own --sink file:PATH",
                    {}, true);  // for a spare that holds the lease, its holder lost it (worker/main.cpp)
    throw Error("cannot lock the JSONL sink file " + path + ": " + errno_text(err) +
                "; choose a path on a local filesystem");
}

// Opens (creating) the sink file for appending, and locks it when it is a regular file; `st` is what
// fstat says of it. Throws naming the path and the fix; nothing stays open then.
int open_locked(const std::string& path, struct stat& st) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) open_failed(path, errno);
    try {
        if (::fstat(fd, &st) != 0) open_failed(path, errno);
        if (S_ISREG(st.st_mode)) lock_exclusively(fd, path);
    } catch (...) {
        ::close(fd);
        throw;
    }
    return fd;
}

}  // namespace

JsonlSink::JsonlSink(int fd, bool owns_fd, bool durable, std::string name, std::shared_ptr<Patcher> patcher)
    : fd_(fd), owns_fd_(owns_fd), durable_(durable), name_(std::move(name)), patcher_(std::move(patcher)) {
}

JsonlSink::~JsonlSink() {
    if (owns_fd_) ::close(fd_);
}

std::unique_ptr<JsonlSink> JsonlSink::open_stdout(int fd, std::shared_ptr<Patcher> patcher) {
    return std::unique_ptr<JsonlSink>(new JsonlSink(fd, false, false, "stdout", std::move(patcher)));
}

std::unique_ptr<JsonlSink> JsonlSink::open_file(const std::string& path, std::shared_ptr<Patcher> patcher) {
    if (path.empty()) throw Error("--sink file: needs a path, as in --sink file:/var/lib/docsync/docs.jsonl");
    struct stat st {};
    int fd = open_locked(path, st);
    std::unique_ptr<JsonlSink> sink;
    try {
        sink.reset(new JsonlSink(fd, true, S_ISREG(st.st_mode), path, std::move(patcher)));
    } catch (...) {
        ::close(fd);
        throw;
    }
    sink->dev_ = st.st_dev;
    sink->ino_ = st.st_ino;
    if (sink->durable_) {
        struct statvfs vfs {};
        if (::fstatvfs(fd, &vfs) == 0) {
            std::uint64_t free_bytes = static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize;
            if (free_bytes < kMinFreeBytes)
                throw Error("the filesystem holding the JSONL sink file " + path + " is full (" +
                            std::to_string(free_bytes) + " bytes free, at least " + std::to_string(kMinFreeBytes) +
                            " needed): free space there or choose another path for --sink file:",
                            {}, true);  // space freed is the fix: a spare retries (transient)
        }
        sink->read_file();
    }
    return sink;
}

// Reads the whole file once: cuts an incomplete last line, then indexes every line's channel,
// place and version. A line that is not an envelope means the path holds something else: refuse it.
void JsonlSink::read_file() {
    std::string line;
    std::uint64_t offset = 0, line_start = 0, line_number = 0, broken = 0;
    char buf[1 << 16];
    for (;;) {
        ssize_t n = ::pread(fd_, buf, sizeof buf, static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR) continue;
            throw Error("cannot read the JSONL sink file " + name_ + ": " + errno_text(errno));
        }
        if (n == 0) break;
        for (ssize_t i = 0; i < n; ++i) {
            if (buf[i] != '\n') {
                line.push_back(buf[i]);
                continue;
            }
            ++line_number;
            if (!line.empty()) {
                auto head = parse_envelope(line);
                if (!head)
                    throw Error("the JSONL sink file " + name_ + " line " + std::to_string(line_number) +
                                " is not a docsync doc line; the file must hold only docsync output: move it "
                                "away or choose another path for --sink file:");
                max_generation_ = std::max(max_generation_, head->version.generation);
                max_version_ = std::max(max_version_, head->version);
                if (!head->is_patch()) {
                    index_line(head->channel, line_start, line.size(), head->version);
                } else if (auto it = lines_.find(head->channel);
                           it != lines_.end() && it->second.held && it->second.size != 0 &&
                           it->second.version == *head->base) {
                    index_line(head->channel, line_start, line.size(), head->version, head->base);
                } else {
                    // Its base is not the channel's line before it: the doc cannot be known from the
                    // file. The channel stays retained (live, recomputed at start and written whole).
                    index_line(head->channel, line_start, line.size(), head->version);
                    lines_[head->channel].held = false;
                    ++broken;
                }
            }
            line.clear();
            line_start = offset + static_cast<std::uint64_t>(i) + 1;
        }
        offset += static_cast<std::uint64_t>(n);
    }
    if (line_start < offset) {
        // A crash cut the last write short: drop the partial line, and make the cut durable before any
        // new line lands behind it.
        if (::ftruncate(fd_, static_cast<off_t>(line_start)) != 0 || ::fsync(fd_) != 0)
            throw Error("cannot cut the incomplete last line of the JSONL sink file " + name_ + ": " +
                        errno_text(errno) + "; make the file writable");
        repaired_bytes_ = offset - line_start;
        log_warning("publish", "cut an incomplete last line (" + std::to_string(repaired_bytes_) + " bytes) from " +
                                   name_ + ", left by an interrupted write");
    }
    size_ = line_start;
    if (broken)
        log_warning("publish", name_ + " holds " + std::to_string(broken) +
                                   " patch line(s) that do not follow their base: those channels are written whole again");
}

// Called with mutex_ held. Writes the whole line or, on failure, nothing.
void JsonlSink::write_line(const std::string& line) {
    if (torn_) {
        if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0)
            throw Error("the JSONL sink " + name_ + " holds a partial line that cannot be cut: " + errno_text(errno),
                        {}, true);
        torn_ = false;
    }
    std::size_t done = 0;
    while (done < line.size()) {
        ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int err = n < 0 ? errno : EIO;
            if (err == EPIPE) {
                // Nobody reads any more (stdout's reader exited): no retry can publish. The doc stays
                // unpublished and its transactions unacknowledged; fatal() tells the worker to stop.
                if (fatal_.empty())
                    fatal_ = "the reader of the JSONL sink " + name_ +
                             " went away (EPIPE): nothing more can be published, so the worker stops; the "
                             "unpublished transactions stay unacknowledged and are sent again at the next start";
                throw Error(fatal_, {}, true);
            }
            if (done > 0 && durable_) {
                // Cut the partial line back so the file stays whole lines; if that fails too, the
                // next publish retries the cut before writing.
                torn_ = ::ftruncate(fd_, static_cast<off_t>(size_)) != 0;
            }
            throw Error("cannot write to the JSONL sink " + name_ + ": " + errno_text(err), {}, true);
        }
        done += static_cast<std::size_t>(n);
    }
    size_ += line.size();
}

std::string JsonlSink::line_of(const std::string& channel, const std::optional<std::string>& doc, DocVersion version) {
    std::string line = make_envelope(channel, doc, version);
    line.push_back('\n');
    return line;
}

void JsonlSink::index_line(const std::string& channel, std::uint64_t offset, std::size_t size, DocVersion version,
                           std::optional<DocVersion> patch_base) {
    Line& at = lines_[channel];
    if (!patch_base) {
        at.whole_size = 0;
        at.held = true;
    } else if (at.whole_size == 0) {
        // The line before this patch was whole: it is the one a read back starts from.
        at.whole_offset = at.offset;
        at.whole_size = at.size;
    }
    at.offset = offset;
    at.size = size <= UINT32_MAX ? static_cast<std::uint32_t>(size) : 0;
    at.version = version;
}

std::uint64_t JsonlSink::append(const std::string& line, const std::string& channel, DocVersion version,
                                std::optional<DocVersion> patch_base) {
    std::uint64_t offset = size_;  // the only writer: O_APPEND writes where its whole lines end
    write_line(line);
    if (durable_) {
        index_line(channel, offset, line.size() - 1, version, patch_base);
        max_generation_ = std::max(max_generation_, version.generation);
        max_version_ = std::max(max_version_, version);
    }
    return ++written_seq_;
}

void JsonlSink::wait_durable(std::unique_lock<std::mutex>& lock, std::uint64_t first, std::uint64_t last) {
    if (!durable_) return;
    // Group commit: the first waiter with no fsync running syncs everything written so far; the
    // others wait for it and are covered by it or by the next one.
    for (;;) {
        // A failed fsync may have dropped every page it covered (Linux marks them clean), so its lines
        // fail even when a later fsync succeeds: their publishes are retried and written again.
        if (last >= failed_from_ && first <= failed_seq_)
            throw Error("cannot fsync the JSONL sink file " + name_ + ": " + sync_error_, {}, true);
        if (synced_seq_ >= last) return;
        if (syncing_) {
            synced_cv_.wait(lock);
            continue;
        }
        syncing_ = true;
        std::uint64_t target = written_seq_;
        lock.unlock();
        int rc = ::fdatasync(fd_);
        int err = errno;
        lock.lock();
        syncing_ = false;
        ++syncs_;
        if (rc == 0) {
            synced_seq_ = std::max(synced_seq_, target);
        } else {
            failed_from_ = synced_seq_ + 1;
            failed_seq_ = target;
            sync_error_ = errno_text(err);
        }
        synced_cv_.notify_all();
    }
}

std::string JsonlSink::claim_line(const std::string& channel, const PatchPlan& plan, bool& patch) {
    bool allowed = true;
    if (durable_) {
        // The file must hold the base as the channel's newest line, and its newest whole line near
        // enough for a read back.
        auto it = lines_.find(channel);
        allowed = it != lines_.end() && it->second.held && it->second.size != 0 && it->second.version == plan.base &&
                  size_ - (it->second.whole_size ? it->second.whole_offset : it->second.offset) < kMaxPatchSpan;
    }
    patch = patcher_->claim(channel, plan, allowed);
    std::string line = patch ? *plan.patch : plan.whole;
    line.push_back('\n');
    return line;
}

void JsonlSink::publish(const std::string& channel, const std::optional<std::string>& doc, DocVersion version) {
    auto out = publish_many({Publication{&channel, &doc, version}});
    if (out.front()) throw *out.front();
}

std::vector<std::optional<Error>> JsonlSink::publish_many(const std::vector<Publication>& docs) {
    std::vector<std::optional<Error>> out(docs.size());
    std::vector<std::string> lines(docs.size());
    std::vector<PatchPlan> plans(patcher_ ? docs.size() : 0);
    for (std::size_t i = 0; i < docs.size(); ++i) {
        try {
            if (patcher_)
                plans[i] = patcher_->plan(*docs[i].channel, *docs[i].doc, docs[i].version);  // the diff, unlocked
            else
                lines[i] = line_of(*docs[i].channel, *docs[i].doc, docs[i].version);
        } catch (const Error& e) {  // not valid JSON: refused for good
            out[i] = e;
        }
    }
    std::unique_lock lock(mutex_);
    std::uint64_t first = 0;
    std::uint64_t last = 0;
    for (std::size_t i = 0; i < docs.size(); ++i) {
        if (out[i]) continue;
        const std::string& channel = *docs[i].channel;
        bool patch = false;
        try {
            // In write order, under the lock: a patch line only right after its base's line.
            if (patcher_) lines[i] = claim_line(channel, plans[i], patch);
            last = append(lines[i], channel, docs[i].version, patch ? std::optional(plans[i].base) : std::nullopt);
            if (!first) first = last;
        } catch (const Error& e) {
            out[i] = e;
            if (patcher_) patcher_->failed(channel);  // what the output holds for it is unknown
        }
    }
    if (!first) return out;
    // One sync for them all.
    try {
        wait_durable(lock, first, last);
    } catch (const Error& e) {
        for (std::size_t i = 0; i < docs.size(); ++i) {
            if (out[i]) continue;
            out[i] = e;
            if (patcher_) patcher_->failed(*docs[i].channel);  // written again, whole
        }
    }
    return out;
}

std::vector<std::string> JsonlSink::retained_channels() {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    out.reserve(lines_.size());
    for (const auto& [channel, line] : lines_) out.push_back(channel);
    return out;
}

std::optional<RetainedDoc> JsonlSink::read_back(const std::string& channel) {
    if (!durable_) return std::nullopt;
    std::lock_guard lock(mutex_);
    auto it = lines_.find(channel);
    if (it == lines_.end() || !it->second.held) return std::nullopt;
    const Line& at = it->second;
    if (at.size == 0)
        throw Error("the place of " + channel + "'s newest line in " + name_ +
                        " is not known since the file was replaced or shrank",
                    {}, true);
    // Under the lock: lost_docs() may reopen the file, and a line being written is not read half.
    if (at.whole_size != 0) return rebuild(channel, at);
    std::string text = read_at(at.offset, at.size, channel + "'s newest line");
    auto doc = retained_doc(text, channel);
    if (!doc)
        throw Error("the line at byte " + std::to_string(at.offset) + " of the JSONL sink file " + name_ +
                        ", where " + channel + "'s newest doc was written, is no longer its envelope",
                    {}, true);
    return doc;
}

std::string JsonlSink::read_at(std::uint64_t offset, std::size_t count, const std::string& what) {
    std::string text(count, '\0');
    std::size_t done = 0;
    while (done < text.size()) {
        ssize_t n = ::pread(fd_, text.data() + done, text.size() - done, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            throw Error("cannot read " + what + " back from the JSONL sink file " + name_ + ": " +
                            (n < 0 ? errno_text(errno) : std::string("the file ends before it")),
                        {}, true);
        done += static_cast<std::size_t>(n);
    }
    return text;
}

std::optional<RetainedDoc> JsonlSink::rebuild(const std::string& channel, const Line& at) {
    auto broken = [&](const std::string& why) {
        return Error("cannot rebuild " + channel + "'s doc from the JSONL sink file " + name_ + ": " + why, {}, true);
    };
    auto whole = retained_doc(read_at(at.whole_offset, at.whole_size, channel + "'s newest whole line"), channel);
    if (!whole || !whole->doc) throw broken("its newest whole line is no longer its doc");
    std::string doc = std::move(*whole->doc);
    DocVersion version = whole->version;
    const std::uint64_t from = at.whole_offset + at.whole_size + 1;
    const std::string span = read_at(from, at.offset + at.size - from, channel + "'s patch lines");
    // The span's lines: other channels' and this one's patches, each from the version before.
    for (std::size_t start = 0; start < span.size();) {
        std::size_t end = span.find('\n', start);
        if (end == std::string::npos) end = span.size();
        std::string_view line(span.data() + start, end - start);
        start = end + 1;
        auto head = parse_envelope(line);
        if (!head) throw broken("a line after its whole line is no docsync line");
        if (head->channel != channel) continue;
        if (!head->is_patch() || *head->base != version) throw broken("its patch lines do not follow each other");
        try {
            doc = patch::apply(doc, patch::Patch{head->kind == EnvelopeKind::JsonPatch ? patch::Form::JsonPatch
                                                                                       : patch::Form::MergePatch,
                                                 std::string(line.substr(head->doc_at, head->doc_size))});
        } catch (const Error& e) {
            throw broken(e.what());
        }
        version = head->version;
    }
    if (version != at.version) throw broken("its newest line was not found after its whole line");
    return RetainedDoc{std::move(doc), version};
}

void JsonlSink::restore(const std::string& channel, const std::optional<std::string>& doc, DocVersion version) {
    std::string line = line_of(channel, doc, version);
    std::unique_lock lock(mutex_);
    if (auto it = lines_.find(channel); it != lines_.end() && it->second.version > version) return;
    if (patcher_) patcher_->failed(channel);  // a whole line the cache did not plan: no base after it
    std::uint64_t seq = append(line, channel, version);
    wait_durable(lock, seq, seq);
}

std::uint64_t JsonlSink::max_generation() {
    std::lock_guard lock(mutex_);
    return max_generation_;
}

DocVersion JsonlSink::max_version() {
    std::lock_guard lock(mutex_);
    return max_version_;
}

std::uint64_t JsonlSink::sync_count() const {
    std::lock_guard lock(mutex_);
    return syncs_;
}

std::optional<std::string> JsonlSink::lost_docs() {
    if (!owns_fd_ || !durable_) return std::nullopt;  // stdout, a pipe or a device: nothing to compare
    std::lock_guard lock(mutex_);
    struct stat by_name {};
    if (::stat(name_.c_str(), &by_name) != 0 || by_name.st_dev != dev_ || by_name.st_ino != ino_) {
        struct stat st {};
        int fd = open_locked(name_, st);
        std::uint64_t size = 0;
        try {
            size = cut_to_whole_lines(fd, static_cast<std::uint64_t>(st.st_size), "the file now at that path");
        } catch (...) {
            ::close(fd);
            throw;
        }
        ::close(fd_);
        fd_ = fd;
        dev_ = st.st_dev;
        ino_ = st.st_ino;
        size_ = size;
        torn_ = false;
        forget_lines();
        if (patcher_) patcher_->clear();  // the new file holds no base
        return "the JSONL sink file " + name_ + " was removed or replaced; writing to the file now at that path";
    }
    struct stat st {};
    if (::fstat(fd_, &st) == 0 && static_cast<std::uint64_t>(st.st_size) < size_) {
        std::string why = "the JSONL sink file " + name_ + " shrank from " + std::to_string(size_) + " to " +
                          std::to_string(st.st_size) + " bytes";
        // Cut first: should it fail, the next call finds the file still shrunk and tries again.
        size_ = cut_to_whole_lines(fd_, static_cast<std::uint64_t>(st.st_size), "the file shrank");
        torn_ = false;
        forget_lines();
        if (patcher_) patcher_->clear();
        return why;
    }
    return std::nullopt;
}

std::uint64_t JsonlSink::cut_to_whole_lines(int fd, std::uint64_t size, const char* when) {
    // The last newline, read backwards a block at a time.
    std::uint64_t end = size, keep = 0;
    char buf[1 << 16];
    while (end > 0 && keep == 0) {
        std::uint64_t from = end > sizeof buf ? end - sizeof buf : 0;
        std::size_t want = static_cast<std::size_t>(end - from), got = 0;
        while (got < want) {
            ssize_t n = ::pread(fd, buf + got, want - got, static_cast<off_t>(from + got));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0)
                throw Error("cannot read the JSONL sink file " + name_ + " to find its last whole line: " +
                                (n < 0 ? errno_text(errno) : std::string("it shrank again while read")),
                            {}, true);
            got += static_cast<std::size_t>(n);
        }
        for (std::size_t i = want; i-- > 0;)
            if (buf[i] == '\n') {
                keep = from + i + 1;
                break;
            }
        end = from;
    }
    if (keep == size) return size;
    // A line cut short (the file was truncated inside it): what is appended next would continue it, so
    // the partial line goes, durably, before any new line lands behind it.
    if (::ftruncate(fd, static_cast<off_t>(keep)) != 0 || ::fsync(fd) != 0)
        throw Error("cannot cut the incomplete last line of the JSONL sink file " + name_ + " (" + when +
                        "): " + errno_text(errno) + "; make the file writable",
                    {}, true);
    log_warning("publish", "cut an incomplete last line (" + std::to_string(size - keep) + " bytes) from " + name_ +
                               " (" + when + "), so that the next line written starts a line of its own");
    return keep;
}

void JsonlSink::forget_lines() {
    // The channels stay (they name docs to keep current); where their lines lie and what they held
    // is known again once each is written anew.
    for (auto& [channel, line] : lines_) line = Line{};
}

std::optional<std::string> JsonlSink::fatal() {
    std::lock_guard lock(mutex_);
    if (fatal_.empty()) return std::nullopt;
    return fatal_;
}

}  // namespace docsync::publish
