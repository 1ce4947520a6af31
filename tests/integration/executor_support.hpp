#pragma once
// Helpers for the executor's integration tests: an admin connection to the test cluster (the libpq
// environment from packaging/dev-cluster.sh) and executor options for it.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "executor/executor.hpp"
#include "pg/connection.hpp"

namespace docsync::test {

inline pg::Connection admin() { return pg::Connection::connect("", pg::deadline_in(std::chrono::seconds(10))); }

inline std::string sql1(pg::Connection& c, const std::string& sql) {
    auto r = c.exec(sql, pg::deadline_in(std::chrono::seconds(60)));
    return r.rows() > 0 && r.columns() > 0 ? std::string(r.get(0, 0)) : std::string();
}

// A plain login role that owns nothing and can read what the tests grant it.
inline void ensure_reader_role(pg::Connection& c, const std::string& role) {
    sql1(c, "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '" + role + "') THEN CREATE ROLE " + role +
                " LOGIN; END IF; END$$");
}

// The batched form of a doc or keys query (DocQuery::batch_sql), as the extension builds it for the
// worker's definitions; creates the extension in the test database when it is missing.
inline std::string batch_sql(pg::Connection& c, const std::string& sql, const std::string& search_path) {
    sql1(c, "CREATE EXTENSION IF NOT EXISTS docsync");
    auto r = c.exec("SELECT docsync.batch_sql($1, $2)", {sql, search_path}, pg::deadline_in(std::chrono::seconds(60)));
    return r.is_null(0, 0) ? std::string() : std::string(r.get(0, 0));
}

inline ExecutorOptions executor_options(const std::string& dsn = "", bool unsafe = true) {
    ExecutorOptions o;
    o.pool_dsn = dsn;
    o.pool_size = 2;
    o.statement_timeout = std::chrono::milliseconds(1500);
    o.max_doc_bytes = 1024 * 1024;
    o.allow_unsafe_pool = unsafe;
    o.reconnect_backoff = std::chrono::milliseconds(20);
    return o;
}

// Runs a shell command and returns its stdout's last line.
inline std::string run_command(const std::string& command) {
    std::string out;
    if (FILE* p = ::popen(command.c_str(), "r")) {
        char buf[512];
        while (std::fgets(buf, sizeof buf, p)) out = buf;
        ::pclose(p);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
}

}  // namespace docsync::test
