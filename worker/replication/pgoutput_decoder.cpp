// pgoutput messages to docsync records (see pgoutput_decoder.hpp).
#include "replication/pgoutput_decoder.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace docsync {

namespace {

constexpr std::uint64_t kEpochSpan = std::uint64_t{1} << 32;
constexpr int kMaxAttnum = 32767;  // MaxAttrNumber

[[noreturn]] void fail(const std::string& what) { throw DecodeError("pgoutput stream: " + what); }

Value new_value(const pgoutput::Datum& d) {
    Value v;
    switch (d.kind) {
        case pgoutput::Kind::Null: v.kind = ValueKind::Null; break;
        case pgoutput::Kind::Toast: v.kind = ValueKind::Toast; break;
        case pgoutput::Kind::Text:
            v.kind = ValueKind::Text;
            v.text = d.bytes;
            break;
        case pgoutput::Kind::Binary:
            fail("a value in binary form; the worker reads text values (start the stream without `binary`)");
    }
    return v;
}

// An old value pgoutput logged, against the new one (nullptr for a DELETE).
Value old_value(const pgoutput::Datum& d, const Value* new_v) {
    Value v;
    switch (d.kind) {
        case pgoutput::Kind::Null:
            v.kind = new_v != nullptr && new_v->kind == ValueKind::Null ? ValueKind::Same : ValueKind::Null;
            return v;
        case pgoutput::Kind::Toast:
            // Not expected (the server inlines logged old values), but only an unchanged new one says more.
            v.kind = new_v != nullptr && new_v->kind == ValueKind::Toast ? ValueKind::Same : ValueKind::Unknown;
            return v;
        case pgoutput::Kind::Text:
            if (new_v != nullptr &&
                (new_v->kind == ValueKind::Toast || (new_v->kind == ValueKind::Text && new_v->text == d.bytes))) {
                v.kind = ValueKind::Same;  // an unchanged TOAST value is not logged anew
                return v;
            }
            v.kind = ValueKind::Text;
            v.text = d.bytes;
            return v;
        case pgoutput::Kind::Binary:
            fail("a value in binary form; the worker reads text values (start the stream without `binary`)");
    }
    return v;
}

bool same_relation(const RelationRecord& x, const RelationRecord& y) {
    if (x.relid != y.relid || x.schema != y.schema || x.name != y.name || x.replica_identity != y.replica_identity ||
        x.columns.size() != y.columns.size())
        return false;
    for (std::size_t i = 0; i < x.columns.size(); ++i) {
        const RelationColumn &a = x.columns[i], &b = y.columns[i];
        if (a.attnum != b.attnum || a.name != b.name || a.type_oid != b.type_oid || a.identity != b.identity ||
            a.missing != b.missing)
            return false;
    }
    return true;
}

}  // namespace

PgoutputDecoder::PgoutputDecoder(std::vector<PgoutputWatch> watches, PgoutputOptions options)
    : options_(options), reference_xid_(options.reference_xid), spool_(options.stream_memory, options.spill_dir) {
    if (options_.proto_version < pgoutput::kProtoVersionMin || options_.proto_version > pgoutput::kProtoVersionMax)
        throw Error("pgoutput protocol version " + std::to_string(options_.proto_version) +
                    " is not implemented; this worker reads versions " + std::to_string(pgoutput::kProtoVersionMin) +
                    " and " + std::to_string(pgoutput::kProtoVersionMax));
    for (auto& w : watches) {
        if (w.relid == 0) throw Error("a pgoutput watch names relid 0");
        for (int a : w.attnums)
            if (a < 1 || a > kMaxAttnum) throw Error("a pgoutput watch of relation " + std::to_string(w.relid) +
                                                     " lists attnum " + std::to_string(a));
        std::sort(w.attnums.begin(), w.attnums.end());
        w.attnums.erase(std::unique(w.attnums.begin(), w.attnums.end()), w.attnums.end());
        std::sort(w.columns.begin(), w.columns.end(),
                  [](const CatalogColumn& a, const CatalogColumn& b) { return a.attnum < b.attnum; });
        Oid relid = w.relid;
        if (!watches_.emplace(relid, std::move(w)).second)
            throw Error("relation " + std::to_string(relid) + " is watched twice");
    }
}

void PgoutputDecoder::reset(std::uint64_t reference_xid) {
    relations_.clear();
    reference_xid_ = reference_xid;
    in_transaction_ = false;
    begin_sent_ = false;
    spool_.clear();
    in_block_ = false;
    replay_ = false;
}

std::uint64_t PgoutputDecoder::widen_xid(std::uint32_t xid) const {
    // The candidates in the reference's epoch and its neighbours; the nearest wins.
    std::uint64_t epoch = reference_xid_ >> 32;
    std::uint64_t best = (epoch << 32) | xid;
    auto distance = [&](std::uint64_t v) { return v > reference_xid_ ? v - reference_xid_ : reference_xid_ - v; };
    if (epoch > 0) {
        std::uint64_t below = best - kEpochSpan;
        if (distance(below) < distance(best)) best = below;
    }
    if (epoch < 0xFFFFFFFFu) {
        std::uint64_t above = best + kEpochSpan;
        if (distance(above) < distance(best)) best = above;
    }
    return best;
}

void PgoutputDecoder::emit_in_transaction(Record&& record, std::vector<Record>& out) {
    if (in_transaction_ && !begin_sent_) {
        out.emplace_back(pending_begin_);
        begin_sent_ = true;
    }
    out.push_back(std::move(record));
}

void PgoutputDecoder::decode(std::span<const std::uint8_t> message, std::vector<Record>& out) {
    if (replay_) throw std::logic_error("PgoutputDecoder::decode() while a streamed transaction is read back");
    std::size_t mark = out.size();
    try {
        std::uint32_t xid = 0;
        pgoutput::Parsed parsed = pgoutput::parse_pgoutput(message, options_.proto_version, in_block_, &xid);
        if (std::holds_alternative<pgoutput::StreamStart>(parsed) || std::holds_alternative<pgoutput::StreamStop>(parsed) ||
            std::holds_alternative<pgoutput::StreamCommit>(parsed) || std::holds_alternative<pgoutput::StreamAbort>(parsed))
            on_stream(parsed);
        else if (in_block_)
            hold(parsed, xid, message);
        else
            apply(parsed, out);
    } catch (...) {
        out.resize(mark);
        throw;
    }
}

void PgoutputDecoder::decode_all(std::span<const std::uint8_t> message, std::vector<Record>& out) {
    decode(message, out);
    while (replay_) replay(out);
}

void PgoutputDecoder::on_stream(const pgoutput::Parsed& parsed) {
    if (auto* s = std::get_if<pgoutput::StreamStart>(&parsed)) {
        if (in_block_) fail("STREAM START of transaction " + std::to_string(s->xid) + " inside a block of " +
                            std::to_string(block_xid_));
        if (in_transaction_) fail("STREAM START inside a transaction");
        if (s->first_segment) {
            if (!spool_.open(s->xid))
                fail("the first block of transaction " + std::to_string(s->xid) + ", which is streaming already");
        } else if (!spool_.holds(s->xid)) {
            fail("a later block of transaction " + std::to_string(s->xid) + ", whose first block this session did not see");
        }
        in_block_ = true;
        block_xid_ = s->xid;
        return;
    }
    if (std::holds_alternative<pgoutput::StreamStop>(parsed)) {
        if (!in_block_) fail("STREAM STOP outside a block");
        in_block_ = false;
        return;
    }
    if (in_block_) fail("STREAM COMMIT or ABORT inside a block");
    if (in_transaction_) fail("STREAM COMMIT or ABORT inside a transaction");
    if (auto* c = std::get_if<pgoutput::StreamCommit>(&parsed)) {
        if (!spool_.holds(c->xid))
            fail("STREAM COMMIT of transaction " + std::to_string(c->xid) + ", which this session did not see streamed");
        // Read back as the transaction sent whole at its commit: BEGIN … COMMIT at the commit's position.
        in_transaction_ = true;
        begin_sent_ = false;
        pending_begin_.xid = widen_xid(c->xid);
        pending_begin_.commit_lsn = c->commit_lsn;
        pending_begin_.commit_time = c->commit_time;
        reference_xid_ = pending_begin_.xid;
        replay_commit_ = CommitRecord{c->commit_lsn, c->end_lsn};
        replay_ = true;
        spool_.start_reading(c->xid);
        return;
    }
    const auto& a = std::get<pgoutput::StreamAbort>(parsed);
    // An abort of a transaction none of whose blocks this session saw drops nothing.
    if (a.subxid == a.xid)
        spool_.drop(a.xid);
    else
        spool_.abort_subtransaction(a.xid, a.subxid);
}

void PgoutputDecoder::hold(const pgoutput::Parsed& parsed, std::uint32_t xid, std::span<const std::uint8_t> message) {
    bool sticky = false;
    if (std::holds_alternative<pgoutput::Begin>(parsed) || std::holds_alternative<pgoutput::Commit>(parsed))
        fail("BEGIN or COMMIT inside a block of streamed transaction " + std::to_string(block_xid_));
    if (std::holds_alternative<pgoutput::Origin>(parsed) || std::holds_alternative<pgoutput::Type>(parsed)) return;
    if (auto* rel = std::get_if<pgoutput::Relation>(&parsed)) {
        if (watches_.count(rel->relid) == 0) return;  // never read: not held
        sticky = true;
    } else if (auto* c = std::get_if<pgoutput::Change>(&parsed)) {
        if (watches_.count(c->relid) == 0) return;
    } else if (auto* t = std::get_if<pgoutput::Truncate>(&parsed)) {
        if (std::none_of(t->relids.begin(), t->relids.end(), [&](Oid relid) { return watches_.count(relid) != 0; }))
            return;
    } else if (auto* m = std::get_if<pgoutput::Message>(&parsed)) {
        if (!m->transactional) fail("a non-transactional message inside a block of streamed transaction " +
                                    std::to_string(block_xid_));
        if (!options_.messages || m->prefix.compare(0, 7, "docsync") != 0) return;
    }
    // Held as protocol version 1 has it: the type byte, then what follows the xid.
    std::vector<std::uint8_t> v1;
    v1.reserve(message.size() - 4);
    v1.push_back(message[0]);
    v1.insert(v1.end(), message.begin() + 5, message.end());
    spool_.append(block_xid_, xid, sticky, v1);
}

std::size_t PgoutputDecoder::replay(std::vector<Record>& out) {
    if (!replay_) return 0;
    std::size_t mark = out.size();
    try {
        std::string message;
        bool kept = false;
        if (spool_.next(message, kept)) {
            std::span<const std::uint8_t> bytes(reinterpret_cast<const std::uint8_t*>(message.data()), message.size());
            pgoutput::Parsed parsed = pgoutput::parse_pgoutput(bytes, options_.proto_version);
            if (auto* rel = std::get_if<pgoutput::Relation>(&parsed); rel && kept)
                on_relation(std::move(*rel), out, true);
            else
                apply(parsed, out);
            return message.size();
        }
        if (begin_sent_) out.emplace_back(replay_commit_);
        in_transaction_ = false;
        begin_sent_ = false;
        replay_ = false;
        return 0;
    } catch (...) {
        // The transaction cannot be read back: it is abandoned, so the decoder stays usable.
        out.resize(mark);
        spool_.stop_reading();
        in_transaction_ = false;
        begin_sent_ = false;
        replay_ = false;
        throw;
    }
}

void PgoutputDecoder::apply(pgoutput::Parsed& parsed, std::vector<Record>& out) {
    if (auto* b = std::get_if<pgoutput::Begin>(&parsed)) {
        if (in_transaction_) fail("BEGIN inside a transaction");
        in_transaction_ = true;
        begin_sent_ = false;
        pending_begin_.xid = widen_xid(b->xid);
        pending_begin_.commit_lsn = b->final_lsn;
        pending_begin_.commit_time = b->commit_time;
        reference_xid_ = pending_begin_.xid;
    } else if (auto* c = std::get_if<pgoutput::Commit>(&parsed)) {
        if (!in_transaction_ || replay_) fail("COMMIT outside a transaction");
        if (c->commit_lsn != pending_begin_.commit_lsn)
            fail("COMMIT at " + format_lsn(c->commit_lsn) + " ends the transaction BEGIN said commits at " +
                 format_lsn(pending_begin_.commit_lsn));
        if (begin_sent_) out.emplace_back(CommitRecord{c->commit_lsn, c->end_lsn});
        in_transaction_ = false;
        begin_sent_ = false;
    } else if (auto* rel = std::get_if<pgoutput::Relation>(&parsed)) {
        on_relation(std::move(*rel), out);
    } else if (auto* change = std::get_if<pgoutput::Change>(&parsed)) {
        on_change(*change, out);
    } else if (auto* t = std::get_if<pgoutput::Truncate>(&parsed)) {
        on_truncate(*t, out);
    } else if (auto* m = std::get_if<pgoutput::Message>(&parsed)) {
        if (!options_.messages || m->prefix.compare(0, 7, "docsync") != 0) return;
        if (m->transactional && !in_transaction_) fail("a transactional message outside a transaction");
        MessageRecord rec{m->transactional, std::move(m->prefix), std::move(m->content)};
        if (m->transactional)
            emit_in_transaction(std::move(rec), out);
        else
            out.emplace_back(std::move(rec));
    }
    // ORIGIN and TYPE say nothing docsync records carry.
}

void PgoutputDecoder::on_relation(pgoutput::Relation&& rel, std::vector<Record>& out, bool kept) {
    auto w = watches_.find(rel.relid);
    if (w == watches_.end()) {
        relations_.erase(rel.relid);  // published but not watched: its changes are skipped
        return;
    }
    const PgoutputWatch& watch = w->second;
    // pgoutput's columns by name (names are unique within a relation).
    std::unordered_map<std::string, int> by_name;
    for (std::size_t i = 0; i < rel.columns.size(); ++i)
        if (!by_name.emplace(rel.columns[i].name, static_cast<int>(i)).second)
            fail("RELATION " + std::to_string(rel.relid) + " names column \"" + rel.columns[i].name + "\" twice");

    Described d;
    d.width = rel.columns.size();
    d.record.relid = rel.relid;
    d.record.schema = std::move(rel.schema);
    d.record.name = std::move(rel.name);
    d.record.replica_identity = rel.replica_identity;
    std::vector<int> missing;
    auto add_present = [&](const CatalogColumn& cc, int source) {
        const pgoutput::Column& pc = rel.columns[static_cast<std::size_t>(source)];
        RelationColumn col;
        col.attnum = cc.attnum;
        col.name = pc.name;
        col.type_oid = pc.type_oid;
        col.identity = pc.key;
        d.record.columns.push_back(std::move(col));
        d.source.push_back(source);
    };
    // A catalog column pgoutput does not send (dropped since, renamed since, or generated) is one the
    // relation does not have, as far as this stream can tell.
    std::size_t next_watched = 0;
    for (const CatalogColumn& cc : watch.columns) {
        auto it = by_name.find(cc.name);
        bool wanted = watch.all_columns;
        if (!wanted) {
            while (next_watched < watch.attnums.size() && watch.attnums[next_watched] < cc.attnum) {
                missing.push_back(watch.attnums[next_watched]);
                ++next_watched;
            }
            wanted = next_watched < watch.attnums.size() && watch.attnums[next_watched] == cc.attnum;
            if (wanted) ++next_watched;
        }
        if (!wanted) continue;
        if (it != by_name.end())
            add_present(cc, it->second);
        else if (!watch.all_columns)
            missing.push_back(cc.attnum);
    }
    for (; next_watched < watch.attnums.size(); ++next_watched) missing.push_back(watch.attnums[next_watched]);
    std::sort(missing.begin(), missing.end());
    for (int attnum : missing) {
        RelationColumn col;
        col.attnum = attnum;
        col.missing = true;
        d.record.columns.push_back(std::move(col));
        d.source.push_back(-1);
    }
    if (kept) {
        auto current = relations_.find(rel.relid);
        if (current != relations_.end() && current->second.width == d.width && current->second.source == d.source &&
            same_relation(current->second.record, d.record))
            return;
    }
    RelationRecord record = d.record;
    relations_[rel.relid] = std::move(d);
    emit_in_transaction(std::move(record), out);
}

void PgoutputDecoder::on_change(const pgoutput::Change& change, std::vector<Record>& out) {
    if (!in_transaction_) fail("a change outside a transaction");
    auto it = relations_.find(change.relid);
    if (it == relations_.end()) {
        if (watches_.count(change.relid) != 0)
            fail("change for relation " + std::to_string(change.relid) + " before its RELATION message");
        return;  // not watched
    }
    const Described& d = it->second;
    auto check_width = [&](const pgoutput::Tuple& t, const char* which) {
        if (t.size() != d.width)
            fail(std::string(which) + " of relation " + std::to_string(change.relid) + " has " +
                 std::to_string(t.size()) + " columns, its RELATION has " + std::to_string(d.width));
        // Binary values mean the stream was started with `binary`, even in a column not read here.
        for (const auto& datum : t)
            if (datum.kind == pgoutput::Kind::Binary) new_value(datum);
    };
    ChangeRecord rec;
    rec.op = static_cast<ChangeOp>(change.op);
    rec.relid = change.relid;
    const std::size_t n = d.record.columns.size();
    if (change.op != 'D') {
        check_width(change.new_tuple, "the new tuple");
        rec.new_values.resize(n);
        for (std::size_t j = 0; j < n; ++j)
            if (d.source[j] >= 0) rec.new_values[j] = new_value(change.new_tuple[static_cast<std::size_t>(d.source[j])]);
    }
    if (change.op != 'I') {
        if (change.old_kind != 0) check_width(change.old_tuple, "the old tuple");
        rec.old_values.resize(n);
        for (std::size_t j = 0; j < n; ++j) {
            // Only identity columns are logged ('K' sends the others as NULL); 'O' flags every column.
            if (d.source[j] < 0 || !d.record.columns[j].identity) continue;
            const Value* new_v = change.op == 'U' ? &rec.new_values[j] : nullptr;
            if (change.old_kind == 0) {
                // No old tuple: the replica identity did not change.
                if (new_v != nullptr) rec.old_values[j].kind = ValueKind::Same;
                continue;
            }
            rec.old_values[j] = old_value(change.old_tuple[static_cast<std::size_t>(d.source[j])], new_v);
        }
    }
    emit_in_transaction(std::move(rec), out);
}

void PgoutputDecoder::on_truncate(const pgoutput::Truncate& truncate, std::vector<Record>& out) {
    if (!in_transaction_) fail("TRUNCATE outside a transaction");
    TruncateRecord rec;
    rec.cascade = truncate.cascade;
    rec.restart_identity = truncate.restart_identity;
    std::set<Oid> seen;
    for (Oid relid : truncate.relids) {
        if (relations_.count(relid) == 0) {
            if (watches_.count(relid) != 0)
                fail("TRUNCATE of relation " + std::to_string(relid) + " before its RELATION message");
            continue;
        }
        if (seen.insert(relid).second) rec.relids.push_back(relid);
    }
    if (rec.relids.empty()) return;
    emit_in_transaction(std::move(rec), out);
}

}  // namespace docsync
