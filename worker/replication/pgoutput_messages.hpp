#pragma once
// The messages of PostgreSQL's built-in `pgoutput` plugin (logical replication protocol), parsed as
// they are on the wire, before replication/pgoutput_decoder.hpp turns them into docsync records.
//
// Protocol version 1 (PostgreSQL 10 and later; what PostgreSQL 15 sends with proto_version '1'):
// big-endian integers, NUL-terminated strings, one message per logical decoding output message.
//   'B' BEGIN     Int64 final_lsn (start of the COMMIT record), Int64 commit_time, Int32 xid
//   'C' COMMIT    Int8 flags (0), Int64 commit_lsn, Int64 end_lsn, Int64 commit_time
//   'O' ORIGIN    Int64 origin commit lsn, String origin name
//   'R' RELATION  Int32 relid, String namespace ("" for pg_catalog), String name, Int8 replident,
//                 Int16 natts, per column: Int8 flags (1: part of the replica identity), String name,
//                 Int32 type oid, Int32 typmod
//   'Y' TYPE      Int32 type oid, String namespace, String name
//   'I' INSERT    Int32 relid, 'N' TupleData
//   'U' UPDATE    Int32 relid, [ 'K' | 'O' TupleData ], 'N' TupleData
//   'D' DELETE    Int32 relid, 'K' | 'O' TupleData
//   'T' TRUNCATE  Int32 nrels, Int8 options (1 CASCADE, 2 RESTART IDENTITY), nrels x Int32 relid
//   'M' MESSAGE   Int8 flags (1: transactional), Int64 lsn, String prefix, Int32 length, bytes
//   TupleData     Int16 ncols, per column: 'n' (NULL) | 'u' (unchanged TOAST) | 't' Int32 len, bytes
//                 (text) | 'b' Int32 len, bytes (binary, only with the `binary` option)
// Protocol version 2 (PostgreSQL 14 and later, with the `streaming` option) adds in-progress
// transactions sent in blocks, before they commit:
//   'S' STREAM START   Int32 xid (top-level), Int8 first_segment (1: the transaction's first block)
//   'E' STREAM STOP    (nothing)
//   'c' STREAM COMMIT  Int32 xid, Int8 flags (0), Int64 commit_lsn, Int64 end_lsn, Int64 commit_time
//   'A' STREAM ABORT   Int32 xid, Int32 subxid (equal to xid: the whole transaction aborted)
// and, inside a block (between 'S' and 'E'), RELATION, TYPE, INSERT, UPDATE, DELETE, TRUNCATE and
// MESSAGE carry an Int32 xid, the (sub)transaction that made the change, right after their type byte.
// Version 3 (two-phase commit) is not parsed: its messages are refused by name.
//
// Everything is bounds-checked and nothing recurses: a truncated, over-long or inconsistent message
// throws DecodeError naming the message and the byte offset.

#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "replication/decoder.hpp"

namespace docsync::pgoutput {

// The protocol versions parse_pgoutput() implements.
constexpr int kProtoVersionMin = 1;
constexpr int kProtoVersionMax = 2;
// The first version with streamed transactions.
constexpr int kProtoVersionStream = 2;

struct Begin {
    std::uint64_t final_lsn = 0;
    std::int64_t commit_time = 0;
    std::uint32_t xid = 0;
};

struct Commit {
    std::uint64_t commit_lsn = 0;
    std::uint64_t end_lsn = 0;
    std::int64_t commit_time = 0;
};

struct Origin {
    std::uint64_t lsn = 0;
    std::string name;
};

struct Column {
    bool key = false;  // flags bit 1: part of the replica identity
    std::string name;
    std::uint32_t type_oid = 0;
    std::int32_t typmod = -1;
};

struct Relation {
    std::uint32_t relid = 0;
    std::string schema;
    std::string name;
    char replica_identity = 'd';
    std::vector<Column> columns;
};

struct Type {
    std::uint32_t oid = 0;
    std::string schema;
    std::string name;
};

enum class Kind : char { Null = 'n', Toast = 'u', Text = 't', Binary = 'b' };

struct Datum {
    Kind kind = Kind::Null;
    std::string bytes;  // Text and Binary
};

using Tuple = std::vector<Datum>;

struct Change {
    char op = 'I';        // 'I', 'U', 'D'
    std::uint32_t relid = 0;
    char old_kind = 0;    // 0 (no old tuple), 'K' (replica identity columns only) or 'O' (every column)
    Tuple old_tuple;
    Tuple new_tuple;      // INSERT, UPDATE
};

struct Truncate {
    bool cascade = false;
    bool restart_identity = false;
    std::vector<std::uint32_t> relids;
};

struct Message {
    bool transactional = false;
    std::uint64_t lsn = 0;
    std::string prefix;
    std::string content;
};

struct StreamStart {
    std::uint32_t xid = 0;
    bool first_segment = false;
};

struct StreamStop {};

struct StreamCommit {
    std::uint32_t xid = 0;
    std::uint64_t commit_lsn = 0;
    std::uint64_t end_lsn = 0;
    std::int64_t commit_time = 0;
};

struct StreamAbort {
    std::uint32_t xid = 0;
    std::uint32_t subxid = 0;
};

using Parsed = std::variant<Begin, Commit, Origin, Relation, Type, Change, Truncate, Message, StreamStart, StreamStop,
                            StreamCommit, StreamAbort>;

// Parses one pgoutput message of protocol `proto_version` (which must be supported: see
// kProtoVersionMin/Max). `in_block`: the message comes between STREAM START and STOP (version 2), so
// a change, RELATION, TYPE or MESSAGE carries its (sub)transaction's xid, stored in `*xid` (0 for the
// other messages). Throws DecodeError.
Parsed parse_pgoutput(std::span<const std::uint8_t> message, int proto_version, bool in_block = false,
                      std::uint32_t* xid = nullptr);

}  // namespace docsync::pgoutput
