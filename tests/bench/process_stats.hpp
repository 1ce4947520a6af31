#pragma once
// What the benchmarks read of other processes: CPU time from /proc.
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace docsync::bench {

// User plus system CPU seconds of process `pid` so far (0 when it cannot be read).
inline double process_cpu_seconds(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(in, line);
    auto close = line.rfind(')');  // the command name may hold spaces and parentheses
    if (close == std::string::npos) return 0;
    std::istringstream fields(line.substr(close + 2));
    std::string f;
    double utime = 0, stime = 0;
    for (int i = 3; fields >> f; ++i) {
        if (i == 14) utime = std::stod(f);
        if (i == 15) {
            stime = std::stod(f);
            break;
        }
    }
    return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace docsync::bench
