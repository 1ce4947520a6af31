// docsync-gateway on a Redis Cluster with one master frozen (SIGSTOP: it still takes TCP connects,
// answers nothing, and no replica takes over): /healthz reads down and names it, and reads of
// channels on the other masters never wait behind it, also when the frozen node is the first
// seed of --redis at the gateway's start.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>

#include "gateway_setup.hpp"

namespace {

// The node index serving `channel`'s key.
int owner_of_channel(RedisTestCluster& cluster, const std::string& channel) {
    return cluster.owner_of(publish::key_slot(publish::cluster_key(channel)));
}

// The first "db:PREFIX:N" whose master is not `avoid`.
std::string channel_not_on(RedisTestCluster& cluster, const std::string& prefix, int avoid) {
    for (int i = 1; i < 1000; ++i) {
        std::string channel = "db:" + prefix + ":" + std::to_string(i);
        if (owner_of_channel(cluster, channel) != avoid) return channel;
    }
    throw std::runtime_error("no channel off node " + std::to_string(avoid));
}

// Thaws a frozen node however the test ends.
struct Frozen {
    pid_t pid;
    explicit Frozen(pid_t p) : pid(p) { REQUIRE(::kill(pid, SIGSTOP) == 0); }
    ~Frozen() { thaw(); }
    void thaw() {
        if (pid > 0) ::kill(pid, SIGCONT);
        pid = -1;
    }
};

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// GET `target` on a fresh connection, giving up after `limit`: the status (0 when no answer came
// by then), the whole answer's text, and the seconds it took.
struct TimedAnswer {
    int status = 0;
    std::string text;
    double seconds = 0;
};
TimedAnswer timed_get(int port, const std::string& target, std::chrono::milliseconds limit = 6000ms) {
    TimedAnswer a;
    auto started = std::chrono::steady_clock::now();
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    timeval tv{static_cast<time_t>(limit.count() / 1000), static_cast<suseconds_t>((limit.count() % 1000) * 1000)};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(static_cast<std::uint16_t>(port));
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0) {
        std::string req = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
        if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
            char buf[4096];
            for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) a.text.append(buf, static_cast<std::size_t>(n));
        }
    }
    ::close(fd);
    a.seconds = seconds_since(started);
    if (a.text.rfind("HTTP/1.1 ", 0) == 0) a.status = std::atoi(a.text.c_str() + 9);
    return a;
}

}  // namespace

TEST_CASE("gateway on a Redis Cluster: /healthz is a round trip to every master and names a frozen one") {
    RedisTestCluster cluster(3, 0);
    publish::RedisClusterSink sink(cluster.address());
    GatewayProcess gateway(cluster.url(), kSecret, {"--public", "db:*"});
    // A followed channel on another master than the one docsync:health hashes to.
    const int health_owner = cluster.owner_of(publish::key_slot("docsync:health"));
    const std::string channel = channel_not_on(cluster, "t", health_owner);
    const int frozen = owner_of_channel(cluster, channel);
    sink.publish(channel, doc_of(1), DocVersion{1, 0x10});
    SseClient sse(gateway.port(), "/v1/sse?channel=" + channel);
    REQUIRE(sse.next_doc());
    REQUIRE(eventually([&] { return http_get(gateway.port(), "/healthz").status == 200; }, 10s));
    const std::string frozen_port = std::to_string(cluster.node(frozen).port());

    const std::size_t log_before = gateway.log().size();
    Frozen freeze(cluster.node(frozen).pid());
    auto frozen_at = std::chrono::steady_clock::now();
    int up_late = 0, named = 0, late_samples = 0;
    double slowest = 0;
    std::string log, odd;  // every status; the first answer that is not down naming the master
    std::size_t log_at_4s = 0;
    while (seconds_since(frozen_at) < 16) {
        if (log_at_4s == 0 && seconds_since(frozen_at) > 4) log_at_4s = gateway.log().size();
        auto started = std::chrono::steady_clock::now();
        auto a = http_get(gateway.port(), "/healthz");
        slowest = std::max(slowest, seconds_since(started));
        log += std::to_string(a.status) + " ";
        // 2 s for the probe to notice; then every answer is down and names the frozen master.
        if (seconds_since(frozen_at) > 2) {
            ++late_samples;
            if (a.status == 200) ++up_late;
            if (a.status == 503 && a.body.find("\"redis\":\"down\"") != std::string::npos &&
                a.body.find(frozen_port) != std::string::npos)
                ++named;
            else if (odd.empty())
                odd = a.body;
        }
        std::this_thread::sleep_for(250ms);
    }
    INFO("/healthz while master " << frozen_port << " was frozen: " << log << "; " << odd);
    CHECK(late_samples > 0);
    CHECK(up_late == 0);
    CHECK(named == late_samples);
    CHECK(slowest < 2.0);  // answered within the probe's own timeout, not a command timeout
    // The subscriber found its link to the frozen master dead within 4 s (a PING a second, 2 s
    // without an answer), and in 16 s never counted a link remade to it as up: that takes an answer.
    std::string since = gateway.log().substr(log_before);
    INFO("the gateway's log since the freeze: " << since);
    CHECK(since.substr(0, log_at_4s - log_before).find(frozen_port + " did not answer PING") != std::string::npos);
    CHECK(since.find("subscriber connected to") == std::string::npos);
    freeze.thaw();
    CHECK(eventually([&] { return http_get(gateway.port(), "/healthz").status == 200; }, 20s));
}

TEST_CASE("gateway on a Redis Cluster: reads of channels on healthy masters never wait behind a frozen one") {
    RedisTestCluster cluster(3, 0);
    publish::RedisClusterSink sink(cluster.address());
    GatewayProcess gateway(cluster.url(), kSecret, {"--public", "db:*"});
    const std::string frozen_channel = channel_not_on(cluster, "t", -1);
    const int frozen = owner_of_channel(cluster, frozen_channel);
    const std::string healthy_channel = channel_not_on(cluster, "u", frozen);
    sink.publish(frozen_channel, doc_of(1), DocVersion{1, 0x10});
    sink.publish(healthy_channel, doc_of(2), DocVersion{1, 0x10});
    REQUIRE(http_get(gateway.port(), "/v1/docs/" + healthy_channel).status == 200);
    REQUIRE(http_get(gateway.port(), "/v1/docs/" + frozen_channel).status == 200);

    Frozen freeze(cluster.node(frozen).pid());
    // A steady trickle of GETs on the frozen master: 4 clients, each asking again once answered.
    std::atomic<bool> stop{false};
    std::vector<std::future<std::pair<double, HttpAnswer>>> first_answers;
    std::vector<std::thread> trickle;
    for (int k = 0; k < 4; ++k) {
        auto promise = std::make_shared<std::promise<std::pair<double, HttpAnswer>>>();
        first_answers.push_back(promise->get_future());
        trickle.emplace_back([&, promise] {
            bool first = true;
            while (!stop) {
                auto started = std::chrono::steady_clock::now();
                HttpAnswer a;
                try {
                    a = http_get(gateway.port(), "/v1/docs/" + frozen_channel);
                } catch (const std::exception&) {
                }
                if (first) promise->set_value({seconds_since(started), a});
                first = false;
            }
        });
    }
    struct Joiner {
        std::atomic<bool>& stop;
        std::vector<std::thread>& threads;
        Frozen& freeze;
        ~Joiner() {
            stop = true;
            freeze.thaw();  // the GETs still out come back
            for (auto& t : threads)
                if (t.joinable()) t.join();
        }
    } joiner{stop, trickle, freeze};
    std::this_thread::sleep_for(1500ms);
    double worst = 0;
    std::string log;
    for (int i = 0; i < 8; ++i) {
        auto started = std::chrono::steady_clock::now();
        auto a = http_get(gateway.port(), "/v1/docs/" + healthy_channel);
        double took = seconds_since(started);
        worst = std::max(worst, took);
        log += std::to_string(took).substr(0, 5) + ":" + std::to_string(a.status) + " ";
        CHECK(a.status == 200);
        std::this_thread::sleep_for(500ms);
    }
    INFO("GET " << healthy_channel << " (seconds:status) while the master of " << frozen_channel << " was frozen: " << log);
    CHECK(worst < 1.0);
    // A read for the frozen master fails within its command timeout (5 s), a 503 naming Redis.
    const std::string frozen_port = std::to_string(cluster.node(frozen).port());
    for (auto& f : first_answers) {
        REQUIRE(f.wait_for(10s) == std::future_status::ready);
        auto answer = f.get();
        double took = answer.first;
        const auto& a = answer.second;  // INFO takes a variable, not a structured binding
        INFO(a.body);
        CHECK(took < 6.0);
        CHECK(a.status == 503);
        CHECK(a.body.find("Redis") != std::string::npos);
        CHECK(a.body.find(frozen_port) != std::string::npos);
    }
}

TEST_CASE("gateway on a Redis Cluster: started while its first seed is frozen, /healthz and reads on healthy masters answer at once") {
    RedisTestCluster cluster(3, 0);
    publish::RedisClusterSink sink(cluster.address());
    const std::string channel = channel_not_on(cluster, "t", 0);
    sink.publish(channel, doc_of(1), DocVersion{1, 0x10});
    const std::string frozen_port = std::to_string(cluster.node(0).port());
    Frozen freeze(cluster.node(0).pid());
    // The frozen node first: asking the seeds in order would cost --redis's command timeout (5 s).
    const std::string url = "redis-cluster://127.0.0.1:" + frozen_port + ",127.0.0.1:" +
                            std::to_string(cluster.node(1).port()) + ",127.0.0.1:" + std::to_string(cluster.node(2).port());
    // Its start waits for its first /healthz: that one too answers within its own timeout (the
    // map is learned from the other seeds meanwhile), not after the frozen seed's command timeout.
    auto starting = std::chrono::steady_clock::now();
    GatewayProcess gateway(url, kSecret, {"--public", "db:*"});
    CHECK(seconds_since(starting) < 2.5);
    auto doc = timed_get(gateway.port(), "/v1/docs/" + channel);
    INFO("GET " << channel << " on a healthy master: " << doc.seconds << " s: " << doc.text);
    CHECK(doc.status == 200);
    CHECK(doc.seconds < 2.0);
    std::string log;
    double slowest = 0;
    int named = 0;
    for (int i = 0; i < 8; ++i) {
        auto h = timed_get(gateway.port(), "/healthz");
        log += std::to_string(h.status) + ":" + std::to_string(h.seconds).substr(0, 5) + " ";
        slowest = std::max(slowest, h.seconds);
        if (h.status == 503 && h.text.find(frozen_port) != std::string::npos) ++named;
        std::this_thread::sleep_for(200ms);
    }
    INFO("/healthz (status:seconds): " << log);
    CHECK(slowest < 2.0);  // its own timeout (1 s), never a command timeout
    CHECK(named == 8);     // down, naming the master that does not answer
}

TEST_CASE("gateway on a Redis Cluster: while its only seed is frozen, /healthz and reads say no seed answered, at once") {
    RedisTestCluster cluster(3, 0);
    const std::string frozen_port = std::to_string(cluster.node(0).port());
    Frozen freeze(cluster.node(0).pid());
    GatewayProcess gateway("redis-cluster://127.0.0.1:" + frozen_port, kSecret, {"--public", "db:*"});
    auto doc = timed_get(gateway.port(), "/v1/docs/db:t:1");
    INFO("GET /v1/docs/db:t:1: " << doc.seconds << " s: " << doc.text);
    CHECK(doc.status == 503);
    CHECK(doc.seconds < 2.0);
    CHECK(doc.text.find("no seed") != std::string::npos);
    std::string log;
    double slowest = 0;
    int told = 0;
    for (int i = 0; i < 8; ++i) {
        auto h = timed_get(gateway.port(), "/healthz");
        log += std::to_string(h.status) + ":" + std::to_string(h.seconds).substr(0, 5) + " ";
        slowest = std::max(slowest, h.seconds);
        if (h.status == 503 && h.text.find(frozen_port) != std::string::npos) ++told;
        std::this_thread::sleep_for(200ms);
    }
    INFO("/healthz (status:seconds): " << log);
    CHECK(slowest < 2.0);
    CHECK(told == 8);
    // Thawed, the map is learned and the gateway reads up.
    freeze.thaw();
    CHECK(eventually([&] { return timed_get(gateway.port(), "/healthz").status == 200; }, 15s));
}
