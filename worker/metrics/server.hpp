#pragma once
// The metrics endpoint (--metrics-listen): GET /metrics answers with the last exposition the
// wiring published (Prometheus text format 0.0.4); any other path is 404, any other method on
// /metrics 405. HTTP is Boost.Beast over Boost.Asio (header-only in libboost-dev, which the worker
// already needs; Debian 12 packages no prometheus-cpp), on one io_context thread of its own, so a
// slow or stuck scraper never touches the stream, the engine or the status thread: they only swap
// in a new body under a mutex nobody else takes.
//
//   metrics::Server server("127.0.0.1", 9464);  // binds now: a busy port fails the start
//   server.publish(metrics::render(readings, snapshot, now));
//
// Threads: publish() and port() may be called from any thread; the destructor stops the server.

#include <cstdint>
#include <memory>
#include <string>

namespace docsync::metrics {

class Server {
public:
    // Listens on address:port (an IP address; port 0 picks a free one) and starts the server
    // thread. Throws docsync::Error naming --metrics-listen when it cannot listen there.
    Server(const std::string& address, std::uint16_t port);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // The body GET /metrics returns from now on. Until the first call it answers 503.
    void publish(std::string body);
    // The port listened on.
    std::uint16_t port() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace docsync::metrics
