// What SSE streams and WebSockets share in delivering docs to a client: the socket's bounded send
// buffer and its graceful or abortive ending.
#include <sys/socket.h>

#include "gateway/session.hpp"

namespace docsync::gateway {

void bound_send_buffer(boost::asio::ip::tcp::socket& socket) {
    boost::system::error_code ignored;  // a socket that refuses keeps the kernel's default
    socket.set_option(boost::asio::socket_base::send_buffer_size(kStreamSendBuffer), ignored);
}

void end_socket(boost::asio::ip::tcp::socket& socket, Ending how) {
    boost::system::error_code ignored;
    if (how == Ending::Abortive) {
        // close() then resets the connection and drops what the kernel still holds for it.
        socket.set_option(boost::asio::socket_base::linger(true, 0), ignored);
    } else {
        socket.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
    }
    socket.close(ignored);
}

}  // namespace docsync::gateway
