#pragma once
// The gateway's HTTP side on Boost.Beast: one acceptor on the hub's thread, and the client
// connections spread over `threads` I/O threads (shards), each with its own LocalHub. A doc is
// fanned out by handing each connection a pointer to the same bytes.
//
//   GET /v1/docs/{channel}   the retained doc; ETag = its version, If-None-Match answers 304
//   GET /v1/sse?channel=…    Server-Sent Events: each channel's retained doc, then every newer one
//   GET /v1/ws               WebSocket: subscribe / unsubscribe / auth in, subscribed / doc / error out
//   GET /healthz             Redis reachability and the gateway's counts
//   GET /, /docsync-client.js  the demo page and the client library
//
// A once-a-second tick on each shard walks its connections: it closes the ones whose token expired, the ones too
// slow to take a doc for `slow_client_timeout`, and requests that never finish; it sends the SSE
// heartbeats. Nothing per connection is timed by its own timer, so an idle connection costs its
// socket and a few hundred bytes.

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <cstdint>
#include <deque>
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
    // A WebSocket that follows no channel for this long, and an HTTP connection that sends no
    // request for this long, is closed.
    std::chrono::milliseconds idle_timeout{10000};
    unsigned threads = 1;  // I/O threads (shards)
};

struct ServerStats {
    std::size_t connections = 0;
    std::size_t sse_streams = 0;
    std::size_t websockets = 0;
    std::uint64_t slow_disconnects = 0;
    std::uint64_t expired_disconnects = 0;
    std::uint64_t idle_disconnects = 0;       // closed by --idle-timeout
    std::uint64_t refused = 0;                // 401 / 403 answers and refused subscriptions
    std::uint64_t refused_connections = 0;    // answered 503 too_many_connections
    std::uint64_t patches_sent = 0;           // docs sent as a patch (patches=1, the client held the base)
    std::uint64_t whole_docs_to_patch_clients = 0;  // docs sent whole to clients that asked for patches
};

// The same, counted by every shard at once.
struct ServerCounters {
    // Raised by the acceptor before a connection is handed to its shard, so a burst never
    // overshoots --max-connections; lowered when the connection ends.
    std::atomic<std::size_t> connections{0};
    // Connections past --max-connections that may still ask for /healthz (and get 503 otherwise).
    std::atomic<std::size_t> overflow{0};
    std::atomic<std::size_t> sse_streams{0};
    std::atomic<std::size_t> websockets{0};
    std::atomic<std::uint64_t> slow_disconnects{0};
    std::atomic<std::uint64_t> expired_disconnects{0};
    std::atomic<std::uint64_t> idle_disconnects{0};
    std::atomic<std::uint64_t> refused{0};
    std::atomic<std::uint64_t> refused_connections{0};
    std::atomic<std::uint64_t> patches_sent{0};
    std::atomic<std::uint64_t> whole_docs_to_patch_clients{0};
};

// Which count a connection holds a place in: one of --max-connections, one of the few kept past it
// for /healthz, or none (handed on to the connection that took over its socket).
enum class Seat { None, Counted, Overflow };

class Server;
class Shard;

// A connection's socket, bound to its shard's io_context: its executor is one pointer, where the
// type-erased executor of tcp::socket makes the socket 80 bytes instead of 48 and each pending
// operation 40 bytes larger, in every connection, idle ones too.
using Socket = boost::asio::ip::tcp::socket::rebind_executor<boost::asio::io_context::executor_type>::other;
// What the acceptor knows of a connection on an overflow seat (server.cpp).
struct OverflowSeat;

// What a shard's tick walks: every open connection of that shard.
class Connection {
public:
    Connection(Shard& shard, Seat seat);
    virtual ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;
    virtual void tick(std::chrono::steady_clock::time_point now, std::chrono::system_clock::time_point wall) = 0;
    virtual void shut() = 0;  // closes at once (the gateway is stopping)

protected:
    // Gives up the seat (for the connection that takes over the socket).
    Seat take_seat() {
        Seat s = seat_;
        seat_ = Seat::None;
        return s;
    }
    Seat seat() const { return seat_; }

    Shard& shard_;

private:
    // The seat alone: an Overflow seat's record is the HTTP session's (server.cpp), since such a
    // seat is answered /healthz only and never handed to a stream, which thus holds no record.
    Seat seat_;
};

// One I/O thread with its connections; everything here but start, stop and join runs on it.
class Shard {
public:
    Shard(Server& server, boost::asio::io_context& hub_io, Hub& hub);
    boost::asio::io_context& io() { return io_; }
    LocalHub& hub() { return hub_; }
    const TokenVerifier& verifier() const;
    const ServerOptions& options() const;
    ServerCounters& counters();
    ServerStats stats() const;

    void add(Connection* c) { connections_.insert(c); }
    void remove(Connection* c) { connections_.erase(c); }

    void start();  // the thread
    void stop();   // from any thread: closes every connection, then the thread runs dry
    void join();

private:
    void schedule_tick();

    Server& server_;
    boost::asio::io_context io_{1};
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
    LocalHub hub_;
    boost::asio::steady_timer tick_;
    std::unordered_set<Connection*> connections_;
    bool stopping_ = false;
    std::thread thread_;
};

class Server {
public:
    // `io`: the hub's; the acceptor runs there.
    Server(boost::asio::io_context& io, Hub& hub, const TokenVerifier& verifier, ServerOptions options);
    ~Server();
    // Binds, listens and starts the shards; throws docsync::Error naming the address when it cannot.
    void start();
    // Stops accepting and closes every connection; join() then waits for the shards' threads.
    void stop();
    void join();
    // The port bound (the one chosen when listen_port was 0).
    std::uint16_t port() const;

    const TokenVerifier& verifier() const { return verifier_; }
    const ServerOptions& options() const { return options_; }
    ServerCounters& counters() { return counters_; }
    ServerStats stats() const;

private:
    void accept();
    // Full overflow seats: takes the seat of the oldest overflow connection that has not asked
    // anything yet and has it closed; false when every one has asked. Runs on the acceptor's thread.
    bool evict_silent_overflow();
    // Drops the records of overflow seats given back: at every accept, so that the records are
    // bounded by the seats in use, whatever the number of connections.
    void prune_overflow_seats();

    boost::asio::io_context& io_;
    const TokenVerifier& verifier_;
    const ServerOptions options_;
    boost::asio::ip::tcp::acceptor acceptor_;
    ServerCounters counters_;
    std::vector<std::unique_ptr<Shard>> shards_;
    std::size_t next_shard_ = 0;
    bool stopping_ = false;
    // The overflow seats, oldest first (touched only on the acceptor's thread; the records' flags
    // are atomic, set by the shards).
    std::deque<std::shared_ptr<OverflowSeat>> overflow_seats_;
};

}  // namespace docsync::gateway
