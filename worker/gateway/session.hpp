#pragma once
// What the gateway's connection types share (not part of its interface): who the caller is and
// what they may follow, the per-connection delivery state, the error bodies, and the hand-offs from
// an HTTP request to a Server-Sent Events stream or a WebSocket.

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <chrono>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/access.hpp"
#include "gateway/hub.hpp"
#include "gateway/request.hpp"
#include "gateway/server.hpp"

namespace docsync::gateway {

using Request = boost::beast::http::request<boost::beast::http::string_body>;

// The caller behind a request: the grant of a valid token, or why the token given was refused.
struct Caller {
    std::optional<Grant> grant;
    std::optional<TokenRefusal> refusal;  // a token was given and refused
};
Caller identify(const TokenVerifier& verifier, const std::optional<std::string>& token,
                std::chrono::system_clock::time_point now);
// The token of a request: its bearer header, else its `token` query parameter.
std::optional<std::string> request_token(const Request& req, const Target& target);

// Whether the caller may follow `channel`; when not, the HTTP status and the error to send back.
struct Verdict {
    bool allowed = false;
    int status = 0;  // 401 or 403 when refused
    std::string code;
    std::string message;
};
Verdict authorize(const Caller& caller, const Patterns& public_channels, std::string_view channel);
// Whether a followed channel needs the caller's token (it is not public).
inline bool needs_token(const Patterns& public_channels, std::string_view channel) {
    return !public_channels.covers(channel);
}

// {"error":CODE,"channel":CHANNEL,"message":MESSAGE} (no channel when empty).
std::string error_json(std::string_view code, std::string_view message, std::string_view channel = {});

// How long a connection that is being ended (an expired token, --idle-timeout) has to send its
// reason and close; then it is closed abortively (end_socket), whatever is still being written.
constexpr std::chrono::milliseconds kEndGrace{250};

// The send buffer of a stream's socket (SSE, WebSocket): what the kernel holds for a slow client
// beyond the outbox. Small, so that what reaches a client after its stream ended (a token's
// expiry) is a few tens of kilobytes, not the megabytes an autotuned buffer grows to; the kernel
// doubles it for its own bookkeeping.
constexpr int kStreamSendBuffer = 64 * 1024;
void bound_send_buffer(Socket& socket);

// How a stream's socket is closed: Graceful lets the kernel send what it holds (then FIN);
// Abortive drops it and resets the connection (SO_LINGER {1, 0}), for a stream that must end now
// (an expired token, a client too slow to read) whatever it has not taken yet.
enum class Ending { Graceful, Abortive };
void end_socket(Socket& socket, Ending how);

// A connection's short queue of replies (SSE comments and errors, WebSocket control messages): a
// vector, since an empty deque already allocates half a kilobyte and an idle connection holds none.
using ControlQueue = std::vector<std::string>;
// The first reply; the last one taken gives the queue's buffer back, so that an idle connection
// holds none (docs/gateway.md, memory per idle stream).
inline std::string pop_front(ControlQueue& queue) {
    std::string first = std::move(queue.front());
    queue.erase(queue.begin());
    if (queue.empty()) ControlQueue().swap(queue);
    return first;
}

// A connection's channels with, for each, the newest version it was sent (or asked to skip to) and at
// most one pending doc: the newest not yet sent. A slow client thus skips versions but always ends
// on the newest, and what waits for it is bounded by its channels, never by the docs published.
class Outbox {
public:
    struct Slot {
        std::string channel;
        std::optional<DocVersion> floor;  // sent, or skipped to: only newer versions go out
        DocPtr pending;
        bool queued = false;
    };

    Slot* find(std::string_view channel);
    Slot& add(std::string channel, std::optional<DocVersion> floor);
    void remove(std::string_view channel);
    std::size_t size() const { return slots_.size(); }
    const std::list<Slot>& slots() const { return slots_; }

    // Keeps `doc` as its channel's pending doc when it is newer than what was sent and what waits;
    // true when it was kept.
    bool offer(const DocPtr& doc);
    // The next doc to send (its channel's floor moves to it), or nullptr when none waits. With
    // `patch` (a client that takes patches), *patch says whether the doc goes as its patch: it
    // carries one, and the floor it moves from is exactly the patch's base (the version the
    // client holds); otherwise the client needs the whole doc.
    DocPtr next(bool* patch = nullptr);
    // Moves the floor of `slot` up to `floor` (never down), dropping a pending doc at or below it.
    void raise_floor(Slot& slot, DocVersion floor);
    // Forgets every channel and pending doc.
    void clear();
    // Each channel's floor, in the order the channels were added (the SSE cursor).
    std::vector<std::optional<DocVersion>> floors() const;
    // Whether the queue of pending docs holds a buffer: only while a doc waits.
    bool holds_queue() const { return queue_.capacity() != 0; }

private:
    // Takes `slot` off the queue; the queue's buffer goes back once it is empty.
    void dequeue(Slot* slot);

    std::list<Slot> slots_;
    // Channels with a pending doc, oldest first. A vector, not a deque: an empty deque allocates
    // half a kilobyte, and this queue is short (at most one entry per channel). Emptied, it frees
    // its buffer: an idle connection holds none.
    std::vector<Slot*> queue_;
};

// Hand-offs from the HTTP session once a request is authorized; the connection's seat goes along.
void start_sse(Shard& shard, Seat seat, Socket socket, const Request& req,
               std::vector<std::string> channels, std::vector<std::optional<DocVersion>> floors,
               std::chrono::system_clock::time_point expires, bool patches);
// `patches`: the client asked for patches (patches=1 in the query, docs/patches.md).
void start_websocket(Shard& shard, Seat seat, Socket socket, Request req, Caller caller, bool patches);

// CORS headers for `origin` when it is allowed (nothing otherwise).
void add_cors(boost::beast::http::fields& fields, const ServerOptions& options, std::string_view origin);

}  // namespace docsync::gateway
