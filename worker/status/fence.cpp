// Fencing on this host (see fence.hpp).
#include "status/fence.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "status/status_board.hpp"

namespace docsync::status {

std::optional<int> flock_holder(const std::filesystem::path& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return std::nullopt;
    char id[64];
    std::snprintf(id, sizeof id, "%02x:%02x:%llu", ::major(st.st_dev), ::minor(st.st_dev),
                  static_cast<unsigned long long>(st.st_ino));
    std::ifstream locks("/proc/locks");
    for (std::string line; std::getline(locks, line);) {
        // "1: FLOCK  ADVISORY  WRITE 4242 00:2e:1234 0 EOF"; a waiter's line has "->" as its second field
        std::istringstream fields(line);
        std::string number, kind, mode, access, pid, file;
        if (!(fields >> number >> kind >> mode >> access >> pid >> file)) continue;
        if (kind == "FLOCK" && file == id && !pid.empty() && pid.find_first_not_of("0123456789") == std::string::npos)
            return std::stoi(pid);
    }
    return std::nullopt;
}

bool is_slot_worker(int pid, const std::filesystem::path& dir, std::string_view database, std::string_view slot) {
    std::string proc = "/proc/" + std::to_string(pid);
    std::ifstream comm(proc + "/comm");
    std::string name;
    if (!std::getline(comm, name) || name != "docsync-worker") return false;
    if (local_lock_owner(dir, database, slot) == pid) return true;
    std::ifstream cmdline(proc + "/cmdline");
    std::vector<std::string> args;
    for (std::string arg; std::getline(cmdline, arg, '\0');) args.push_back(arg);
    for (std::size_t i = 0; i < args.size(); ++i)
        if (args[i] == "--slot=" + std::string(slot) || (args[i] == "--slot" && i + 1 < args.size() && args[i + 1] == slot))
            return true;
    return false;
}

std::optional<int> kill_flock_holder(const std::filesystem::path& path, const std::filesystem::path& dir,
                                     std::string_view database, std::string_view slot) {
    std::optional<int> pid = flock_holder(path);
    if (!pid || *pid == ::getpid() || !is_slot_worker(*pid, dir, database, slot) || ::kill(*pid, SIGKILL) != 0)
        return std::nullopt;
    return pid;
}

}  // namespace docsync::status
