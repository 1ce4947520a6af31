// The docs the engine knows; see doc_set.hpp.
#include "engine/doc_set.hpp"

#include <algorithm>
#include <limits>

#include "common/log.hpp"
#include "engine/channel.hpp"
#include "engine/key_text.hpp"

namespace docsync {

namespace {

// A refused channel as the log shows it: whole when short, else a prefix (cut at a character's
// start) and its length, so a client's huge channel never makes a huge log line.
std::string shown(const std::string& channel) {
    constexpr std::size_t kShownBytes = 128;
    if (channel.size() <= kShownBytes) return "\"" + channel + "\"";
    std::size_t cut = kShownBytes;
    while (cut > 0 && (static_cast<unsigned char>(channel[cut]) & 0xC0) == 0x80) --cut;
    // appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "\"" + std::string(…) at -O2
    std::string out = "\"";
    out.append(channel, 0, cut);
    out += "\"... (";
    out += std::to_string(channel.size());
    out += " bytes)";
    return out;
}

// What the refusal memory holds for a channel: the channel, or for one longer than any channel
// names a doc its length and hash, never its text.
std::string remembered_as(const std::string& channel) {
    if (channel.size() <= kMaxChannelBytes) return channel;
    std::string out = "\x01";  // appended: the same false -Wrestrict as above
    out += std::to_string(channel.size());
    out += ':';
    out += std::to_string(std::hash<std::string>{}(channel));
    return out;
}

}  // namespace

Entry* DocSet::find_or_create(const std::string& channel, bool create, bool polled) {
    if (create && channel.size() > kMaxChannelBytes) {
        refuse_channel(channel, "longer than " + std::to_string(kMaxChannelBytes) + " bytes, which no doc's channel is");
        return nullptr;
    }
    // refused after its doc was made (refuse_computed, drop_non_canonical): asked for again, it is
    // refused at once, even while its entry waits for the sweep
    if (create && !server_refused_.empty() && server_refused_.contains(channel)) {
        refuse_channel(channel, "PostgreSQL refused its key as input for the param's type, or the type changed");
        return nullptr;
    }
    auto it = docs_.find(channel);
    if (it != docs_.end()) return &*it;
    if (!create) return nullptr;
    ParsedChannel parsed;
    if (!parse_channel(channel, parsed)) {
        log_warning("engine", "ignoring channel \"" + channel + "\": not a db:<query>:<values> channel");
        return nullptr;
    }
    std::uint16_t query = catalog_.resolve(parsed);
    if (query == kNoQuery) {
        log_debug("engine", "ignoring channel \"" + channel + "\": no such query with that many params");
        return nullptr;
    }
    // one doc, one name: a key PostgreSQL would print otherwise names no doc (engine/key_text.hpp)
    KeyCheck key = check_channel_key(parsed.query, catalog_.definitions().queries[query].key_types, parsed.values);
    if (!key.ok) {
        refuse_channel(channel, key.problem);
        return nullptr;
    }
    // a key only the server can check costs a round trip: a poll's new channels take a budget
    if (polled && options_.key_check_rate > 0 &&
        !key_types_checked(catalog_.definitions().queries[query].key_types, parsed.values.size()) && !take_key_check())
        return nullptr;
    auto [created, inserted] = docs_.try_emplace(channel);
    created->second.query = query;
    if (inserted && options_.live_all && options_.journal && !journal_quiet_) options_.journal->named(channel);
    return &*created;
}

void DocSet::refuse_channel(const std::string& channel, const std::string& problem) {
    ++refused_channels_;
    // each of the first kRefusedRemembered distinct channels is logged once; a poll that lists it
    // again is quiet, and refusals past them are summed up once per kRefusedSummaryEvery
    std::string key = remembered_as(channel);
    if (refused_seen_.contains(key)) return;
    if (refused_seen_.insert_if_room(key)) {
        log_warning("engine", "refusing channel " + shown(channel) + ": " + problem +
                                  "; nothing is computed or kept for it (a doc has one channel: its key as PostgreSQL prints it)");
        return;
    }
    ++refused_unlogged_;
    Nanos t = now();
    if (refused_summary_at_ && t - refused_summary_at_ < to_nanos(kRefusedSummaryEvery)) return;
    log_warning("engine", std::to_string(refused_unlogged_) + " more refusal(s) of channels whose key is not as PostgreSQL "
                          "prints it, not logged one by one (the first " + std::to_string(kRefusedRemembered) +
                          " refused channels were; docsync_refused_channels_total counts every refusal)");
    refused_unlogged_ = 0;
    refused_summary_at_ = t;
}

bool DocSet::take_key_check() {
    Nanos t = now();
    if (key_check_second_ == 0 || t - key_check_second_ >= to_nanos(std::chrono::seconds(1))) {
        key_check_second_ = t;
        key_checks_left_ = options_.key_check_rate;
    }
    if (key_checks_left_ > 0) {
        --key_checks_left_;
        return true;
    }
    ++key_checks_deferred_;
    if (key_check_logged_at_ && t - key_check_logged_at_ < to_nanos(kRefusedSummaryEvery)) return false;
    log_warning("engine", std::to_string(key_checks_deferred_) + " channel(s) named only by subscribers wait for a later "
                          "liveness poll: their keys need the server's check, and --key-check-rate (" +
                          std::to_string(options_.key_check_rate) + " per second) is spent (logged once a minute at most)");
    key_checks_deferred_ = 0;
    key_check_logged_at_ = t;
    return false;
}

void DocSet::schedule(Entry& entry) {
    Doc& doc = entry.second;
    doc.set(DocFlags::Dirty);
    if (doc.has_any(DocFlags::Queued | DocFlags::InFlight | DocFlags::Txn)) return;
    if (doc.has(DocFlags::Delayed)) {
        // A doc retried after a permanent failure is not on the ack path; new waiters are.
        if (!doc.has(DocFlags::OffAck) || doc.pending_seq == 0) return;
        doc.clear(DocFlags::Delayed | DocFlags::OffAck);
    }
    Nanos interval = to_nanos(options_.min_round_interval);
    if (doc.last_start && interval > 0) {
        Nanos due = doc.last_start + interval;
        if (now() < due) {  // a hot doc: its next round waits for the interval
            doc.retry_at = due;
            doc.set(DocFlags::Delayed);
            delayed_.emplace(due, entry.first);
            wake_.notify_one();
            return;
        }
    }
    doc.set(DocFlags::Queued);
    ready_.push_back(&entry);
    wake_.notify_one();
}

void DocSet::delay(const std::string& channel, Doc& doc, std::chrono::milliseconds wait, bool off_ack) {
    doc.retry_at = now() + to_nanos(wait);
    doc.set(DocFlags::Delayed | DocFlags::Dirty);
    doc.clear(DocFlags::OffAck);
    if (off_ack) doc.set(DocFlags::OffAck);
    delayed_.emplace(doc.retry_at, channel);
}

void DocSet::make_live(Entry& entry) {
    if (!entry.second.has(DocFlags::Live)) {
        entry.second.set(DocFlags::Live);
        schedule(entry);  // it may have missed changes while it was not live
    }
}

void DocSet::protect(Doc& doc) {
    Nanos t = now();
    doc.grace_until = t + to_nanos(options_.touch_grace);
    doc.lease_until = std::max(doc.lease_until, t + to_nanos(options_.lease));
}

void DocSet::abandon(Doc& doc) {
    ledger_.settle(doc.pending_seq);
    doc.xids.clear();
    doc.clear(DocFlags::Dirty);
    walk_unflag(doc);
}

void DocSet::sync_live(const std::vector<std::string>& channels, bool complete) {
    Nanos t = now();
    Nanos lease = to_nanos(options_.lease);
    std::vector<Doc*> listed;
    for (const auto& channel : channels) {
        Entry* entry = find_or_create(channel, true, true);
        if (!entry) continue;
        entry->second.lease_until = t + lease;
        make_live(*entry);
        listed.push_back(&entry->second);
    }
    if (complete && !options_.live_all) {
        std::sort(listed.begin(), listed.end());
        for (auto& [channel, doc] : docs_) {
            if (!doc.has(DocFlags::Live) || doc.grace_until > t) continue;
            if (!std::binary_search(listed.begin(), listed.end(), &doc)) doc.clear(DocFlags::Live);
        }
    }
    drop_expired(t);
    sweep();
}

void DocSet::drop_expired(Nanos t) {
    if (options_.live_all) return;
    for (auto& [channel, doc] : docs_) {
        if (doc.has(DocFlags::Live) && doc.lease_until <= t && doc.grace_until <= t)
            doc.clear(DocFlags::Live);
    }
}

void DocSet::sweep() {
    constexpr DocFlags kBusy =
        DocFlags::Live | DocFlags::Queued | DocFlags::InFlight | DocFlags::Txn | DocFlags::Delayed;
    for (auto it = docs_.begin(); it != docs_.end();) {
        if (!it->second.has_any(kBusy)) {
            abandon(it->second);
            if (options_.live_all && options_.journal) options_.journal->forgotten(it->first);
            it = docs_.erase(it);
        } else {
            ++it;
        }
    }
}

void DocSet::reindex(const std::vector<std::string>& changed, std::uint64_t seq) {
    for (auto& entry : docs_) {
        Doc& doc = entry.second;
        ParsedChannel parsed;
        doc.query = parse_channel(entry.first, parsed) ? catalog_.resolve(parsed) : kNoQuery;
        if (doc.query == kNoQuery) {
            doc.clear(DocFlags::Live);  // its query is gone
            continue;
        }
        if (doc.has(DocFlags::Live) &&
            std::find(changed.begin(), changed.end(), parsed.query) != changed.end()) {
            ledger_.wait(doc.pending_seq, seq);
            schedule(entry);
        }
    }
}

void DocSet::forget_waiters() {
    for (auto& [channel, doc] : docs_) {
        doc.pending_seq = 0;
        doc.flight_seq = 0;
    }
}

void DocSet::promote_due(Nanos t) {
    while (!delayed_.empty() && delayed_.begin()->first <= t) {
        auto node = delayed_.extract(delayed_.begin());
        auto it = docs_.find(node.mapped());
        if (it == docs_.end()) continue;
        Doc& doc = it->second;
        if (!doc.has(DocFlags::Delayed) || doc.retry_at != node.key()) continue;  // superseded
        doc.clear(DocFlags::Delayed | DocFlags::OffAck);
        schedule(*it);
    }
}

Nanos DocSet::next_due() const {
    return delayed_.empty() ? std::numeric_limits<Nanos>::max() : delayed_.begin()->first;
}

bool DocSet::start(Entry& entry, DocJob& job) {
    Doc& doc = entry.second;
    doc.clear(DocFlags::Queued);
    if (doc.has(DocFlags::Txn)) return false;  // rescheduled at COMMIT
    if (!doc.has(DocFlags::Live)) {
        abandon(doc);
        return false;
    }
    if (!doc.has(DocFlags::Dirty)) return false;
    doc.set(DocFlags::InFlight);
    doc.clear(DocFlags::Dirty);
    job.previous_start = doc.last_start;
    doc.last_start = now();
    ledger_.hand_over(doc.pending_seq, doc.flight_seq);
    job.entry = &entry;
    job.channel = entry.first;
    job.xids = std::move(doc.xids);
    doc.xids.clear();
    job.query = doc.query;
    job.lsn = doc.lsn;
    job.walk_id = 0;
    if (doc.has(DocFlags::Walk)) {
        doc.clear(DocFlags::Walk);
        --walk_flagged_;
        ++walk_running_;
        job.walk_id = walk_.id;
    }
    ++in_flight_;
    return true;
}

bool DocSet::take(std::vector<DocJob>& jobs, std::size_t max) {
    jobs.clear();
    DocJob first;
    bool found = false;
    while (!found && !ready_.empty()) {
        Entry* entry = ready_.front();
        ready_.pop_front();
        found = start(*entry, first);
    }
    if (!found) return false;
    std::uint16_t query = first.query;
    jobs.push_back(std::move(first));
    // More docs of the same query from the front of the queue, the others keeping their places:
    // a look at a bounded window keeps a take cheap however long the queue, and the queue first
    // come, first served.
    std::vector<Entry*> others;
    for (std::size_t seen = 0; jobs.size() < max && !ready_.empty() && seen < 4 * max; ++seen) {
        Entry* entry = ready_.front();
        ready_.pop_front();
        if (entry->second.query != query) {
            others.push_back(entry);
            continue;
        }
        DocJob job;
        if (start(*entry, job)) jobs.push_back(std::move(job));
    }
    ready_.insert(ready_.begin(), others.begin(), others.end());
    return true;
}

bool DocSet::end_compute(const DocJob& job) {
    --in_flight_;
    job.entry->second.clear(DocFlags::InFlight);
    bool walk_job = job.walk_id != 0 && job.walk_id == walk_.id;
    if (walk_job) --walk_running_;
    return walk_job;
}

void DocSet::published(Entry& entry, bool walk_job) {
    Doc& doc = entry.second;
    ledger_.settle(doc.flight_seq);
    doc.failures = 0;
    doc.clear(DocFlags::Retained);  // what the sink holds is ours now
    if (doc.has(DocFlags::Dirty)) schedule(entry);
    if (walk_job) walk_settle();
}

void DocSet::retry(Entry& entry, const DocJob& job, std::chrono::milliseconds wait, bool walk_job,
                   bool round) {
    Doc& doc = entry.second;
    if (!round) doc.last_start = job.previous_start;
    if (walk_job) {  // not done yet: the retry counts for the walk
        doc.set(DocFlags::Walk);
        ++walk_flagged_;
    }
    // The running compute's waiters wait for the next one; its xids must be seen by it too.
    ledger_.hand_over(doc.flight_seq, doc.pending_seq);
    doc.xids.insert(doc.xids.begin(), job.xids.begin(), job.xids.end());
    ++doc.failures;
    delay(job.channel, doc, wait, false);
}

void DocSet::failed(Entry& entry, std::chrono::milliseconds wait, bool walk_job) {
    Doc& doc = entry.second;
    ledger_.settle(doc.flight_seq);
    ++doc.failures;
    bool waiters = doc.pending_seq != 0;
    delay(entry.first, doc, wait, true);
    if (waiters) schedule(entry);
    if (walk_job) walk_settle();
}

void DocSet::refuse_computed(Entry& entry, const std::string& problem, bool walk_job, bool key_checked) {
    Doc& doc = entry.second;
    ledger_.settle(doc.flight_seq);
    doc.clear(DocFlags::Live);
    abandon(doc);
    // the server check refused the key, so the channel is no doc's; a copy the sink retained under
    // it (and no publish of ours replaced) is left to expire, once
    if (key_checked && doc.has(DocFlags::Retained)) refused_retained_.push_back(entry.first);
    doc.clear(DocFlags::Retained);
    server_refused_.insert_evicting(entry.first);
    refuse_channel(entry.first, problem);
    if (walk_job) walk_settle();
}

std::vector<std::pair<std::string, Lsn>> DocSet::drop_non_canonical() {
    std::vector<std::pair<std::string, Lsn>> dropped;
    key_dropped_.clear();
    server_refused_.clear();  // the key types may have changed back: checked anew
    for (auto& entry : docs_) {
        Doc& doc = entry.second;
        if (doc.query == kNoQuery || !doc.has(DocFlags::Live)) continue;
        ParsedChannel parsed;
        if (!parse_channel(entry.first, parsed)) continue;
        KeyCheck key = check_channel_key(parsed.query, catalog_.definitions().queries[doc.query].key_types, parsed.values);
        if (key.ok) continue;
        doc.clear(DocFlags::Live);
        abandon(doc);
        refuse_channel(entry.first, key.problem + " (its key type changed)");
        dropped.emplace_back(entry.first, doc.lsn);
        if (doc.has(DocFlags::InFlight)) key_dropped_.insert(entry.first);
        server_refused_.insert_evicting(entry.first);
    }
    return dropped;
}

void DocSet::start_walk(RecomputeReason reason, bool gap) {
    // A new id: computes of an earlier walk still running no longer count. A gap the earlier one
    // had not closed yet is this one's to close. A start's own walk that replaces one no doc of
    // which was computed yet (a sink found short before the first session) keeps the reason asked
    // for first: it says more than "startup".
    bool unbegun = walk_.running() && walk_flagged_ == walk_.total && walk_running_ == 0;
    if (reason == RecomputeReason::Startup && unbegun) reason = walk_.reason;
    walk_ = RecomputeProgress{reason, walk_.id + 1, 0, 0, now(), 0, gap || walk_.holds_waits()};
    walk_flagged_ = 0;
    walk_running_ = 0;
    for (auto& entry : docs_) {
        Doc& doc = entry.second;
        doc.clear(DocFlags::Walk);
        if (!doc.has(DocFlags::Live)) continue;
        doc.set(DocFlags::Walk);
        ++walk_flagged_;
        schedule(entry);
    }
    walk_.total = walk_flagged_;
    walk_settle();
}

RecomputeProgress DocSet::walk_progress() const {
    RecomputeProgress out = walk_;
    if (!out.finished_ns) out.done = walk_.total - walk_flagged_ - walk_running_;
    return out;
}

void DocSet::walk_unflag(Doc& doc) {
    if (!doc.has(DocFlags::Walk)) return;
    doc.clear(DocFlags::Walk);
    --walk_flagged_;
    walk_settle();
}

void DocSet::walk_settle() {
    if (walk_.finished_ns == 0 && walk_flagged_ == 0 && walk_running_ == 0) {
        walk_.done = walk_.total;
        walk_.finished_ns = now();
    }
}

void DocSet::count(std::uint64_t& live, std::uint64_t& dirty) const {
    for (const auto& [channel, doc] : docs_) {
        if (!doc.has(DocFlags::Live)) continue;
        ++live;
        if (doc.has(DocFlags::Dirty)) ++dirty;
    }
}

}  // namespace docsync
