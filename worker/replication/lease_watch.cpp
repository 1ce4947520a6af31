// The active worker's watch on its lease (see lease_watch.hpp).
#include "replication/lease_watch.hpp"

#include <exception>

#include "common/log.hpp"

namespace docsync {

LeaseWatch::LeaseWatch(Lease& lease, OnLost on_lost, std::chrono::milliseconds interval)
    : lease_(lease), on_lost_(std::move(on_lost)), interval_(interval), thread_([this] { run(); }) {}

LeaseWatch::~LeaseWatch() { stop(); }

void LeaseWatch::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void LeaseWatch::run() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
        lock.unlock();
        // Unlocked around the round trip: stop() only sets the flag and waits for this thread.
        bool lost = false;
        std::string holder;
        try {
            lost = lease_.check() == Lease::State::Lost;
            if (lost) holder = lease_.holder();
        } catch (const std::exception& e) {
            log_debug("lease", std::string("checking the lease failed (asked again): ") + e.what());
        }
        if (lost) {
            on_lost_(holder);
            return;
        }
        lock.lock();
        wake_.wait_for(lock, interval_, [this] { return stopping_; });
    }
}

}  // namespace docsync
