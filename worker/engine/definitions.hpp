#pragma once
// The definitions the worker runs on: doc queries and the watches that map row changes to docs,
// parsed from docsync.worker_definitions() (contract B in docs/design.md: one jsonb document).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/seams.hpp"

namespace docsync {

// One column of a watched table, identified by attnum (stable across RENAME).
struct WatchColumn {
    std::string name;
    int attnum = 0;
    bool operator==(const WatchColumn&) const = default;
};

// How changes to one table reach the docs of one query.
//   direct:        `columns` are the doc params in $n order, `keys_sql` is empty;
//   reverse index: `keys_sql` runs with `keys_args` (the changed row's columns) as $1…, and each row
//                  it returns is one doc's params in order;
//   broadcast:     no columns and no keys query: every change of the table recomputes every live doc
//                  of the query.
// `read_columns` are the columns of the table the query reads (nullopt: all of them): an UPDATE that
// leaves each of them, and the watch's own columns, unchanged cannot change the watch's docs.
struct Watch {
    std::string query;
    std::uint32_t relid = 0;
    std::string schema;
    std::string table;
    std::vector<WatchColumn> columns;
    std::optional<std::string> keys_sql;
    std::vector<WatchColumn> keys_args;
    std::string keys_batch_sql;  // keys_sql for many key values at once (DocQuery::batch_sql); may be empty
    bool allow_broadcast = false;
    bool broadcast = false;
    std::optional<std::vector<WatchColumn>> read_columns;
    std::string keys_reader_role;  // the role keys_sql runs as (DocQuery::reader_role); may be empty
    // The search_path keys_sql runs under: pinned for the watch's definer when it made the watch,
    // never the doc query's (whose definer may be another role). Missing: pg_catalog alone.
    std::string keys_search_path;
    bool operator==(const Watch&) const = default;

    bool reverse() const { return keys_sql.has_value(); }
};

struct Definitions {
    std::uint64_t generation = 0;  // bumped by every definition change and watched-table DDL
    std::vector<DocQuery> queries;
    std::vector<Watch> watches;
    // Watches whose table or columns do not resolve by name in this database (dropped or renamed
    // unseen by docsync's event triggers, a partial restore): never used; each is "watch <id> of
    // query \"<name>\": <problem, with the fix>", for the log.
    std::vector<std::string> unresolved;
    // Queries that read a table no watch covers, so their docs go stale when it changes: one line
    // each, naming the tables and the fix, for the log.
    std::vector<std::string> uncovered;

    // The query named `name`, or nullptr.
    const DocQuery* find_query(std::string_view name) const;
};

// The longest text of a doc or keys query the worker computes: the text goes into every compute's
// statement. A query whose text, or a keys query of one of its watches, is longer is refused (its
// docs are never computed; docsync.worker_query_status says why) and its texts are not kept.
inline constexpr std::size_t kMaxQueryTextBytes = 1024 * 1024;

// Parses docsync.worker_definitions()'s JSON. Throws docsync::Error naming the problem (and where)
// when the document is malformed: a missing or mistyped field, a watch naming an unknown query, a
// direct watch whose column count differs from its query's params, duplicate query names.
Definitions parse_definitions(std::string_view json);

// The plugin's `tables` option (contract A) for these definitions: `relid(attnum,…)` entries, the
// union of the columns every watch of a table uses (its columns, keys_args and read_columns; a watch
// whose read_columns is nullopt adds only its own columns, since none of its changes is skipped), in
// ascending relid and attnum order; a table none of whose watches names a column gets no list (every
// column). Empty when nothing is watched.
std::string plugin_tables(const Definitions& definitions);

}  // namespace docsync
