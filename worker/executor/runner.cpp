// A portable install's runners; the contract is in runner.hpp.
#include "executor/runner.hpp"

#include "common/error.hpp"

namespace docsync::runner {

std::string call(const std::string& reader_role) {
    std::string quoted = "\"";
    for (char c : reader_role) {
        if (c == '"') quoted += '"';
        quoted += c;
    }
    return "SELECT docsync_row FROM docsync_run." + quoted + "\"($1, $2::pg_catalog.text[]) AS docsync_row";
}

pg::Params call_params(const std::string& sql, const SqlArgs& args) {
    return {sql, pg::text_array(args)};
}

std::optional<std::vector<std::optional<std::string>>> record_fields(std::string_view text) {
    // record_in's reading of record_out's text: fields between the parentheses, separated by
    // commas; an empty unquoted field is NULL; a double quote starts or ends a quoted stretch, in
    // which "" is one; a backslash takes the next character as it is.
    if (text.size() < 2 || text.front() != '(' || text.back() != ')') return std::nullopt;
    std::vector<std::optional<std::string>> fields;
    std::size_t i = 1;
    const std::size_t end = text.size() - 1;
    for (;;) {
        std::string value;
        bool present = false;
        bool quoted = false;
        while (i < end && (quoted || (text[i] != ',' && text[i] != ')'))) {
            char c = text[i];
            if (c == '\\') {
                if (i + 1 >= text.size()) return std::nullopt;
                value += text[i + 1];
                i += 2;
            } else if (c == '"' && quoted && i + 1 < end && text[i + 1] == '"') {
                value += '"';
                i += 2;
            } else if (c == '"') {
                quoted = !quoted;
                ++i;
            } else {
                value += c;
                ++i;
            }
            present = true;
        }
        if (quoted) return std::nullopt;
        fields.push_back(present ? std::optional<std::string>(std::move(value)) : std::nullopt);
        if (i == end) break;
        if (text[i] != ',') return std::nullopt;
        ++i;
    }
    return fields;
}

pg::Result unpack(const pg::Result& rows) {
    // Row by row into the result made here: one row's fields at a time besides the two results.
    auto malformed = [] { return Error("the reader role's runner returned a malformed row"); };
    auto no_memory = [] { return Error("out of memory unpacking a runner's result", {}, true); };
    PGresult* made = PQmakeEmptyPGresult(nullptr, PGRES_TUPLES_OK);
    if (!made) throw no_memory();
    pg::Result out(made);
    int columns = -1;
    for (int row = 0; row < rows.rows(); ++row) {
        auto fields = rows.is_null(row, 0) ? std::nullopt : record_fields(rows.get(row, 0));
        if (!fields) throw malformed();
        if (columns < 0) {
            columns = static_cast<int>(fields->size());
            std::vector<std::string> names;
            for (int c = 0; c < columns; ++c) names.push_back("c" + std::to_string(c + 1));
            std::vector<PGresAttDesc> attributes(static_cast<std::size_t>(columns));
            for (int c = 0; c < columns; ++c) {
                auto& a = attributes[static_cast<std::size_t>(c)];
                a = PGresAttDesc{};
                a.name = names[static_cast<std::size_t>(c)].data();
                a.typid = 25;  // text
                a.typlen = -1;
                a.atttypmod = -1;
            }
            if (!PQsetResultAttrs(made, columns, attributes.data())) throw no_memory();
        }
        if (static_cast<int>(fields->size()) != columns) throw malformed();
        for (int c = 0; c < columns; ++c) {
            auto& v = (*fields)[static_cast<std::size_t>(c)];
            char empty = '\0';
            if (!PQsetvalue(made, row, c, v ? v->data() : &empty, v ? static_cast<int>(v->size()) : -1))
                throw no_memory();
        }
    }
    return out;
}

}  // namespace docsync::runner
