#pragma once
// The canonical text of a doc key: what PostgreSQL prints for the value, on a connection with the
// settings every worker connection pins (DateStyle ISO, TimeZone UTC; docs/design.md, "key
// identity"). A channel names a doc only in that spelling: db:order:1, never db:order:01 or
// db:order:+1, which PostgreSQL reads as the same order, so one row could otherwise be computed and
// retained under any number of names of which a change keeps only one current.
//
// Pure and I/O-free: the worker checks channels with it before any compute (warm, touch, liveness
// polls, retained channels at start), and docsync-gateway before following a channel.
//
// The key types are the base types of the doc query's params, by pg_type name, as
// docsync.worker_definitions() lists them ("key_types"). The types checked here are those whose
// text form is fixed by their value: integers (int2, int4, int8, oid), bool, uuid, date,
// timestamp, timestamptz, and the string types (text, varchar, name), whose every text is
// canonical, and bpchar (a char(n) column's param, typed without its width), whose canonical text
// has no trailing spaces: they are no part of its value; network addresses, bit strings and
// integer ranges (key_text_forms.hpp); a domain over a sized type carries its size ("varchar(3)", "bpchar(5)", "timestamp(0)", "bit(4)"), checked
// here too: 'abc ' is not a varchar(3), PostgreSQL reads it as 'abc'.
// Every key of every type must also be a value PostgreSQL can read: valid UTF-8 (the
// connections' client_encoding) and, for dates and timestamps, inside the type's range.
// A bpchar[] ("_bpchar") spelled otherwise than trim_bpchar_array prints it (an element padded,
// {"FR ",DE}, or quoted where array_out does not quote) is refused here naming the trimmed spelling;
// any other bpchar[] spelling is left to the server check. Any other type ("" when the query's param is of a type outside pg_catalog) is let
// through here: the worker has the server spell-check it once per channel (Runner::print_keys,
// key_type_checked), and docsync-gateway takes it as written.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/seams.hpp"

namespace docsync {

struct KeyCheck {
    bool ok = true;       // the value is in its canonical form (or its type is not checked)
    std::string problem;  // not ok: what is wrong, naming the canonical spelling when there is one
    std::optional<std::string> canonical;  // not ok: the value's canonical text, when the value is one
    std::size_t param = 0;                 // check_key, not ok: the index of the refused value
};

// One value of type `type` (a pg_type name) as a channel spells it.
KeyCheck check_key_text(std::string_view type, std::string_view text);

// Whether check_key_text decides every spelling of `type` ("" included: a type outside pg_catalog
// is not). A key of another type is spelled-checked by the server once per channel
// (Runner::print_keys), the worker's compute path refusing a spelling PostgreSQL prints otherwise.
bool key_type_checked(std::string_view type);
// Whether each of `params` key types is (true too when the types are unknown: nothing to ask).
bool key_types_checked(const std::vector<std::string>& types, std::size_t params);

// Every value of a channel's key against the query's key types, the refusal naming the doc's one
// channel as build_channel spells it (escaped: "db:ev:2026-01-01 00%3A00%3A00") when the value
// has a canonical spelling: what the worker and docsync-gateway say when they refuse a channel.
KeyCheck check_channel_key(std::string_view query, const std::vector<std::string>& types, const SqlArgs& values);

// Every value of a channel's key against the query's key types (`types` may be shorter than
// `values`, or empty: those values are not checked). NULL is always canonical. On refusal
// `problem` names the param ("param 1 (int4): …").
KeyCheck check_key(const std::vector<std::string>& types, const SqlArgs& values);

// A key read from data (the key columns of a change, a row of a keys query) as its channel spells
// it: each value check_key_text names a canonical spelling for is replaced by that spelling (a
// char(3) column's "FR " for a bpchar param is "FR", for a bpchar(5) domain "FR   "), so a change
// names the channel every client asks for; a bpchar[] ("_bpchar", which the server checks) has
// each element's trailing spaces cut. A value without one (or beyond `types`) stays as read.
SqlArgs canonical_key(const std::vector<std::string>& types, SqlArgs values);

// The key types of every query as one JSON object, {"<query>":["<type>",…],…}, for
// Publisher::describe_keys; a query whose key types are unknown is left out.
std::string key_types_json(const std::vector<DocQuery>& queries);
// The inverse, for docsync-gateway: false when `json` is not such an object.
bool parse_key_types_json(std::string_view json, std::map<std::string, std::vector<std::string>>& out);

}  // namespace docsync
