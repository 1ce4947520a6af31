#pragma once
// The CopyBoth phase of a replication connection, after START_REPLICATION (Connection::start_copy):
// CopyData messages in both directions without blocking, and a poll() that also watches a wake-up
// descriptor. libpq buffers both ways: read() hands out complete messages it already holds,
// wait() reads what the socket has into that buffer, send() queues and flush() writes out.
//
// Errors are docsync::Error: the server's, with its SQLSTATE, or a lost connection (transient).
// Belongs to the thread that owns the Connection.

#include <optional>
#include <string_view>

#include "pg/connection.hpp"

namespace docsync::pg {

class CopyBoth {
public:
    // `conn` has started a CopyBoth (start_copy) and outlives this.
    explicit CopyBoth(Connection& conn) : conn_(conn) {}
    CopyBoth(const CopyBoth&) = delete;
    CopyBoth& operator=(const CopyBoth&) = delete;

    // The next complete message libpq holds, valid until the next read(); nullopt when none is
    // buffered (wait() reads more). When the server ends the copy, throws its final error, or a
    // transient 08006 when it ended without one.
    std::optional<std::string_view> read();

    // Queues one message and writes out what the socket takes now; `context` starts the error.
    void send(std::string_view message, std::string_view context);

    // Writes out what libpq still holds without blocking: true when nothing is left.
    bool flush();

    // Waits up to `timeout_ms` for input (when `read`), room to write (when `write`) or for `wake_fd`
    // to become readable, and reads what arrived into libpq's buffer. Returns whether `wake_fd` is
    // readable. An interrupted wait returns false.
    bool wait(bool read, bool write, int wake_fd, int timeout_ms);

    // Ends the copy from this side and writes that out until `deadline`, without waiting for the
    // server's answer: the connection is closed next.
    void end(Deadline deadline);

private:
    Connection& conn_;
    std::unique_ptr<char, decltype(&PQfreemem)> message_{nullptr, &PQfreemem};
};

}  // namespace docsync::pg
