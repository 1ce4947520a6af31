#pragma once
// A spare's watch on the active worker of its slot (--standby; replication/lease.hpp says why).
//
// The slot streamed by no walsender for `hung_after` while a worker holds the lease (the server ended
// its stream after wal_sender_timeout; a worker reconnecting after an outage waits at most its
// backoff's 15 s cap), and that worker's lease session idle as long (a live worker checks its lease
// every second, also while it fails to stream), means that worker hangs: its sessions are ended so
// the lease and the slot free. A hung worker on this host also holds the slot's lock file (and a file
// sink's lock), which would keep the spare from starting: `fence` kills it there.
//
// Thread ownership: the spare's waiting loop, with the lease it uses.

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "replication/lease.hpp"

namespace docsync {

class HungWatch {
public:
    // `fence(database, pid)`: kills worker process `pid` when it runs on this host holding the slot's
    // lock file; true when it did.
    using Fence = std::function<bool(const std::string& database, int pid)>;

    HungWatch(std::chrono::milliseconds hung_after, Fence fence);

    // One look, after the spare found the lease held: ends a hung holder's sessions (logged).
    void look(Lease& lease, const std::string& slot);
    // The server could not be asked: what was seen of the stream says nothing any more.
    void forget() { unstreamed_since_.reset(); }

private:
    const std::chrono::milliseconds hung_after_;
    const Fence fence_;
    std::optional<std::chrono::steady_clock::time_point> unstreamed_since_;
    bool alive_logged_ = false;  // "alive but not streaming" said for this episode
};

}  // namespace docsync
