// docsync-worker: wiring only. Process-wide settings (SIGPIPE), the command line, the log, then the
// worker's life (lifecycle/serve.hpp): standing by, the active worker's components and threads
// (lifecycle/run.hpp), the stream's handler (lifecycle/pipeline.hpp).
#include <csignal>
#include <cstdio>
#include <exception>

#include "common/log.hpp"
#include "config/settings.hpp"
#include "lifecycle/serve.hpp"

extern char** environ;

int main(int argc, char** argv) {
    // A write to a socket or pipe the peer closed (Redis, a node, stdout's reader) must be an error the
    // sink handles, not the end of the worker.
    std::signal(SIGPIPE, SIG_IGN);
    auto parsed = docsync::parse_settings(argc, argv, environ);
    if (!parsed.run) {
        if (!parsed.output.empty()) std::fputs(parsed.output.c_str(), stdout);
        if (!parsed.error.empty()) std::fprintf(stderr, "%s\n", parsed.error.c_str());
        return parsed.exit_code;
    }
    if (auto error = docsync::apply_log_settings(parsed.settings); !error.empty()) {
        std::fprintf(stderr, "%s\n", error.c_str());
        return 2;
    }
    try {
        return docsync::lifecycle::serve(parsed.settings);
    } catch (const std::exception& e) {
        docsync::log_error("worker", e.what());
        return 1;
    }
}
