// The harmless-role check; the contract is in role_check.hpp.
#include "executor/role_check.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "pg/connection.hpp"

namespace docsync {

std::vector<std::string> role_problems(pg::Connection& connection, bool replication_allowed) {
    // Every role the session's role reaches through memberships (any member may SET ROLE to it), the
    // shortest path first, with what makes it dangerous, spelled as the path: "reader is a member of
    // admins, which is a member of postgres, a superuser".
    auto r = connection.exec(
        "WITH RECURSIVE reach(oid, path) AS ("
        "  SELECT r.oid, ARRAY[r.rolname::text] FROM pg_catalog.pg_roles r WHERE r.rolname = current_user"
        "  UNION ALL"
        "  SELECT m.roleid, reach.path || g.rolname::text FROM reach"
        "    JOIN pg_catalog.pg_auth_members m ON m.member = reach.oid"
        "    JOIN pg_catalog.pg_roles g ON g.oid = m.roleid"
        "   WHERE cardinality(reach.path) < 32 AND NOT g.rolname::text = ANY (reach.path)),"
        " shortest AS (SELECT DISTINCT ON (oid) oid, path FROM reach ORDER BY oid, cardinality(path))"
        " SELECT s.path[1] || CASE WHEN cardinality(s.path) = 1 THEN '' ELSE ' is a member of ' ||"
        "          pg_catalog.array_to_string(s.path[2:], ', which is a member of ') END ||"
        "        CASE WHEN NOT h.attribute THEN ''"
        "             WHEN h.what = 'a superuser' THEN CASE WHEN cardinality(s.path) = 1 THEN ' is ' ELSE ', ' END"
        "             ELSE CASE WHEN cardinality(s.path) = 1 THEN ' has ' ELSE ', which has ' END END ||"
        "        CASE WHEN h.attribute THEN h.what ELSE '' END,"
        "        r.rolsuper"
        " FROM shortest s JOIN pg_catalog.pg_roles r ON r.oid = s.oid"
        " CROSS JOIN LATERAL (VALUES (r.rolsuper, 'a superuser', true),"
        "   (r.rolreplication AND NOT r.rolsuper AND NOT $1::boolean, 'REPLICATION', true),"
        "   (r.rolbypassrls AND NOT r.rolsuper, 'BYPASSRLS', true),"
        "   (r.rolcreaterole AND NOT r.rolsuper, 'CREATEROLE', true),"
        "   (r.rolname IN ('pg_read_server_files', 'pg_write_server_files', 'pg_execute_server_program',"
        "                  'pg_signal_backend', 'pg_read_all_data', 'pg_write_all_data'), r.rolname::text, false)"
        " ) h(applies, what, attribute)"
        " WHERE h.applies ORDER BY cardinality(s.path), s.path::text, h.what",
        {replication_allowed ? "true" : "false"}, pg::deadline_in(std::chrono::seconds(30)));
    std::vector<std::string> problems;
    bool super = false;  // a role that reaches a superuser owns everything: owned tables would only repeat it
    for (int row = 0; row < r.rows(); ++row) {
        problems.emplace_back(r.get(row, 0));
        super = super || r.get(row, 1) == "t";
    }
    if (super) return problems;
    auto owned = connection.exec(
        "SELECT pg_catalog.format('%I.%I', n.nspname, c.relname), pg_catalog.pg_get_userbyid(c.relowner)"
        " FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
        " WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND c.relpersistence <> 't'"
        "   AND c.relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)"
        "   AND pg_catalog.pg_has_role(current_user, c.relowner, 'MEMBER')"
        " ORDER BY c.oid LIMIT 3",
        pg::deadline_in(std::chrono::seconds(30)));
    for (int row = 0; row < owned.rows(); ++row)
        problems.push_back(std::string(owned.get(row, 1)) + " owns table " + std::string(owned.get(row, 0)) +
                           " (an owner bypasses grants and can turn row-level security off)");
    return problems;
}

void require_harmless_role(pg::Connection& connection, bool replication_allowed, const std::string& which,
                           const std::string& fix, bool allow_unsafe, const char* component) {
    auto problems = role_problems(connection, replication_allowed);
    if (problems.empty()) return;
    std::string list;
    for (const auto& p : problems) list += (list.empty() ? "" : "; ") + p;
    std::string message = which + " is not harmless (" + list + "): " + fix;
    if (!allow_unsafe) throw Error(message + ", or pass --allow-unsafe-pool on a throwaway setup");
    log_warning(component, "--allow-unsafe-pool: " + message + ". Never run like this in production.");
}

// A portable install's reader check (ExecutorOptions::check_reader): what the compute changed of the
// role and search_path compute_as set, read after its query in its transaction; nullopt when nothing.
std::optional<std::string> reader_changed(const pg::Result& r, const std::string& reader_role,
                                          const std::string& search_path) {
    if (r.rows() != 1 || r.columns() != 2) throw Error("the reader check returned a malformed result");
    std::string role(r.get(0, 0));
    std::string path(r.get(0, 1));
    if (role != reader_role)
        return "it changed the role it computes as from its definer's reader role \"" + reader_role + "\" to \"" +
               role + "\"";
    if (path != search_path)
        return "it changed its search_path from its stored \"" + search_path + "\" to \"" + path + "\"";
    return std::nullopt;
}

}  // namespace docsync
