// DeliveryProgressCoordinator: acknowledgements only at contiguous transaction boundaries.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "progress/coordinator.hpp"

using docsync::DeliveryProgressCoordinator;
using docsync::Lsn;

namespace {

// Records every acknowledgement, as the stream would send it upstream.
class FakeAcknowledger : public docsync::Acknowledger {
public:
    void acknowledge(Lsn lsn) override {
        std::lock_guard lock(mutex);
        acked.push_back(lsn);
    }
    Lsn last() {
        std::lock_guard lock(mutex);
        return acked.empty() ? 0 : acked.back();
    }
    std::mutex mutex;
    std::vector<Lsn> acked;
};

}  // namespace

TEST_CASE("out-of-order completion acknowledges only the contiguous prefix") {
    FakeAcknowledger ack;
    DeliveryProgressCoordinator c(&ack);
    auto t1 = c.register_txn(100);
    auto t2 = c.register_txn(200);
    auto t3 = c.register_txn(300);
    CHECK(c.complete(t3) == 0);
    CHECK(c.complete(t2) == 0);
    CHECK(ack.acked.empty());
    CHECK(c.pending_groups() == 3);
    CHECK(c.complete(t1) == 300);  // all three became contiguous at once
    CHECK(ack.acked == std::vector<Lsn>{300});
    CHECK(c.idle());
}

TEST_CASE("a held-back transaction holds every later one") {
    FakeAcknowledger ack;
    DeliveryProgressCoordinator c(&ack);
    std::vector<std::uint64_t> tickets;
    for (Lsn l = 1; l <= 10; ++l) tickets.push_back(c.register_txn(l * 100));
    for (std::size_t i = 0; i < tickets.size(); ++i)
        if (i != 4) c.complete(tickets[i]);
    CHECK(ack.last() == 400);  // stops right before the fifth transaction
    CHECK(c.checkpoint() == 400);
    c.complete(tickets[4]);
    CHECK(ack.last() == 1000);
}

TEST_CASE("a multi-item group advances only when every item is done and the group is closed") {
    FakeAcknowledger ack;
    DeliveryProgressCoordinator c(&ack);
    auto a = c.register_item(110, false);
    auto b = c.register_item(120, false);
    c.complete(a);
    c.complete(b);
    CHECK(ack.acked.empty());  // the group is still open: more items may follow
    auto d = c.register_item(150, true);
    CHECK(ack.acked.empty());
    c.complete(d);
    CHECK(ack.acked == std::vector<Lsn>{150});  // the group's position is its last item's
}

TEST_CASE("finalize closes the last group at a clean end of stream") {
    FakeAcknowledger ack;
    DeliveryProgressCoordinator c(&ack);
    auto a = c.register_txn(100);
    auto b = c.register_item(180, false);
    c.complete(a);
    c.complete(b);
    CHECK(ack.last() == 100);
    CHECK(c.finalize() == 180);
    CHECK(ack.last() == 180);
    CHECK(c.finalize() == 180);  // idempotent
    CHECK(ack.acked.size() == 2);
}

TEST_CASE("finalize does not advance past incomplete work") {
    DeliveryProgressCoordinator c;
    auto a = c.register_item(100, false);
    CHECK(c.finalize() == 0);
    c.complete(a);
    CHECK(c.checkpoint() == 100);
}

TEST_CASE("registration after completion starts a new group") {
    FakeAcknowledger ack;
    DeliveryProgressCoordinator c(&ack);
    auto a = c.register_txn(100);
    c.complete(a);
    CHECK(c.idle());
    auto b = c.register_txn(200);
    CHECK_FALSE(c.idle());
    CHECK(c.checkpoint() == 100);
    c.complete(b);
    CHECK(ack.acked == std::vector<Lsn>{100, 200});
}

TEST_CASE("completing unregistered work or completing twice is an error") {
    DeliveryProgressCoordinator c;
    CHECK_THROWS_WITH_AS(c.complete(1), doctest::Contains("completed before registration"), docsync::Error);
    CHECK_THROWS_AS(c.complete(0), docsync::Error);
    auto a = c.register_txn(100);
    auto b = c.register_txn(200);
    CHECK_THROWS_WITH_AS(c.complete(b + 1), doctest::Contains("before registration"), docsync::Error);
    c.complete(b);
    CHECK_THROWS_WITH_AS(c.complete(b), doctest::Contains("completed twice"), docsync::Error);
    c.complete(a);
    CHECK_THROWS_WITH_AS(c.complete(a), doctest::Contains("completed twice"), docsync::Error);
    CHECK(c.checkpoint() == 200);
}

TEST_CASE("a new epoch drops pending groups and ignores completions from older epochs") {
    FakeAcknowledger ack;
    DeliveryProgressCoordinator c(&ack);
    auto old1 = c.register_txn(100);
    auto old2 = c.register_txn(200);
    c.complete(old1);
    CHECK(ack.last() == 100);
    CHECK(c.new_epoch() == 2);
    CHECK(c.idle());
    // The server redelivers the transaction at 200 under the new epoch.
    auto again = c.register_txn(200);
    CHECK_NOTHROW(c.complete(old2));  // a late completion of the old session: ignored
    CHECK(c.checkpoint() == 100);
    CHECK(c.stats().stale_completions == 1);
    c.complete(again);
    CHECK(ack.acked == std::vector<Lsn>{100, 200});
}

TEST_CASE("acknowledgements never go backwards, also for redelivered transactions") {
    FakeAcknowledger ack;
    DeliveryProgressCoordinator c(&ack, 500);
    auto a = c.register_txn(300);  // redelivered below the confirmed position
    c.complete(a);
    CHECK(ack.acked.empty());
    CHECK(c.checkpoint() == 500);
    c.set_checkpoint_floor(400);
    CHECK(c.checkpoint() == 500);
    auto b = c.register_txn(700);
    c.complete(b);
    CHECK(ack.acked == std::vector<Lsn>{700});
}

TEST_CASE("the keepalive rule: a WAL end is acknowledged only when nothing is pending") {
    FakeAcknowledger ack;
    DeliveryProgressCoordinator c(&ack);
    CHECK(c.acknowledge_idle(1000));
    CHECK(ack.last() == 1000);
    CHECK_FALSE(c.acknowledge_idle(900));  // never backwards
    auto a = c.register_txn(1500);
    CHECK_FALSE(c.acknowledge_idle(2000));  // a transaction is pending
    CHECK(c.checkpoint() == 1000);
    c.complete(a);
    CHECK(ack.last() == 1500);
    CHECK(c.acknowledge_idle(2000));
    CHECK(ack.acked == std::vector<Lsn>{1000, 1500, 2000});
}

TEST_CASE("pending bytes are counted until their group is advanced past") {
    DeliveryProgressCoordinator c;
    auto a = c.register_txn(100, 4000);
    auto b = c.register_txn(200, 1000);
    CHECK(c.pending_bytes() == 5000);
    c.complete(b);
    CHECK(c.pending_bytes() == 5000);
    c.complete(a);
    CHECK(c.pending_bytes() == 0);
    c.register_txn(300, 10);
    c.new_epoch();
    CHECK(c.pending_bytes() == 0);
}

TEST_CASE("concurrent completers: the checkpoint ends at the last position and acks only increase") {
    FakeAcknowledger ack;
    DeliveryProgressCoordinator c(&ack);
    constexpr int kTxns = 4000;
    std::vector<std::uint64_t> tickets;
    for (int i = 1; i <= kTxns; ++i) tickets.push_back(c.register_txn(static_cast<Lsn>(i) * 16));
    std::shuffle(tickets.begin(), tickets.end(), std::mt19937(42));
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&] {
            for (std::size_t i; (i = next.fetch_add(1)) < tickets.size();) c.complete(tickets[i]);
        });
    for (auto& t : threads) t.join();
    CHECK(c.checkpoint() == static_cast<Lsn>(kTxns) * 16);
    CHECK(c.idle());
    CHECK(std::is_sorted(ack.acked.begin(), ack.acked.end()));
    CHECK(std::adjacent_find(ack.acked.begin(), ack.acked.end()) == ack.acked.end());
}

TEST_CASE("concurrent registration and completion: no acknowledgement passes an incomplete transaction") {
    FakeAcknowledger ack;
    DeliveryProgressCoordinator c(&ack);
    constexpr int kTxns = 3000;
    std::mutex queue_mutex;
    std::vector<std::pair<std::uint64_t, Lsn>> queue;
    std::atomic<bool> done{false};
    std::atomic<Lsn> lowest_incomplete_seen_violation{0};
    std::thread producer([&] {
        for (int i = 1; i <= kTxns; ++i) {
            Lsn lsn = static_cast<Lsn>(i) * 10;
            auto t = c.register_txn(lsn);
            std::lock_guard lock(queue_mutex);
            queue.emplace_back(t, lsn);
        }
        done = true;
    });
    std::vector<std::thread> completers;
    std::mutex held_mutex;
    Lsn held_lsn = 15000;  // held back until the producer is done
    std::uint64_t held_ticket = 0;
    for (int t = 0; t < 3; ++t)
        completers.emplace_back([&, t] {
            std::mt19937 rng(t);
            for (;;) {
                std::pair<std::uint64_t, Lsn> item{0, 0};
                {
                    std::lock_guard lock(queue_mutex);
                    if (!queue.empty()) {
                        std::size_t i = rng() % queue.size();
                        item = queue[i];
                        queue[i] = queue.back();
                        queue.pop_back();
                    }
                }
                if (item.first == 0) {
                    if (done) {
                        std::lock_guard lock(queue_mutex);
                        if (queue.empty()) return;
                    }
                    std::this_thread::yield();
                    continue;
                }
                if (item.second == held_lsn) {
                    std::lock_guard lock(held_mutex);
                    held_ticket = item.first;
                    continue;
                }
                c.complete(item.first);
                if (c.checkpoint() >= held_lsn) lowest_incomplete_seen_violation = c.checkpoint();
            }
        });
    producer.join();
    for (auto& t : completers) t.join();
    CHECK(lowest_incomplete_seen_violation.load() == 0);
    CHECK(c.checkpoint() == held_lsn - 10);
    REQUIRE(held_ticket != 0);
    c.complete(held_ticket);
    CHECK(c.checkpoint() == static_cast<Lsn>(kTxns) * 10);
    CHECK(std::is_sorted(ack.acked.begin(), ack.acked.end()));
}
