#pragma once
// The gateway's HTTP side on Boost.Beast: one acceptor and every client connection, all on one I/O
// thread (a doc is fanned out by handing each connection a pointer to the same bytes).
//
//   GET /v1/docs/{channel}   the retained doc; ETag = its version, If-None-Match answers 304
//   GET /v1/sse?channel=…    Server-Sent Events: each channel's retained doc, then every newer one
//   GET /v1/ws               WebSocket: subscribe / unsubscribe / auth in, subscribed / doc / error out
//   GET /healthz             Redis reachability and the gateway's counts
//   GET /, /docsync-client.js  the demo page and the client library
//
// A once-a-second tick walks the connections: it closes the ones whose token expired, the ones too
// slow to take a doc for `slow_client_timeout`, and requests that never finish; it sends the SSE
// heartbeats. Nothing per connection is timed by its own timer, so an idle connection costs its
// socket and a few hundred bytes.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "gateway/access.hpp"
#include "gateway/hub.hpp"

namespace docsync::gateway {

struct ServerOptions {
    std::string listen_address = "127.0.0.1";
    std::uint16_t listen_port = 8080;
    Patterns public_channels;
    std::vector<std::string> allow_origins;  // CORS; "*" for any
    std::size_t max_connections = 20000;
    std::size_t max_channels = 100;  // per SSE stream or WebSocket
    std::chrono::milliseconds slow_client_timeout{30000};
    std::chrono::milliseconds heartbeat{15000};
    std::chrono::milliseconds request_timeout{30000};  // to send a request's header and body
};

struct ServerStats {
    std::size_t connections = 0;
    std::size_t sse_streams = 0;
    std::size_t websockets = 0;
    std::uint64_t slow_disconnects = 0;
    std::uint64_t expired_disconnects = 0;
    std::uint64_t refused = 0;  // 401 / 403 answers and refused subscriptions
};

class Server;

// What the tick walks: every open connection.
class Connection {
public:
    explicit Connection(Server& server);
    virtual ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;
    virtual void tick(std::chrono::steady_clock::time_point now, std::chrono::system_clock::time_point wall) = 0;
    virtual void shut() = 0;  // closes at once (the gateway is stopping)

protected:
    Server& server_;
};

class Server {
public:
    Server(boost::asio::io_context& io, Hub& hub, const TokenVerifier& verifier, ServerOptions options);
    // Binds and listens; throws docsync::Error naming the address when it cannot.
    void start();
    // Stops accepting and closes every connection.
    void stop();
    // The port bound (the one chosen when listen_port was 0).
    std::uint16_t port() const;

    Hub& hub() { return hub_; }
    const TokenVerifier& verifier() const { return verifier_; }
    const ServerOptions& options() const { return options_; }
    boost::asio::io_context& io() { return io_; }
    ServerStats stats() const;

    void add(Connection* c) { connections_.insert(c); }
    void remove(Connection* c) { connections_.erase(c); }
    ServerStats& counters() { return counters_; }

private:
    void accept();
    void schedule_tick();

    boost::asio::io_context& io_;
    Hub& hub_;
    const TokenVerifier& verifier_;
    const ServerOptions options_;
    boost::asio::ip::tcp::acceptor acceptor_;
    boost::asio::steady_timer tick_;
    std::unordered_set<Connection*> connections_;
    ServerStats counters_;
    bool stopping_ = false;
};

}  // namespace docsync::gateway
