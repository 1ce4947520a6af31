// docsync-gateway on a Redis Cluster with one master frozen (SIGSTOP: it still takes TCP connects,
// answers nothing, and no replica takes over): /healthz reads down and names it, and reads of
// channels on the other masters never wait behind it.
#include <signal.h>

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
        auto [took, a] = f.get();
        INFO(a.body);
        CHECK(took < 6.0);
        CHECK(a.status == 503);
        CHECK(a.body.find("Redis") != std::string::npos);
        CHECK(a.body.find(frozen_port) != std::string::npos);
    }
}
