// The status board: the status file written through a Boost.Interprocess mapping under a seqlock,
// and the slot's flock()ed lock file.
#include "status/status_board.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include <boost/interprocess/file_mapping.hpp>
#include <boost/interprocess/mapped_region.hpp>

#include "common/error.hpp"
#include "common/log.hpp"
#include "status/status_reader.hpp"

namespace docsync::status {

namespace {

namespace bip = boost::interprocess;

std::int64_t to_us(WallTime t) {
    if (t == WallTime{}) return 0;
    return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

std::string escape_database(std::string_view database) {
    static const char hex[] = "0123456789ABCDEF";
    std::string out;
    for (std::size_t i = 0; i < database.size(); ++i) {
        auto c = static_cast<unsigned char>(database[i]);
        if (c == '/' || c == '%' || c < 0x20 || c == 0x7F || (i == 0 && c == '.')) {
            out.push_back('%');
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        } else {
            out.push_back(static_cast<char>(c));
        }
    }
    return out;
}

std::string errno_text(int err) { return std::system_category().message(err); }

// Length of the valid UTF-8 sequence starting at s[i], 0 when invalid.
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
    auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    unsigned char c = b(i);
    std::size_t n;
    std::uint32_t cp;
    if (c < 0x80) return c == 0 ? 0 : 1;
    if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07;
    else return 0;
    if (i + n > s.size()) return 0;
    for (std::size_t k = 1; k < n; ++k) {
        if ((b(i + k) & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (b(i + k) & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

}  // namespace

std::string_view state_name(WorkerState state) {
    const char* name = docsync_status_state_name(static_cast<std::uint32_t>(state));
    return name ? name : "unknown";
}

std::string status_file_name(std::string_view database, std::string_view slot) {
    return escape_database(database) + "." + std::string(slot) + ".status";
}

std::string lock_file_name(std::string_view database, std::string_view slot) {
    return escape_database(database) + "." + std::string(slot) + ".lock";
}

void copy_field(char* field, std::size_t field_size, std::string_view text) {
    std::memset(field, 0, field_size);
    if (field_size == 0) return;
    std::size_t out = 0, i = 0;
    while (i < text.size()) {
        std::size_t n = utf8_sequence(text, i);
        std::size_t take = n == 0 ? 1 : n;
        if (out + (n == 0 ? 1 : n) > field_size - 1) break;  // never cut a character
        if (n == 0) field[out++] = '?';
        else std::memcpy(field + out, text.data() + i, n), out += n;
        i += take;
    }
}

namespace {

std::string format_seconds(double seconds) {
    char buf[64];
    if (seconds < 10) {
        std::snprintf(buf, sizeof buf, "%.1f s", seconds);
    } else if (seconds < 120) {
        std::snprintf(buf, sizeof buf, "%.0f s", seconds);
    } else if (seconds < 7200) {
        std::snprintf(buf, sizeof buf, "%.0f min", seconds / 60);
    } else {
        std::snprintf(buf, sizeof buf, "%.1f h", seconds / 3600);
    }
    return buf;
}

}  // namespace

std::string describe_recompute(const RecomputeStatus& r, WallTime now) {
    const char* reason = docsync_status_recompute_name(r.reason);
    std::string what = r.reason == DOCSYNC_RECOMPUTE_VALVE ? "WAL safety valve recompute"
                                                           : std::string(reason ? reason : "unknown") + " recompute";
    bool finished = r.finished_at != WallTime{};
    double elapsed = std::max(0.0, std::chrono::duration<double>((finished ? r.finished_at : now) - r.started_at).count());
    double rate = elapsed > 0 ? static_cast<double>(r.done) / elapsed : 0;
    char rate_text[64];
    std::snprintf(rate_text, sizeof rate_text, "%.0f docs/s", rate);
    if (finished)
        return what + " done: " + std::to_string(r.total) + " live docs in " + format_seconds(elapsed) +
               (r.total > 0 ? " (" + std::string(rate_text) + ")" : "");
    std::uint64_t percent = r.total ? r.done * 100 / r.total : 0;
    std::string line = what + ": " + std::to_string(r.done) + " of " + std::to_string(r.total) + " live docs (" +
                       std::to_string(percent) + "%), " + rate_text + ", ";
    if (r.done == 0 || rate <= 0) return line + "time left unknown";
    return line + "about " + format_seconds(static_cast<double>(r.total - r.done) / rate) + " left";
}

void fill_body(DocsyncStatusBody& body, const StatusSnapshot& s, std::string_view database, std::string_view slot,
               std::int32_t pid, WallTime started_at, WallTime heartbeat_at) {
    std::memset(&body, 0, sizeof body);
    body.heartbeat_us = to_us(heartbeat_at);
    body.started_us = to_us(started_at);
    body.pid = pid;
    body.state = static_cast<std::uint32_t>(s.state);
    copy_field(body.database, sizeof body.database, database);
    copy_field(body.slot, sizeof body.slot, slot);
    body.generation = s.generation;
    body.received_lsn = s.received_lsn;
    body.acked_lsn = s.acked_lsn;
    body.acked_us = to_us(s.acked_at);
    body.open_txns = s.open_txns;
    body.dirty_depth = s.dirty_depth;
    body.in_flight = s.in_flight;
    body.live_docs = s.live_docs;
    body.changes = s.totals.changes;
    body.recomputes = s.totals.recomputes;
    body.publishes = s.totals.publishes;
    body.permanent_failures = s.totals.permanent_failures;
    body.transient_retries = s.totals.transient_retries;
    body.valve_resets = s.totals.valve_resets;
    body.not_visible_retries = s.totals.not_visible_retries;
    body.audit_samples = s.totals.audit_samples;
    body.audit_divergences = s.totals.audit_divergences;
    body.recompute_reason = s.recompute.reason;
    body.recompute_flags = (s.recompute.gap ? DOCSYNC_STATUS_RECOMPUTE_GAP : 0) |
                           (s.sink_unchecked ? DOCSYNC_STATUS_SINK_UNCHECKED : 0);
    body.recompute_total = s.recompute.total;
    body.recompute_done = s.recompute.done;
    body.recompute_started_us = to_us(s.recompute.started_at);
    body.recompute_finished_us = to_us(s.recompute.finished_at);
    body.last_error_us = s.last_error.empty() ? 0 : to_us(s.last_error_at);
    copy_field(body.last_error, sizeof body.last_error, s.last_error);
    std::size_t kept = std::min<std::size_t>(s.queries.size(), DOCSYNC_STATUS_MAX_QUERIES);
    body.query_count = static_cast<std::uint32_t>(kept);
    body.queries_omitted = static_cast<std::uint32_t>(s.queries.size() - kept);
    for (std::size_t i = 0; i < kept; ++i) {
        const auto& q = s.queries[i];
        auto& out = body.queries[i];
        copy_field(out.name, sizeof out.name, q.name);
        out.recomputes = q.recomputes;
        out.permanent_failures = q.permanent_failures;
        out.compute_us_total = q.compute_us_total;
        out.last_error_us = q.last_error.empty() ? 0 : to_us(q.last_error_at);
        copy_field(out.last_error, sizeof out.last_error, q.last_error);
        copy_field(out.batch_set_aside, sizeof out.batch_set_aside, q.batch_set_aside);
    }
}

// ---- SlotLock

namespace {

// This kernel's boot id (a UUID), shared by every container on the host; empty when unknown.
// What a lock file says of its owner: the pid's line (empty unless all digits) and the boot id's.
struct LockOwner {
    std::string pid;
    std::string boot_id;
};
LockOwner read_lock_owner(int fd) {
    char buf[128] = {};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    std::string text(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
    auto eol = text.find('\n');
    LockOwner owner;
    owner.pid = text.substr(0, eol);
    if (owner.pid.empty() || owner.pid.size() > 9 || owner.pid.find_first_not_of("0123456789") != std::string::npos)
        owner.pid.clear();
    if (eol != std::string::npos) owner.boot_id = text.substr(eol + 1, text.find('\n', eol + 1) - eol - 1);
    return owner;
}

std::string boot_id() {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string id;
    std::getline(in, id);
    return id;
}

}  // namespace

SlotLock::SlotLock(const std::filesystem::path& dir, std::string_view database, std::string_view slot)
    : path_(dir / lock_file_name(database, slot)) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
        int err = errno;
        throw Error("cannot open the lock file " + path_.string() + ": " + errno_text(err) +
                    "; check that --status-dir names a directory this user may write");
    }
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        std::string owner;
        if (err == EWOULDBLOCK) {
            // The owner writes its pid right after taking the lock: give it a moment.
            for (int i = 0; i < 50 && owner.empty(); ++i) {
                owner = read_lock_owner(fd_).pid;
                if (owner.empty()) ::usleep(10000);
            }
        }
        ::close(fd_);
        fd_ = -1;
        if (err == EWOULDBLOCK)
            throw Error("slot \"" + std::string(slot) + "\" of database \"" + std::string(database) +
                        "\" is already served by another docsync-worker (pid " + (owner.empty() ? "unknown" : owner) +
                        ", holding " + path_.string() + "); stop that worker first, or give this one another --slot");
        throw Error("cannot lock " + path_.string() + ": " + errno_text(err));
    }
    // The pid, for the messages that name the owner, and the kernel's boot id, which tells the server
    // whether it shares this kernel, so whether it can see this lock (docsync.status_files()).
    std::string pid = std::to_string(::getpid()) + "\n" + boot_id() + "\n";
    if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
        int err = errno;
        ::close(fd_);
        fd_ = -1;
        throw Error("cannot write the lock file " + path_.string() + ": " + errno_text(err));
    }
}

std::optional<int> local_lock_owner(const std::filesystem::path& dir, std::string_view database,
                                    std::string_view slot) {
    std::filesystem::path path = dir / lock_file_name(database, slot);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return std::nullopt;
    std::optional<int> owner;
    if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {
        ::flock(fd, LOCK_UN);  // free: nobody holds it
    } else if (errno == EWOULDBLOCK) {
        LockOwner held = read_lock_owner(fd);
        if (!held.pid.empty() && held.boot_id == boot_id()) owner = std::stoi(held.pid);
    }
    ::close(fd);
    return owner;
}

bool kill_lock_owner(const std::filesystem::path& dir, std::string_view database, std::string_view slot, int pid) {
    if (local_lock_owner(dir, database, slot) != pid) return false;
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    return std::getline(comm, name) && name == "docsync-worker" && ::kill(pid, SIGKILL) == 0;
}

SlotLock::~SlotLock() {
    if (fd_ >= 0) ::close(fd_);  // closing the only descriptor releases the flock
}

// ---- StatusBoard

struct StatusBoard::Mapping {
    bip::file_mapping file;
    bip::mapped_region region;
    DocsyncStatusFile* data() { return static_cast<DocsyncStatusFile*>(region.get_address()); }
};

namespace {

// Makes sure the status file exists with this layout; returns the seq to continue from (even), so
// readers never see the counter go backwards across worker restarts. A missing or unusable file is
// replaced by a complete initial image (`initial`) written aside and renamed into place, so a reader
// never sees a half-created file.
std::uint64_t prepare_file(const std::filesystem::path& path, const DocsyncStatusFile& initial) {
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        DocsyncStatusFile header{};
        struct stat st{};
        constexpr auto header_len = static_cast<ssize_t>(DOCSYNC_STATUS_SEQ_OFFSET + sizeof header.seq);
        bool reuse = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                     st.st_size == static_cast<off_t>(sizeof(DocsyncStatusFile)) &&
                     ::pread(fd, &header, header_len, 0) == header_len && header.magic == DOCSYNC_STATUS_MAGIC &&
                     header.layout_version == DOCSYNC_STATUS_LAYOUT_VERSION && header.file_size == sizeof(DocsyncStatusFile);
        if (reuse) ::fchmod(fd, 0644);
        ::close(fd);
        if (reuse) return (header.seq + 1) & ~std::uint64_t{1};
    }
    std::filesystem::path tmp = path;
    tmp += ".tmp";
    fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        int err = errno;
        throw Error("cannot create the status file " + tmp.string() + ": " + errno_text(err) +
                    "; check that --status-dir names a directory this user may write");
    }
    bool ok = ::fchmod(fd, 0644) == 0 &&
              ::pwrite(fd, &initial, sizeof initial, 0) == static_cast<ssize_t>(sizeof initial);
    int err = errno;
    ::close(fd);
    if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) ok = false, err = errno;
    if (!ok) {
        ::unlink(tmp.c_str());
        throw Error("cannot write the status file " + path.string() + ": " + errno_text(err));
    }
    return initial.seq;
}

// The recompute of every live doc a status file left unfinished while it covered a gap in the
// stream (its worker stopped or died mid-way): the next worker's recompute must close that gap, and
// the file must go on showing it meanwhile. nullopt for any other file, or none.
std::optional<RecomputeStatus> unfinished_gap(const std::filesystem::path& path) {
    ReadResult read = read_status_file(path);
    if (read.check != DOCSYNC_STATUS_OK) return std::nullopt;
    const DocsyncStatusBody& b = read.file.body;
    if (b.recompute_reason == DOCSYNC_RECOMPUTE_NONE || (b.recompute_flags & DOCSYNC_STATUS_RECOMPUTE_GAP) == 0 ||
        b.recompute_finished_us != 0)
        return std::nullopt;
    RecomputeStatus r;
    r.reason = b.recompute_reason;
    r.total = b.recompute_total;
    r.done = b.recompute_done;
    r.started_at = WallTime{} + std::chrono::microseconds(b.recompute_started_us);
    r.gap = true;
    return r;
}

}  // namespace

StatusBoard::StatusBoard(const std::filesystem::path& dir, std::string database, std::string slot, BoardOptions options)
    : database_(std::move(database)), slot_(std::move(slot)), options_(options), pid_(static_cast<std::int32_t>(::getpid())),
      started_at_(std::chrono::system_clock::now()), last_summary_(std::chrono::steady_clock::now()) {
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec)) {
        std::filesystem::create_directories(dir, ec);
        if (ec)
            throw Error("cannot create the status directory " + dir.string() + ": " + ec.message() +
                        "; create it, or point --status-dir somewhere this user may write");
        std::filesystem::permissions(dir, std::filesystem::perms(0755), ec);
    } else if (!std::filesystem::is_directory(dir, ec)) {
        throw Error("--status-dir " + dir.string() + " is not a directory");
    }
    lock_ = std::make_unique<SlotLock>(dir, database_, slot_);
    file_path_ = dir / status_file_name(database_, slot_);
    created_ = !std::filesystem::exists(file_path_, ec);
    if (auto gap = unfinished_gap(file_path_)) {
        last_.recompute = *gap;
        inherited_gap_ = true;
    }
    // A starting worker has not checked its sink yet: waits hold until its first publish says so.
    last_.sink_unchecked = true;
    auto initial = std::make_unique<DocsyncStatusFile>();
    std::memset(initial.get(), 0, sizeof *initial);
    initial->magic = DOCSYNC_STATUS_MAGIC;
    initial->layout_version = DOCSYNC_STATUS_LAYOUT_VERSION;
    initial->file_size = sizeof(DocsyncStatusFile);
    fill_body(initial->body, last_, database_, slot_, pid_, started_at_, std::chrono::system_clock::now());
    initial->body_crc = docsync_status_crc32c(&initial->body, sizeof initial->body);
    std::uint64_t seq = prepare_file(file_path_, *initial);
    try {
        mapping_ = std::make_unique<Mapping>();
        mapping_->file = bip::file_mapping(file_path_.c_str(), bip::read_write);
        mapping_->region = bip::mapped_region(mapping_->file, bip::read_write, 0, sizeof(DocsyncStatusFile));
    } catch (const bip::interprocess_exception& e) {
        throw Error("cannot map the status file " + file_path_.string() + ": " + e.what());
    }
    auto* f = mapping_->data();
    std::atomic_ref<std::uint64_t>(f->seq).store(seq | 1u, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    f->magic = DOCSYNC_STATUS_MAGIC;
    f->layout_version = DOCSYNC_STATUS_LAYOUT_VERSION;
    f->file_size = sizeof(DocsyncStatusFile);
    std::atomic_thread_fence(std::memory_order_release);
    std::atomic_ref<std::uint64_t>(f->seq).store(seq + 2, std::memory_order_release);
    std::lock_guard lock(mutex_);
    write_locked(last_);
    log_locked(last_);
}

StatusBoard::~StatusBoard() {
    try {
        std::lock_guard lock(mutex_);
        if (withdrawn_) {
            mapping_.reset();
            std::error_code ec;
            std::filesystem::remove(file_path_, ec);  // silently: the error that ended the start is the last line
            return;
        }
        StatusSnapshot final = last_;
        final.state = WorkerState::Stopped;
        write_locked(final);
        log_locked(final);
    } catch (...) {
        // Nothing escapes a destructor; the file keeps its last values and its heartbeat goes stale.
    }
}

void StatusBoard::publish(const StatusSnapshot& snapshot) {
    std::lock_guard lock(mutex_);
    write_locked(snapshot);
    log_locked(snapshot);
    last_ = snapshot;
}

void StatusBoard::set_sink_unchecked(bool unchecked) {
    std::lock_guard lock(mutex_);
    last_.sink_unchecked = unchecked;
    write_locked(last_);
}

void StatusBoard::heartbeat() {
    std::lock_guard lock(mutex_);
    write_locked(last_);
}

std::uint64_t StatusBoard::sequence() const {
    return std::atomic_ref<std::uint64_t>(mapping_->data()->seq).load(std::memory_order_acquire);
}

void StatusBoard::write_locked(const StatusSnapshot& snapshot) {
    // Build the body aside so the odd window is one memcpy long.
    DocsyncStatusBody body;
    fill_body(body, snapshot, database_, slot_, pid_, started_at_, std::chrono::system_clock::now());
    std::uint32_t crc = docsync_status_crc32c(&body, sizeof body);
    auto* f = mapping_->data();
    std::atomic_ref<std::uint64_t> seq(f->seq);
    std::uint64_t s = seq.load(std::memory_order_relaxed);
    seq.store(s + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    std::memcpy(&f->body, &body, sizeof body);
    f->body_crc = crc;
    std::atomic_thread_fence(std::memory_order_release);
    seq.store(s + 2, std::memory_order_release);
}

void StatusBoard::log_locked(const StatusSnapshot& s) {
    if (!options_.log) return;
    if (!logged_any_ || s.state != logged_state_) {
        log_info("status", "state " + std::string(state_name(s.state)) + " (slot " + slot_ + ", database " + database_ +
                               ", status file " + file_path_.string() + ")");
        logged_any_ = true;
        logged_state_ = s.state;
    }
    auto now = std::chrono::steady_clock::now();
    const RecomputeStatus& r = s.recompute;
    if (r.reason != DOCSYNC_RECOMPUTE_NONE && r.started_at != WallTime{}) {
        bool finished = r.finished_at != WallTime{};
        bool fresh = r.id != logged_recompute_;
        if (fresh) {
            logged_recompute_ = r.id;
            logged_recompute_done_ = false;
            last_recompute_line_ = now;
            if (!finished) log_info("status", describe_recompute(r, std::chrono::system_clock::now()));
        }
        if (finished && !logged_recompute_done_) {
            logged_recompute_done_ = true;
            log_info("status", describe_recompute(r, std::chrono::system_clock::now()));
        } else if (!finished && !fresh && options_.recompute_interval.count() > 0 &&
                   now - last_recompute_line_ >= options_.recompute_interval) {
            last_recompute_line_ = now;
            log_info("status", describe_recompute(r, std::chrono::system_clock::now()));
        }
    }
    if (options_.summary_interval.count() > 0 && now - last_summary_ >= options_.summary_interval) {
        last_summary_ = now;
        const Totals& t = s.totals;
        log_info("status", std::string(state_name(s.state)) + ": received " + format_lsn(s.received_lsn) + ", acked " +
                               format_lsn(s.acked_lsn) + ", open txns " + std::to_string(s.open_txns) + ", dirty " +
                               std::to_string(s.dirty_depth) + ", in flight " + std::to_string(s.in_flight) +
                               ", live docs " + std::to_string(s.live_docs) + ", changes " + std::to_string(t.changes) +
                               ", recomputes " + std::to_string(t.recomputes) + ", publishes " +
                               std::to_string(t.publishes) + ", permanent failures " +
                               std::to_string(t.permanent_failures) + ", transient retries " +
                               std::to_string(t.transient_retries) + ", audit samples " +
                               std::to_string(t.audit_samples) + ", audit divergences " +
                               std::to_string(t.audit_divergences));
    }
}

}  // namespace docsync::status
