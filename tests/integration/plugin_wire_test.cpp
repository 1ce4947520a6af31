// The plugin's binary output, read from a real slot, decodes with the worker's decoder (rendered by
// ../wire_text.hpp) to exactly what the same slot says in format 'text'; BEGIN and COMMIT carry the xid and positions the
// server reports for them.
#include <doctest/doctest.h>

#include <string>
#include <unistd.h>

#include "../wire_text.hpp"
#include "docsync_wire.h"
#include "pg/connection.hpp"

using namespace std::chrono_literals;
using docsync::pg::Connection;
using docsync::pg::deadline_in;

TEST_CASE("binary records from a real slot round-trip to the text format") {
    auto c = Connection::connect("", deadline_in(10s));
    const std::string sfx = std::to_string(getpid());
    const std::string slot = "wire_rt_" + sfx, a = "wire_a_" + sfx, b = "wire_b_" + sfx, u = "wire_u_" + sfx;
    auto run = [&](const std::string& sql) { return c.exec(sql, deadline_in(30s)); };
    run("SET client_min_messages = warning");
    run("CREATE TABLE " + a + " (id int PRIMARY KEY, t text, n numeric, j jsonb, big text, gone int)");
    run("ALTER TABLE " + a + " ALTER big SET STORAGE EXTERNAL");
    run("CREATE TABLE " + b + " (id int, v text)");
    run("ALTER TABLE " + b + " REPLICA IDENTITY FULL");
    run("CREATE TABLE " + u + " (id int PRIMARY KEY)");
    run("SELECT pg_create_logical_replication_slot('" + slot + "', 'docsync')");
    const std::string tables =
        c.exec("SELECT format('%s,%s(1,2,99)', '" + a + "'::regclass::oid, '" + b + "'::regclass::oid)", deadline_in(10s))
            .get(0, 0)
            .data();
    for (int i = 0; i < 20; ++i) {
        std::string id = std::to_string(i);
        run("INSERT INTO " + a + " VALUES (" + id + ", E'row\\n''" + id + "''', " + id + ".5, '{\"i\": " + id +
            "}', repeat('z', 3000), 1)");
        run("INSERT INTO " + u + " VALUES (" + id + ")");
        run("INSERT INTO " + b + " VALUES (" + id + ", NULL)");
    }
    run("UPDATE " + a + " SET t = 'changed' WHERE id % 3 = 0");
    run("UPDATE " + a + " SET id = id + 100 WHERE id % 5 = 0");
    run("ALTER TABLE " + a + " DROP COLUMN gone");
    run("UPDATE " + b + " SET v = 'v' || id WHERE id < 10");
    run("DELETE FROM " + a + " WHERE id % 2 = 1");
    run("DELETE FROM " + b + " WHERE id > 15");
    run("BEGIN");
    run("SELECT pg_logical_emit_message(true, 'docsync.rt', 'in txn')");
    run("INSERT INTO " + a + " (id) VALUES (1000)");
    run("COMMIT");
    run("SELECT pg_logical_emit_message(false, 'docsync.rt', E'\\\\x00 and \\x01')");
    run("TRUNCATE " + a + ", " + b + ", " + u);

    const std::string args = "'tables', '" + tables + "'";
    auto bin = run("SELECT lsn::text, xid::text, encode(data, 'hex') FROM pg_logical_slot_peek_binary_changes('" + slot +
                   "', NULL, NULL, " + args + ")");
    auto text = run("SELECT data FROM pg_logical_slot_peek_changes('" + slot + "', NULL, NULL, 'format', 'text', " + args + ")");
    REQUIRE(bin.rows() == text.rows());
    REQUIRE(bin.rows() > 100);

    docsync::Decoder decoder;
    docsync_test::TextRenderer renderer;
    docsync::BeginRecord last_begin;
    int begins = 0, commits = 0;
    for (int r = 0; r < bin.rows(); ++r) {
        auto bytes = docsync_test::from_hex(bin.get(r, 2));
        INFO("record " << r << ": " << text.get(r, 0));
        auto record = decoder.decode(bytes);
        REQUIRE(renderer.render(record) == text.get(r, 0));
        if (auto* b = std::get_if<docsync::BeginRecord>(&record)) {
            ++begins;
            CHECK(bytes[0] == DOCSYNC_REC_BEGIN);
            last_begin = *b;
            CHECK(std::to_string(b->xid) == bin.get(r, 1));  // epoch 0 on a fresh cluster
        } else if (auto* commit = std::get_if<docsync::CommitRecord>(&record)) {
            ++commits;
            CHECK(bytes[0] == DOCSYNC_REC_COMMIT);
            CHECK(commit->commit_lsn == last_begin.commit_lsn);
            auto lsn = c.exec("SELECT ($1::pg_lsn - '0/0')::text", {std::string(bin.get(r, 0))}, deadline_in(10s));
            CHECK(std::to_string(commit->end_lsn) == lsn.get(0, 0));
        }
    }
    CHECK(begins == commits);
    CHECK(begins >= 40);  // the unwatched table's 20 transactions emitted nothing

    run("SELECT pg_drop_replication_slot('" + slot + "')");
    run("DROP TABLE " + a + ", " + b + ", " + u);
}
