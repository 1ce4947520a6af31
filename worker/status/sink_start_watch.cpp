// The sink's watch while the worker starts (see sink_start_watch.hpp).
#include "status/sink_start_watch.hpp"

#include <chrono>

#include "common/error.hpp"

namespace docsync::status {

SinkStartWatch::SinkStartWatch(Publisher& publisher, StatusBoard& board)
    : publisher_(publisher), board_(board), thread_([this] { run(); }) {}

SinkStartWatch::~SinkStartWatch() { stop(); }

std::optional<std::string> SinkStartWatch::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::lock_guard lock(mutex_);
    return lost_;
}

void SinkStartWatch::run() {
    std::unique_lock lock(mutex_);
    while (!stopping_ && !lost_) {
        lock.unlock();
        bool checked = false;
        std::optional<std::string> lost;
        try {
            std::uint64_t breaks = publisher_.breaks();
            lost = publisher_.lost_docs();
            checked = !lost && publisher_.breaks() == breaks;
        } catch (const std::exception&) {
            // the sink cannot be asked now: unchecked, asked again next time
        }
        board_.set_sink_unchecked(!checked);
        lock.lock();
        if (lost) lost_ = std::move(lost);  // unchecked until the started worker recomputed
        wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; });
    }
}

}  // namespace docsync::status
