#pragma once
// The delivery core SSE streams and WebSockets share: a connection's outbox (one pending doc per
// followed channel) and its short queue of replies, one write at a time, the slow-client check,
// and the ending (pending docs and replies dropped, the reason written last, then a FIN or a close
// frame, the connection reset after kEndGrace). A transport gives only its framing: how a reply, a
// doc and the end are written (sse.cpp, websocket.cpp). Everything runs on the connection's shard.

#include <boost/asio/ip/tcp.hpp>

#include <functional>
#include <memory>
#include <string>

#include "gateway/session.hpp"

namespace docsync::gateway {

class Delivery : public Connection, public Follower, public std::enable_shared_from_this<Delivery> {
public:
    ~Delivery() override;  // unfollows what it still follows

    // A newer doc of a followed channel: kept as its channel's pending doc, written in turn.
    void on_doc(const DocPtr& doc) override;

protected:
    using WriteDone = std::function<void(boost::system::error_code)>;

    Delivery(Shard& shard, Seat seat);

    // Names the connection in logs ("an SSE stream", "a WebSocket"): a function, not a member
    // every idle stream would hold.
    virtual const char* kind() const = 0;

    // The transport's framing. Each write_* starts one asynchronous write and calls `done` once.
    virtual bool ready() const { return true; }  // whether writes may start (a WebSocket: once accepted)
    virtual void write_message(const std::string& text, WriteDone done) = 0;
    // `patch`: the doc's patch form (the client holds its base), else the whole doc.
    virtual void write_doc(const DocPtr& doc, bool patch, WriteDone done) = 0;
    // After the reason of an end went out: SSE sends a FIN, a WebSocket its close frame (and
    // closes once it is written). Clears writing_ itself when it writes.
    virtual void write_end() = 0;
    virtual Socket& socket() = 0;

    // Queues a reply and writes it in turn.
    void send(std::string message);
    // The checks every tick makes first: a client too slow to take a write for
    // --slow-client-timeout, or an end that overran its grace, is closed abortively. True when closed.
    bool tick_closes(std::chrono::steady_clock::time_point now);
    // Ends the connection: nothing more goes out but `reason`, then write_end(); pending docs and
    // replies are dropped, not flushed, and after kEndGrace the connection is reset.
    void end(std::string reason);
    void close(Ending how);
    // Follows `channel` (a channel of the outbox) at the hub; refused (false) once the connection
    // is ending or closed, so that a stream that is going away is never followed again.
    bool follow(const std::string& channel);
    // Unfollows every channel of the outbox (those not followed yet are no-ops): the hub never
    // keeps a pointer to a stream that is closed or freed.
    void unfollow_all();
    void pump();
    void start_write();  // a write starts now (the slow-client check times it)

    Outbox outbox_;
    ControlQueue control_;
    std::chrono::steady_clock::time_point write_started_{};
    std::chrono::steady_clock::time_point last_write_{};
    bool writing_ = false;
    bool closed_ = false;
    bool ending_ = false;            // end() was called: closed within kEndGrace
    bool close_after_flush_ = false; // write_end() once the queue is written
    bool patches_ = false;           // the client asked for patches (patches=1): in the padding beside the flags
    // The text being written: a reply, or what a transport writes before a doc of its own (an SSE
    // stream's multi-channel head); one write at a time shares it. Freed once written.
    std::string current_;

private:
    DocPtr sending_;  // the doc being written
};

}  // namespace docsync::gateway
