// The publication a pgoutput session reads from, and the watches it decodes with (see
// pgoutput_publication.hpp).
#include "replication/pgoutput_publication.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/sqlstate.hpp"

namespace docsync {

namespace {

constexpr std::string_view kComponent = "stream";

[[noreturn]] void bad_tables(std::string_view tables, std::size_t at, const char* expected) {
    throw Error("the tables option \"" + std::string(tables) + "\" is not the worker's relid(attnum,…) form: " +
                expected + " at character " + std::to_string(at + 1));
}

// One row of the catalog query: a column of a watched or extension table.
struct CatalogRow {
    Oid relid = 0;
    std::string name;  // quoted schema.table
    bool docsync_schema = false;
    char replident = 'd';
    int attnum = 0;
    std::string attname;
    bool identity = false;  // in the primary key (DEFAULT) or the replica identity index (INDEX)
};

}  // namespace

std::vector<std::pair<Oid, std::vector<int>>> parse_worker_tables(std::string_view tables) {
    std::vector<std::pair<Oid, std::vector<int>>> out;
    std::size_t i = 0;
    auto number = [&](std::uint64_t max, const char* what) {
        std::size_t start = i;
        std::uint64_t v = 0;
        while (i < tables.size() && tables[i] >= '0' && tables[i] <= '9') {
            v = v * 10 + static_cast<std::uint64_t>(tables[i] - '0');
            if (v > max) bad_tables(tables, start, what);
            ++i;
        }
        if (i == start || v == 0) bad_tables(tables, start, what);
        return v;
    };
    while (i < tables.size()) {
        auto relid = static_cast<Oid>(number(0xFFFFFFFFu, "a relation OID"));
        std::vector<int> attnums;
        if (i < tables.size() && tables[i] == '(') {
            do {
                ++i;
                attnums.push_back(static_cast<int>(number(32767, "an attnum")));
            } while (i < tables.size() && tables[i] == ',');
            if (i >= tables.size() || tables[i] != ')') bad_tables(tables, i, "')'");
            ++i;
        }
        out.emplace_back(relid, std::move(attnums));
        if (i < tables.size()) {
            if (tables[i] != ',') bad_tables(tables, i, "','");
            ++i;
            if (i == tables.size()) bad_tables(tables, i, "an entry");
        }
    }
    return out;
}

std::string publication_name(std::string_view slot) { return "docsync_" + std::string(slot); }

PgoutputPlan plan_pgoutput(pg::Connection& conn, std::string_view tables, pg::Deadline deadline) {
    auto entries = parse_worker_tables(tables);
    std::string oids = "{";
    for (const auto& [relid, attnums] : entries) oids += (oids.size() > 1 ? "," : "") + std::to_string(relid);
    oids += "}";
    // Every live column of the watched relations and of the extension's own logged tables, with
    // whether it is in the relation's replica identity key.
    auto r = conn.exec_simple(
        "SELECT c.oid, pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname), "
        "n.nspname = 'docsync', c.relreplident, a.attnum, a.attname, "
        "coalesce(a.attnum = ANY (k.indkey::int2[]), false) "
        "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
        "LEFT JOIN pg_catalog.pg_index k ON k.indrelid = c.oid AND "
        "(CASE c.relreplident WHEN 'd' THEN k.indisprimary WHEN 'i' THEN k.indisreplident ELSE false END) "
        "WHERE c.relkind IN ('r', 'p') AND c.relpersistence = 'p' AND "
        "(c.oid = ANY (" + conn.quote_literal(oids) + "::pg_catalog.oid[]) OR (n.nspname = 'docsync' AND NOT c.relispartition)) "
        "ORDER BY c.oid, a.attnum",
        deadline);
    std::map<Oid, std::vector<CatalogRow>> relations;
    for (int i = 0; i < r.rows(); ++i) {
        CatalogRow row;
        row.relid = static_cast<Oid>(std::stoul(std::string(r.get(i, 0))));
        row.name = r.get(i, 1);
        row.docsync_schema = r.get(i, 2) == "t";
        row.replident = r.get(i, 3).empty() ? 'd' : r.get(i, 3)[0];
        row.attnum = std::stoi(std::string(r.get(i, 4)));
        row.attname = r.get(i, 5);
        row.identity = r.get(i, 6) == "t";
        relations[row.relid].push_back(std::move(row));
    }
    std::map<Oid, std::vector<int>> watched;
    std::set<Oid> whole;
    for (const auto& [relid, attnums] : entries) {
        if (attnums.empty()) whole.insert(relid);
        auto& w = watched[relid];
        w.insert(w.end(), attnums.begin(), attnums.end());
    }

    PgoutputPlan plan;
    for (const auto& [relid, rows] : relations) {
        const CatalogRow& first = rows.front();
        bool is_watched = watched.count(relid) != 0;
        bool has_identity = first.replident == 'f' ||
                            std::any_of(rows.begin(), rows.end(), [](const CatalogRow& c) { return c.identity; });
        if (!has_identity) {
            if (is_watched)
                throw Error("table " + first.name + " has no replica identity" +
                            (first.replident == 'n' ? std::string(" (REPLICA IDENTITY NOTHING)") : std::string(" (no primary key)")) +
                            ": reading pgoutput needs it in a publication, where PostgreSQL would refuse its UPDATEs and "
                            "DELETEs; give it a primary key or ALTER TABLE " + first.name +
                            " REPLICA IDENTITY FULL, or stream with --plugin docsync");
            // Once per table and process: the plan is made again at every catalog check.
            static std::mutex warned_mutex;
            static std::set<std::string> warned;
            std::lock_guard<std::mutex> lock(warned_mutex);
            if (warned.insert(first.name).second)
                log_warning(kComponent, "the extension's table " + first.name + " has no replica identity; it is left "
                                        "out of the publication");
            continue;
        }
        PgoutputWatch watch;
        watch.relid = relid;
        watch.all_columns = !is_watched || whole.count(relid) != 0;
        if (is_watched) watch.attnums = watched[relid];
        PublishedTable table;
        table.relid = relid;
        table.name = first.name;
        // Whole, never with a column list: PostgreSQL refuses the application's UPDATE and DELETE of
        // a table whose column list does not cover its replica identity, and the identity is the
        // tables' owners' to change at any time (ALTER TABLE … REPLICA IDENTITY FULL, a new primary
        // key). The decoder projects the rows onto the watched columns by name.
        table.whole = true;
        for (const CatalogRow& c : rows) watch.columns.push_back({c.attnum, c.attname});
        plan.watches.push_back(std::move(watch));
        plan.tables.push_back(std::move(table));
    }
    // Watched relations the catalog does not have (dropped since): watched, never published.
    for (const auto& [relid, attnums] : watched) {
        if (relations.count(relid) != 0) continue;
        PgoutputWatch watch;
        watch.relid = relid;
        watch.attnums = attnums;
        watch.all_columns = whole.count(relid) != 0;
        plan.watches.push_back(std::move(watch));
    }
    return plan;
}

namespace {

// What publication_contents holds for a table published with a row filter (WHERE), whatever its
// columns: a filter drops rows the docs read, so it never equals what the watches want.
constexpr const char* kRowFilter = "row filter";

// The publication's tables as pg_publication_rel has them: relid to "*" (no column list), the
// attnums, ascending and space-separated, or kRowFilter.
std::map<Oid, std::string> publication_contents(pg::Connection& conn, const std::string& name, pg::Deadline deadline) {
    auto r = conn.exec_simple("SELECT pr.prrelid, pr.prattrs::text, pr.prqual IS NOT NULL "
                              "FROM pg_catalog.pg_publication_rel pr "
                              "JOIN pg_catalog.pg_publication p ON p.oid = pr.prpubid WHERE p.pubname = " +
                                  conn.quote_literal(name),
                              deadline);
    std::map<Oid, std::string> out;
    for (int i = 0; i < r.rows(); ++i) {
        std::string attrs = "*";
        if (r.get(i, 2) == "t") {
            attrs = kRowFilter;
        } else if (!r.is_null(i, 1)) {
            std::vector<int> attnums;
            std::string text(r.get(i, 1));
            for (std::size_t at = 0; at < text.size();) {
                std::size_t end = text.find(' ', at);
                if (end == std::string::npos) end = text.size();
                if (end > at) attnums.push_back(std::stoi(text.substr(at, end - at)));
                at = end + 1;
            }
            std::sort(attnums.begin(), attnums.end());
            attrs.clear();
            for (int a : attnums) attrs += (attrs.empty() ? "" : " ") + std::to_string(a);
        }
        out[static_cast<Oid>(std::stoul(std::string(r.get(i, 0))))] = attrs;
    }
    return out;
}

}  // namespace

std::string publication_shortfall(pg::Connection& conn, const std::string& name, const PgoutputPlan& plan,
                                  pg::Deadline deadline) {
    auto pub = conn.exec_simple("SELECT puballtables, pubviaroot, pubinsert AND pubupdate AND pubdelete AND pubtruncate "
                                "FROM pg_catalog.pg_publication WHERE pubname = " + conn.quote_literal(name),
                                deadline);
    const std::string quoted = conn.quote_identifier(name);
    if (pub.rows() == 0) return "publication " + quoted + " does not exist";
    if (pub.get(0, 0) == "t") return "publication " + quoted + " is FOR ALL TABLES";
    if (pub.get(0, 1) != "t") return "publication " + quoted + " does not publish partitions as their root";
    if (pub.get(0, 2) != "t") return "publication " + quoted + " does not publish every insert, update, delete and truncate";
    auto held = publication_contents(conn, name, deadline);
    for (const auto& t : plan.tables) {
        auto it = held.find(t.relid);
        if (it == held.end()) return "publication " + quoted + " does not hold table " + t.name;
        if (it->second == kRowFilter) return "publication " + quoted + " holds table " + t.name + " with a row filter";
        if (it->second != "*") return "publication " + quoted + " holds table " + t.name + " with a column list";
    }
    return {};
}

namespace {

// The publication's row, and its tables with every partition or child under them (their
// pg_inherits rows): the CTEs publication_mark and publication_edited_since_slot read.
std::string publication_tree(pg::Connection& conn, const std::string& name) {
    return "WITH RECURSIVE pub AS (SELECT p.oid, p.xmin FROM pg_catalog.pg_publication p WHERE p.pubname = " +
           conn.quote_literal(name) +
           "), tree(relid) AS (SELECT pr.prrelid FROM pg_catalog.pg_publication_rel pr JOIN pub ON pr.prpubid = pub.oid"
           " UNION SELECT i.inhrelid FROM tree t JOIN pg_catalog.pg_inherits i ON i.inhparent = t.relid),"
           " links AS (SELECT i.inhrelid, i.inhparent, i.xmin, c.relfilenode FROM tree t"
           " JOIN pg_catalog.pg_inherits i ON i.inhrelid = t.relid JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid) ";
}

}  // namespace

std::string publication_mark(pg::Connection& conn, const std::string& name, pg::Deadline deadline) {
    // A partition detached and attached again (or a child taken out of its parent and put back)
    // leaves the publication's rows alone, yet pgoutput, publishing through the root, skipped its
    // changes in between: its link's xmin is in the mark. So is its storage: a partition set
    // UNLOGGED (refused for a published table, not for its partition) and LOGGED again wrote no WAL
    // for its changes in between (a TRUNCATE, CLUSTER or VACUUM FULL of it moves the mark too).
    auto r = conn.exec_simple(
        publication_tree(conn, name) +
            "SELECT pub.xmin::text || coalesce(':' || (SELECT pg_catalog.string_agg(pr.oid::text || '/' || pr.xmin::text, "
            "',' ORDER BY pr.oid) FROM pg_catalog.pg_publication_rel pr WHERE pr.prpubid = pub.oid), '') || "
            "coalesce(';' || (SELECT pg_catalog.string_agg(l.inhrelid::text || '<' || l.inhparent::text || '/' || "
            "l.xmin::text || '#' || l.relfilenode::text, ',' ORDER BY l.inhrelid, l.inhparent) FROM links l), '') FROM pub",
        deadline);
    return r.rows() == 0 ? std::string() : std::string(r.get(0, 0));
}

bool publication_edited_since_slot(pg::Connection& conn, const std::string& name, const std::string& slot,
                                   pg::Deadline deadline) {
    auto r = conn.exec_simple(
        publication_tree(conn, name) +
            "SELECT EXISTS (SELECT FROM pub LEFT JOIN pg_catalog.pg_publication_rel pr ON pr.prpubid = pub.oid, "
            "  pg_catalog.pg_replication_slots s "
            " WHERE s.slot_name = " + conn.quote_literal(slot) + " AND s.catalog_xmin IS NOT NULL "
            "   AND (pg_catalog.age(pub.xmin) <= pg_catalog.age(s.catalog_xmin) "
            "        OR pg_catalog.age(pr.xmin) <= pg_catalog.age(s.catalog_xmin) "
            "        OR EXISTS (SELECT FROM links l WHERE pg_catalog.age(l.xmin) <= pg_catalog.age(s.catalog_xmin))))",
        deadline);
    return r.get(0, 0) == "t";
}

bool publication_gains(const std::map<Oid, std::string>& held, const std::map<Oid, std::string>& wanted) {
    auto attnums = [](const std::string& attrs) {
        std::set<int> out;
        for (std::size_t at = 0; at < attrs.size();) {
            std::size_t end = std::min(attrs.find(' ', at), attrs.size());
            if (end > at) out.insert(std::stoi(attrs.substr(at, end - at)));
            at = end + 1;
        }
        return out;
    };
    for (const auto& [relid, attrs] : wanted) {
        auto it = held.find(relid);
        if (it == held.end() || it->second == kRowFilter) return true;
        if (it->second == "*" || it->second == attrs) continue;
        if (attrs == "*") return true;
        auto had = attnums(it->second);
        for (int a : attnums(attrs))
            if (!had.count(a)) return true;
    }
    return false;
}

bool sync_publication(pg::Connection& conn, const std::string& name, const PgoutputPlan& plan, pg::Deadline deadline) {
    std::string list;
    std::map<Oid, std::string> wanted;
    for (const auto& t : plan.tables) {
        if (!list.empty()) list += ", ";
        list += "TABLE " + t.name;
        std::string& attrs = wanted[t.relid];
        if (t.whole) {
            attrs = "*";
            continue;
        }
        list += " (";
        for (std::size_t i = 0; i < t.columns.size(); ++i) {
            list += (i ? ", " : "") + t.columns[i];
            attrs += (i ? " " : "") + std::to_string(t.attnums[i]);
        }
        list += ")";
    }
    const std::string pub = conn.quote_identifier(name);
    auto exists = conn.exec_simple("SELECT puballtables, pubviaroot, pubinsert AND pubupdate AND pubdelete AND "
                                   "pubtruncate FROM pg_catalog.pg_publication WHERE pubname = " +
                                       conn.quote_literal(name),
                                   deadline);
    std::vector<std::string> statements;
    bool gains = true;
    if (exists.rows() == 0) {
        statements.push_back("CREATE PUBLICATION " + pub + (list.empty() ? std::string() : " FOR " + list) +
                             " WITH (publish_via_partition_root = true)");
    } else {
        if (exists.get(0, 0) == "t")
            throw Error("publication " + pub + " is FOR ALL TABLES; the worker keeps its tables in step with the "
                        "watches: DROP PUBLICATION " + pub + " and let the worker create it");
        if (exists.get(0, 1) != "t")
            statements.push_back("ALTER PUBLICATION " + pub + " SET (publish_via_partition_root = true)");
        // The default actions, as CREATE PUBLICATION gives them: the decoder reads all four.
        if (exists.get(0, 2) != "t")
            statements.push_back("ALTER PUBLICATION " + pub + " SET (publish = 'insert, update, delete, truncate')");
        auto held = publication_contents(conn, name, deadline);
        // Publishing partitions as their root, or an action it did not, changes what is sent: a gain.
        gains = !statements.empty() || publication_gains(held, wanted);
        if (held != wanted) {
            if (!list.empty()) {
                statements.push_back("ALTER PUBLICATION " + pub + " SET " + list);
            } else {
                // Nothing to publish: drop what it holds.
                auto names = conn.exec_simple(
                    "SELECT pg_catalog.quote_ident(schemaname) || '.' || pg_catalog.quote_ident(tablename) "
                    "FROM pg_catalog.pg_publication_tables WHERE pubname = " + conn.quote_literal(name),
                    deadline);
                for (int i = 0; i < names.rows(); ++i)
                    statements.push_back("ALTER PUBLICATION " + pub + " DROP TABLE " + std::string(names.get(i, 0)));
            }
        }
    }
    for (const auto& statement : statements) {
        try {
            conn.exec_simple(statement, deadline);
        } catch (const Error& e) {
            if (e.sqlstate() != sqlstate::kInsufficientPrivilege) throw;  // the tables' owner must do it
            std::string all;
            for (const auto& s : statements) all += s + "; ";
            all.pop_back();
            throw Error("the role of --dsn may not set up publication " + pub + " (" + e.what() +
                            "); have an owner of the tables (or a superuser) run: " + all,
                        e.sqlstate(), false);
        }
    }
    if (!statements.empty()) log_info(kComponent, "publication " + pub + " set to the watches: " + statements.back());
    return !statements.empty() && gains;
}

bool server_allows_plugin(pg::Connection& conn, std::string_view name, pg::Deadline deadline) {
    auto r = conn.exec_simple("SELECT pg_catalog.current_setting('output_plugin_libraries', true)", deadline);
    if (r.rows() == 0 || r.is_null(0, 0)) return true;
    std::string_view list = r.get(0, 0);
    for (std::size_t at = 0; at <= list.size();) {
        std::size_t end = std::min(list.find(',', at), list.size());
        std::string_view item = list.substr(at, end - at);
        while (!item.empty() && (item.front() == ' ' || item.front() == '\t' || item.front() == '"')) item.remove_prefix(1);
        while (!item.empty() && (item.back() == ' ' || item.back() == '\t' || item.back() == '"')) item.remove_suffix(1);
        if (item == name) return true;
        at = end + 1;
    }
    return false;
}

std::uint64_t next_full_xid(pg::Connection& conn, pg::Deadline deadline) {
    auto r = conn.exec_simple("SELECT pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())::text", deadline);
    return std::stoull(std::string(r.get(0, 0)));
}

}  // namespace docsync
