// docsync-status-tool: drives the worker's status board and reader outside the worker, for the
// status tests.
//   docsync-status-tool run --dir D --database DB --slot S [--state streaming] [--interval-ms 200]
//                           [--error TEXT] [--query NAME:RECOMPUTES:FAILURES:COMPUTE_US[:ERROR]]...
//                           [--received LSN] [--acked LSN] [--dirty N] [--live N] [--max-seconds 300]
//     holds the slot's lock and publishes the snapshot every interval until SIGTERM/SIGINT (then
//     state `stopped`, exit 0) or --max-seconds; prints "ready <pid>" once the first update is written.
//     Exits 3 with the board's error when another process holds the slot.
//   docsync-status-tool read FILE
//     reads FILE as the extension does and prints what it found, one `key=value` per line.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>

#include "common/error.hpp"
#include "common/lsn.hpp"
#include "status/status_board.hpp"
#include "status/status_reader.hpp"

using namespace docsync;
using namespace docsync::status;

namespace {

volatile sig_atomic_t stop_requested = 0;
void on_signal(int) { stop_requested = 1; }

WorkerState parse_state(const std::string& name) {
    for (auto s : {WorkerState::Starting, WorkerState::Streaming, WorkerState::Reconnecting, WorkerState::Draining,
                   WorkerState::ValveReset, WorkerState::Stopped})
        if (state_name(s) == name) return s;
    throw CLI::ValidationError("--state", "unknown state " + name);
}

QueryCounters parse_query(const std::string& spec) {
    QueryCounters q;
    std::vector<std::string> parts;
    std::size_t start = 0;
    for (int i = 0; i < 4; ++i) {
        auto colon = spec.find(':', start);
        if (colon == std::string::npos) {
            parts.push_back(spec.substr(start));
            start = spec.size() + 1;
            break;
        }
        parts.push_back(spec.substr(start, colon - start));
        start = colon + 1;
    }
    if (parts.size() < 4) throw CLI::ValidationError("--query", "expected NAME:RECOMPUTES:FAILURES:COMPUTE_US[:ERROR]");
    q.name = parts[0];
    q.recomputes = std::stoull(parts[1]);
    q.failures = std::stoull(parts[2]);
    q.compute_us_total = std::stoull(parts[3]);
    if (start <= spec.size()) {
        q.last_error = spec.substr(start);
        q.last_error_at = std::chrono::system_clock::now();
    }
    return q;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"docsync-status-tool: the status board outside the worker, for tests"};
    app.require_subcommand(1);

    auto* run = app.add_subcommand("run", "hold the slot's lock and publish a snapshot periodically");
    std::string dir, database, slot, state = "streaming", error, received, acked;
    std::vector<std::string> queries;
    int interval_ms = 200, max_seconds = 300;
    std::uint64_t dirty = 0, live = 0;
    run->add_option("--dir", dir)->required();
    run->add_option("--database", database)->required();
    run->add_option("--slot", slot)->required();
    run->add_option("--state", state);
    run->add_option("--error", error);
    run->add_option("--query", queries);
    run->add_option("--received", received);
    run->add_option("--acked", acked);
    run->add_option("--dirty", dirty);
    run->add_option("--live", live);
    run->add_option("--interval-ms", interval_ms)->check(CLI::Range(10, 10000));
    run->add_option("--max-seconds", max_seconds)->check(CLI::Range(1, 3600));

    auto* read = app.add_subcommand("read", "read a status file as the extension does");
    std::string file;
    read->add_option("file", file)->required();

    CLI11_PARSE(app, argc, argv);

    if (read->parsed()) {
        auto r = read_status_file(file);
        std::cout << "result=" << describe(r) << "\n";
        if (r.check == DOCSYNC_STATUS_OK) {
            const auto& b = r.file.body;
            const char* name = docsync_status_state_name(b.state);
            std::cout << "seq=" << r.file.seq << "\nstate=" << (name ? name : "?") << "\npid=" << b.pid
                      << "\ndatabase=" << b.database << "\nslot=" << b.slot << "\nreceived=" << format_lsn(b.received_lsn)
                      << "\nacked=" << format_lsn(b.acked_lsn) << "\nqueries=" << b.query_count
                      << "\nlast_error=" << b.last_error << "\n";
        }
        return r.check == DOCSYNC_STATUS_OK ? 0 : 1;
    }

    StatusSnapshot snap;
    try {
        snap.state = parse_state(state);
        if (!received.empty()) snap.received_lsn = parse_lsn(received).value_or(0);
        if (!acked.empty()) {
            snap.acked_lsn = parse_lsn(acked).value_or(0);
            snap.acked_at = std::chrono::system_clock::now();
        }
        snap.dirty_depth = dirty;
        snap.live_docs = live;
        if (!error.empty()) {
            snap.last_error = error;
            snap.last_error_at = std::chrono::system_clock::now();
        }
        for (const auto& q : queries) {
            snap.queries.push_back(parse_query(q));
            snap.total_recomputes += snap.queries.back().recomputes;
            snap.total_permanent_failures += snap.queries.back().failures;
        }
    } catch (const std::exception& e) {
        std::cerr << "docsync-status-tool: " << e.what() << "\n";
        return 2;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    try {
        StatusBoard board(dir, database, slot);
        board.publish(snap);
        std::cout << "ready " << ::getpid() << std::endl;
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(max_seconds);
        while (!stop_requested && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
            board.publish(snap);
        }
    } catch (const Error& e) {
        std::cerr << "docsync-status-tool: " << e.what() << "\n";
        return 3;
    }
    return 0;
}
