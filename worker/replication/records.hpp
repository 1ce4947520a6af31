#pragma once
// Decoded docsync wire records (shared/docsync_wire.h), as the stream hands them up. Plain values:
// they own their strings and outlive the message buffer they were decoded from.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "common/lsn.hpp"

namespace docsync {

using Oid = std::uint32_t;

struct BeginRecord {
    std::uint64_t xid = 0;      // full 64-bit xid (epoch << 32 | xid)
    Lsn commit_lsn = 0;         // start of the COMMIT record
    std::int64_t commit_time = 0;  // microseconds since 2000-01-01 UTC
};

struct RelationColumn {
    int attnum = 0;
    std::string name;
    Oid type_oid = 0;
    bool identity = false;  // part of the replica identity
    bool missing = false;   // listed in `tables` but the relation has no such column
};

struct RelationRecord {
    Oid relid = 0;
    std::string schema;
    std::string name;
    char replica_identity = 'd';  // pg_class.relreplident: d, f, n, i
    std::vector<RelationColumn> columns;
};

enum class ValueKind : char {
    Null = 'n',
    Text = 't',
    Toast = 'u',    // unchanged out-of-line value, not logged (new tuples only)
    Same = 's',     // old tuple only: equal to the new value
    Unknown = '?',  // not logged, or the column does not exist
};

struct Value {
    ValueKind kind = ValueKind::Unknown;
    std::string text;  // only for ValueKind::Text
};

enum class ChangeOp : char { Insert = 'I', Update = 'U', Delete = 'D' };

struct ChangeRecord {
    ChangeOp op = ChangeOp::Insert;
    Oid relid = 0;
    std::vector<Value> new_values;  // INSERT, UPDATE; one per RELATION column
    std::vector<Value> old_values;  // UPDATE, DELETE; one per RELATION column
};

struct TruncateRecord {
    bool cascade = false;
    bool restart_identity = false;
    std::vector<Oid> relids;
};

struct MessageRecord {
    bool transactional = false;
    std::string prefix;
    std::string content;
};

struct CommitRecord {
    Lsn commit_lsn = 0;
    Lsn end_lsn = 0;  // the position to acknowledge once the transaction is done
};

using Record = std::variant<BeginRecord, RelationRecord, ChangeRecord, TruncateRecord, MessageRecord, CommitRecord>;

}  // namespace docsync
