// TicketLedger: the engine's tickets complete in stream order, once nothing holds their sequence or
// an earlier one: no transaction is reported done while something it dirtied lacks a durable
// outcome (invariant 1 (docs/design.md)).
#include "engine/ticket_ledger.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <vector>

using docsync::TicketLedger;

namespace {

using Tickets = std::vector<std::uint64_t>;

Tickets collect(TicketLedger& ledger) {
    Tickets out;
    std::size_t n = ledger.collect_completed(out);
    CHECK(n == out.size());
    return out;
}

// A transaction that waits on `slot` (a doc's next compute): commits with ticket `ticket`.
std::uint64_t commit_on(TicketLedger& ledger, std::uint64_t& slot, std::uint64_t ticket) {
    std::uint64_t seq = ledger.next_seq();
    ledger.wait(slot, seq);
    ledger.enqueue(ticket);
    return seq;
}

// A transaction that waits on something of its own (a keys lookup): holds its own sequence.
std::uint64_t commit_held(TicketLedger& ledger, std::uint64_t ticket) {
    std::uint64_t seq = ledger.next_seq();
    ledger.hold(seq);
    ledger.enqueue(ticket);
    return seq;
}

}  // namespace

TEST_CASE("a later transaction released first waits for the earlier one, then both complete in order") {
    TicketLedger ledger;
    auto s1 = commit_held(ledger, 101);
    auto s2 = commit_held(ledger, 102);
    auto s3 = commit_held(ledger, 103);
    CHECK(s1 < s2);
    CHECK(s2 < s3);
    ledger.release(s3);
    ledger.release(s2);
    CHECK(collect(ledger).empty());  // 102 and 103 are done, but 101 is not
    CHECK(ledger.waiting() == 3);
    ledger.release(s1);
    CHECK(collect(ledger) == Tickets{101, 102, 103});
    CHECK(ledger.waiting() == 0);
}

TEST_CASE("collect returns only the completed prefix, each ticket once") {
    TicketLedger ledger;
    auto s1 = commit_held(ledger, 1);
    auto s2 = commit_held(ledger, 2);
    auto s3 = commit_held(ledger, 3);
    ledger.release(s1);
    CHECK(collect(ledger) == Tickets{1});
    CHECK(collect(ledger).empty());  // never twice
    ledger.release(s3);
    CHECK(collect(ledger).empty());  // 3 is free, but 2 holds it back
    ledger.release(s2);
    CHECK(collect(ledger) == Tickets{2, 3});
    CHECK(collect(ledger).empty());
}

TEST_CASE("holds count: a sequence held twice is free only after both releases") {
    TicketLedger ledger;
    std::uint64_t seq = ledger.next_seq();
    ledger.hold(seq);  // a keys lookup
    ledger.hold(seq);  // a doc
    ledger.enqueue(7);
    ledger.release(seq);
    CHECK(collect(ledger).empty());
    ledger.release(seq);
    CHECK(collect(ledger) == Tickets{7});
    ledger.release(seq);  // released once too often: nothing held, nothing happens
    CHECK(collect(ledger).empty());
}

TEST_CASE("a doc waited on by two transactions holds the oldest, and its outcome completes both") {
    TicketLedger ledger;
    std::uint64_t doc = 0;
    auto s1 = commit_on(ledger, doc, 1);
    commit_on(ledger, doc, 2);
    CHECK(doc == s1);  // one hold, on the older
    CHECK(collect(ledger).empty());
    ledger.settle(doc);
    CHECK(doc == 0);
    CHECK(collect(ledger) == Tickets{1, 2});
}

TEST_CASE("a doc whose slot holds a later transaction moves its hold to an older one that waits on it") {
    TicketLedger ledger;
    std::uint64_t lookup_seq = commit_held(ledger, 1);  // an older transaction, waiting on a lookup
    std::uint64_t doc = 0;
    commit_on(ledger, doc, 2);
    // The lookup ends and names the doc: the older transaction waits on the doc now.
    ledger.wait(doc, lookup_seq);
    CHECK(doc == lookup_seq);
    ledger.release(lookup_seq);
    CHECK(collect(ledger).empty());  // the doc holds both
    ledger.settle(doc);
    CHECK(collect(ledger) == Tickets{1, 2});
}

TEST_CASE("a transaction that waits on a doc an older one holds is not complete until the doc settles") {
    TicketLedger ledger;
    std::uint64_t doc = 0;
    commit_on(ledger, doc, 1);
    auto s2 = ledger.next_seq();
    ledger.wait(doc, s2);  // takes no hold of its own: the doc holds the older sequence
    ledger.enqueue(2);
    auto s3 = commit_held(ledger, 3);
    ledger.release(s3);
    CHECK(collect(ledger).empty());
    ledger.settle(doc);
    CHECK(collect(ledger) == Tickets{1, 2, 3});
}

TEST_CASE("a doc dirtied again while it computes: the running compute completes only the earlier waiters") {
    TicketLedger ledger;
    std::uint64_t pending = 0, flight = 0;
    auto s1 = commit_on(ledger, pending, 1);
    ledger.hand_over(pending, flight);  // the compute starts
    CHECK(flight == s1);
    CHECK(pending == 0);
    auto s2 = commit_on(ledger, pending, 2);  // a change while it runs
    CHECK(pending == s2);
    ledger.settle(flight);  // published
    CHECK(collect(ledger) == Tickets{1});
    CHECK(ledger.waiting() == 1);
    ledger.hand_over(pending, flight);  // one more round
    ledger.settle(flight);
    CHECK(collect(ledger) == Tickets{2});
}

TEST_CASE("a retried compute hands its waiters to the next one, which completes them all") {
    TicketLedger ledger;
    std::uint64_t pending = 0, flight = 0;
    auto s1 = commit_on(ledger, pending, 1);
    ledger.hand_over(pending, flight);
    commit_on(ledger, pending, 2);
    ledger.hand_over(flight, pending);  // not visible yet: retried
    CHECK(flight == 0);
    CHECK(pending == s1);  // the older of the two
    CHECK(collect(ledger).empty());
    ledger.hand_over(pending, flight);
    ledger.settle(flight);
    CHECK(collect(ledger) == Tickets{1, 2});
    // Nothing is left held: a new transaction completes as soon as its own hold goes.
    auto s3 = commit_held(ledger, 3);
    ledger.release(s3);
    CHECK(collect(ledger) == Tickets{3});
}

TEST_CASE("sequence 0 is nobody: holding, waiting on or releasing it changes nothing") {
    TicketLedger ledger;
    std::uint64_t doc = 0;
    ledger.hold(0);
    ledger.wait(doc, 0);
    CHECK(doc == 0);
    ledger.release(0);
    ledger.settle(doc);
    std::uint64_t other = 0;
    ledger.hand_over(doc, other);
    CHECK(other == 0);
    auto s1 = commit_held(ledger, 1);
    ledger.release(s1);
    CHECK(collect(ledger) == Tickets{1});
}

TEST_CASE("a reset forgets waiting tickets and holds, releases of forgotten sequences are ignored") {
    TicketLedger ledger;
    auto s1 = commit_held(ledger, 1);
    auto s2 = commit_held(ledger, 2);
    ledger.reset();
    CHECK(ledger.waiting() == 0);
    CHECK(collect(ledger).empty());  // never completed
    auto s3 = commit_held(ledger, 3);
    CHECK(s3 > s2);  // sequences keep growing across epochs
    ledger.release(s1);
    ledger.release(s2);
    CHECK(collect(ledger).empty());
    ledger.release(s3);
    CHECK(collect(ledger) == Tickets{3});
}

TEST_CASE("a transaction that waited on nothing leaves its sequence to the next one") {
    TicketLedger ledger;
    auto seq = ledger.next_seq();
    // It dirtied no live doc: not queued; the engine completes its ticket at once.
    CHECK(ledger.next_seq() == seq);
    auto s1 = commit_held(ledger, 5);
    CHECK(s1 == seq);
    ledger.release(s1);
    CHECK(collect(ledger) == Tickets{5});
}

TEST_CASE("random holds and releases: a ticket completes exactly when nothing holds it or an earlier one") {
    std::mt19937_64 rng(20240611);
    for (int round = 0; round < 50; ++round) {
        TicketLedger ledger;
        std::map<std::uint64_t, int> held;  // the model: sequence → holds
        std::vector<std::uint64_t> seqs;    // queued, by ticket (ticket = index + 1)
        Tickets completed;
        for (int step = 0; step < 400; ++step) {
            auto r = rng() % 10;
            if (r < 4 || seqs.empty()) {
                std::uint64_t seq = ledger.next_seq();
                int holds = 1 + static_cast<int>(rng() % 3);
                for (int i = 0; i < holds; ++i) ledger.hold(seq);
                held[seq] += holds;
                ledger.enqueue(seqs.size() + 1);
                seqs.push_back(seq);
            } else if (!held.empty()) {
                auto it = held.begin();
                std::advance(it, static_cast<long>(rng() % held.size()));
                ledger.release(it->first);
                if (--it->second == 0) held.erase(it);
            }
            Tickets out;
            ledger.collect_completed(out);
            completed.insert(completed.end(), out.begin(), out.end());
            // The model: ticket t is complete iff no sequence <= its own is held.
            std::uint64_t oldest_held =
                held.empty() ? std::numeric_limits<std::uint64_t>::max() : held.begin()->first;
            std::size_t expect = 0;
            while (expect < seqs.size() && seqs[expect] < oldest_held) ++expect;
            REQUIRE(completed.size() == expect);
            for (std::size_t i = 0; i < completed.size(); ++i) REQUIRE(completed[i] == i + 1);
            REQUIRE(ledger.waiting() == seqs.size() - expect);
        }
    }
}
