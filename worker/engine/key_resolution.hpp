#pragma once
// Key resolution: how a changed row becomes doc keys. Each watch of the changed table reads its
// columns from the change (the doc params of a direct watch, the keys_args of a reverse index),
// from the new tuple and from the old one, so a row that moves from one doc to another dirties
// both. A key that cannot be read (a column not logged, an unchanged TOAST value whose old value was
// not logged) is never silently nothing: it broadcasts to every live doc of the query.
//
// The plans say where each watch's columns sit in a change of its table; they are rebuilt when a
// RELATION record describes a table anew and when the definitions change.

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/catalog.hpp"
#include "engine/seams.hpp"
#include "replication/records.hpp"

namespace docsync {

// How one watch reads a change of its table: positions of its columns in the change's values.
struct WatchPlan {
    std::uint16_t watch = 0;
    std::uint16_t query = 0;
    bool reverse = false;
    bool broadcast = false;      // every change names every live doc of the query
    std::vector<int> positions;  // -1: the relation has no such column (values unknown)
    // The positions of the columns the query reads, its own `positions` included, when it names
    // them (Watch::read_columns); nullopt: it may read any column, and every UPDATE reaches it.
    std::optional<std::vector<int>> read_positions;
};

struct RelPlan {
    bool definitions_table = false;  // one of docsync's definition tables
    std::vector<WatchPlan> watches;
};

class ChangePlans {
public:
    // A RELATION record: the table's columns as the stream will send them from now on.
    void describe(const RelationRecord& relation, const Catalog& catalog);
    // The definitions changed: every plan is made again.
    void rebuild(const Catalog& catalog);
    // The plan for changes of `relid`, or nullptr when no watch or definition table has it.
    const RelPlan* find(std::uint32_t relid) const;

private:
    std::unordered_map<std::uint32_t, RelationRecord> relations_;  // last RELATION per relid
    std::unordered_map<std::uint32_t, RelPlan> plans_;
};

// What a change names, watch by watch.
class KeyTargets {
public:
    // A key could not be read: every live doc of `query` may be affected.
    virtual void broadcast(std::uint16_t query) = 0;
    // A direct watch: the doc of `query` whose params are `key`.
    virtual void direct(std::uint16_t query, const SqlArgs& key) = 0;
    // A reverse index: its keys query, run with `key`, names the docs.
    virtual void lookup(std::uint16_t watch, const SqlArgs& key) = 0;

protected:
    ~KeyTargets() = default;
};

// Tells `targets` every key `change` names under `plan`: the new row's and, when it differs, the
// old row's; a broadcast watch names every live doc of its query. An UPDATE that leaves every column
// a watch reads unchanged (SAME in the old tuple, or an unchanged out-of-line value in the new one;
// never UNKNOWN) names nothing for that watch: it cannot change its docs.
void resolve_change(const RelPlan& plan, const ChangeRecord& change, KeyTargets& targets);
// A TRUNCATE of the table: every key of every watch is unknown.
void resolve_truncate(const RelPlan& plan, KeyTargets& targets);

}  // namespace docsync
