// The status file reader mirroring the extension's: pread, seq/body/seq, shared judgement.
#include "status/status_reader.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <system_error>

namespace docsync::status {

ReadResult read_status_file(const std::filesystem::path& path, int max_attempts) {
    ReadResult r;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        r.error = "cannot open " + path.string() + ": " + std::system_category().message(errno);
        return r;
    }
    DocsyncStatusCheck check = DOCSYNC_STATUS_SHORT;
    std::uint64_t first_seq = 0;
    bool seq_stuck_odd = true;
    for (int attempt = 1; attempt <= max_attempts; ++attempt) {
        r.attempts = attempt;
        std::uint64_t before = 0, after = 0;
        ssize_t n0 = ::pread(fd, &before, sizeof before, DOCSYNC_STATUS_SEQ_OFFSET);
        std::atomic_thread_fence(std::memory_order_acquire);
        ssize_t n = ::pread(fd, &r.file, sizeof r.file, 0);
        std::atomic_thread_fence(std::memory_order_acquire);
        ssize_t n1 = ::pread(fd, &after, sizeof after, DOCSYNC_STATUS_SEQ_OFFSET);
        if (n < 0 || n0 < 0 || n1 < 0) {
            r.error = "cannot read " + path.string() + ": " + std::system_category().message(errno);
            ::close(fd);
            return r;
        }
        if (n0 != static_cast<ssize_t>(sizeof before) || n1 != static_cast<ssize_t>(sizeof after)) before = after = 1;
        check = docsync_status_check(&r.file, static_cast<std::size_t>(n), before, after);
        r.layout_version = n >= 8 && r.file.magic == DOCSYNC_STATUS_MAGIC ? r.file.layout_version : 0;
        if (attempt == 1) first_seq = before;
        if (before != first_seq || after != first_seq || (before & 1u) == 0) seq_stuck_odd = false;
        if (check != DOCSYNC_STATUS_RETRY) break;
        if (attempt > 10) ::usleep(100);
    }
    ::close(fd);
    if (check == DOCSYNC_STATUS_RETRY && seq_stuck_odd && docsync_status_abandoned_update_ok(&r.file)) {
        check = DOCSYNC_STATUS_OK;
        r.abandoned_update = true;
    }
    r.check = check;
    return r;
}

std::string describe(const ReadResult& r) {
    if (!r.error.empty()) return r.error;
    switch (r.check) {
        case DOCSYNC_STATUS_OK: return "ok";
        case DOCSYNC_STATUS_RETRY: return "status file changing on every read (or writer stopped mid-update)";
        case DOCSYNC_STATUS_SHORT: return "status file too short";
        case DOCSYNC_STATUS_BAD_MAGIC: return "not a docsync status file";
        case DOCSYNC_STATUS_FOREIGN_VERSION: return "status file layout version " + std::to_string(r.layout_version);
        case DOCSYNC_STATUS_BAD_SIZE: return "status file has the wrong size";
        case DOCSYNC_STATUS_BAD_CRC: return "status file body fails its CRC check";
    }
    return "unknown";
}

}  // namespace docsync::status
