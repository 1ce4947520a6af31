// The record of what a sink should hold, outside the sink (see sink_record.hpp).
#include "executor/sink_record.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "common/log.hpp"

namespace docsync {

namespace {

constexpr std::string_view kComponent = "publish";
constexpr auto kStatementTimeout = std::chrono::seconds(30);
// After a failed write the writer waits this long (doubling to the cap) before trying again.
constexpr std::chrono::milliseconds kRetryFirst{200};
constexpr std::chrono::milliseconds kRetryCap{5000};

std::string version_text(DocVersion v) { return std::to_string(v.generation) + "/" + format_lsn(v.lsn); }

}  // namespace

std::string text_array_literal(const std::vector<std::string>& values) {
    std::string out = "{";
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (i) out += ',';
        out += '"';
        for (char c : values[i]) {
            if (c == '"' || c == '\\') out += '\\';
            out += c;
        }
        out += '"';
    }
    return out + "}";
}

SinkRecord::SinkRecord(std::string dsn, std::string slot, std::string sink, SinkRecordOptions options)
    : dsn_(std::move(dsn)), slot_(std::move(slot)), sink_(std::move(sink)), options_(options) {
    connection();
}

SinkRecord::~SinkRecord() { stop(); }

pg::Connection& SinkRecord::connection() {
    if (!conn_ || !conn_->ok()) {
        conn_.reset();
        conn_.emplace(pg::Connection::connect(dsn_, pg::deadline_in(kStatementTimeout),
                                              {{"application_name", "docsync-worker sink record"}}, "--dsn"));
    }
    return *conn_;
}

std::optional<std::string> SinkRecord::unusable() {
    auto r = connection().exec(
        "SELECT count(*), count(*) FILTER (WHERE pg_catalog.has_function_privilege(p.oid, 'EXECUTE')) "
        "FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = 'docsync' AND p.proname IN ('sink_recorded', 'sink_confirmed', 'journal_name', "
        "'journal_forget', 'journal_channels')",
        pg::deadline_in(kStatementTimeout));
    if (r.get(0, 0) != "5")
        return std::string("docsync.journal_name() and docsync.sink_recorded() are not installed; run "
                           "ALTER EXTENSION docsync UPDATE");
    if (r.get(0, 1) != "5")
        return "the --dsn role " + connection().user() +
               " may not execute docsync.journal_name() or docsync.sink_recorded(); run SELECT "
               "docsync.grant_replication('" + connection().user() + "')";
    return std::nullopt;
}

std::optional<std::string> SinkRecord::check(DocVersion held) {
    auto r = connection().exec("SELECT generation, lsn FROM docsync.sink_recorded($1, $2)", {slot_, sink_},
                               pg::deadline_in(kStatementTimeout));
    if (r.rows() == 0 || r.is_null(0, 0)) return std::nullopt;
    DocVersion recorded{std::stoull(std::string(r.get(0, 0))), parse_lsn(r.get(0, 1)).value_or(0)};
    recorded_ = recorded;
    if (held >= recorded) return std::nullopt;
    std::string found = held == DocVersion{} ? std::string("holds no docsync doc at all (no docsync:max_version)")
                                             : "holds docs up to version " + version_text(held);
    return sink_ + " " + found + ", but PostgreSQL records that slot \"" + slot_ + "\" saw it hold version " +
           version_text(recorded) + " (docsync.sinks): it lost docs while no worker watched it (restored from an "
           "older snapshot, flushed, restarted without persistence, or its file truncated or replaced)";
}

std::vector<std::string> SinkRecord::load() {
    auto r = connection().exec("SELECT docsync.journal_channels($1)", {slot_}, pg::deadline_in(kStatementTimeout));
    std::vector<std::string> out;
    out.reserve(static_cast<std::size_t>(r.rows()));
    for (int i = 0; i < r.rows(); ++i) out.emplace_back(r.get(i, 0));
    return out;
}

void SinkRecord::named(const std::string& channel) {
    {
        std::lock_guard lock(mutex_);
        queued_.emplace_back(true, channel);
    }
    wake_.notify_one();
}

void SinkRecord::forgotten(const std::string& channel) {
    {
        std::lock_guard lock(mutex_);
        queued_.emplace_back(false, channel);
    }
    wake_.notify_one();
}

void SinkRecord::start(std::function<DocVersion()> read_version) {
    read_version_ = std::move(read_version);
    std::lock_guard lock(mutex_);
    if (writer_.joinable() || stopping_) return;
    writer_ = std::thread([this] { run(); });
}

void SinkRecord::stop() {
    {
        std::lock_guard lock(mutex_);
        if (stopping_) return;
        stopping_ = true;
    }
    wake_.notify_all();
    if (writer_.joinable()) writer_.join();
}

void SinkRecord::run() {
    auto next_confirm = std::chrono::steady_clock::now();
    auto retry = kRetryFirst;
    bool failing = false;
    std::vector<JournalOp> ops;
    for (;;) {
        bool stopping;
        {
            std::unique_lock lock(mutex_);
            wake_.wait_until(lock, next_confirm, [this] { return stopping_ || !queued_.empty(); });
            stopping = stopping_;
            if (!stopping && !queued_.empty()) {
                // Gather a batch: the changes of one transaction name their docs one by one.
                lock.unlock();
                std::this_thread::sleep_for(options_.batch_delay);
                lock.lock();
            }
            ops.insert(ops.end(), std::make_move_iterator(queued_.begin()), std::make_move_iterator(queued_.end()));
            queued_.clear();
        }
        bool confirm_due = std::chrono::steady_clock::now() >= next_confirm;
        try {
            write_round(ops, confirm_due || stopping);
            if (failing) log_info(kComponent, "the live journal and sink record in PostgreSQL are written again");
            failing = false;
            retry = kRetryFirst;
            if (confirm_due) next_confirm = std::chrono::steady_clock::now() + options_.confirm_interval;
        } catch (const std::exception& e) {
            conn_.reset();
            if (!failing)
                log_warning(kComponent, std::string("could not write the live journal or the sink record to "
                                                    "PostgreSQL (retried; what is queued is kept): ") +
                                            e.what());
            failing = true;
            if (stopping) return;
            next_confirm = std::chrono::steady_clock::now() + retry;
            retry = std::min(retry * 2, kRetryCap);
            std::unique_lock lock(mutex_);
            wake_.wait_for(lock, retry, [this] { return stopping_; });
            continue;
        }
        if (stopping) return;
    }
}

void SinkRecord::write_round(std::vector<JournalOp>& ops, bool confirm_due) {
    // Runs of one kind, in order (a doc forgotten and named again stays named), each in batches;
    // what was written leaves `ops`, so a failure retries only the rest.
    std::size_t done = 0;
    while (done < ops.size()) {
        bool add = ops[done].first;
        std::vector<std::string> batch;
        std::size_t end = done;
        while (end < ops.size() && ops[end].first == add && batch.size() < options_.max_batch)
            batch.push_back(ops[end++].second);
        try {
            write_channels(add ? "journal_name" : "journal_forget", batch);
        } catch (...) {
            ops.erase(ops.begin(), ops.begin() + static_cast<std::ptrdiff_t>(done));
            throw;
        }
        done = end;
    }
    ops.clear();
    if (!confirm_due || !read_version_) return;
    DocVersion held;
    try {
        held = read_version_();
    } catch (const std::exception&) {
        return;  // the sink is down: its outage is reported where docs are published
    }
    if (recorded_ && *recorded_ == held) return;
    connection().exec("SELECT docsync.sink_confirmed($1, $2, $3, $4)",
                      {slot_, sink_, std::to_string(held.generation), format_lsn(held.lsn)},
                      pg::deadline_in(kStatementTimeout));
    recorded_ = held;
}

void SinkRecord::write_channels(const char* function, const std::vector<std::string>& channels) {
    connection().exec(std::string("SELECT docsync.") + function + "($1, $2::text[])",
                      {slot_, text_array_literal(channels)}, pg::deadline_in(kStatementTimeout));
}

}  // namespace docsync
