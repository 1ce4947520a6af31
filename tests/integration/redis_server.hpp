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
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "redis/connection.hpp"

namespace docsync::testing {

// SIGTERM to child `pid`, SIGKILL after 10 s; its exit status (128 + signal when a signal ended it),
// or -1 when it had to be killed.
inline int terminate_child(pid_t pid) {
    ::kill(pid, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) != pid) {
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            return -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Polls `done` every 20 ms until it holds (true) or `limit` has passed (false).
template <typename F>
bool eventually(F done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
}

class RedisServer {
public:
    // `port` 0: a free one.
    explicit RedisServer(std::vector<std::string> extra_args = {}, int port = 0) : extra_(std::move(extra_args)) {
        std::string tmpl = (std::filesystem::temp_directory_path() / "docsync-redis-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        dir_ = tmpl;
        port_ = port != 0 ? port : free_port();
        for (std::size_t i = 0; i + 1 < extra_.size(); ++i)
            if (extra_[i] == "--requirepass") password_ = extra_[i + 1];
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
    pid_t pid() const { return pid_; }
    std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
    // With --requirepass among the arguments, the password too.
    publish::RedisAddress address() const {
        auto a = publish::parse_redis_url(url());
        a.password = password_;
        return a;
    }

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
        terminate_child(pid_);
        pid_ = -1;
    }

    // A plain client connection for the test's own commands.
    std::unique_ptr<publish::RedisConnection> client() const {
        return publish::RedisConnection::connect(address(), std::chrono::seconds(2), std::chrono::seconds(10));
    }

    // A free loopback port (0 asks the kernel for one); 0 when `wanted` is taken.
    static int free_port(int wanted = 0) {
        int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = htons(static_cast<std::uint16_t>(wanted));
        socklen_t len = sizeof addr;
        if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
            if (fd >= 0) ::close(fd);
            if (wanted != 0) return 0;
            throw std::runtime_error("no free loopback port");
        }
        ::close(fd);
        return ntohs(addr.sin_port);
    }

private:
    std::vector<std::string> extra_;
    std::string password_;
    std::filesystem::path dir_;
    int port_ = 0;
    pid_t pid_ = -1;
};

// A Redis Cluster of real redis-servers: `masters` masters, each with `replicas` replicas, the 16384
// slots split evenly, every node agreeing on the map before the constructor returns.
class RedisTestCluster {
public:
    // `password`: every node requires it (requirepass, and masterauth for the replicas).
    explicit RedisTestCluster(int masters = 3, int replicas = 0, std::string password = {})
        : masters_(masters), replicas_(replicas), password_(std::move(password)) {
        std::vector<std::string> args{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                      "--cluster-node-timeout", "1000", "--cluster-require-full-coverage", "no",
                                      "--repl-diskless-sync-delay", "0"};
        if (!password_.empty()) args.insert(args.end(), {"--requirepass", password_, "--masterauth", password_});
        for (int i = 0; i < masters * (1 + replicas); ++i)
            nodes_.push_back(std::make_unique<RedisServer>(args, cluster_port()));
        for (int m = 0; m < masters; ++m) {
            int first = m * 16384 / masters, last = (m + 1) * 16384 / masters - 1;
            command(m, {"CLUSTER", "ADDSLOTSRANGE", std::to_string(first), std::to_string(last)});
        }
        for (std::size_t i = 1; i < nodes_.size(); ++i)
            command(static_cast<int>(i), {"CLUSTER", "MEET", "127.0.0.1", std::to_string(nodes_[0]->port())});
        wait([&] { return known_everywhere(); }, "every node to know every other");
        for (int r = masters; r < static_cast<int>(nodes_.size()); ++r)
            command(r, {"CLUSTER", "REPLICATE", id((r - masters) % masters)});
        wait([&] { return settled(); }, "the cluster to agree on its slots");
        if (replicas_ > 0) wait_replicas_synced();
    }
    // Waits until every replica has synced with its master and the master counts it online (only
    // then does WAIT count it, and can it be promoted).
    void wait_replicas_synced() {
        wait([&] {
            for (int r = masters_; r < size(); ++r)
                if (reply(r, {"INFO", "replication"}).find("master_link_status:up") == std::string::npos) return false;
            for (int m = 0; m < masters_; ++m) {
                std::string info = reply(m, {"INFO", "replication"});
                std::size_t online = 0;
                for (auto at = info.find("state=online"); at != std::string::npos; at = info.find("state=online", at + 1))
                    ++online;
                if (online < static_cast<std::size_t>(replicas_)) return false;
            }
            return true;
        }, "the replicas to sync");
    }

    int size() const { return static_cast<int>(nodes_.size()); }
    RedisServer& node(int i) { return *nodes_[static_cast<std::size_t>(i)]; }
    std::string url() const {
        return "redis-cluster://" + (password_.empty() ? std::string() : ":" + password_ + "@") + "127.0.0.1:" +
               std::to_string(nodes_[0]->port()) + ",127.0.0.1:" + std::to_string(nodes_[1 % nodes_.size()]->port());
    }
    publish::RedisClusterAddress address() const { return publish::parse_redis_cluster_url(url()); }
    std::string id(int i) { return reply(i, {"CLUSTER", "MYID"}); }
    // The node index serving `slot` now, as node 0 sees it.
    int owner_of(int slot) {
        auto c = node(0).client();
        auto r = c->command({"CLUSTER", "SLOTS"});
        for (std::size_t i = 0; i < r->elements; ++i) {
            const redisReply* range = r->element[i];
            if (slot >= range->element[0]->integer && slot <= range->element[1]->integer)
                for (int n = 0; n < size(); ++n)
                    if (range->element[2]->element[1]->integer == nodes_[static_cast<std::size_t>(n)]->port()) return n;
        }
        return -1;
    }
    // The text of node i's reply to `args`; throws on an error reply.
    std::string reply(int i, const std::vector<std::string>& args) {
        auto c = node(i).client();
        std::vector<std::string_view> a(args.begin(), args.end());
        auto r = c->command(a);
        if (r->type == REDIS_REPLY_ERROR) throw std::runtime_error("node " + std::to_string(i) + ": " + publish::reply_text(r.get()));
        return r->type == REDIS_REPLY_INTEGER ? std::to_string(r->integer) : publish::reply_text(r.get());
    }
    void command(int i, const std::vector<std::string>& args) { (void)reply(i, args); }
    bool is_master(int i) {
        auto r = node(i).client()->command({"ROLE"});
        return r->type == REDIS_REPLY_ARRAY && r->elements > 0 && publish::reply_text(r->element[0]) == "master";
    }
    // Moves `slot` from node `from` to node `to` the way redis-cli --cluster reshard does.
    void move_slot(int slot, int from, int to) {
        begin_migration(slot, from, to);
        migrate_keys(slot, from, to);
        end_migration(slot, to);
    }
    void begin_migration(int slot, int from, int to) {
        command(to, {"CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", id(from)});
        command(from, {"CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", id(to)});
    }
    void migrate_keys(int slot, int from, int to) {
        auto c = node(from).client();
        auto keys = c->command({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "1000"});
        for (std::size_t k = 0; k < keys->elements; ++k)
            command(from, {"MIGRATE", "127.0.0.1", std::to_string(node(to).port()), publish::reply_text(keys->element[k]),
                           "0", "5000"});
    }
    void end_migration(int slot, int to) {
        // Every master learns the new owner (replicas take it from their masters and refuse SETSLOT).
        for (int n = 0; n < size(); ++n)
            if (is_master(n)) command(n, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", id(to)});
    }

private:
    static int cluster_port() {
        // The cluster bus listens on port + 10000: both must be free, and below the ephemeral range
        // (32768 and up), where a client connection's own end could take them before the server binds.
        // Ports 10000-19999, buses 20000-29999: no node's port is another cluster's bus port (the
        // scenarios' clusters pick from the same ranges).
        for (int attempt = 0; attempt < 200; ++attempt) {
            int port = 10000 + static_cast<int>((static_cast<unsigned>(::getpid()) * 7919u +
                                                 static_cast<unsigned>(attempt) * 104729u) %
                                                10000u);
            if (RedisServer::free_port(port) == port && RedisServer::free_port(port + 10000) == port + 10000) return port;
        }
        throw std::runtime_error("no free pair of loopback ports for a cluster node");
    }
    bool known_everywhere() {
        for (int i = 0; i < size(); ++i)
            if (reply(i, {"CLUSTER", "INFO"}).find("cluster_known_nodes:" + std::to_string(size())) == std::string::npos)
                return false;
        return true;
    }
    bool settled() {
        for (int i = 0; i < size(); ++i) {
            std::string info = reply(i, {"CLUSTER", "INFO"});
            if (info.find("cluster_state:ok") == std::string::npos ||
                info.find("cluster_slots_assigned:16384") == std::string::npos)
                return false;
            auto c = node(i).client();
            auto shards = c->command({"CLUSTER", "SHARDS"});
            if (shards->elements != static_cast<std::size_t>(masters_)) return false;
            for (std::size_t sh = 0; sh < shards->elements; ++sh)
                for (std::size_t f = 0; f + 1 < shards->element[sh]->elements; f += 2)
                    if (publish::reply_text(shards->element[sh]->element[f]) == "nodes" &&
                        shards->element[sh]->element[f + 1]->elements != static_cast<std::size_t>(1 + replicas_))
                        return false;
        }
        return true;
    }
    template <typename F>
    void wait(F ready, const char* what) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!ready()) {
            if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error(std::string("waited 30 s for ") + what);
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }

    int masters_;
    int replicas_;
    std::string password_;
    std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace docsync::testing
