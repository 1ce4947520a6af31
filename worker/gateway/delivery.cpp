// The delivery core SSE streams and WebSockets share (delivery.hpp), and their sockets' bounded
// send buffer and graceful or abortive ending.
#include "gateway/delivery.hpp"

#include <boost/asio/steady_timer.hpp>

#include <cassert>

#include "common/log.hpp"

namespace docsync::gateway {

namespace asio = boost::asio;
using steady = std::chrono::steady_clock;

void bound_send_buffer(Socket& socket) {
    boost::system::error_code ignored;  // a socket that refuses keeps the kernel's default
    socket.set_option(asio::socket_base::send_buffer_size(kStreamSendBuffer), ignored);
}

void end_socket(Socket& socket, Ending how) {
    boost::system::error_code ignored;
    if (how == Ending::Abortive) {
        // close() then resets the connection and drops what the kernel still holds for it.
        socket.set_option(asio::socket_base::linger(true, 0), ignored);
    } else {
        socket.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    }
    socket.close(ignored);
}

Delivery::Delivery(Shard& shard, Seat seat) : Connection(shard, seat) {}

Delivery::~Delivery() {
    unfollow_all();
    // Whatever the order of closing and following, a freed stream is followed nowhere.
    assert(!shard_.hub().holds(this));
}

void Delivery::on_doc(const DocPtr& doc) {
    if (!closed_ && outbox_.offer(doc)) pump();
}

void Delivery::send(std::string message) {
    control_.push_back(std::move(message));
    pump();
}

bool Delivery::tick_closes(steady::time_point now) {
    if (closed_) return true;
    if (writing_ && now - write_started_ >= shard_.options().slow_client_timeout) {
        ++shard_.counters().slow_disconnects;
        log_info("gateway", std::string("closed ") + kind() + " whose client took no bytes for " +
                                std::to_string(shard_.options().slow_client_timeout.count()) + " ms (too slow)");
        close(Ending::Abortive);
        return true;
    }
    if (ending_) {
        close(Ending::Abortive);  // the reason did not go out within a tick: cut off
        return true;
    }
    return false;
}

void Delivery::end(std::string reason) {
    ending_ = true;
    unfollow_all();
    outbox_.clear();
    control_.clear();
    control_.push_back(std::move(reason));
    close_after_flush_ = true;
    pump();
    auto timer = std::make_shared<asio::steady_timer>(socket().get_executor(), kEndGrace);
    timer->async_wait([self = shared_from_this(), timer](const boost::system::error_code&) {
        self->close(Ending::Abortive);
    });
}

void Delivery::close(Ending how) {
    if (closed_) return;
    closed_ = true;
    unfollow_all();
    outbox_.clear();
    end_socket(socket(), how);
}

bool Delivery::follow(const std::string& channel) {
    if (closed_ || ending_) return false;
    shard_.hub().follow(channel, this);
    return true;
}

void Delivery::unfollow_all() {
    for (const auto& slot : outbox_.slots()) shard_.hub().unfollow(slot.channel, this);
}

void Delivery::start_write() {
    writing_ = true;
    write_started_ = steady::now();
}

void Delivery::pump() {
    if (writing_ || closed_ || !ready()) return;
    auto done = [self = shared_from_this()](boost::system::error_code ec) {
        self->writing_ = false;
        self->sending_.reset();
        std::string().swap(self->current_);  // a long reply's buffer is not kept while idle
        if (ec) return self->close(Ending::Graceful);
        self->last_write_ = steady::now();
        self->pump();
    };
    if (!control_.empty()) {
        current_ = pop_front(control_);
        start_write();
        return write_message(current_, std::move(done));
    }
    bool patch = false;
    if (DocPtr doc = outbox_.next(patches_ ? &patch : nullptr)) {
        if (patches_) ++(patch ? shard_.counters().patches_sent : shard_.counters().whole_docs_to_patch_clients);
        sending_ = std::move(doc);
        start_write();
        return write_doc(sending_, patch, std::move(done));
    }
    if (close_after_flush_) {
        close_after_flush_ = false;
        write_end();
    }
}

}  // namespace docsync::gateway
