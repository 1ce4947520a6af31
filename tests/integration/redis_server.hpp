#pragma once
// A real redis-server for a test: started on a free loopback port in its own temporary directory,
// stopped (and the directory removed) when the object goes away, also when the test fails. The server
// is killed with the test process if that dies first (PR_SET_PDEATHSIG).
//   RedisServer redis;                       // --save '' (nothing on disk)
//   RedisServer durable({"--appendonly", "yes", "--appendfsync", "always"});
//   redis.stop(); redis.start();             // a restart on the same port and directory

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "publish/redis_connection.hpp"

namespace docsync::testing {

class RedisServer {
public:
    explicit RedisServer(std::vector<std::string> extra_args = {}) : extra_(std::move(extra_args)) {
        std::string tmpl = (std::filesystem::temp_directory_path() / "docsync-redis-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        dir_ = tmpl;
        port_ = free_port();
        start();
    }
    ~RedisServer() {
        stop();
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    RedisServer(const RedisServer&) = delete;
    RedisServer& operator=(const RedisServer&) = delete;

    int port() const { return port_; }
    std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
    publish::RedisAddress address() const { return publish::parse_redis_url(url()); }

    void start() {
        if (pid_ > 0) return;
        std::vector<std::string> args = {"redis-server", "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                         "--save", "", "--appendonly", "no", "--daemonize", "no",
                                         "--dir", dir_.string(), "--logfile", (dir_ / "redis.log").string()};
        args.insert(args.end(), extra_.begin(), extra_.end());
        pid_t pid = ::fork();
        if (pid < 0) throw std::runtime_error("fork failed");
        if (pid == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            std::vector<char*> argv;
            for (auto& a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execvp("redis-server", argv.data());
            ::_exit(127);
        }
        pid_ = pid;
        // Ready when it answers PING, within 10 s.
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        for (;;) {
            try {
                auto c = publish::RedisConnection::connect(address(), std::chrono::milliseconds(200),
                                                           std::chrono::milliseconds(1000));
                auto r = c->command({"PING"});
                if (publish::reply_text(r.get()) == "PONG") return;
            } catch (const std::exception&) {
            }
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                throw std::runtime_error("redis-server exited at start; see " + (dir_ / "redis.log").string());
            }
            if (std::chrono::steady_clock::now() > deadline) {
                stop();
                throw std::runtime_error("redis-server did not answer PING within 10 s");
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }

    // SIGTERM (Redis flushes its append-only file and exits), SIGKILL after 10 s.
    void stop() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGTERM);
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        int status = 0;
        while (::waitpid(pid_, &status, WNOHANG) != pid_) {
            if (std::chrono::steady_clock::now() > deadline) {
                ::kill(pid_, SIGKILL);
                ::waitpid(pid_, &status, 0);
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        pid_ = -1;
    }

    // A plain client connection for the test's own commands.
    std::unique_ptr<publish::RedisConnection> client() const {
        return publish::RedisConnection::connect(address(), std::chrono::seconds(2), std::chrono::seconds(10));
    }

private:
    static int free_port() {
        int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = 0;
        socklen_t len = sizeof addr;
        if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
            if (fd >= 0) ::close(fd);
            throw std::runtime_error("no free loopback port");
        }
        ::close(fd);
        return ntohs(addr.sin_port);
    }

    std::vector<std::string> extra_;
    std::filesystem::path dir_;
    int port_ = 0;
    pid_t pid_ = -1;
};

}  // namespace docsync::testing
