// The continuous audit: pacing the samples, and judging each against the sink (auditor.hpp).
#include "audit/auditor.hpp"

#include <algorithm>
#include <cstdio>
#include <random>

#include "common/error.hpp"
#include "common/log.hpp"
#include "envelope/envelope.hpp"

namespace docsync::audit {

namespace {

constexpr const char* kComponent = "audit";

std::string describe(DocVersion version) {
    return "(generation " + std::to_string(version.generation) + ", lsn " + format_lsn(version.lsn) + ")";
}

std::string percent(double rate) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g%%", rate);
    return buf;
}

// Whether the audit must leave the doc alone for now: no recompute of every live doc has finished
// yet, or one runs.
bool paused(const RecomputeProgress& walk) { return walk.id == 0 || walk.running(); }
bool paused(const AuditView& view) { return view.walk_id == 0 || view.recomputing; }

}  // namespace

Auditor::Auditor(Engine& engine, Runner& runner, Publisher& publisher, std::function<Lsn()> acknowledged,
                 AuditorOptions options)
    : engine_(engine),
      runner_(runner),
      publisher_(publisher),
      acknowledged_(std::move(acknowledged)),
      options_(std::move(options)) {}

Auditor::~Auditor() { stop(); }

bool Auditor::start() {
    if (options_.rate <= 0) {
        log_info(kComponent, "the continuous audit is off (--audit-rate 0)");
        return false;
    }
    if (!publisher_.retains()) {
        if (options_.rate_given)
            log_warning(kComponent,
                        "--audit-rate " + percent(options_.rate) + " cannot audit " + options_.sink +
                            ": it retains no docs to compare with fresh computes; the audit is off");
        else
            log_info(kComponent, "the continuous audit is off: " + options_.sink +
                                     " retains no docs to compare with fresh computes");
        return false;
    }
    log_info(kComponent, "continuous audit: " + percent(options_.rate) +
                             " of the live docs per minute are recomputed and compared with " +
                             options_.sink);
    std::lock_guard lock(mutex_);
    stopping_ = false;
    thread_ = std::thread([this] { loop(); });
    return true;
}

void Auditor::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

AuditStats Auditor::stats() const { return {samples_.load(), divergences_.load(), skipped_.load()}; }

bool Auditor::pause_for(std::chrono::milliseconds d) {
    std::unique_lock lock(mutex_);
    return !wake_.wait_for(lock, d, [this] { return stopping_; });
}

bool Auditor::wait_acknowledged(Lsn lsn) {
    auto until = std::chrono::steady_clock::now() + options_.ack_wait;
    for (;;) {
        if (acknowledged_() >= lsn) return true;
        if (std::chrono::steady_clock::now() >= until) return false;
        if (!pause_for(options_.ack_poll)) return false;
    }
}

Verdict Auditor::judged(const std::string& channel, const Judgement& judgement) {
    // One debug line per sample: the fault tests count them across a run's logs.
    if (log_enabled(LogLevel::Debug))
        log_debug(kComponent,
                  "sampled " + channel + " at " + describe(judgement.version) + ": " +
                      (judgement.verdict == Verdict::Agree
                           ? std::string("the sink retains the same doc")
                           : "the sink retains a later version " + describe(judgement.retained->version)));
    return count(judgement.verdict);
}

Verdict Auditor::count(Verdict verdict) {
    if (verdict == Verdict::Skipped) {
        ++skipped_;
    } else {
        ++samples_;
        if (verdict == Verdict::Diverged) ++divergences_;
    }
    return verdict;
}

Auditor::Judgement Auditor::judge(const AuditDraw& draw) {
    Judgement out;
    DocOutcome outcome;
    try {
        // Nothing to wait for: the sample sees whatever its snapshot sees, and its version says what.
        outcome = runner_.run_doc(draw.query, draw.args, Visibility{});
    } catch (const std::exception& e) {
        log_debug(kComponent, "computing " + draw.channel + " failed: " + e.what());
        return out;
    }
    // A failed compute proves nothing about the sink: the engine records its own.
    if (outcome.kind != OutcomeKind::Ok || outcome.snapshot_lsn == 0) return out;
    // The sink holds compact JSON, and a null doc as a tombstone: the sample is put the same way.
    std::optional<std::string> sample;
    if (outcome.doc) {
        try {
            sample = publish::compact_json(*outcome.doc);
        } catch (const Error&) {
            return out;  // the sink refuses such a doc: the engine records that
        }
        if (*sample == "null") sample.reset();
    }
    out.doc = std::move(outcome.doc);
    out.sample = sample;
    out.version = DocVersion{draw.view.generation, outcome.snapshot_lsn};
    if (!wait_acknowledged(outcome.snapshot_lsn)) {
        log_debug(kComponent, "skipping " + draw.channel + ": the acknowledged position did not reach " +
                                  format_lsn(outcome.snapshot_lsn) + " in time");
        return out;
    }
    // Since the draw, a recompute of every live doc or a new generation (versions moved on), or new
    // definitions (the sample may have run a query the sink's doc no longer comes from).
    AuditView view = engine_.audit_view(draw.channel);
    if (paused(view) || view.walk_id != draw.view.walk_id || view.generation != draw.view.generation ||
        view.definitions != draw.view.definitions)
        return out;
    try {
        out.retained = publisher_.read_back(draw.channel);
    } catch (const std::exception& e) {
        log_warning(kComponent, "cannot read back what " + options_.sink + " retains for " + draw.channel +
                                    ": " + e.what() + "; not audited this time");
        return out;
    }
    if (out.retained && out.retained->version > out.version) {
        out.verdict = Verdict::Newer;
    } else if (out.retained ? out.retained->doc == sample : !sample) {
        out.verdict = Verdict::Agree;
    } else if (!view.busy) {
        out.verdict = Verdict::Diverged;
    }
    return out;
}

Verdict Auditor::audit_one(std::uint64_t random) {
    auto draw = engine_.draw_live(random);
    if (!draw || paused(draw->view) || draw->view.busy) return count(Verdict::Skipped);
    Judgement first = judge(*draw);
    if (first.verdict == Verdict::Skipped) return count(Verdict::Skipped);
    if (first.verdict != Verdict::Diverged) return judged(draw->channel, first);
    // Suspected: judged again on a compute taken after the acknowledged position passed the first
    // one's snapshot (auditor.hpp says which race this rules out).
    log_debug(kComponent, draw->channel + " differs from the sink at " + describe(first.version) +
                              "; computing it again to confirm");
    if (!pause_for(options_.confirm_delay)) return count(Verdict::Skipped);
    Judgement second = judge(*draw);
    if (second.verdict == Verdict::Skipped) return count(Verdict::Skipped);
    if (second.verdict != Verdict::Diverged) return judged(draw->channel, second);
    auto held_version = [](const Judgement& j) { return j.retained ? std::optional(j.retained->version) : std::nullopt; };
    if (first.sample != second.sample && held_version(first) == held_version(second)) return unstable(*draw);
    std::string held = second.retained
                           ? "version " + describe(second.retained->version) + " holding another doc"
                           : "nothing";
    std::string healed = "published it again at " + describe(second.version);
    try {
        publisher_.restore(draw->channel, second.doc, second.version);
    } catch (const std::exception& e) {
        healed =
            "publishing it again failed (" + std::string(e.what()) + "); a later sample will find it again";
    }
    log_warning(kComponent, "divergence: " + options_.sink + " retains " + held + " for " + draw->channel +
                                ", but a compute at version " + describe(second.version) +
                                " gives another, and every change it sees was published; " + healed);
    return count(Verdict::Diverged);
}

Verdict Auditor::unstable(const AuditDraw& draw) {
    if (unstable_queries_.insert(draw.query.name).second)
        log_warning(kComponent, "doc query \"" + draw.query.name + "\" gave two different docs for " + draw.channel +
                                    " at two computes while nothing was published for it: it is not a function of "
                                    "the data (now(), random(), a sequence?), so the audit cannot judge its docs");
    return count(Verdict::Skipped);
}

void Auditor::loop() {
    std::mt19937_64 random(options_.seed ? options_.seed : std::random_device{}());
    using Clock = std::chrono::steady_clock;
    // The engine's figures the pace depends on, read at most every idle_check (Engine::stats() looks
    // at every doc); whether a recompute of every live doc runs is cheap to ask, and asked often, so
    // the audit resumes as soon as one ends.
    constexpr auto kWalkPoll = std::chrono::milliseconds(50);
    Clock::time_point read_at{};
    std::uint64_t live = 0;
    bool backlog = false;
    Clock::time_point last = Clock::now();
    for (;;) {
        auto now = Clock::now();
        if (now - read_at >= options_.idle_check) {
            EngineStats s = engine_.stats();
            read_at = now;
            live = s.live_docs;
            backlog = s.dirty_depth() > options_.max_backlog;
        }
        bool walking = paused(engine_.recompute_progress());
        if (walking || backlog || live == 0) {
            last = now;  // the pace starts again once there is something to audit
            if (!pause_for(walking ? std::min(kWalkPoll, options_.idle_check) : options_.idle_check)) return;
            continue;
        }
        // `rate` percent of `live` docs per minute, evenly: one sample every interval.
        auto interval = std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(60.0 / (options_.rate / 100.0 * static_cast<double>(live))));
        auto due = last + interval;
        if (now < due) {
            if (!pause_for(std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::min<Clock::duration>(due - now, options_.idle_check)) +
                           std::chrono::milliseconds(1)))
                return;
            continue;
        }
        // On time, the next one is due an interval after this one was; late by more than an interval
        // (a sample took long), the pace starts again from now rather than catching up in a burst.
        last = now - due < interval ? due : now;
        audit_one(random());
        std::lock_guard lock(mutex_);
        if (stopping_) return;
    }
}

}  // namespace docsync::audit
