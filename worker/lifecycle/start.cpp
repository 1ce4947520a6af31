// The active worker's start: lease, status board, sink.
#include "lifecycle/start.hpp"

#include <unistd.h>

#include <thread>

#include "common/log.hpp"
#include "config/settings.hpp"
#include "status/fence.hpp"

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
    for (bool fenced = false;;) {
        try {
            return std::make_unique<status::StatusBoard>(settings.status_dir, database, settings.slot);
        } catch (const Error& e) {
            if (!settings.standby) throw;
            if (std::chrono::steady_clock::now() >= until) {
                auto owner = status::local_lock_owner(settings.status_dir, database, settings.slot);
                if (fenced || !owner || *owner == ::getpid() ||
                    !status::kill_lock_owner(settings.status_dir, database, settings.slot, *owner))
                    throw StartUnavailable("cannot take the slot's status file", e);
                log_warning("status", std::string(e.what()) + ": that worker lost the lease to this one " +
                                          format_duration(kLeaseGrace) +
                                          " ago and still holds the status file (it drains or is frozen): killed "
                                          "it (SIGKILL), so that the status file is this worker's");
                fenced = true;
                until = std::chrono::steady_clock::now() + kLeaseGrace;  // the kernel drops its locks
            }
            std::this_thread::sleep_for(200ms);
        }
    }
}

namespace {

// Fences the worker this spare replaces when it still holds the JSONL sink file's lock (frozen, or
// draining after it lost the lease): only a docsync-worker of this host serving this slot; true when
// it did.
bool fence_file_holder(const Settings& settings, const publish::SinkSpec& sink, const std::string& database) {
    if (sink.kind != publish::SinkSpec::Kind::File) return false;
    auto pid = status::kill_flock_holder(sink.path, settings.status_dir, database, settings.slot);
    if (!pid) return false;
    log_warning("publish", "the JSONL sink file " + sink.path + " is still locked by docsync-worker pid " +
                               std::to_string(*pid) + ", which lost the lease of slot \"" + settings.slot +
                               "\" to this worker (it drains or is frozen): killed it (SIGKILL) so that its lock goes");
    return true;
}

}  // namespace

std::unique_ptr<Publisher> open_sink(const Settings& settings, const publish::SinkSpec& sink, const std::string& database,
                                     std::shared_ptr<publish::Patcher> patcher) {
    auto until = std::chrono::steady_clock::now() + kLeaseGrace;
    for (bool fenced = false;; std::this_thread::sleep_for(200ms)) {
        try {
            return publish::make_publisher(sink, {}, patcher);
        } catch (const Error& e) {
            if (!settings.standby || !e.transient()) throw;
            if (!fenced) fenced = fence_file_holder(settings, sink, database);
            if (!fenced || std::chrono::steady_clock::now() >= until) throw StartUnavailable("cannot start the sink", e);
        }
    }
}

}  // namespace docsync::lifecycle
