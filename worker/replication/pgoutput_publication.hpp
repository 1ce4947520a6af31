#pragma once
// What a stream session reading `pgoutput` needs from the catalog: the watches the decoder projects
// onto (replication/pgoutput_decoder.hpp) and the publication that makes pgoutput send their rows,
// `docsync_<slot>`, which the worker creates and keeps in step with the watches at every session
// start (docs/internals.md, "Reading pgoutput").
//
// The publication lists every watched table whole, with no column list: PostgreSQL refuses UPDATE and
// DELETE of a published table whose column list does not cover its replica identity, and the tables'
// owners may change the identity at any time (ALTER TABLE … REPLICA IDENTITY FULL), so a column list
// would let such an ALTER break the application's writes. The decoder projects each row onto the
// watched columns by name. The extension's own logged tables are published whole too. Partitioned tables are
// published as their root (publish_via_partition_root). A watched table without a replica identity
// (NOTHING, or DEFAULT without a primary key) is refused by name: publishing it would make
// PostgreSQL refuse the application's UPDATEs and DELETEs of it.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pg/connection.hpp"
#include "replication/pgoutput_decoder.hpp"

namespace docsync {

// One table of the publication: its quoted name and, unless it is published whole, its columns.
struct PublishedTable {
    Oid relid = 0;
    std::string name;
    bool whole = true;
    std::vector<std::string> columns;  // quoted
    std::vector<int> attnums;          // ascending, as the columns
};

struct PgoutputPlan {
    std::vector<PgoutputWatch> watches;
    std::vector<PublishedTable> tables;
};

// The worker's `tables` option (`relid[(attnum,…)]` entries, as plugin_tables() writes them).
// Throws Error for anything else.
std::vector<std::pair<Oid, std::vector<int>>> parse_worker_tables(std::string_view tables);

// Reads the catalog for the watched relations of `tables` (and the extension's own tables) and
// plans the watches and the publication. Throws Error naming a watched table without a replica
// identity.
PgoutputPlan plan_pgoutput(pg::Connection& conn, std::string_view tables, pg::Deadline deadline);

// The publication a slot reads from.
std::string publication_name(std::string_view slot);

// Whether publishing `wanted` instead of `held` (relid to "*", every column, or the attnums ascending
// and space-separated, as pg_publication_rel has them) adds a table or a column: pgoutput sends its
// changes only from that change on.
bool publication_gains(const std::map<Oid, std::string>& held, const std::map<Oid, std::string>& wanted);

// Creates the publication or sets its tables to the plan's, unless it already matches (simple
// queries: works on a replication connection); true when it created it or added a table or column
// to it (or made it publish partitions as their root). Adding a table to
// a publication takes its owner: when the role may not, the Error gives the statement for an owner to
// run.
bool sync_publication(pg::Connection& conn, const std::string& name, const PgoutputPlan& plan, pg::Deadline deadline);

// What keeps the publication from sending every change the plan needs, "" when nothing does: it is
// missing, FOR ALL TABLES, does not publish partitions as their root or every action (insert,
// update, delete, truncate), or lacks a planned table or holds it with a column list. A table an
// owner took out by hand (ALTER PUBLICATION … DROP TABLE) sends nothing from then on, so the worker
// checks this at every --catalog-check and has the next session start set the publication right.
// Tables it holds beyond the plan send changes the decoder drops: not counted.
std::string publication_shortfall(pg::Connection& conn, const std::string& name, const PgoutputPlan& plan,
                                  pg::Deadline deadline);

// What changes with every edit of the publication, and only then: its row's xmin (ALTER PUBLICATION
// … SET, RENAME, OWNER TO) and each of its tables' rows, oid and xmin (ADD, DROP and SET TABLE make
// new ones), and the pg_inherits row of every partition or child under its tables (a DETACH and
// ATTACH make a new one) with its relfilenode (SET UNLOGGED and LOGGED make new ones); "" when it
// does not exist. A table taken out and put back, the actions
// narrowed and set back, or a partition detached and attached again, between two looks leaves
// publication_shortfall nothing to find, but moves this: pgoutput never sent what changed in
// between. (A partition created or attached anew moves it too: every live doc is recomputed.)
std::string publication_mark(pg::Connection& conn, const std::string& name, pg::Deadline deadline);

// Whether an edit of the publication may have committed after the slot's confirmed position (simple
// queries): a row of the publication (see publication_mark) written by a transaction not older than
// the slot's catalog_xmin, the oldest a session of the slot may still decode. Such an edit, undone
// before this session started, hid the changes between: the caller recomputes every live doc. The
// worker's own last change of the publication counts too, until the slot has moved past it.
bool publication_edited_since_slot(pg::Connection& conn, const std::string& name, const std::string& slot,
                                   pg::Deadline deadline);

// Whether the server may decode with the output plugin `name`: PostgreSQL 15.19 and later decode only
// with the plugins output_plugin_libraries lists; without that setting any installed plugin may be
// used.
bool server_allows_plugin(pg::Connection& conn, std::string_view name, pg::Deadline deadline);

// The server's next full xid (pg_current_snapshot()'s xmax): the decoder's first xid reference.
std::uint64_t next_full_xid(pg::Connection& conn, pg::Deadline deadline);

}  // namespace docsync
