// Key resolution; see key_resolution.hpp.
#include "engine/key_resolution.hpp"

namespace docsync {

namespace {

// A tuple's key values, resolved against the other tuple of the change.
enum class Key { Known, Unknown, SameAsNew };

// The key the new tuple names. An unchanged out-of-line value (TOAST) equals the old one, which is
// known only when the old tuple logged it.
Key new_key(const WatchPlan& plan, const std::vector<Value>& new_values, const std::vector<Value>& old_values,
            SqlArgs& out) {
    out.clear();
    for (int position : plan.positions) {
        auto p = static_cast<std::size_t>(position);
        if (position < 0 || p >= new_values.size()) return Key::Unknown;
        const Value* v = &new_values[p];
        if (v->kind == ValueKind::Toast) {
            if (p >= old_values.size()) return Key::Unknown;
            v = &old_values[p];
        }
        if (v->kind == ValueKind::Text) {
            out.emplace_back(v->text);
        } else if (v->kind == ValueKind::Null) {
            out.emplace_back(std::nullopt);
        } else {
            return Key::Unknown;
        }
    }
    return Key::Known;
}

// The key the old tuple names. SAME means "equal to the new value"; all SAME: the key did not move.
Key old_key(const WatchPlan& plan, const std::vector<Value>& old_values, bool update, Key new_known,
            const SqlArgs& key_new, SqlArgs& out) {
    out.clear();
    bool all_same = true;
    for (std::size_t j = 0; j < plan.positions.size(); ++j) {
        int position = plan.positions[j];
        auto p = static_cast<std::size_t>(position);
        if (position < 0 || p >= old_values.size()) return Key::Unknown;
        const Value& v = old_values[p];
        if (v.kind == ValueKind::Same && update) {
            if (new_known != Key::Known) {
                out.emplace_back(std::nullopt);  // equal to an unknown new value: resolved below
                continue;
            }
            out.push_back(key_new[j]);
            continue;
        }
        all_same = false;
        if (v.kind == ValueKind::Text) {
            out.emplace_back(v.text);
        } else if (v.kind == ValueKind::Null) {
            out.emplace_back(std::nullopt);
        } else {
            return Key::Unknown;
        }
    }
    if (all_same && update) return Key::SameAsNew;
    if (new_known != Key::Known && update) {
        // Some columns are SAME as a new value we do not know.
        for (std::size_t j = 0; j < plan.positions.size(); ++j)
            if (old_values[static_cast<std::size_t>(plan.positions[j])].kind == ValueKind::Same)
                return Key::Unknown;
    }
    return Key::Known;
}

// Whether an UPDATE left the value at `position` as it was: logged SAME in the old tuple, or an
// unchanged out-of-line value (TOAST) in the new one. UNKNOWN (not logged) may have changed.
bool unchanged(const ChangeRecord& change, int position) {
    if (position < 0) return false;
    auto p = static_cast<std::size_t>(position);
    if (p < change.old_values.size() && change.old_values[p].kind == ValueKind::Same) return true;
    return p < change.new_values.size() && change.new_values[p].kind == ValueKind::Toast;
}

// Whether `change` is an UPDATE that cannot change the docs of the watch `plan`.
bool reads_nothing_changed(const WatchPlan& plan, const ChangeRecord& change) {
    if (change.op != ChangeOp::Update || !plan.read_positions) return false;
    for (int position : *plan.read_positions)
        if (!unchanged(change, position)) return false;
    return true;
}

}  // namespace

void ChangePlans::describe(const RelationRecord& relation, const Catalog& catalog) {
    relations_[relation.relid] = relation;
    rebuild(catalog);
}

void ChangePlans::rebuild(const Catalog& catalog) {
    plans_.clear();
    for (const auto& [relid, relation] : relations_) {
        if (relation.schema == "docsync" && (relation.name == "query_defs" || relation.name == "watch_defs" ||
                                             relation.name == "def_generation"))
            plans_[relid].definitions_table = true;
    }
    const Definitions& defs = catalog.definitions();
    for (std::size_t w = 0; w < defs.watches.size(); ++w) {
        const Watch& watch = defs.watches[w];
        RelPlan& plan = plans_[watch.relid];
        WatchPlan wp;
        wp.watch = static_cast<std::uint16_t>(w);
        wp.query = catalog.at(watch.query);
        wp.reverse = watch.reverse();
        wp.broadcast = watch.broadcast;
        const auto& columns = watch.reverse() ? watch.keys_args : watch.columns;
        auto rel = relations_.find(watch.relid);
        auto position_of = [&](const WatchColumn& column) {
            int position = -1;
            if (rel != relations_.end()) {
                const auto& rc = rel->second.columns;
                for (std::size_t i = 0; i < rc.size(); ++i)
                    if (rc[i].attnum == column.attnum && !rc[i].missing) position = static_cast<int>(i);
            }
            return position;
        };
        for (const auto& column : columns) wp.positions.push_back(position_of(column));
        if (watch.read_columns) {
            // a moved row reaches other docs: the mapping columns count as read too
            std::vector<int> read = wp.positions;
            for (const auto& column : *watch.read_columns) read.push_back(position_of(column));
            wp.read_positions = std::move(read);
        }
        plan.watches.push_back(std::move(wp));
    }
}

const RelPlan* ChangePlans::find(std::uint32_t relid) const {
    auto it = plans_.find(relid);
    return it == plans_.end() ? nullptr : &it->second;
}

void resolve_change(const RelPlan& plan, const ChangeRecord& change, KeyTargets& targets) {
    SqlArgs key_new, key_old;
    for (const WatchPlan& wp : plan.watches) {
        if (reads_nothing_changed(wp, change)) continue;
        if (wp.broadcast) {
            targets.broadcast(wp.query);
            continue;
        }
        bool update = change.op == ChangeOp::Update;
        bool has_new = change.op != ChangeOp::Delete;
        bool has_old = change.op != ChangeOp::Insert;
        Key nk = has_new ? new_key(wp, change.new_values, change.old_values, key_new) : Key::Unknown;
        Key ok = has_old ? old_key(wp, change.old_values, update, nk, key_new, key_old) : Key::Unknown;
        if (ok == Key::SameAsNew) has_old = false;
        if ((has_new && nk != Key::Known) || (has_old && ok != Key::Known)) {
            // Never silently nothing: a key we cannot read may name any live doc of the query.
            targets.broadcast(wp.query);
        }
        bool dirty_new = has_new && nk == Key::Known;
        bool dirty_old = has_old && ok == Key::Known && !(dirty_new && key_old == key_new);
        if (wp.reverse) {
            if (dirty_new) targets.lookup(wp.watch, key_new);
            if (dirty_old) targets.lookup(wp.watch, key_old);
        } else {
            if (dirty_new) targets.direct(wp.query, key_new);
            if (dirty_old) targets.direct(wp.query, key_old);
        }
    }
}

void resolve_truncate(const RelPlan& plan, KeyTargets& targets) {
    for (const auto& wp : plan.watches) targets.broadcast(wp.query);
}

}  // namespace docsync
