#pragma once
// What the benchmark programs (gateway_bench.cpp, patch_fanout_bench.cpp, patch_worker_bench.cpp)
// share around their measurements: their `--name value` options, and the step that sends an SSE
// stream's connect and its request.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>

namespace docsync::bench {

class Options {
  public:
    using Usage = void (*)(const char* argv0);  // prints the usage and exits

    // argv[first..] as `--name value` pairs; anything else calls `usage`.
    Options(int argc, char** argv, int first, Usage usage) : argv0_(argv[0]), usage_(usage) {
        for (int i = first; i + 1 < argc; i += 2) {
            if (std::strncmp(argv[i], "--", 2) != 0) fail();
            opt_[argv[i] + 2] = argv[i + 1];
        }
    }
    // Calls the usage unless every option named is given.
    void require(std::initializer_list<const char*> names) const {
        for (const char* name : names)
            if (!opt_.count(name)) fail();
    }
    [[noreturn]] void fail() const {
        usage_(argv0_);
        std::exit(2);
    }
    long num(const char* name, long fallback) const {
        auto it = opt_.find(name);
        return it == opt_.end() ? fallback : std::atol(it->second.c_str());
    }
    std::string text(const char* name, const char* fallback = "") const {
        auto it = opt_.find(name);
        return it == opt_.end() ? fallback : it->second;
    }

  private:
    const char* argv0_;
    Usage usage_;
    std::map<std::string, std::string> opt_;
};

// Starts a non-blocking TCP connect to 127.0.0.1:`port` and registers the descriptor with `epoll`
// under `tag` for EPOLLOUT and EPOLLIN. Returns it, or -1 with `why` set (nothing left open).
inline int connect_loopback(int epoll, int port, std::uint32_t tag, std::string& why) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        why = std::string("socket: ") + std::strerror(errno);
        return -1;
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS) {
        why = std::string("connect: ") + std::strerror(errno);
        ::close(fd);
        return -1;
    }
    epoll_event ev{};
    ev.events = EPOLLOUT | EPOLLIN;
    ev.data.u32 = tag;
    ::epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &ev);
    return fd;
}

// `fd`, registered with `epoll` under `tag`, has finished its non-blocking connect (EPOLLOUT,
// EPOLLERR or EPOLLHUP came): sends `request` in one write and rearms the descriptor for reading.
// Returns why the stream failed, or "" when the request is out.
inline std::string send_request_when_connected(int epoll, int fd, std::uint32_t tag,
                                               std::string_view request) {
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err) return std::string("connect: ") + std::strerror(err);
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size()))
        return "the request did not go out in one write";
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = tag;
    ::epoll_ctl(epoll, EPOLL_CTL_MOD, fd, &ev);
    return {};
}

}  // namespace docsync::bench
