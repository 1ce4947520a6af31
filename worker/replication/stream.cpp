// The replication stream (see stream.hpp).
#include "replication/stream.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <random>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/sqlstate.hpp"
#include "replication/session.hpp"

namespace docsync {

namespace {

using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::string_view kComponent = kStreamComponent;

}  // namespace

const char* to_string(StreamState state) {
    switch (state) {
        case StreamState::Idle: return "idle";
        case StreamState::Connecting: return "connecting";
        case StreamState::Streaming: return "streaming";
        case StreamState::Paused: return "paused";
        case StreamState::Backoff: return "backoff";
        case StreamState::Stopped: return "stopped";
        case StreamState::Failed: return "failed";
    }
    return "unknown";
}

Stream::Stream(StreamOptions options, DeliveryProgressCoordinator& coordinator, StreamHandler& handler)
    : options_(std::move(options)), coordinator_(coordinator), handler_(handler) {
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) throw Error(std::string("eventfd failed: ") + std::strerror(errno));
    coordinator_.set_acknowledger(this);
}

Stream::~Stream() {
    coordinator_.set_acknowledger(nullptr);
    if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Stream::wake() {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
}

void Stream::drain_wake() {
    std::uint64_t drained;
    [[maybe_unused]] auto n = ::read(wake_fd_, &drained, sizeof drained);
}

void Stream::wait_wake(int timeout_ms) {
    pollfd pfd{wake_fd_, POLLIN, 0};
    ::poll(&pfd, 1, timeout_ms);
    drain_wake();
}

void Stream::acknowledge(Lsn lsn) {
    Lsn current = acked_.load();
    while (lsn > current && !acked_.compare_exchange_weak(current, lsn)) {
    }
    wake();
}

void Stream::cap_acknowledgements(Lsn lsn) {
    ack_cap_ = lsn;
    wake();
}

void Stream::stop() {
    stop_ = true;
    wake();
}

void Stream::request_restart() {
    restart_ = true;
    wake();
}

StreamStats Stream::stats() const {
    std::lock_guard lock(stats_mutex_);
    return stats_;
}

void Stream::set_state(StreamState state) {
    update_stats([&](StreamStats& stats) { stats.state = state; });
}

void Stream::record_error(const std::string& message) {
    update_stats([&](StreamStats& stats) { stats.last_error = message; });
}

void Stream::run() {
    bool valve_pending = false;
    bool first = true;
    int failures = 0;
    // The slot's position the last failed session started from: a session that fails again from
    // there made no progress (the same transaction failing again, say a streamed one that cannot be
    // spilled), and its retries back off as a connection refused does, instead of making the server
    // decode it again every few hundred milliseconds.
    std::optional<Lsn> last_failed_start;
    std::mt19937_64 rng(std::random_device{}());
    while (!stop_) {
        SessionInfo info;
        info.reconnect = !first;
        Outcome outcome = Outcome::Lost;
        bool streamed = false;
        try {
            set_state(StreamState::Connecting);
            outcome = Session(*this, info).run(valve_pending);
            streamed = true;
        } catch (const Error& e) {
            streamed = info.epoch != 0;  // the session had started: reset the backoff, unless it made no progress
            if (!e.transient()) {
                set_state(StreamState::Failed);
                // pgoutput looks its publication up by name as of each change it decodes: one that
                // was dropped, or renamed away and back, fails every session from here on.
                std::string message = e.what();
                if (info.pgoutput && streamed && e.sqlstate() == sqlstate::kUndefinedObject)
                    message += "; if the publication was dropped or renamed while the slot existed, pgoutput cannot "
                               "decode the changes made meanwhile: drop the slot (SELECT pg_drop_replication_slot('" +
                               options_.slot + "')) and start the worker again, which makes both anew and recomputes "
                               "every live doc";
                record_error(message);
                log_error(kComponent, message);
                throw Error(message, e.sqlstate(), false);
            }
            record_error(e.what());
            log_warning(kComponent, std::string("replication connection lost: ") + e.what());
        } catch (...) {
            set_state(StreamState::Failed);
            throw;
        }
        first = false;
        valve_pending = outcome == Outcome::Valve;
        if (outcome == Outcome::Stopped) break;
        update_stats([](StreamStats& stats) { stats.reconnects++; });
        if (outcome != Outcome::Lost) {
            failures = 0;
            continue;
        }
        if (streamed) {
            if (last_failed_start != info.start_lsn) failures = 0;
            last_failed_start = info.start_lsn;
        }
        // Capped exponential backoff with jitter (half to all of the step).
        auto step = options_.backoff_initial * (1LL << std::min(failures, 16));
        step = std::min<milliseconds>(step, options_.backoff_max);
        failures++;
        std::uniform_int_distribution<long long> jitter(step.count() / 2, std::max<long long>(step.count(), 1));
        auto until = SteadyClock::now() + milliseconds(jitter(rng));
        set_state(StreamState::Backoff);
        while (!stop_ && SteadyClock::now() < until) wait_wake(poll_timeout_ms(until));
    }
    set_state(StreamState::Stopped);
}

}  // namespace docsync
