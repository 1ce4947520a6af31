// A spare's watch on the active worker (see hung_watch.hpp).
#include "replication/hung_watch.hpp"

#include <cstdio>

#include "common/error.hpp"
#include "common/log.hpp"

namespace docsync {

namespace {

std::string seconds(std::chrono::milliseconds d) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(d.count()) / 1000);
    return buf;
}

}  // namespace

HungWatch::HungWatch(std::chrono::milliseconds hung_after, Fence fence)
    : hung_after_(hung_after), fence_(std::move(fence)) {}

void HungWatch::look(Lease& lease, const std::string& slot) {
    auto now = std::chrono::steady_clock::now();
    if (lease.slot_streamed()) {
        unstreamed_since_.reset();
        alive_logged_ = false;
        return;
    }
    if (!unstreamed_since_) unstreamed_since_ = now;
    auto unstreamed = std::chrono::duration_cast<std::chrono::milliseconds>(now - *unstreamed_since_);
    if (unstreamed < hung_after_) return;
    std::optional<double> idle = lease.holder_idle();
    if (idle && *idle * 1000 < static_cast<double>(hung_after_.count())) {
        if (!alive_logged_)
            log_warning("worker", "the active worker of slot \"" + slot + "\" (" + lease.holder() +
                                      ") has not streamed the slot for " + seconds(unstreamed) +
                                      ", but it is alive (it checks its lease): see its log for why it cannot stream");
        alive_logged_ = true;
        return;
    }
    unstreamed_since_.reset();
    alive_logged_ = false;
    std::string holder = lease.holder();
    try {
        std::optional<int> pid = lease.holder_process();
        int ended = lease.end_hung_holder();
        std::string fenced;
        if (pid && fence_ && fence_(lease.database(), *pid))
            fenced = "; it runs on this host holding the slot's lock file: killed it (SIGKILL) so that its locks go";
        log_warning("worker", "the active worker of slot \"" + slot + "\" (" + holder +
                                  ") holds the lease, but no walsender has streamed the slot for " +
                                  seconds(unstreamed) + ": taking it for hung; ended " + std::to_string(ended) +
                                  " of its sessions" + fenced + "; taking over");
    } catch (const Error& e) {
        log_warning("worker", "the active worker of slot \"" + slot + "\" (" + holder +
                                  ") seems hung, but its sessions cannot be ended: " + e.what() +
                                  "; run every worker of a slot as the same --dsn role, or end them by hand");
    }
}

}  // namespace docsync
