// Doc and keys statements bounded on the server; the contract is in bounded_forms.hpp.
#include "executor/bounded_forms.hpp"

#include <charconv>

#include "engine/channel.hpp"

namespace docsync::bounded_forms {

std::string doc_form(const std::string& sql, int leading, std::size_t max_doc_bytes, std::size_t max_rows) {
    // The text is made once, in a LATERAL subquery that OFFSET 0 keeps from being pulled up, so a
    // jsonb doc is printed once. The operators are pg_catalog's whatever the query's search_path:
    // the check must not be the definer's to answer. The UNION ALL branch is never run (the planner
    // drops it); it only makes the server count the query's columns.
    const std::string cap = std::to_string(max_doc_bytes);
    const std::string size = "pg_catalog.octet_length(docsync_t.t)";
    std::string lead;
    std::string nulls;
    std::string names;
    for (int i = 1; i <= leading; ++i) {
        lead += "docsync_r.c" + std::to_string(i) + ", ";
        nulls += "NULL, ";
        names += "c" + std::to_string(i) + ", ";
    }
    return "SELECT " + lead + "CASE WHEN " + size + " OPERATOR(pg_catalog.<=) " + cap + " THEN docsync_t.t END, CASE WHEN " +
           size + " OPERATOR(pg_catalog.>) " + cap + " THEN " + size + " END FROM ((\n" + sql + "\n) UNION ALL SELECT " +
           nulls + "NULL WHERE false) AS docsync_r(" + names +
           "d) CROSS JOIN LATERAL (SELECT docsync_r.d::pg_catalog.text AS t OFFSET 0) AS docsync_t LIMIT " +
           std::to_string(max_rows);
}

std::string keys_form(const std::string& sql, std::size_t max_rows, std::size_t max_total_bytes) {
    // A row over the cap fails the statement, saying so, through the one way SQL has to raise: a
    // text no integer reads. ROW(docsync_k.*) is every column, whatever the query names them (a bare
    // docsync_k would be a column of that name).
    const std::string size = "pg_catalog.octet_length(ROW(docsync_k.*)::pg_catalog.text)";
    const std::string cap = std::to_string(kMaxKeyRowBytes);
    const std::string row_check = " OPERATOR(pg_catalog.<=) " + cap + " THEN true ELSE pg_catalog.concat('docsync: a key row of ', ";
    const std::string row_refusal = ", ' bytes, over " + cap + " (no channel name holds more than " +
                                    std::to_string(kMaxChannelBytes) + ")')::pg_catalog.int4 IS NULL END";
    if (max_total_bytes == 0)
        return "SELECT docsync_k.* FROM (\n" + sql + "\n) AS docsync_k WHERE CASE WHEN " + size + row_check + size +
               row_refusal + " LIMIT " + std::to_string(max_rows);
    // The running total of the rows' sizes, beside each row as a whole (ROW(…), whose fields the
    // outer query spreads again: the query's own column names never reach the checks).
    const std::string total = std::to_string(max_total_bytes);
    return "SELECT (docsync_w.docsync_r).* FROM (SELECT ROW(docsync_k.*) AS docsync_r, " + size +
           " AS docsync_s, pg_catalog.sum(" + size + ") OVER (ROWS UNBOUNDED PRECEDING) AS docsync_t FROM (\n" + sql +
           "\n) AS docsync_k) AS docsync_w WHERE CASE WHEN docsync_w.docsync_s" + row_check + "docsync_w.docsync_s" +
           row_refusal + " AND CASE WHEN docsync_w.docsync_t OPERATOR(pg_catalog.<=) " + total +
           " THEN true ELSE pg_catalog.concat('docsync: key rows of ', docsync_w.docsync_t, ' bytes or more, over " + total +
           " in one statement')::pg_catalog.int4 IS NULL END LIMIT " + std::to_string(max_rows);
}

std::optional<std::size_t> oversize(std::optional<std::string_view> column) {
    if (!column) return std::nullopt;
    std::size_t n = 0;
    auto [end, ec] = std::from_chars(column->data(), column->data() + column->size(), n);
    if (ec != std::errc() || end != column->data() + column->size()) return std::nullopt;
    return n;
}

}  // namespace docsync::bounded_forms
