#pragma once
// What the gateway's tests and benchmarks drive it with: the gateway as a child process, tokens
// minted with libjwt, and blocking HTTP, Server-Sent Events and WebSocket clients on Boost.Beast.

#include <jwt.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.hpp"

namespace docsync::testing {

namespace gw_asio = boost::asio;
namespace gw_beast = boost::beast;
namespace gw_http = gw_beast::http;
using gw_tcp = gw_asio::ip::tcp;

// A JWT: HS256 under `secret` (or `alg` other than HS256: "none" for the unsigned form), expiring
// `ttl` from now, opening `channels`.
inline std::string mint_token(const std::string& secret, const std::vector<std::string>& channels,
                              std::chrono::seconds ttl = std::chrono::seconds(300), jwt_alg_t alg = JWT_ALG_HS256,
                              bool with_exp = true) {
    jwt_t* jwt = nullptr;
    jwt_new(&jwt);
    std::string list = "{\"channels\":[";
    for (std::size_t i = 0; i < channels.size(); ++i) list += (i ? ",\"" : "\"") + channels[i] + "\"";
    list += "]}";
    jwt_add_grants_json(jwt, list.c_str());
    if (with_exp)
        jwt_add_grant_int(jwt, "exp", static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(
                                                            std::chrono::system_clock::now().time_since_epoch() + ttl)
                                                            .count()));
    if (alg == JWT_ALG_NONE) jwt_set_alg(jwt, JWT_ALG_NONE, nullptr, 0);
    else jwt_set_alg(jwt, alg, reinterpret_cast<const unsigned char*>(secret.data()), static_cast<int>(secret.size()));
    char* text = jwt_encode_str(jwt);
    std::string token = text ? text : "";
    std::free(text);
    jwt_free(jwt);
    return token;
}

// A free loopback port below the ranges the other test servers draw from (PostgreSQL 20000–31999,
// Redis Cluster nodes 10000–21999 and their bus ports 20000–31999) and the ephemeral range.
inline int gateway_free_port() {
    static std::mt19937 rng(static_cast<unsigned>(::getpid()) ^ static_cast<unsigned>(std::random_device{}()));
    for (int i = 0; i < 200; ++i) {
        int port = 3000 + static_cast<int>(rng() % 7000);
        int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = htons(static_cast<std::uint16_t>(port));
        bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
        ::close(fd);
        if (ok) return port;
    }
    throw std::runtime_error("no free loopback port");
}

struct HttpAnswer {
    unsigned status = 0;
    std::map<std::string, std::string> headers;  // lower-case names
    std::string body;
};

// One request on a fresh connection.
inline HttpAnswer http_get(int port, const std::string& target, const std::map<std::string, std::string>& headers = {}) {
    gw_asio::io_context io;
    gw_tcp::socket socket(io);
    socket.connect(gw_tcp::endpoint(gw_asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
    gw_http::request<gw_http::empty_body> req(gw_http::verb::get, target, 11);
    req.set(gw_http::field::host, "127.0.0.1");
    for (const auto& [k, v] : headers) req.set(k, v);
    gw_http::write(socket, req);
    gw_beast::flat_buffer buffer;
    gw_http::response<gw_http::string_body> res;
    gw_http::read(socket, buffer, res);
    HttpAnswer answer;
    answer.status = res.result_int();
    for (const auto& f : res) {
        std::string name(f.name_string());
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        answer.headers[name] = std::string(f.value());
    }
    answer.body = res.body();
    return answer;
}

// docsync-gateway as a child process; its log goes to a file in a temporary directory.
class GatewayProcess {
public:
    // `environment`: NAME=VALUE pairs set for the gateway alone.
    GatewayProcess(const std::string& redis_url, const std::string& secret, std::vector<std::string> extra = {},
                   std::vector<std::string> environment = {})
        : environment_(std::move(environment)) {
        std::string tmpl = (std::filesystem::temp_directory_path() / "docsync-gateway-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        dir_ = tmpl;
        if (!secret.empty()) {
            std::ofstream(dir_ / "secret") << secret << "\n";
            extra.insert(extra.begin(), {"--jwt-secret-file", (dir_ / "secret").string()});
        }
        port_ = gateway_free_port();
        args_ = {DOCSYNC_GATEWAY_PATH, "--redis", redis_url, "--listen", "127.0.0.1:" + std::to_string(port_),
                 "--log-file", (dir_ / "gateway.log").string()};
        args_.insert(args_.end(), extra.begin(), extra.end());
        start();
    }
    ~GatewayProcess() {
        stop();
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    GatewayProcess(const GatewayProcess&) = delete;
    GatewayProcess& operator=(const GatewayProcess&) = delete;

    int port() const { return port_; }
    pid_t pid() const { return pid_; }
    std::string log() const {
        std::ifstream in(dir_ / "gateway.log");
        return std::string(std::istreambuf_iterator<char>(in), {});
    }
    // Resident memory, from /proc.
    std::size_t rss_bytes() const {
        std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
        std::string line;
        while (std::getline(in, line))
            if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
        return 0;
    }

    void start() {
        pid_t pid = ::fork();
        if (pid < 0) throw std::runtime_error("fork failed");
        if (pid == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            for (auto& e : environment_) ::putenv(e.data());
            std::vector<char*> argv;
            for (auto& a : args_) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
        pid_ = pid;
        // Ready when it answers /healthz (200, or 503 while Redis is away), within 10 s.
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        for (;;) {
            try {
                auto a = http_get(port_, "/healthz");
                if (a.status == 200 || a.status == 503) return;
            } catch (const std::exception&) {
            }
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                throw std::runtime_error("docsync-gateway exited at start: " + log());
            }
            if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("docsync-gateway did not start: " + log());
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    // SIGTERM; the exit status (SIGKILL after 10 s: -1).
    int stop() {
        if (pid_ <= 0) return 0;
        int status = terminate_child(pid_);
        pid_ = -1;
        return status;
    }

private:
    std::filesystem::path dir_;
    std::vector<std::string> args_;
    std::vector<std::string> environment_;
    int port_ = 0;
    pid_t pid_ = -1;
};

struct SseEvent {
    std::string event;  // "doc", "error"
    std::string id;
    std::string data;
};

// A Server-Sent Events stream, read on demand (a test can leave it unread to play a slow client).
class SseClient {
public:
    // `receive_buffer`: the socket's SO_RCVBUF, set before connecting (0: the kernel's default).
    SseClient(int port, const std::string& target, const std::map<std::string, std::string>& headers = {},
              int receive_buffer = 0)
        : socket_(io_) {
        socket_.open(gw_tcp::v4());
        if (receive_buffer > 0) socket_.set_option(gw_asio::socket_base::receive_buffer_size(receive_buffer));
        socket_.connect(gw_tcp::endpoint(gw_asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
        gw_http::request<gw_http::empty_body> req(gw_http::verb::get, target, 11);
        req.set(gw_http::field::host, "127.0.0.1");
        req.set(gw_http::field::accept, "text/event-stream");
        for (const auto& [k, v] : headers) req.set(k, v);
        gw_http::write(socket_, req);
        // The header, up to its blank line (the rest is the stream's first bytes).
        std::string header;
        char chunk[4096];
        for (;;) {
            auto n = socket_.read_some(gw_asio::buffer(chunk));
            header.append(chunk, n);
            if (header.find("\r\n\r\n") != std::string::npos) break;
        }
        auto blank = header.find("\r\n\r\n");
        pending_ = header.substr(blank + 4);
        header.resize(blank + 2);
        status_ = static_cast<unsigned>(std::stoul(header.substr(9, 3)));
        content_type_ = header_value(header, "content-type");
        if (status_ != 200) {
            // An error answer: its JSON body, read to its length.
            std::size_t length = std::stoul(header_value(header, "content-length"));
            boost::system::error_code ec;
            while (pending_.size() < length) {
                auto n = socket_.read_some(gw_asio::buffer(chunk), ec);
                if (ec) break;
                pending_.append(chunk, n);
            }
            error_body_ = pending_;
        }
    }

    unsigned status() const { return status_; }
    const std::string& content_type() const { return content_type_; }
    const std::string& error_body() const { return error_body_; }

    // The next event (comments skipped), or nullopt at the timeout or when the stream ended.
    std::optional<SseEvent> next(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
        auto deadline = std::chrono::steady_clock::now() + timeout;
        for (;;) {
            if (auto e = take()) return e;
            if (ended_) return std::nullopt;
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) return std::nullopt;
            pollfd pfd{socket_.native_handle(), POLLIN, 0};
            if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
            char chunk[65536];
            boost::system::error_code ec;
            auto n = socket_.read_some(gw_asio::buffer(chunk), ec);
            if (ec) ended_ = true;
            pending_.append(chunk, n);
        }
    }
    // The next `doc` event.
    std::optional<SseEvent> next_doc(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
        auto deadline = std::chrono::steady_clock::now() + timeout;
        for (;;) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            auto e = next(std::max(left, std::chrono::milliseconds(0)));
            if (!e || e->event == "doc") return e;
        }
    }
    // True once the server closed the stream (waits up to `timeout`).
    bool ended(std::chrono::milliseconds timeout) {
        auto deadline = std::chrono::steady_clock::now() + timeout;
        while (!ended_ && std::chrono::steady_clock::now() < deadline) next(std::chrono::milliseconds(50));
        return ended_;
    }

private:
    // A header's value (name in lower case), or "".
    static std::string header_value(const std::string& header, const std::string& name) {
        std::string lower = header;
        for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        auto at = lower.find("\r\n" + name + ":");
        if (at == std::string::npos) return "";
        at += name.size() + 3;
        auto end = header.find("\r\n", at);
        std::string value = header.substr(at, end - at);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        return value;
    }

    std::optional<SseEvent> take() {
        for (;;) {
            auto end = pending_.find("\n\n");
            if (end == std::string::npos) return std::nullopt;
            std::string block = pending_.substr(0, end);
            pending_.erase(0, end + 2);
            SseEvent e;
            bool any = false;
            std::size_t at = 0;
            while (at <= block.size()) {
                auto nl = std::min(block.find('\n', at), block.size());
                std::string line = block.substr(at, nl - at);
                at = nl + 1;
                if (line.empty() || line[0] == ':') continue;
                auto colon = line.find(':');
                std::string field = line.substr(0, colon);
                std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
                if (!value.empty() && value[0] == ' ') value.erase(0, 1);
                if (field == "event") e.event = value, any = true;
                else if (field == "id") e.id = value, any = true;
                else if (field == "data") e.data += value, any = true;
            }
            if (any && !e.data.empty()) {
                if (e.event.empty()) e.event = "message";
                return e;
            }
        }
    }

    gw_asio::io_context io_;
    gw_tcp::socket socket_;
    unsigned status_ = 0;
    std::string content_type_;
    std::string error_body_;
    std::string pending_;
    bool ended_ = false;
};

// A WebSocket client; a thread reads its messages into a queue.
class WsClient {
public:
    explicit WsClient(int port, const std::string& target = "/v1/ws", const std::map<std::string, std::string>& headers = {})
        : ws_(io_) {
        gw_beast::get_lowest_layer(ws_).connect(
            gw_tcp::endpoint(gw_asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
        ws_.set_option(gw_beast::websocket::stream_base::decorator([headers](gw_beast::websocket::request_type& req) {
            for (const auto& [k, v] : headers) req.set(k, v);
        }));
        gw_beast::websocket::response_type res;
        ws_.handshake(res, "127.0.0.1", target);  // throws on a refused upgrade
        reader_ = std::thread([this] {
            for (;;) {
                gw_beast::flat_buffer buffer;
                boost::system::error_code ec;
                ws_.read(buffer, ec);
                std::lock_guard lock(mutex_);
                if (ec) {
                    closed_ = true;
                    if (ec == gw_beast::websocket::error::closed) close_reason_ = std::string(ws_.reason().reason.data(), ws_.reason().reason.size());
                    cv_.notify_all();
                    return;
                }
                messages_.push_back(gw_beast::buffers_to_string(buffer.data()));
                cv_.notify_all();
            }
        });
    }
    ~WsClient() {
        // shutdown ends the reader's read; the socket is closed once the reader is gone.
        boost::system::error_code ec;
        gw_beast::get_lowest_layer(ws_).shutdown(gw_tcp::socket::shutdown_both, ec);
        if (reader_.joinable()) reader_.join();
        gw_beast::get_lowest_layer(ws_).close(ec);
    }
    void send(const std::string& text) {
        std::lock_guard lock(write_mutex_);
        ws_.text(true);
        ws_.write(gw_asio::buffer(text));
    }
    // The next message, or nullopt at the timeout or once closed.
    std::optional<std::string> next(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
        std::unique_lock lock(mutex_);
        cv_.wait_for(lock, timeout, [&] { return !messages_.empty() || closed_; });
        if (messages_.empty()) return std::nullopt;
        auto m = std::move(messages_.front());
        messages_.pop_front();
        return m;
    }
    // The next message holding `needle`.
    std::optional<std::string> next_with(const std::string& needle, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
        auto deadline = std::chrono::steady_clock::now() + timeout;
        for (;;) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() < 0) return std::nullopt;
            auto m = next(left);
            if (!m || m->find(needle) != std::string::npos) return m;
        }
    }
    bool closed(std::chrono::milliseconds timeout) {
        std::unique_lock lock(mutex_);
        cv_.wait_for(lock, timeout, [&] { return closed_; });
        return closed_;
    }
    std::string close_reason() {
        std::lock_guard lock(mutex_);
        return close_reason_;
    }

private:
    gw_asio::io_context io_;
    gw_beast::websocket::stream<gw_tcp::socket> ws_;
    std::thread reader_;
    std::mutex mutex_, write_mutex_;
    std::condition_variable cv_;
    std::deque<std::string> messages_;
    bool closed_ = false;
    std::string close_reason_;
};

}  // namespace docsync::testing
