#pragma once
// RAII over libpq: a connection owner, a result owner, and SQL execution with client-side deadlines.
//
// Thread ownership: a Connection and every Result it produced belong to one thread at a time. Only
// cancel_handle() may be used from another thread (PQcancel is safe for that).

#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace docsync::pg {

using Deadline = std::chrono::steady_clock::time_point;
using Params = std::vector<std::optional<std::string>>;

// `values` as one text[] literal: each element quoted, `"` and `\` escaped, so that any text
// survives; NULL unquoted.
std::string text_array(const Params& values);

// Deadline `d` from now.
inline Deadline deadline_in(std::chrono::steady_clock::duration d) { return std::chrono::steady_clock::now() + d; }

class Result {
public:
    Result() = default;
    explicit Result(PGresult* result) : result_(result, &PQclear) {}

    ExecStatusType status() const { return result_ ? PQresultStatus(result_.get()) : PGRES_FATAL_ERROR; }
    int rows() const { return result_ ? PQntuples(result_.get()) : 0; }
    int columns() const { return result_ ? PQnfields(result_.get()) : 0; }
    bool is_null(int row, int column) const { return PQgetisnull(result_.get(), row, column) != 0; }
    std::string_view get(int row, int column) const {
        return {PQgetvalue(result_.get(), row, column), static_cast<std::size_t>(PQgetlength(result_.get(), row, column))};
    }
    std::optional<std::string> get_optional(int row, int column) const {
        if (is_null(row, column)) return std::nullopt;
        return std::string(get(row, column));
    }
    Oid column_type(int column) const { return PQftype(result_.get(), column); }
    PGresult* raw() const { return result_.get(); }
    explicit operator bool() const { return result_ != nullptr; }

private:
    std::unique_ptr<PGresult, decltype(&PQclear)> result_{nullptr, &PQclear};
};

// Shares a connection's PGcancel with other threads; valid while the Connection lives.
class CancelHandle {
public:
    explicit CancelHandle(PGcancel* cancel) : cancel_(cancel, &PQfreeCancel) {}
    // Asks the server to cancel the running statement; false when the request could not be sent.
    bool cancel() const;

private:
    std::unique_ptr<PGcancel, decltype(&PQfreeCancel)> cancel_;
};

// One statement of a pipeline (Connection::pipeline). `sync` ends a group after it: the server
// skips the rest of a group after a failed statement, and runs the next group.
struct Statement {
    std::string sql;
    Params params;
    bool sync = false;
    // Keep it prepared on the connection: parsed and planned at its first run only (the server
    // replans it after DDL on what it reads, or a search_path change). Extended protocol only.
    bool prepare = false;
};

// One statement's outcome in a pipeline: its result, or the server's error (a statement skipped
// after an earlier failure of its group has an error saying so, without a SQLSTATE).
struct Step {
    Result result;
    std::optional<Error> error;
};

class Connection {
public:
    // Connects without blocking past `deadline` (PQconnectStartParams + PQconnectPoll + poll()).
    // `conninfo` is a libpq connection string or URI; `overrides` are extra keyword/value pairs that
    // win over it (e.g. replication=database, application_name). `setting` names where the connection
    // string came from (--dsn, --pool-dsn) in the error. Throws docsync::Error (transient) with one
    // line: the setting, the role and database, libpq's reason folded onto one line, and the likely
    // fix (connect_fix); it carries the server's SQLSTATE when the server refused the connection
    // (57P03 while it starts or stops, 28P01 for a wrong password, …).
    static Connection connect(const std::string& conninfo, Deadline deadline,
                              const std::vector<std::pair<std::string, std::string>>& overrides = {},
                              std::string_view setting = {});

    Connection(Connection&&) noexcept = default;
    Connection& operator=(Connection&&) noexcept = default;
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    // Runs one statement (text result) and returns its result. A server error, a lost connection or
    // the deadline (after which the statement is cancelled) throws docsync::Error carrying the
    // SQLSTATE (57014 for a client-side timeout) and whether the failure is transient. A statement
    // that starts a COPY is an error (0A000): the COPY is ended at once, so the deadline still holds.
    Result exec(const std::string& sql, Deadline deadline);
    Result exec(const std::string& sql, const Params& params, Deadline deadline);

    // Non-throwing variant: the error, if any, in `error` and an empty Result.
    Result try_exec(const std::string& sql, const Params& params, Deadline deadline, Error* error);

    // Runs `sql` over the simple query protocol (no parameters), as a replication connection requires
    // (walsenders refuse the extended protocol): replication commands such as IDENTIFY_SYSTEM and,
    // with replication=database, plain SQL. Same errors as exec().
    Result exec_simple(const std::string& sql, Deadline deadline);
    Result try_exec_simple(const std::string& sql, Deadline deadline, Error* error);

    // Runs `statements` in libpq's pipeline mode: all are sent at once and their results read back,
    // one network round trip for all. Server errors are the steps'; a lost connection, or the
    // deadline (the running statement is then cancelled, with 5 s of grace for the rest), throws
    // docsync::Error (transient), after which the connection must be dropped. The last statement
    // must end a group (`sync`). Extended protocol only: not on replication connections. A
    // `prepare` statement is prepared in the same exchange the first time; a prepared statement whose
    // result type changed (DDL) fails with a transient error and is prepared again next time.
    std::vector<Step> pipeline(const std::vector<Statement>& statements, Deadline deadline);
    // Statements kept prepared (Statement::prepare); beyond this many, statements run unprepared.
    static constexpr std::size_t kMaxPrepared = 128;
    std::size_t prepared_count() const { return prepared_.size(); }
    // Deallocates every statement the session has prepared (DEALLOCATE ALL) and forgets them, so
    // the next run of each is parsed and planned against the catalog as it is now. Nothing is sent
    // when none is prepared. Throws like exec().
    void forget_prepared(Deadline deadline);

    // Sends `sql` (simple protocol) and waits for its first result without consuming further ones:
    // for START_REPLICATION, whose result is PGRES_COPY_BOTH. Throws like exec().
    Result start_copy(const std::string& sql, Deadline deadline);

    int backend_pid() const { return PQbackendPID(conn_.get()); }
    std::string user() const { return PQuser(conn_.get()); }  // the role the session logged in as

    bool ok() const { return conn_ && PQstatus(conn_.get()) == CONNECTION_OK; }
    std::unique_ptr<CancelHandle> cancel_handle() const { return std::make_unique<CancelHandle>(PQgetCancel(conn_.get())); }
    PGconn* raw() const { return conn_.get(); }
    int server_version() const { return PQserverVersion(conn_.get()); }

    // Waits until the socket is readable (or writable with `for_write`) or `deadline` passes; false on
    // timeout. Throws docsync::Error when poll() fails.
    bool wait_socket(bool for_write, Deadline deadline) const;

    // SQL literal and identifier quoting with the connection's encoding rules.
    std::string quote_literal(std::string_view text) const;
    std::string quote_identifier(std::string_view text) const;

private:
    Result run(const std::string& sql, const Params* params, Deadline deadline, Error* error);
    // The waits of run() and pipeline(): until the output is flushed, or until a result can be read
    // without blocking. When `deadline` passes the running statement is cancelled once and the
    // deadline moves 5 s on (`cancelled` says so); false when that passes too, or the connection
    // fails.
    bool wait_or_cancel(bool for_write, Deadline& deadline, bool& cancelled);
    bool flush_output(Deadline& deadline, bool& cancelled);
    bool await_result(Deadline& deadline, bool& cancelled);
    // Ends a COPY a statement started (COPY_IN: refused; COPY_OUT/BOTH: cancelled and drained) so the
    // statement's final result follows; false when that did not happen by `deadline`.
    bool end_copy(ExecStatusType status, Deadline deadline);
    explicit Connection(PGconn* conn) : conn_(conn, &PQfinish) {}
    std::unique_ptr<PGconn, decltype(&PQfinish)> conn_;
    std::unordered_map<std::string, std::string> prepared_;  // SQL → the name it is prepared under
    std::uint64_t prepared_seq_ = 0;                          // names are docsync_<n>, never reused
};

// Pins the session settings that change how values print, so a key prints the same in the plugin's
// output (the walsender's session), in keys queries (the pool's) and in the definitions, whatever the
// environment (PGCLIENTENCODING, PGTZ) or ALTER ROLE … SET say: client_encoding UTF8, TimeZone UTC,
// DateStyle ISO, IntervalStyle postgres, extra_float_digits 3, bytea_output hex. One simple-protocol
// round trip, so it works on replication connections too. Throws like exec().
void pin_text_forms(Connection& conn, Deadline deadline);

// The error of a failed result (or of the connection when `result` is null), with its SQLSTATE and
// its message folded onto one line (fold_message).
Error error_from(PGconn* conn, const PGresult* result, std::string_view context = {});

// Why `conninfo` is not a connection string libpq accepts (its message, on one line), or empty when
// it is one. Parses only: nothing connects.
std::string conninfo_problem(const std::string& conninfo);

// A libpq or server message on one line: lines joined as sentences, indentation and runs of blanks
// collapsed, the caret line under a query position ("      ^") dropped.
std::string fold_message(std::string_view message);

// The likely fix for a failed connection, from libpq's (untranslated) message, or empty when the
// message is not one it knows. `setting` names the connection string in the advice ("--dsn");
// `walsender` says the connection asked for replication=database, whose pg_hba.conf line names its
// database (a logical walsender matches the database's lines, never `replication`'s).
std::string connect_fix(std::string_view message, std::string_view setting, bool walsender);

}  // namespace docsync::pg
