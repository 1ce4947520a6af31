// The CopyBoth phase of a replication connection (see copy_both.hpp).
#include "pg/copy_both.hpp"

#include <poll.h>

#include <cerrno>
#include <cstring>

#include "common/sqlstate.hpp"

namespace docsync::pg {

std::optional<std::string_view> CopyBoth::read() {
    PGconn* raw = conn_.raw();
    message_.reset();
    char* buf = nullptr;
    int n = PQgetCopyData(raw, &buf, 1);  // async: never blocks
    if (n == 0) return std::nullopt;
    if (n == -1) {  // the server ended the copy: its final result says why
        Result end(PQgetResult(raw));
        if (end.status() == PGRES_FATAL_ERROR) throw error_from(raw, end.raw(), "replication stream ended");
        throw Error("the server ended the replication stream", sqlstate::kConnectionFailure, true);
    }
    if (n < 0) throw error_from(raw, nullptr, "replication stream");
    message_.reset(buf);
    return std::string_view(buf, static_cast<std::size_t>(n));
}

void CopyBoth::send(std::string_view message, std::string_view context) {
    PGconn* raw = conn_.raw();
    if (PQputCopyData(raw, message.data(), static_cast<int>(message.size())) != 1)
        throw error_from(raw, nullptr, context);
    if (PQflush(raw) < 0) throw error_from(raw, nullptr, context);
}

bool CopyBoth::flush() {
    int rc = PQflush(conn_.raw());
    if (rc < 0) throw error_from(conn_.raw(), nullptr, "replication stream");
    return rc == 0;
}

bool CopyBoth::wait(bool read, bool write, int wake_fd, int timeout_ms) {
    PGconn* raw = conn_.raw();
    pollfd fds[2] = {{PQsocket(raw), static_cast<short>((read ? POLLIN : 0) | (write ? POLLOUT : 0)), 0},
                     {wake_fd, POLLIN, 0}};
    if (fds[0].fd < 0)
        throw Error("the replication connection has no socket", sqlstate::kConnectionFailure, true);
    int n = ::poll(fds, 2, timeout_ms);
    if (n < 0 && errno != EINTR) throw Error(std::string("poll failed: ") + std::strerror(errno), {}, true);
    if (n <= 0) return false;
    if (read && (fds[0].revents & (POLLIN | POLLERR | POLLHUP)) && !PQconsumeInput(raw))
        throw error_from(raw, nullptr, "replication stream");
    return (fds[1].revents & POLLIN) != 0;
}

void CopyBoth::end(Deadline deadline) {
    PGconn* raw = conn_.raw();
    if (PQputCopyEnd(raw, nullptr) != 1) return;
    while (PQflush(raw) == 1 && conn_.wait_socket(true, deadline)) {
    }
}

}  // namespace docsync::pg
