#pragma once
// The statements the executor sends for a doc or keys query (executor.cpp), bounded on the server:
// libpq holds a statement's whole result before the worker sees any of it, so what a query may
// return (a doc of any size, any number of rows) is cut where it is computed.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace docsync::bounded_forms {

// A doc query, or its batched form (`leading` 2: the ordinal and `present` come first), as a
// statement whose doc column comes as text (its type's output, what the query's own result
// prints) when it holds at most `max_doc_bytes` bytes, and else as NULL followed by its size in
// one more column; at most `max_rows` rows come back. A query of other than one doc column is
// refused by the server (each UNION query must have the same number of columns, SQLSTATE 42601).
std::string doc_form(const std::string& sql, int leading, std::size_t max_doc_bytes, std::size_t max_rows);

// The largest key row a keys query may return, as its record's text: a key names a channel, and no
// channel name holds more than kMaxChannelBytes (engine/channel.hpp).
inline constexpr std::size_t kMaxKeyRowBytes = 4096;

// A keys query or its batched form, at most `max_rows` rows; a row whose text (its record's) holds
// more than kMaxKeyRowBytes fails the statement (SQLSTATE 22P02, the message naming its size)
// before any of it is sent, and so do rows whose texts add up to more than `max_total_bytes`
// (0: no total). So a result holds at most max(`max_rows` × kMaxKeyRowBytes, `max_total_bytes` +
// kMaxKeyRowBytes) bytes of rows.
std::string keys_form(const std::string& sql, std::size_t max_rows, std::size_t max_total_bytes = 0);

// The size the server reported for a doc over the cap (doc_form's last column), if any.
std::optional<std::size_t> oversize(std::optional<std::string_view> column);

// What a refusal of doc_form's column check means, added to the server's message.
inline constexpr std::string_view kOneColumnHint =
    "a doc query returns exactly one column, the doc's JSON (did DDL change what it returns?)";

}  // namespace docsync::bounded_forms
