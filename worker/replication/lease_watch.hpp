#pragma once
// The active worker's watch on its lease (replication/lease.hpp): every second, a round trip on the
// lease session. It starts as soon as the worker holds the lease, before anything else of its start
// (reading definitions may wait for minutes behind a migration's lock), and runs until the worker
// ends. The round trip is also the worker's liveness signal: a spare takes the holder for hung only
// when its lease session has been idle as long as the slot went unstreamed (replication/hung_watch.hpp),
// so a worker still starting is never killed as hung. When another worker took the lease (this one's
// lease connection broke meanwhile), `on_lost` is called once, with the new holder.
//
// Thread ownership: the watch's own thread uses the lease from construction until stop() returns.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "replication/lease.hpp"

namespace docsync {

class LeaseWatch {
public:
    using OnLost = std::function<void(const std::string& holder)>;

    LeaseWatch(Lease& lease, OnLost on_lost, std::chrono::milliseconds interval = std::chrono::seconds(1));
    ~LeaseWatch();
    LeaseWatch(const LeaseWatch&) = delete;
    LeaseWatch& operator=(const LeaseWatch&) = delete;

    // Ends the watch (idempotent): the lease belongs to the caller again.
    void stop();

private:
    void run();

    Lease& lease_;
    const OnLost on_lost_;
    const std::chrono::milliseconds interval_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace docsync
