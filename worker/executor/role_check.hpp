#pragma once
// The check that a role is harmless enough to run customers' SQL (the pool's) or hold the slot (the
// replication role's): security code, kept apart so it is reviewed as such.

#include <optional>
#include <string>
#include <vector>

namespace docsync::pg {
class Connection;
class Result;
}

namespace docsync {

// What makes the connection's role unsafe to run customer SQL or hold the slot, followed through
// memberships (a member may SET ROLE to any role it belongs to), each naming its path ("reader is a
// member of admins, which is a member of postgres, a superuser"): a superuser, REPLICATION (unless
// `replication_allowed`), BYPASSRLS or CREATEROLE; pg_read_server_files, pg_write_server_files,
// pg_execute_server_program, pg_signal_backend, pg_read_all_data, pg_write_all_data; owning a table
// (owners bypass grants and can turn row-level security off). Empty when the role is harmless.
// Throws docsync::Error when the check cannot run.
std::vector<std::string> role_problems(pg::Connection& connection, bool replication_allowed);

// Throws docsync::Error "<which> is not harmless (<problems>): <fix>, or pass --allow-unsafe-pool …"
// when role_problems finds any; with `allow_unsafe` it logs that as a warning of `component` instead.
void require_harmless_role(pg::Connection& connection, bool replication_allowed, const std::string& which,
                           const std::string& fix, bool allow_unsafe, const char* component);

// A portable install's reader check (ExecutorOptions::check_reader): given the row of
// `SELECT current_user, current_setting('search_path')` read after a compute's query in its
// transaction, what the query changed of the role and search_path docsync.compute_as set (a portable
// compute_as cannot refuse set_config('role', …)); nullopt when nothing. Throws docsync::Error on a
// malformed row.
std::optional<std::string> reader_changed(const pg::Result& row, const std::string& reader_role,
                                          const std::string& search_path);

}  // namespace docsync
