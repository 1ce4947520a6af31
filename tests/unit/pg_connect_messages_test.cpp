// Connection failures as users see them: libpq's messages folded onto one line, and the likely fix
// for each, from the messages PostgreSQL 15's libpq and server write.
#include <doctest/doctest.h>

#include <string>

#include "pg/connection.hpp"

using docsync::pg::connect_fix;
using docsync::pg::fold_message;

TEST_CASE("libpq messages are folded onto one line, caret lines dropped") {
    CHECK(fold_message("connection to server at \"127.0.0.1\", port 1 failed: Connection refused\n"
                       "\tIs the server running on that host and accepting TCP/IP connections?\n") ==
          "connection to server at \"127.0.0.1\", port 1 failed: Connection refused. Is the server running on that "
          "host and accepting TCP/IP connections?");
    CHECK(fold_message("ERROR:  syntax error at or near \"FROM\"\nLINE 1: SELECT FROM FROM\n                    ^\n") ==
          "ERROR: syntax error at or near \"FROM\". LINE 1: SELECT FROM FROM");
    CHECK(fold_message("FATAL:  role \"x\" does not exist\n") == "FATAL: role \"x\" does not exist");
    CHECK(fold_message("") == "");
    CHECK(fold_message("\n\n") == "");
}

TEST_CASE("each common connection failure gets its fix, naming the setting") {
    // A wrong password, and none at all.
    auto fix = connect_fix("connection to server at \"127.0.0.1\", port 5432 failed: FATAL: password authentication "
                           "failed for user \"docsync_reader\"",
                           "--pool-dsn", false);
    CHECK(fix.find("the password is wrong") == 0);
    CHECK(fix.find("~/.pgpass") != std::string::npos);
    CHECK(fix.find("PGPASSFILE") != std::string::npos);
    CHECK(fix.find("password=… of --pool-dsn") != std::string::npos);
    fix = connect_fix("connection to server at \"127.0.0.1\", port 5432 failed: fe_sendauth: no password supplied",
                      "--dsn", true);
    CHECK(fix.find("the server asks for a password and none was given") == 0);
    CHECK(fix.find("password=… in --dsn") != std::string::npos);

    // No pg_hba.conf line: the line to add; for the walsender, that it is the database's line.
    fix = connect_fix("connection to server at \"10.0.0.5\", port 5432 failed: FATAL: no pg_hba.conf entry for host "
                      "\"10.0.0.9\", user \"docsync_repl\", database \"app\", no encryption",
                      "--dsn", true);
    CHECK(fix.find("\"host app docsync_repl 10.0.0.9/32 scram-sha-256\"") != std::string::npos);
    CHECK(fix.find("SELECT pg_reload_conf()") != std::string::npos);
    CHECK(fix.find("matches the lines for its database, not the `replication` lines") != std::string::npos);
    fix = connect_fix("connection to server on socket \"/run/postgresql/.s.PGSQL.5432\" failed: FATAL: no pg_hba.conf "
                      "entry for host \"[local]\", user \"docsync_reader\", database \"app\", no encryption",
                      "--pool-dsn", false);
    CHECK(fix.find("\"local app docsync_reader scram-sha-256\"") != std::string::npos);
    CHECK(fix.find("replication") == std::string::npos);
    fix = connect_fix("connection to server at \"::1\", port 5432 failed: FATAL: pg_hba.conf rejects connection for "
                      "host \"::1\", user \"r\", database \"app\", no encryption",
                      "--pool-dsn", false);
    CHECK(fix.find("a reject line in pg_hba.conf matches first") == 0);
    CHECK(fix.find("\"host app r ::1/128 scram-sha-256\"") != std::string::npos);

    // Nothing there, a missing database or role, a role without REPLICATION or LOGIN.
    CHECK(connect_fix("connection to server at \"127.0.0.1\", port 1 failed: Connection refused. Is the server running "
                      "on that host and accepting TCP/IP connections?",
                      "--dsn", false) == "no server listens there: start PostgreSQL, or fix host= and port= in --dsn");
    CHECK(connect_fix("connection to server on socket \"/tmp/.s.PGSQL.1\" failed: No such file or directory. Is the "
                      "server running locally and accepting connections on that socket?",
                      "--pool-dsn", false)
              .find("fix host= and port= in --pool-dsn") != std::string::npos);
    CHECK(connect_fix("connection to server on socket \"/tmp/.s.PGSQL.5432\" failed: FATAL: database \"ap\" does not "
                      "exist",
                      "--pool-dsn", false) ==
          "create the database, or fix dbname= in --pool-dsn (psql -l lists the databases)");
    CHECK(connect_fix("connection to server on socket \"/srv/user/run/.s.PGSQL.5432\" failed: FATAL: role \"rdr\" does "
                      "not exist",
                      "--pool-dsn", false) == "create the role (CREATE ROLE rdr LOGIN …) or fix user= in --pool-dsn");
    CHECK(connect_fix("connection to server at \"h\", port 5432 failed: FATAL: must be superuser or replication role "
                      "to start walsender",
                      "--dsn", true)
              .find("ALTER ROLE <role> REPLICATION") != std::string::npos);
    CHECK(connect_fix("FATAL: role \"r\" is not permitted to log in", "--pool-dsn", false).find("ALTER ROLE r LOGIN") == 0);
    CHECK(connect_fix("could not translate host name \"db.example\" to address: Name or service not known", "--dsn",
                      false) == "the host name does not resolve: fix host= in --dsn");
    CHECK(connect_fix("FATAL: sorry, too many clients already", "--pool-dsn", false).find("max_connections") !=
          std::string::npos);
    // An unknown message still says where to look.
    CHECK(connect_fix("something new", "--dsn", false) == "check host=, port=, dbname= and user= in --dsn");
}
