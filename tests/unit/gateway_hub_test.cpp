// The gateway's hub against a fake FeedPort: read before subscribe, the retained doc read again
// once subscribed, versions only rising, warm and touch announcements, and /healthz's verdict.
#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>

#include <deque>
#include <set>

#include "gateway/hub.hpp"

using namespace docsync;
using namespace docsync::gateway;
using namespace std::chrono_literals;

namespace {

class FakeFeed : public FeedPort {
public:
    std::set<std::string> following;
    std::deque<std::pair<std::string, std::function<void(FeedRead)>>> reads;  // waiting, oldest first
    std::vector<std::pair<std::string, bool>> announced;                     // channel, warm
    std::vector<std::function<void(FeedRead)>> probes;
    std::chrono::milliseconds probe_timeout{0};
    bool is_up = true;

    void set_following(const std::string& channel, bool follow) override {
        if (follow) following.insert(channel);
        else following.erase(channel);
    }
    void read(const std::string& channel, std::function<void(FeedRead)> done) override {
        reads.emplace_back(channel, std::move(done));
    }
    void announce(const std::string& channel, bool warm) override { announced.emplace_back(channel, warm); }
    void probe(std::chrono::milliseconds timeout, std::function<void(FeedRead)> done) override {
        probe_timeout = timeout;
        probes.push_back(std::move(done));
    }
    bool up() const override { return is_up; }

    // Answers the oldest read waiting: `value`, nullopt (no doc), or an error.
    void answer(std::optional<std::string> value, std::string error = {}) {
        REQUIRE(!reads.empty());
        auto done = std::move(reads.front().second);
        reads.pop_front();
        done(FeedRead{error.empty(), std::move(value), std::move(error)});
    }
};

struct Recorder : Follower {
    std::vector<int> ns;  // each doc's "n"
    std::vector<std::string> notices;
    void on_doc(const DocPtr& doc) override {
        auto at = doc->envelope.find("\"n\":");
        ns.push_back(std::atoi(doc->envelope.c_str() + at + 4));
    }
    void on_notice(const std::string&, const std::string& code, const std::string&) override { notices.push_back(code); }
};

std::string envelope(const std::string& channel, int n, int lsn) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "%X", lsn);
    return R"({"channel":")" + channel + R"(","doc":{"n":)" + std::to_string(n) + R"(},"generation":1,"lsn":"0/)" + hex + "\"}";
}

struct Fixture {
    boost::asio::io_context io;
    FakeFeed feed;
    Hub hub{io, feed};
    void settle() {
        io.restart();
        io.poll();
    }
};

}  // namespace

TEST_CASE("gateway hub: a channel is read, subscribed, read again, announced; versions only rise") {
    Fixture f;
    Recorder client;
    const std::string channel = "db:order:42";
    f.hub.follow(channel, &client);
    REQUIRE(f.feed.reads.size() == 1);  // read before subscribing
    CHECK(f.feed.following.empty());
    f.feed.answer(envelope(channel, 1, 0x10));
    f.settle();
    CHECK(client.ns == std::vector<int>{1});
    CHECK(f.feed.following.count(channel) == 1);  // Redis holds the doc: subscribed
    f.hub.on_subscribed(channel);                // the subscription is in place: read again
    REQUIRE(f.feed.reads.size() == 1);
    f.feed.answer(envelope(channel, 2, 0x20));
    f.settle();
    CHECK(client.ns == std::vector<int>{1, 2});
    CHECK(f.feed.announced == std::vector<std::pair<std::string, bool>>{{channel, false}});  // docsync:touch
    // Messages: newer ones go out, an older or equal one does not.
    f.hub.receive(channel, envelope(channel, 3, 0x30));
    f.settle();
    f.hub.receive(channel, envelope(channel, 0, 0x08));
    f.settle();
    CHECK(client.ns == std::vector<int>{1, 2, 3});
    CHECK(f.hub.stats().stale == 1);
    // A second follower gets the newest at once; the last one leaving unsubscribes.
    Recorder late;
    f.hub.follow(channel, &late);
    CHECK(late.ns == std::vector<int>{3});
    f.hub.unfollow(channel, &client);
    CHECK(f.feed.following.count(channel) == 1);
    f.hub.unfollow(channel, &late);
    CHECK(f.feed.following.empty());
    CHECK(f.hub.stats().channels == 0);
}

TEST_CASE("gateway hub: a channel Redis holds no doc for asks the worker (docsync:warm); a failed read is retried") {
    Fixture f;
    Recorder client;
    f.hub.follow("db:order:7", &client);
    f.feed.answer(std::nullopt);
    f.settle();
    CHECK(f.feed.following.count("db:order:7") == 1);
    CHECK(f.hub.stats().missing == 1);
    f.hub.on_subscribed("db:order:7");
    f.feed.answer(std::nullopt);
    f.settle();
    CHECK(f.feed.announced == std::vector<std::pair<std::string, bool>>{{"db:order:7", true}});
    // Redis away at the first read: not subscribed unread; read again a second later.
    Recorder other;
    f.hub.follow("db:order:8", &other);
    f.feed.answer(std::nullopt, "Redis Cluster node 127.0.0.1:7001 did not answer GET within 5000 ms");
    f.settle();
    CHECK(f.feed.following.count("db:order:8") == 0);
    CHECK(f.hub.stats().deferred == 1);
    f.io.restart();
    f.io.run_for(1500ms);
    CHECK(f.feed.reads.size() == 1);
    CHECK(f.feed.reads.front().first == "db:order:8");
}

TEST_CASE("gateway hub: /healthz's verdict is the feed's probe, with the subscriber up, within the timeout") {
    Fixture f;
    std::vector<std::pair<bool, std::string>> verdicts;
    auto ask = [&] { f.hub.health(300ms, [&](bool up, std::string why) { verdicts.emplace_back(up, why); }); };
    ask();
    ask();  // shares the probe out
    REQUIRE(f.feed.probes.size() == 1);
    CHECK(f.feed.probe_timeout == 300ms);
    f.feed.probes.back()(FeedRead{true, "PONG", {}});
    f.settle();
    REQUIRE(verdicts.size() == 2);
    CHECK(verdicts[0].first);
    CHECK(verdicts[1].first);

    ask();
    f.feed.probes.back()(FeedRead{false, std::nullopt, "Redis Cluster node 127.0.0.1:7001 did not answer PING within 300 ms"});
    f.settle();
    REQUIRE(verdicts.size() == 3);
    CHECK_FALSE(verdicts[2].first);
    CHECK(verdicts[2].second.find("127.0.0.1:7001") != std::string::npos);

    f.feed.is_up = false;
    ask();
    f.feed.probes.back()(FeedRead{true, "PONG", {}});
    f.settle();
    REQUIRE(verdicts.size() == 4);
    CHECK_FALSE(verdicts[3].first);
    CHECK(verdicts[3].second == "the subscriber connection is down");

    // A probe never answered: down by the timeout (and a little), not later.
    f.feed.is_up = true;
    ask();
    auto started = std::chrono::steady_clock::now();
    f.io.restart();
    while (verdicts.size() < 5 && std::chrono::steady_clock::now() - started < 2s) f.io.run_for(20ms);
    REQUIRE(verdicts.size() == 5);
    CHECK_FALSE(verdicts[4].first);
    CHECK(std::chrono::steady_clock::now() - started < 1s);
}
