// The active worker's start: lease, status board, sink.
#include "lifecycle/start.hpp"

#include <thread>

#include "common/log.hpp"

namespace docsync::lifecycle {

using namespace std::chrono_literals;

void take_lease(Lease& lease, const std::string& slot) {
    auto until = std::chrono::steady_clock::now() + kLeaseGrace;
    for (bool logged = false;; std::this_thread::sleep_for(500ms)) {
        if (lease.try_acquire()) return;
        if (std::chrono::steady_clock::now() >= until)
            throw Error("the lease of slot \"" + slot + "\" is held by another worker: " + lease.holder() +
                        "; stop it, or start this worker with --standby to wait as its hot spare");
        if (!logged) log_info("worker", "waiting for the lease of slot \"" + slot + "\", held by " + lease.holder());
        logged = true;
    }
}

std::unique_ptr<status::StatusBoard> open_board(const Settings& settings, const std::string& database) {
    auto until = std::chrono::steady_clock::now() + (settings.standby ? kLeaseGrace : 0s);
    for (;;) {
        try {
            return std::make_unique<status::StatusBoard>(settings.status_dir, database, settings.slot);
        } catch (const Error& e) {
            if (!settings.standby) throw;
            if (std::chrono::steady_clock::now() >= until) {
                log_warning("status", std::string(e.what()) +
                                          ": that worker lost the lease to this one and drains or hangs; running "
                                          "without the status file until it is free (docsync.status shows that "
                                          "worker's last values meanwhile)");
                return nullptr;
            }
            std::this_thread::sleep_for(200ms);
        }
    }
}

std::unique_ptr<Publisher> open_sink(const Settings& settings, const publish::SinkSpec& sink) {
    try {
        return publish::make_publisher(sink);
    } catch (const Error& e) {
        if (settings.standby && e.transient()) throw SinkUnavailable(e);
        throw;
    }
}

}  // namespace docsync::lifecycle
