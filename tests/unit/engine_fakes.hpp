#pragma once
// Fakes at the engine's seams for the unit tests: a Runner that "queries" an in-memory table of
// docs and keys, a Publisher that records what it is given, and a clock the test moves by hand.

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.hpp"
#include "common/error.hpp"
#include "engine/channel.hpp"
#include "engine/definitions.hpp"
#include "engine/engine.hpp"
#include "engine/seams.hpp"
#include "replication/records.hpp"

namespace docsync::test {

class FakeClock final : public Clock {
public:
    TimePoint now() const override {
        std::lock_guard<std::mutex> lock(mutex_);
        return now_;
    }
    void advance(std::chrono::milliseconds d) {
        std::lock_guard<std::mutex> lock(mutex_);
        now_ += d;
    }

private:
    mutable std::mutex mutex_;
    TimePoint now_{std::chrono::hours(1000)};
};

struct DocCall {
    std::string query;
    SqlArgs args;
    Visibility need;
};

class FakeRunner final : public Runner {
public:
    // The "database": doc text per channel (absent: no row).
    std::map<std::string, std::string> rows;
    // keys rows per (watch table, args)
    std::map<SqlArgs, std::vector<SqlArgs>> keys;
    // Scripted outcomes, consumed first-come: kind and error.
    std::vector<OutcomeKind> doc_script;
    std::vector<OutcomeKind> keys_script;
    std::function<void(const DocQuery&, const SqlArgs&)> during_doc;  // runs inside run_doc
    std::function<void(const SqlArgs&)> during_keys;                  // runs inside run_keys
    Lsn snapshot_lsn = 0;  // the WAL position each Ok compute reports for its snapshot
    std::vector<DocCall> doc_calls;
    std::vector<SqlArgs> keys_calls;
    // Batched statements, as a database runs them: one call per statement, with its size; a doc
    // (keys args) listed as failing makes the whole statement fail, as a query error would.
    std::vector<DocCall> doc_batches;     // need: the statement's; args: empty
    std::vector<std::size_t> doc_batch_sizes;
    std::vector<std::size_t> keys_batch_sizes;
    std::set<std::string> failing_docs;   // channels whose query raises an error
    std::set<SqlArgs> failing_keys;       // keys args whose query raises an error
    std::map<std::string, std::string> invalid_keys;  // channel -> SQLSTATE PostgreSQL raises reading its key
    std::map<std::string, std::string> set_aside;     // batched forms set aside: doc query -> why
    // The server's spelling check (print_keys): a key value -> what PostgreSQL prints for it
    // (absent: printed as written), or -> the SQLSTATE it raises reading it (bad_key_values).
    std::map<std::string, std::string> printed_keys;
    std::map<std::string, std::string> bad_key_values;
    std::vector<std::string> print_calls;  // the channel of each check
    std::mutex mutex;

    KeyPrintOutcome print_keys(const DocQuery& query, const SqlArgs& values) override {
        std::lock_guard<std::mutex> lock(mutex);
        print_calls.push_back(build_channel(query.name, values));
        KeyPrintOutcome out;
        for (const auto& v : values) {
            if (v && bad_key_values.count(*v)) {
                out.kind = OutcomeKind::Permanent;
                out.sqlstate = bad_key_values.at(*v);
                out.error = "invalid input syntax for the key";
                out.printed.clear();
                return out;
            }
            auto it = v ? printed_keys.find(*v) : printed_keys.end();
            out.printed.push_back(it == printed_keys.end() ? v : SqlValue(it->second));
        }
        return out;
    }

    std::map<std::string, std::string> batched_forms_set_aside_by_query() const override { return set_aside; }

    DocBatchOutcome run_docs(const DocQuery& query, const std::vector<SqlArgs>& args, const Visibility& need) override {
        {
            std::lock_guard<std::mutex> lock(mutex);
            doc_batches.push_back({query.name, {}, need});
            doc_batch_sizes.push_back(args.size());
            if (args.size() > 1)
                for (const auto& a : args)
                    if (failing_docs.count(build_channel(query.name, a)) || invalid_keys.count(build_channel(query.name, a)))
                        return {true, "division by zero", {}};
        }
        return Runner::run_docs(query, args, need);
    }

    KeysBatchOutcome run_keys_batch(const KeysQuery& query, const std::vector<SqlArgs>& args, std::size_t max_keys,
                                    const Visibility& need) override {
        {
            std::lock_guard<std::mutex> lock(mutex);
            keys_batch_sizes.push_back(args.size());
            if (args.size() > 1)
                for (const auto& a : args)
                    if (failing_keys.count(a)) return {true, "division by zero", {}};
        }
        return Runner::run_keys_batch(query, args, max_keys, need);
    }

    DocOutcome run_doc(const DocQuery& query, const SqlArgs& args, const Visibility& need) override {
        if (during_doc) during_doc(query, args);
        std::lock_guard<std::mutex> lock(mutex);
        doc_calls.push_back({query.name, args, need});
        DocOutcome out;
        if (auto bad = invalid_keys.find(build_channel(query.name, args)); bad != invalid_keys.end()) {
            out.kind = OutcomeKind::Permanent;
            out.error = "query \"" + query.name + "\" failed: invalid input for its param";
            out.sqlstate = bad->second;
            return out;
        }
        if (failing_docs.count(build_channel(query.name, args))) {
            out.kind = OutcomeKind::Permanent;
            out.error = "query \"" + query.name + "\" failed: division by zero";
            out.sqlstate = "22012";
            return out;
        }
        if (!doc_script.empty()) {
            out.kind = doc_script.front();
            doc_script.erase(doc_script.begin());
            if (out.kind != OutcomeKind::Ok) {
                out.error = "scripted failure of query \"" + query.name + "\"";
                out.sqlstate = out.kind == OutcomeKind::Permanent ? "22012" : "08006";
                return out;
            }
        }
        auto it = rows.find(build_channel(query.name, args));
        if (it != rows.end()) out.doc = it->second;
        out.snapshot_lsn = snapshot_lsn;
        return out;
    }

    KeysOutcome run_keys(const KeysQuery&, const SqlArgs& args, std::size_t max_keys, const Visibility&) override {
        if (during_keys) during_keys(args);
        std::lock_guard<std::mutex> lock(mutex);
        keys_calls.push_back(args);
        KeysOutcome out;
        if (failing_keys.count(args)) {
            out.kind = OutcomeKind::Permanent;
            out.error = "keys query failed: division by zero";
            out.sqlstate = "22012";
            return out;
        }
        if (!keys_script.empty()) {
            out.kind = keys_script.front();
            keys_script.erase(keys_script.begin());
            if (out.kind != OutcomeKind::Ok) {
                out.error = "scripted keys failure";
                return out;
            }
        }
        auto it = keys.find(args);
        if (it != keys.end()) out.keys = it->second;
        if (out.keys.size() > max_keys) {
            out.kind = OutcomeKind::Permanent;
            out.error = "too many keys";
            out.keys.clear();
        }
        return out;
    }
};

struct Published {
    std::string channel;
    std::optional<std::string> doc;
    DocVersion version;
};

class FakePublisher final : public Publisher {
public:
    std::vector<Published> published;
    std::vector<std::string> retained;
    int fail_next = 0;     // throw a transient error this many times
    int refuse_next = 0;   // then throw a permanent error (the sink refuses the doc) this many times
    std::mutex mutex;

    void publish(const std::string& channel, const std::optional<std::string>& doc, DocVersion version) override {
        std::lock_guard<std::mutex> lock(mutex);
        if (fail_next > 0) {
            --fail_next;
            throw Error("sink unavailable", {}, true);
        }
        if (refuse_next > 0) {
            --refuse_next;
            throw Error("doc is not valid JSON", {}, false);
        }
        published.push_back({channel, doc, version});
    }
    std::vector<std::string> retained_channels() override { return retained; }
    std::vector<std::string> orphans;  // what expire_orphans was given
    void expire_orphans(const std::vector<std::string>& channels) override {
        orphans.insert(orphans.end(), channels.begin(), channels.end());
    }
    std::uint64_t max_generation() override { return 0; }

    std::size_t count(const std::string& channel) {
        std::lock_guard<std::mutex> lock(mutex);
        std::size_t n = 0;
        for (const auto& p : published) n += p.channel == channel;
        return n;
    }
    std::optional<Published> last(const std::string& channel) {
        std::lock_guard<std::mutex> lock(mutex);
        for (auto it = published.rbegin(); it != published.rend(); ++it)
            if (it->channel == channel) return *it;
        return std::nullopt;
    }
};

// Record builders.
inline Value text(std::string s) { return Value{ValueKind::Text, std::move(s)}; }
inline Value null_value() { return Value{ValueKind::Null, {}}; }
inline Value same() { return Value{ValueKind::Same, {}}; }
inline Value unknown() { return Value{ValueKind::Unknown, {}}; }
inline Value toast() { return Value{ValueKind::Toast, {}}; }

}  // namespace docsync::test
