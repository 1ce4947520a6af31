#pragma once
// The continuous audit (--audit-rate): one thread that recomputes a random sample of the live docs
// and compares each with what the sink retains, so a doc the sink holds wrongly — whatever lost or
// changed it — is found, reported and published again instead of staying wrong until its next change.
//
// It runs beside the engine, never inside it: its computes go through the Runner one at a time
// (taking one pool connection while they run), paced evenly over the minute, and it registers no
// ticket, so it never delays an acknowledgement (invariant 1 (docs/design.md)). It pauses while a
// recompute of every live doc runs (that recompute heals what the sink may have missed, and changes
// every doc's version), before the first one has finished, and while the dirty backlog is large.
//
// The divergence rule, which never blames the sink for a concurrent update. A sample of a doc is
// computed at a snapshot S (DocOutcome::snapshot_lsn); its version is v_s = (the generation in force,
// S), as the engine versions docs (the doc versions rule (docs/design.md)). The audit then waits,
// bounded, until the worker's acknowledged position has reached S: every transaction the snapshot
// sees has had its docs published. S is the WAL insert position read after the snapshot was taken,
// never the write position: under synchronous_commit = off a commit is visible before its WAL is
// written, and a sample judged at the write position would blame the sink for a commit the stream
// had not delivered yet (tests/scenarios/worker_audit_async.sh). Then it reads what the sink retains (v_r, doc_r):
//   - v_r > v_s: a later change was published meanwhile; the sample proves nothing (newer);
//   - v_r <= v_s and doc_r equals the sample: agreement;
//   - v_r <= v_s and doc_r differs, or nothing is retained for a doc that exists: suspected.
// A sample is skipped when the generation, the definitions (the doc query may have changed) or the
// recompute of every live doc changed since its draw, and a suspected doc the engine has work pending
// for is skipped too (its next publish is coming). Otherwise
// the doc is computed and judged again a moment later, and only a second suspicion is a divergence
// (unless the two computes gave two docs while the sink held one version: a doc query that is not a
// function of the data, such as one calling now() or random(), cannot be audited, and says so):
// a commit written to WAL before S but not yet visible to the snapshot (its visibility follows its
// WAL record by a moment, by much longer behind a synchronous standby) is published later at a
// version that may equal v_s, and the second sample, taken after the acknowledged position passed S,
// sees it. A divergence is logged (a warning naming the channel and both versions, never a doc's
// content), counted, and healed by publishing the second sample with its version through
// Publisher::restore, which never puts it in front of a newer doc. Docs are compared as the sink
// holds them: compact JSON text (envelope/envelope.hpp), which the doc query's output gives
// identically for equal data; a null doc and a doc the sink holds nothing for agree (a tombstone
// expires).
//
// A sink that retains nothing (stdout) cannot be audited: the audit is off there.
//
// Threads: start() starts the audit's thread; stop(), stats() and audit_one() may be called from any
// thread (audit_one runs one sample on the caller's, for tests).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "common/lsn.hpp"
#include "engine/engine.hpp"
#include "engine/seams.hpp"

namespace docsync::audit {

struct AuditorOptions {
    // --audit-rate: percent of the live docs sampled per minute; 0: off. rate_given: it was set
    // (flag, variable or config key), so a sink that cannot be audited deserves a warning.
    double rate = 1.0;
    bool rate_given = false;
    std::string sink = "the sink";  // how messages name the sink (the --sink value)
    // The longest wait for the acknowledged position to reach a sample's snapshot; past it the
    // sample is skipped (a stalled sink or pool: status says so elsewhere).
    std::chrono::milliseconds ack_wait{std::chrono::seconds(30)};
    // How often the acknowledged position is looked at while waiting.
    std::chrono::milliseconds ack_poll{std::chrono::milliseconds(10)};
    // How long after a suspicion the doc is computed again.
    std::chrono::milliseconds confirm_delay{std::chrono::seconds(1)};
    // Dirty docs and keys lookups waiting above which the audit pauses: the pool is busy with work
    // that matters more.
    std::uint64_t max_backlog = 1000;
    // How often a paused (or idle: no live doc) audit looks again, and how old the engine's figures
    // it paces by may be.
    std::chrono::milliseconds idle_check{std::chrono::seconds(1)};
    std::uint64_t seed = 0;  // of the draws; 0: a random one
};

// What one sample came to.
enum class Verdict {
    Agree,     // the sink retains what a fresh compute gives
    Newer,     // the sink retains a later version: a change was published meanwhile
    Diverged,  // the sink held it wrongly, twice in a row: counted and published again
    Skipped,   // not judged: no live doc drawn, paused, the doc busy, a failed compute or read-back,
               // or the acknowledged position did not reach the snapshot in time
};

struct AuditStats {
    std::uint64_t samples = 0;  // judged: agreed, newer or diverged
    std::uint64_t divergences = 0;
    std::uint64_t skipped = 0;
};

class Auditor {
  public:
    // `acknowledged` is the worker's acknowledged position (the coordinator's checkpoint): every
    // transaction that ends at or before it has its docs published.
    Auditor(Engine& engine, Runner& runner, Publisher& publisher, std::function<Lsn()> acknowledged,
            AuditorOptions options);
    ~Auditor();  // stops
    Auditor(const Auditor&) = delete;
    Auditor& operator=(const Auditor&) = delete;

    // Starts the audit's thread and logs one line saying at what rate; or, when the rate is 0 or the
    // sink retains nothing, logs why the audit is off and returns false.
    bool start();
    // Ends the thread after its current sample (a wait in it ends at once). Idempotent.
    void stop();

    // One sample, drawn with `random`, on the calling thread.
    Verdict audit_one(std::uint64_t random);

    AuditStats stats() const;

  private:
    // One compute of the drawn doc judged against the sink: the verdict (Diverged meaning suspected),
    // and for a suspicion what to publish again and what the sink held.
    struct Judgement {
        Verdict verdict = Verdict::Skipped;
        std::optional<std::string> doc;     // the sample, as the query returned it
        std::optional<std::string> sample;  // compacted as the sink holds it (a null doc: nullopt)
        DocVersion version;                 // v_s
        std::optional<RetainedDoc> retained;
    };
    Judgement judge(const AuditDraw& draw);
    // Waits until the acknowledged position reaches `lsn`; false after ack_wait or when stopping.
    bool wait_acknowledged(Lsn lsn);
    // Sleeps `d` unless stopped meanwhile; false when stopping.
    bool pause_for(std::chrono::milliseconds d);
    // Counts a verdict; judged() also logs an agreement or a newer version at debug level.
    Verdict count(Verdict verdict);
    // Two computes of a doc gave two docs while the sink held one version: its query is not a
    // function of the data. Logged once per query; the doc is not judged.
    Verdict unstable(const AuditDraw& draw);
    Verdict judged(const std::string& channel, const Judgement& judgement);
    void loop();

    Engine& engine_;
    Runner& runner_;
    Publisher& publisher_;
    const std::function<Lsn()> acknowledged_;
    const AuditorOptions options_;

    std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    std::thread thread_;

    std::set<std::string> unstable_queries_;  // warned about (the audit's thread, or audit_one's caller)
    std::atomic<std::uint64_t> samples_{0};
    std::atomic<std::uint64_t> divergences_{0};
    std::atomic<std::uint64_t> skipped_{0};
};

}  // namespace docsync::audit
