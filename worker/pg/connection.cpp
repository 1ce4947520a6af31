// RAII over libpq with client-side deadlines.
#include "common/sqlstate.hpp"
#include "pg/connection.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace docsync::pg {

namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Deadline deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return 0;
    return left > 1000 * 60 * 60 ? 1000 * 60 * 60 : static_cast<int>(left);
}

std::string trim(std::string text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return text;
}

// A server's error or notice text as the worker keeps, logs and records it: a definer's query
// decides its length (an input function quotes its whole input), so past kMaxServerText bytes it
// is cut at a character's start and says how long it was.
constexpr std::size_t kMaxServerText = 4096;
std::string bounded_text(const char* text) {
    std::string_view whole = text ? std::string_view(text) : std::string_view();
    if (whole.size() <= kMaxServerText) return std::string(whole);
    std::size_t cut = kMaxServerText;
    while (cut > 0 && (static_cast<unsigned char>(whole[cut]) & 0xC0) == 0x80) --cut;
    return std::string(whole.substr(0, cut)) + "… (" + std::to_string(whole.size()) + " bytes in all)\n";
}

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// The quoted name after `word` in a server message: quoted_after(…role "x" does not exist…, "role")
// is x; empty when there is none.
std::string quoted_after(std::string_view message, std::string_view word) {
    std::string key = std::string(word) + " \"";
    auto at = message.find(key);
    if (at == std::string_view::npos) return {};
    auto open = at + key.size();
    auto close = message.find('"', open);
    if (close == std::string_view::npos) return {};
    return std::string(message.substr(open, close - open));
}

// The pg_hba.conf line that admits the connection a "no pg_hba.conf entry for host …" message describes.
std::string hba_line(std::string_view message) {
    std::string host = quoted_after(message, "host");
    std::string user = quoted_after(message, "user");
    std::string database = quoted_after(message, "database");
    if (user.empty() || database.empty()) return {};
    if (host.empty() || host == "[local]") return "local " + database + " " + user + " scram-sha-256";
    return "host " + database + " " + user + " " + host + (contains(host, ":") ? "/128" : "/32") + " scram-sha-256";
}

bool is_sqlstate(std::string_view code) {
    return code.size() == 5 && std::all_of(code.begin(), code.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z');
           });
}

// Connection attempts run with verbose errors, the one way libpq shows the SQLSTATE of an error the
// server sends before the connection is up: "…failed: FATAL:  57P03: the database system is shutting
// down", then a "LOCATION:  …" line. Takes the SQLSTATE out of each error (returning the last one's:
// the attempt that ended the connect) and drops the LOCATION lines, which leaves the message as the
// default verbosity prints it.
std::string take_sqlstate(std::string& message) {
    std::string sqlstate;
    std::string out;
    std::size_t start = 0;
    while (start < message.size()) {
        auto end = message.find('\n', start);
        auto stop = end == std::string::npos ? message.size() : end + 1;
        std::string_view line(message.data() + start, stop - start);
        start = stop;
        if (line.starts_with("LOCATION:  ")) continue;
        // "<severity>:  <SQLSTATE>: <message>"
        for (auto at = line.find(":  "); at != std::string_view::npos; at = line.find(":  ", at + 1)) {
            if (!is_sqlstate(line.substr(at + 3, 5)) || line.substr(at + 8, 2) != ": ") continue;
            sqlstate = line.substr(at + 3, 5);
            out += line.substr(0, at + 3);
            line.remove_prefix(at + 10);
            break;
        }
        out += line;
    }
    message = std::move(out);
    return sqlstate;
}

// Prints a notice as libpq's default receiver would at the default verbosity (which the connect's
// verbose errors, take_sqlstate, would otherwise change), bounded (bounded_text), and at most
// kNoticesPerMinute a minute in all, the rest counted: a doc query may raise any number of any
// length.
constexpr int kNoticesPerMinute = 100;
void print_notice(void*, const PGresult* notice) {
    static std::mutex mutex;
    static std::chrono::steady_clock::time_point window;
    static int printed = 0;
    static long dropped = 0;
    {
        std::lock_guard lock(mutex);
        auto now = std::chrono::steady_clock::now();
        if (now >= window + std::chrono::minutes(1)) {
            if (dropped > 0)
                std::fprintf(stderr, "docsync-worker: %ld notice(s) from the server dropped in the last minute (more than %d)\n",
                             dropped, kNoticesPerMinute);
            window = now;
            printed = 0;
            dropped = 0;
        }
        if (printed >= kNoticesPerMinute) {
            ++dropped;
            return;
        }
        ++printed;
    }
    std::unique_ptr<char, decltype(&PQfreemem)> text(
        PQresultVerboseErrorMessage(notice, PQERRORS_DEFAULT, PQSHOW_CONTEXT_ERRORS), &PQfreemem);
    if (text) std::fputs(bounded_text(text.get()).c_str(), stderr);
}

// Connect failure: "--pool-dsn: could not connect as user "r" to database "app": <libpq>; <fix>",
// with the server's SQLSTATE when the server refused the connection.
Error connect_error(PGconn* conn, std::string_view setting, bool walsender, std::string reason) {
    std::string message = setting.empty() ? std::string("could not connect") : std::string(setting) + ": could not connect";
    if (conn && PQuser(conn) && PQdb(conn))
        message += std::string(" as user \"") + PQuser(conn) + "\" to database \"" + PQdb(conn) + "\"";
    if (reason.empty() && conn) reason = PQerrorMessage(conn);
    std::string sqlstate = take_sqlstate(reason);
    reason = fold_message(reason);
    if (reason.empty()) reason = "unknown libpq error";
    message += ": " + reason;
    if (auto fix = connect_fix(reason, setting, walsender); !fix.empty()) message += "; " + fix;
    return Error(message, sqlstate, true);
}

}  // namespace

std::string conninfo_problem(const std::string& conninfo) {
    char* err = nullptr;
    std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> options(PQconninfoParse(conninfo.c_str(), &err),
                                                                          &PQconninfoFree);
    if (options) return {};
    std::string message = err ? fold_message(err) : "out of memory";
    if (err) PQfreemem(err);
    return message;
}

std::string fold_message(std::string_view message) {
    std::string out;
    std::size_t start = 0;
    while (start <= message.size()) {
        auto end = message.find('\n', start);
        if (end == std::string_view::npos) end = message.size();
        std::string_view line = message.substr(start, end - start);
        start = end + 1;
        // Collapse indentation and runs of blanks; skip a line that only points at a position.
        std::string folded;
        bool blank = true;
        for (char c : line) {
            bool space = c == ' ' || c == '\t' || c == '\r';
            if (space) {
                if (!blank) folded.push_back(' ');
                blank = true;
            } else {
                folded.push_back(c);
                blank = false;
            }
        }
        while (!folded.empty() && folded.back() == ' ') folded.pop_back();
        if (folded.empty() || folded.find_first_not_of('^') == std::string::npos) continue;
        if (!out.empty()) {
            char last = out.back();
            if (last != '.' && last != ':' && last != '?' && last != '!' && last != ';') out.push_back('.');
            out.push_back(' ');
        }
        out += folded;
    }
    return out;
}

std::string connect_fix(std::string_view message, std::string_view setting, bool walsender) {
    std::string in = setting.empty() ? std::string("the connection string") : std::string(setting);
    std::string user = quoted_after(message, "user");
    std::string role = user.empty() ? std::string("<role>") : user;
    if (contains(message, "password authentication failed"))
        return "the password is wrong: correct it in ~/.pgpass (or the file PGPASSFILE names; lines "
               "host:port:database:user:password, mode 0600) or in password=… of " + in;
    if (contains(message, "no password supplied"))
        return "the server asks for a password and none was given: put it in ~/.pgpass (or the file PGPASSFILE "
               "names; lines host:port:database:user:password, mode 0600) or password=… in " + in;
    if (contains(message, "Peer authentication failed") || contains(message, "Ident authentication failed"))
        return "peer authentication admits only the OS user named \"" + role + "\": run the worker as that user, map "
               "its OS user in pg_ident.conf, or connect over TCP (host=127.0.0.1) with a password in " + in;
    if (contains(message, "no pg_hba.conf entry") || contains(message, "pg_hba.conf rejects connection")) {
        std::string line = hba_line(message);
        std::string fix = contains(message, "rejects") ? "a reject line in pg_hba.conf matches first: put a line that "
                                                         "admits it above that one"
                                                       : "no pg_hba.conf line admits it: add one";
        if (!line.empty()) fix += ", such as \"" + line + "\"";
        fix += ", then reload (SELECT pg_reload_conf())";
        if (walsender)
            fix += "; a logical replication connection matches the lines for its database, not the "
                   "`replication` lines";
        return fix;
    }
    if (contains(message, "must be superuser or replication role to start walsender"))
        return "the role may not stream: ALTER ROLE " + role + " REPLICATION, or connect " + in +
               " as the replication role (CREATE ROLE docsync_repl LOGIN REPLICATION)";
    if (contains(message, "is not permitted to log in"))
        return "ALTER ROLE " + quoted_after(message, "role") + " LOGIN, or connect " + in + " as a LOGIN role";
    if (std::string name = quoted_after(message, "role");
        !name.empty() && contains(message, "role \"" + name + "\" does not exist"))
        return "create the role (CREATE ROLE " + name + " LOGIN …) or fix user= in " + in;
    if (std::string name = quoted_after(message, "database");
        !name.empty() && contains(message, "database \"" + name + "\" does not exist"))
        return "create the database, or fix dbname= in " + in + " (psql -l lists the databases)";
    if (contains(message, "Connection refused") || contains(message, "Is the server running"))
        return "no server listens there: start PostgreSQL, or fix host= and port= in " + in;
    if (contains(message, "could not translate host name") || contains(message, "Name or service not known"))
        return "the host name does not resolve: fix host= in " + in;
    if (contains(message, "timeout expired") || contains(message, "timed out"))
        return "the server did not answer in time: check host= and port= in " + in +
               ", and that no firewall drops the connection";
    if (contains(message, "too many clients") || contains(message, "connection slots are reserved"))
        return "the server's max_connections is reached: raise it, or lower --pool";
    if (contains(message, "exceeds max_wal_senders"))
        return "the server's max_wal_senders is reached: raise it (each worker streams on one walsender)";
    if (contains(message, "the database system is"))
        return "the server is starting, stopping or recovering: the worker retries until it accepts connections";
    if (contains(message, "SSL"))
        return "check sslmode= and the certificate settings in " + in + " against the server's ssl setting";
    return "check host=, port=, dbname= and user= in " + in;
}

std::string text_array(const Params& values) {
    std::string out = "{";
    for (const auto& value : values) {
        if (out.size() > 1) out += ',';
        if (!value) {
            out += "NULL";
            continue;
        }
        out += '"';
        for (char c : *value) {
            if (c == '"' || c == '\\') out += '\\';
            out += c;
        }
        out += '"';
    }
    return out + '}';
}

bool CancelHandle::cancel() const {
    if (!cancel_) return false;
    char errbuf[256];
    return PQcancel(cancel_.get(), errbuf, sizeof errbuf) == 1;
}

Error error_from(PGconn* conn, const PGresult* result, std::string_view context) {
    std::string sqlstate;
    std::string message;
    if (result) {
        if (const char* s = PQresultErrorField(result, PG_DIAG_SQLSTATE)) sqlstate = s;
        message = trim(bounded_text(PQresultErrorMessage(result)));
    }
    if (message.empty() && conn) message = trim(bounded_text(PQerrorMessage(conn)));
    message = fold_message(message);
    if (message.empty()) message = "unknown libpq error";
    bool lost = conn == nullptr || PQstatus(conn) != CONNECTION_OK;
    if (!context.empty()) message = std::string(context) + ": " + message;
    return Error(message, sqlstate, lost || sqlstate_is_transient(sqlstate));
}

Connection Connection::connect(const std::string& conninfo, Deadline deadline,
                               const std::vector<std::pair<std::string, std::string>>& overrides,
                               std::string_view setting) {
    std::vector<const char*> keys{"dbname"};
    std::vector<const char*> values{conninfo.c_str()};
    bool walsender = false;
    for (const auto& [k, v] : overrides) {
        keys.push_back(k.c_str());
        values.push_back(v.c_str());
        if (k == "replication") walsender = true;
    }
    keys.push_back(nullptr);
    values.push_back(nullptr);
    // expand_dbname = 1: the first dbname value may be a whole connection string or URI.
    Connection c(PQconnectStartParams(keys.data(), values.data(), 1));
    if (!c.conn_) throw Error("could not allocate a libpq connection", {}, true);
    if (PQstatus(c.conn_.get()) == CONNECTION_BAD) throw connect_error(c.conn_.get(), setting, walsender, {});
    // Verbose errors for the SQLSTATE of a refusal (take_sqlstate); notices print bounded, here and after.
    PQsetErrorVerbosity(c.conn_.get(), PQERRORS_VERBOSE);
    PQsetNoticeReceiver(c.conn_.get(), print_notice, nullptr);
    for (;;) {
        auto state = PQconnectPoll(c.conn_.get());
        if (state == PGRES_POLLING_OK) break;
        if (state == PGRES_POLLING_FAILED) throw connect_error(c.conn_.get(), setting, walsender, {});
        if (!c.wait_socket(state == PGRES_POLLING_WRITING, deadline)) {
            Error timeout = connect_error(c.conn_.get(), setting, walsender, "timed out");
            throw Error(timeout.what(), sqlstate::kUnableToConnect, true);
        }
    }
    PQsetErrorVerbosity(c.conn_.get(), PQERRORS_DEFAULT);
    if (PQsetnonblocking(c.conn_.get(), 1) != 0) throw connect_error(c.conn_.get(), setting, walsender, {});
    return c;
}

bool Connection::wait_socket(bool for_write, Deadline deadline) const {
    pollfd pfd{PQsocket(conn_.get()), static_cast<short>(for_write ? POLLOUT : POLLIN), 0};
    if (pfd.fd < 0) throw Error("connection has no socket", {}, true);
    for (;;) {
        int rc = ::poll(&pfd, 1, remaining_ms(deadline));
        if (rc > 0) return true;
        if (rc == 0) return false;
        if (errno != EINTR) throw Error(std::string("poll failed: ") + std::strerror(errno), {}, true);
    }
}

Result Connection::exec(const std::string& sql, Deadline deadline) { return exec(sql, Params{}, deadline); }

Result Connection::exec(const std::string& sql, const Params& params, Deadline deadline) {
    Error error("");
    Result result = try_exec(sql, params, deadline, &error);
    if (!result) throw error;
    return result;
}

Result Connection::try_exec(const std::string& sql, const Params& params, Deadline deadline, Error* error) {
    return run(sql, &params, deadline, error);
}

Result Connection::exec_simple(const std::string& sql, Deadline deadline) {
    Error error("");
    Result result = try_exec_simple(sql, deadline, &error);
    if (!result) throw error;
    return result;
}

Result Connection::try_exec_simple(const std::string& sql, Deadline deadline, Error* error) {
    return run(sql, nullptr, deadline, error);
}

Result Connection::start_copy(const std::string& sql, Deadline deadline) {
    PGconn* conn = conn_.get();
    if (!PQsendQuery(conn, sql.c_str())) throw error_from(conn, nullptr);
    for (;;) {
        int rc = PQflush(conn);
        if (rc == 0) break;
        if (rc < 0 || !wait_socket(true, deadline))
            throw Error("could not send the command: " + fold_message(PQerrorMessage(conn)), {}, true);
    }
    while (PQisBusy(conn)) {
        if (!wait_socket(false, deadline))
            throw Error("the server did not answer " + sql + " in time", sqlstate::kQueryCanceled, true);
        if (!PQconsumeInput(conn)) throw error_from(conn, nullptr);
    }
    Result first(PQgetResult(conn));
    auto status = first.status();
    if (status == PGRES_COPY_BOTH || status == PGRES_COPY_OUT || status == PGRES_COPY_IN) return first;
    Error error = error_from(conn, first.raw());
    // Drain the rest of the command's results so the connection is reusable.
    for (int i = 0; i < 16; ++i) {
        if (PQisBusy(conn) && (!wait_socket(false, deadline) || !PQconsumeInput(conn))) break;
        Result next(PQgetResult(conn));
        if (!next) break;
    }
    throw error;
}

Result Connection::run(const std::string& sql, const Params* params, Deadline deadline, Error* error) {
    std::vector<const char*> values;
    if (params) {
        values.reserve(params->size());
        for (const auto& p : *params) values.push_back(p ? p->c_str() : nullptr);
    }
    PGconn* conn = conn_.get();
    int sent = params ? PQsendQueryParams(conn, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                                          nullptr, nullptr, 0)
                      : PQsendQuery(conn, sql.c_str());
    if (!sent) {
        *error = error_from(conn, nullptr);
        return {};
    }
    bool cancelled = false;
    if (!flush_output(deadline, cancelled)) {
        *error = Error("could not send the query: " + fold_message(PQerrorMessage(conn)), {}, true);
        return {};
    }
    Result last;
    bool copied = false;
    for (;;) {
        if (!await_result(deadline, cancelled)) {
            *error = cancelled ? Error("statement did not end after it was cancelled", {}, true)
                               : error_from(conn, nullptr);
            return {};
        }
        PGresult* r = PQgetResult(conn);
        if (!r) break;
        last = Result(r);
        auto status = last.status();
        if (status == PGRES_COPY_IN || status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH) {
            copied = true;
            if (!end_copy(status, deadline)) {
                *error = Error("the statement started a COPY that did not end; dropping the connection",
                               sqlstate::kFeatureNotSupported, true);
                return {};
            }
        }
    }
    if (copied) {
        *error = Error("the statement started a COPY, which docsync never runs on this connection; doc and keys "
                       "queries are SELECTs",
                       sqlstate::kFeatureNotSupported, false);
        return {};
    }
    auto status = last.status();
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return last;
    *error = error_from(conn, last.raw());
    if (cancelled && error->sqlstate() == sqlstate::kQueryCanceled)
        *error = Error("statement timed out on the client-side deadline and was cancelled", sqlstate::kQueryCanceled,
                       true);
    return {};
}

bool Connection::wait_or_cancel(bool for_write, Deadline& deadline, bool& cancelled) {
    while (!wait_socket(for_write, deadline)) {
        if (cancelled) return false;
        cancel_handle()->cancel();
        cancelled = true;
        deadline = Clock::now() + std::chrono::seconds(5);  // grace for the cancel to land
    }
    return true;
}

bool Connection::flush_output(Deadline& deadline, bool& cancelled) {
    for (;;) {
        int rc = PQflush(conn_.get());
        if (rc == 0) return true;
        if (rc < 0 || !wait_or_cancel(true, deadline, cancelled)) return false;
    }
}

bool Connection::await_result(Deadline& deadline, bool& cancelled) {
    while (PQisBusy(conn_.get()))
        if (!wait_or_cancel(false, deadline, cancelled) || !PQconsumeInput(conn_.get())) return false;
    return true;
}

std::vector<Step> Connection::pipeline(const std::vector<Statement>& statements, Deadline deadline) {
    PGconn* conn = conn_.get();
    if (statements.empty() || !statements.back().sync)
        throw Error("a pipeline must end with a sync", sqlstate::kFeatureNotSupported, false);
    if (!PQenterPipelineMode(conn)) throw error_from(conn, nullptr);
    // The statements prepared by this exchange (their Prepare's result comes first) and the names
    // of the prepared ones.
    std::vector<bool> preparing(statements.size(), false);
    std::vector<std::string> names(statements.size());
    for (std::size_t i = 0; i < statements.size(); ++i) {
        const Statement& statement = statements[i];
        std::vector<const char*> values;
        values.reserve(statement.params.size());
        for (const auto& p : statement.params) values.push_back(p ? p->c_str() : nullptr);
        int count = static_cast<int>(values.size());
        if (statement.prepare) {
            auto known = prepared_.find(statement.sql);
            if (known != prepared_.end()) {
                names[i] = known->second;
            } else if (prepared_.size() < kMaxPrepared) {
                names[i] = "docsync_" + std::to_string(++prepared_seq_);
                preparing[i] = true;
                prepared_.emplace(statement.sql, names[i]);
                if (!PQsendPrepare(conn, names[i].c_str(), statement.sql.c_str(), count, nullptr))
                    throw Error("could not queue a statement: " + fold_message(PQerrorMessage(conn)), {}, true);
            }
        }
        bool queued = names[i].empty()
                          ? PQsendQueryParams(conn, statement.sql.c_str(), count, nullptr, values.data(), nullptr,
                                              nullptr, 0)
                          : PQsendQueryPrepared(conn, names[i].c_str(), count, values.data(), nullptr, nullptr, 0);
        if (!queued || (statement.sync && !PQpipelineSync(conn)))
            throw Error("could not queue a statement: " + fold_message(PQerrorMessage(conn)), {}, true);
    }
    bool cancelled = false;
    if (!flush_output(deadline, cancelled))
        throw Error("could not send the statements: " + fold_message(PQerrorMessage(conn)), {}, true);
    auto lost = [&] {
        return cancelled ? Error("a statement did not end after it was cancelled", {}, true)
                         : error_from(conn, nullptr);
    };
    std::vector<Step> steps(statements.size());
    for (std::size_t i = 0; i < statements.size(); ++i) {
        if (preparing[i]) {
            // The Prepare's result, then a null. When it did not succeed (an error, or skipped after
            // an earlier failure) the statement is not prepared: its execution fails with that.
            bool prepared = false;
            for (;;) {
                if (!await_result(deadline, cancelled)) throw lost();
                PGresult* r = PQgetResult(conn);
                if (!r) break;
                Result result(r);
                if (result.status() == PGRES_COMMAND_OK) {
                    prepared = true;
                } else if (result.status() != PGRES_PIPELINE_ABORTED) {
                    steps[i].error = error_from(conn, result.raw());
                }
            }
            if (!prepared) prepared_.erase(statements[i].sql);
        }
        // A statement's results, then a null; a sync's own result after its statement's.
        for (;;) {
            if (!await_result(deadline, cancelled)) throw lost();
            PGresult* r = PQgetResult(conn);
            if (!r) break;
            Result result(r);
            auto status = result.status();
            // A COPY would leave libpq in a state where no further result comes: drop the connection.
            if (status == PGRES_COPY_IN || status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH)
                throw Error("a statement started a COPY, which docsync never runs on this connection; dropping it",
                            sqlstate::kFeatureNotSupported, true);
            if (status == PGRES_PIPELINE_ABORTED) {
                if (!steps[i].error)  // its own Prepare's failure says more
                    steps[i].error = Error("skipped: an earlier statement of its pipeline failed", {}, false);
            }
            else if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK)
                steps[i].result = std::move(result);
            else if (!steps[i].error)
                steps[i].error = error_from(conn, result.raw());
        }
        // A prepared SELECT whose result columns changed under it (DDL) fails once with 0A000, and
        // one the session no longer has (DISCARD, a pooler between us and the server) with 26000:
        // prepare it again next time, and have the caller retry. Only when it was prepared by an
        // earlier exchange: a statement prepared just now that fails so fails for its own reasons
        // (a set-returning function where none may be), and that error stands.
        if (!names[i].empty() && !preparing[i] && steps[i].error &&
            (steps[i].error->sqlstate() == sqlstate::kFeatureNotSupported ||
             steps[i].error->sqlstate() == sqlstate::kInvalidSqlStatementName)) {
            prepared_.erase(statements[i].sql);
            steps[i].error = Error(std::string("the prepared statement is gone or its result type changed under it "
                                               "(DDL); it is prepared again on the next try: ") + steps[i].error->what(),
                                   steps[i].error->sqlstate(), true);
        }
        if (statements[i].sync) {
            if (!await_result(deadline, cancelled)) throw lost();
            Result sync(PQgetResult(conn));
            if (sync.status() != PGRES_PIPELINE_SYNC) throw Error("the pipeline lost its place", {}, true);
        }
    }
    if (!PQexitPipelineMode(conn)) throw error_from(conn, nullptr);
    if (cancelled)
        for (auto& step : steps)
            if (step.error && step.error->sqlstate() == sqlstate::kQueryCanceled)
                step.error = Error("statement timed out on the client-side deadline and was cancelled",
                                   sqlstate::kQueryCanceled, true);
    return steps;
}

bool Connection::end_copy(ExecStatusType status, Deadline deadline) {
    PGconn* conn = conn_.get();
    auto until = std::min(deadline, Clock::now() + std::chrono::seconds(5));
    if (status == PGRES_COPY_IN) {
        int rc;
        while ((rc = PQputCopyEnd(conn, "docsync never runs COPY")) == 0)
            if (!wait_socket(true, until)) return false;
        if (rc < 0) return false;
        for (int left; (left = PQflush(conn)) != 0;)
            if (left < 0 || !wait_socket(true, until)) return false;
        return true;
    }
    cancel_handle()->cancel();
    for (;;) {
        char* row = nullptr;
        int n = PQgetCopyData(conn, &row, 1);
        if (row) PQfreemem(row);
        if (n > 0) continue;
        if (n == -1) return true;  // the COPY is over; its result follows
        if (n == -2) return false;
        if (!wait_socket(false, until) || !PQconsumeInput(conn)) return false;
    }
}

void Connection::forget_prepared(Deadline deadline) {
    if (prepared_.empty()) return;
    exec_simple("DEALLOCATE ALL", deadline);
    prepared_.clear();
}

void pin_text_forms(Connection& conn, Deadline deadline) {
    conn.exec_simple("SET client_encoding = 'UTF8'; SET TimeZone = 'UTC'; SET DateStyle = 'ISO, MDY'; "
                     "SET IntervalStyle = 'postgres'; SET extra_float_digits = 3; SET bytea_output = 'hex'",
                     deadline);
}

std::string Connection::quote_literal(std::string_view text) const {
    std::unique_ptr<char, decltype(&PQfreemem)> q(PQescapeLiteral(conn_.get(), text.data(), text.size()), &PQfreemem);
    if (!q) throw error_from(conn_.get(), nullptr, "could not quote a literal");
    return q.get();
}

std::string Connection::quote_identifier(std::string_view text) const {
    std::unique_ptr<char, decltype(&PQfreemem)> q(PQescapeIdentifier(conn_.get(), text.data(), text.size()),
                                                  &PQfreemem);
    if (!q) throw error_from(conn_.get(), nullptr, "could not quote an identifier");
    return q.get();
}

}  // namespace docsync::pg
