// The metrics endpoint: an Asio acceptor and Beast HTTP sessions, all on one io_context thread.
#include "metrics/server.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>

#include "common/error.hpp"
#include "common/log.hpp"

namespace docsync::metrics {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// What the scraped text is labelled with (the format's version 0.0.4).
constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";
// A scraper that sends nothing, or reads nothing, for this long is dropped.
constexpr auto kIdleTimeout = std::chrono::seconds(30);

// The body to serve, shared by the publishing thread and the server thread.
struct Body {
    std::mutex mutex;
    std::optional<std::string> text;  // none until the first publish
};

// One connection: read a request, answer it, and again while the client keeps the connection alive.
class Session : public std::enable_shared_from_this<Session> {
public:
    Session(tcp::socket socket, Body& body) : stream_(std::move(socket)), body_(body) {}

    void start() { read(); }

private:
    void read() {
        request_ = {};
        parser_.emplace();
        parser_->body_limit(4096);  // a scrape has no body worth keeping
        stream_.expires_after(kIdleTimeout);
        http::async_read(stream_, buffer_, *parser_,
                         [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
    }

    void on_read(beast::error_code ec) {
        if (ec) {  // the client closed, timed out or sent what is not HTTP: nothing to answer
            beast::error_code ignored;
            stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
            return;
        }
        request_ = parser_->release();
        respond();
    }

    void respond() {
        auto response = std::make_shared<http::response<http::string_body>>();
        response->version(request_.version());
        response->keep_alive(request_.keep_alive());
        response->set(http::field::server, "docsync-worker");
        std::string_view target(request_.target().data(), request_.target().size());
        std::string_view path = target.substr(0, target.find('?'));
        if (path != "/metrics") {
            response->result(http::status::not_found);
            response->set(http::field::content_type, "text/plain; charset=utf-8");
            response->body() = "not found: the metrics are at /metrics\n";
        } else if (request_.method() != http::verb::get) {
            response->result(http::status::method_not_allowed);
            response->set(http::field::allow, "GET");
            response->set(http::field::content_type, "text/plain; charset=utf-8");
            response->body() = "use GET\n";
        } else {
            std::lock_guard lock(body_.mutex);
            if (body_.text) {
                response->result(http::status::ok);
                response->set(http::field::content_type, kContentType);
                response->body() = *body_.text;
            } else {
                response->result(http::status::service_unavailable);
                response->set(http::field::content_type, "text/plain; charset=utf-8");
                response->body() = "the worker is starting: no metrics yet\n";
            }
        }
        response->prepare_payload();
        stream_.expires_after(kIdleTimeout);
        http::async_write(stream_, *response,
                          [self = shared_from_this(), response](beast::error_code ec, std::size_t) {
                              if (ec) return;
                              if (response->keep_alive()) {
                                  self->read();
                              } else {
                                  beast::error_code ignored;
                                  self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
                              }
                          });
    }

    beast::tcp_stream stream_;
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    http::request<http::string_body> request_;
    Body& body_;
};

}  // namespace

struct Server::Impl {
    asio::io_context io{1};
    tcp::acceptor acceptor{io};
    Body body;
    std::thread thread;

    void accept() {
        acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
            if (ec == asio::error::operation_aborted) return;  // stopping
            if (!ec) std::make_shared<Session>(std::move(socket), body)->start();
            // Other accept errors (out of descriptors) pass: the next scrape tries again.
            accept();
        });
    }
};

Server::Server(const std::string& address, std::uint16_t port) : impl_(std::make_unique<Impl>()) {
    // address:port as given, [address]:port for IPv6.
    auto shown = [&](std::uint16_t p) {
        return (address.find(':') != std::string::npos ? "[" + address + "]" : address) + ":" + std::to_string(p);
    };
    std::string where = "--metrics-listen " + shown(port);
    beast::error_code ec;
    auto ip = asio::ip::make_address(address, ec);
    if (ec) throw Error(where + ": \"" + address + "\" is not an IP address; give e.g. 127.0.0.1:9464");
    tcp::endpoint endpoint(ip, port);
    auto fail = [&](const char* step) {
        throw Error(where + ": cannot " + step + " (" + ec.message() +
                    "); give a free port on an address of this host, or leave --metrics-listen unset");
    };
    if (impl_->acceptor.open(endpoint.protocol(), ec); ec) fail("open a socket");
    if (impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec); ec) fail("set SO_REUSEADDR");
    if (impl_->acceptor.bind(endpoint, ec); ec) fail("listen there");
    if (impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec); ec) fail("listen there");
    impl_->accept();
    impl_->thread = std::thread([impl = impl_.get()] { impl->io.run(); });
    log_info("metrics", "serving Prometheus metrics at http://" + shown(this->port()) + "/metrics");
}

Server::~Server() {
    impl_->io.stop();
    impl_->thread.join();
}

void Server::publish(std::string body) {
    std::lock_guard lock(impl_->body.mutex);
    impl_->body.text = std::move(body);
}

std::uint16_t Server::port() const { return impl_->acceptor.local_endpoint().port(); }

}  // namespace docsync::metrics
