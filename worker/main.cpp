// docsync-worker: wiring only. Parses the settings and connects the components.
#include <unistd.h>

#include <cstdio>

#include "config/settings.hpp"

extern char** environ;

int main(int argc, char** argv) {
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
    std::fprintf(stderr, "docsync-worker: streaming is not implemented in this version\n");
    return 1;
}
