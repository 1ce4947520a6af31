// Standing by and serving: the loop around the active worker's run.
#include "lifecycle/serve.hpp"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <ctime>
#include <optional>
#include <string>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/sqlstate.hpp"
#include "config/settings.hpp"
#include "lifecycle/run.hpp"
#include "lifecycle/start.hpp"
#include "metrics/server.hpp"
#include "metrics/worker_metrics.hpp"
#include "replication/hung_watch.hpp"
#include "replication/lease.hpp"
#include "status/status_board.hpp"

namespace docsync::lifecycle {

using namespace std::chrono_literals;

namespace {

// Whether a failed start is retried, and after how long. A spare retries what the moment explains
// (StartUnavailable, a lost connection, SQLSTATE classes 08, 53, 57: see sqlstate_is_transient), every
// kStartRetry, lease given back; a worker without --standby retries only what the server itself
// says is of the moment (08, 53, 57P03 "cannot connect now"), backing off up to 30 s. A wrong
// password, role or database, a refused role or sink setting still ends the start with its message.
std::optional<std::chrono::milliseconds> start_retry(const Error& e, bool standby, int failed_starts) {
    const std::string& state = e.sqlstate();
    if (standby) {
        if (dynamic_cast<const StartUnavailable*>(&e) || (e.transient() && sqlstate_is_transient(state)))
            return kStartRetry;
        return std::nullopt;
    }
    if (!e.transient() || !(state.starts_with("08") || state.starts_with("53") || state == "57P03")) return std::nullopt;
    return std::min<std::chrono::milliseconds>(kStartRetry * (1 << std::min(failed_starts, 4)), 30s);
}

// Waits `delay` before a retried start; false when SIGTERM or SIGINT asks the worker to stop.
bool wait_to_retry(const sigset_t& signals, std::chrono::milliseconds delay) {
    auto until = std::chrono::steady_clock::now() + delay;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(until - std::chrono::steady_clock::now());
        if (left.count() <= 0) return true;
        timespec wait{static_cast<time_t>(left.count() / 1'000'000'000), static_cast<long>(left.count() % 1'000'000'000)};
        int signal = sigtimedwait(&signals, nullptr, &wait);
        if (signal == SIGTERM || signal == SIGINT) return false;
        if (signal == SIGHUP) reopen_log();
    }
}


// How long the slot goes unstreamed before a spare takes the active worker for hung: 3 status
// intervals, 20 s at least. DOCSYNC_TEST_HUNG_AFTER (a duration, 1s at least) replaces it for the
// tests that would otherwise wait it out; no setting names it, and a spare logs it when it is given.
std::chrono::milliseconds hung_after(const Settings& settings) {
    std::chrono::milliseconds normal = std::max<std::chrono::milliseconds>(3 * settings.status_interval, 20s);
    const char* test = std::getenv("DOCSYNC_TEST_HUNG_AFTER");
    if (test == nullptr || *test == '\0') return normal;
    try {
        std::chrono::milliseconds given = parse_duration(test);
        if (given >= 1s) {
            log_info("worker", std::string("DOCSYNC_TEST_HUNG_AFTER=") + test + ": an active worker counts as hung after " +
                                   format_duration(given) + " unstreamed, not " + format_duration(normal) + " (for tests only)");
            return given;
        }
    } catch (const SettingError&) {
    }
    log_warning("worker", std::string("DOCSYNC_TEST_HUNG_AFTER=\"") + test +
                              "\" is no duration of 1s or more (e.g. 5s): ignored, hung after " + format_duration(normal));
    return normal;
}

// A spare's wait (--standby): polls the lease every 500 ms, registered as a standby meanwhile, until
// it takes the lease (true) or a signal asks it to stop (false). Server outages are retried. An
// active worker is taken for hung when no walsender streams the slot for hung_after() (HungWatch).
bool stand_by(Lease& lease, const Settings& settings, const sigset_t& signals, metrics::Server* metrics_server) {
    auto since = std::chrono::system_clock::now();
    auto started = std::chrono::steady_clock::now();
    std::string last_problem;
    bool announced = false;
    HungWatch hung(hung_after(settings),
                   [&settings](const std::string& database, int pid) {
                       return status::kill_lock_owner(settings.status_dir, database, settings.slot, pid);
                   });
    for (;;) {
        try {
            if (lease.try_acquire()) {
                auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
                log_info("worker", "took the lease of slot \"" + settings.slot + "\" after standing by for " +
                                       format_duration(waited) + ": starting as the active worker");
                return true;
            }
            lease.stand_by();
            if (!announced)
                log_info("worker", "standing by: the lease of slot \"" + settings.slot + "\" is held by " + lease.holder() +
                                       "; taking over when that worker stops or dies");
            announced = true;
            last_problem.clear();
            hung.look(lease, settings.slot);
        } catch (const Error& e) {
            hung.forget();
            // A wrong password or role, or a database that does not exist, is a setting to fix: no
            // wait makes it right.
            if (e.sqlstate().starts_with("28") || e.sqlstate() == "3D000") throw;
            if (last_problem != e.what())
                log_warning("worker", std::string("standing by, the server cannot be asked (retried): ") + e.what());
            last_problem = e.what();
        }
        if (metrics_server) metrics_server->publish(metrics::render_standby(since, std::chrono::system_clock::now()));
        timespec wait{0, 500'000'000};
        int signal = sigtimedwait(&signals, nullptr, &wait);
        if (signal == SIGHUP) {
            reopen_log();
            log_info("worker", "SIGHUP: log file reopened");
        } else if (signal == SIGTERM || signal == SIGINT) {
            log_info("worker", std::string(signal == SIGTERM ? "SIGTERM" : "SIGINT") + " while standing by: stopping");
            return false;
        }
    }
}

}  // namespace

int serve(const Settings& settings) {
    // Signals go to one thread only (run()'s signal thread, or stand_by()): block them before any
    // thread starts.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGHUP);
    sigaddset(&signals, SIGUSR1);  // internal: ends run()'s signal thread
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    // Listening first: a port in use fails the start before anything connects.
    std::unique_ptr<metrics::Server> metrics_server;
    if (!settings.metrics_address.empty())
        metrics_server = std::make_unique<metrics::Server>(settings.metrics_address, settings.metrics_port);

    Lease lease({.dsn = settings.dsn, .slot = settings.slot});
    int failed_starts = 0;
    for (;;) {
        if (settings.standby && !stand_by(lease, settings, signals, metrics_server.get())) return 0;
        int code = 0;
        try {
            code = run(settings, lease, signals, metrics_server.get());
        } catch (const Error& e) {
            auto retry = start_retry(e, settings.standby, failed_starts);
            if (!retry) throw;
            ++failed_starts;
            if (settings.standby)
                log_warning("worker", "took the lease of slot \"" + settings.slot + "\" but " +
                                          (dynamic_cast<const StartUnavailable*>(&e) ? "" : "cannot start: ") + e.what() +
                                          "; giving the lease back and standing by again (retried in " +
                                          format_duration(*retry) + ")");
            else
                log_warning("worker", std::string("cannot start: ") + e.what() + "; the server refuses for now: retried in " +
                                          format_duration(*retry) + " (try " + std::to_string(failed_starts) + ")");
            lease.release();
            if (!wait_to_retry(signals, *retry)) return 0;
            continue;
        }
        failed_starts = 0;
        if (code != kSteppedDown) return code;
        if (!settings.standby) {
            log_error("worker", "this worker lost the lease of slot \"" + settings.slot +
                                    "\" to another worker and stepped down; start every worker of a slot with "
                                    "--standby so the one that steps down waits as the hot spare");
            return 1;
        }
    }
}

}  // namespace docsync::lifecycle
