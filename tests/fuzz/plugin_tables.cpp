// Fuzz target: the output plugin's `tables` option parser (plugin/tables_syntax.c, the code the
// plugin runs at slot start on a value anyone with REPLICATION can pass). Three properties:
//   - any input ends in acceptance or in an error inside the value, never in a crash or a read past it;
//   - what it accepts, written back canonically (OIDs, every name double-quoted), parses to the same
//     entries;
//   - the same bytes read as watches (relid, attnums): the worker's plugin_tables() string for them
//     parses to exactly those relations and the union of their attnums, in order.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/definitions.hpp"
#include "plugin/tables_syntax.h"

namespace {

struct Entry {
    bool by_oid = false;
    std::uint32_t relid = 0;
    bool has_schema = false;
    std::string schema, name;
    std::vector<int> attnums;
    std::vector<std::string> columns;
    bool operator==(const Entry&) const = default;
};

// The name the plugin uses: quoted as written, unquoted folded (ASCII, as in a UTF-8 database).
std::string name_of(const DocsyncTablesIdent* ident) {
    std::string text(ident->len + 1, '\0');
    text.resize(docsync_tables_ident_text(ident, text.data()));
    if (!ident->quoted)
        for (char& c : text)
            if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return text;
}

const DocsyncTablesVisitor kVisitor = {
    [](void* arg, std::uint32_t relid) {
        auto& entries = *static_cast<std::vector<Entry>*>(arg);
        entries.push_back(Entry{.by_oid = true, .relid = relid});
    },
    [](void* arg, const DocsyncTablesIdent* schema, const DocsyncTablesIdent* name) {
        auto& entries = *static_cast<std::vector<Entry>*>(arg);
        Entry e;
        e.has_schema = schema != nullptr;
        if (schema) e.schema = name_of(schema);
        e.name = name_of(name);
        entries.push_back(std::move(e));
    },
    [](void* arg, int attnum) {
        auto& entries = *static_cast<std::vector<Entry>*>(arg);
        if (entries.empty() || !entries.back().by_oid || attnum < 1 || attnum > DOCSYNC_TABLES_MAX_ATTNUM)
            __builtin_trap();
        entries.back().attnums.push_back(attnum);
    },
    [](void* arg, const DocsyncTablesIdent* name) {
        auto& entries = *static_cast<std::vector<Entry>*>(arg);
        if (entries.empty() || entries.back().by_oid || name->len == 0) __builtin_trap();
        entries.back().columns.push_back(name_of(name));
    },
    nullptr,
};

bool parse(const std::string& value, std::vector<Entry>& entries, DocsyncTablesError& error) {
    return docsync_tables_parse(value.c_str(), &kVisitor, &entries, &error);
}

std::string quoted(const std::string& name) {
    std::string out = "\"";
    for (char c : name) {
        if (c == '"') out.push_back('"');
        out.push_back(c);
    }
    return out + "\"";
}

std::string canonical(const std::vector<Entry>& entries) {
    std::string out;
    for (const auto& e : entries) {
        if (!out.empty()) out += " , ";
        if (e.by_oid) {
            out += std::to_string(e.relid);
        } else {
            if (e.has_schema) out += quoted(e.schema) + ".";
            out += quoted(e.name);
        }
        std::vector<std::string> columns = e.columns;
        for (int a : e.attnums) columns.push_back(std::to_string(a));
        if (columns.empty()) continue;
        out += "(";
        for (std::size_t i = 0; i < columns.size(); ++i) {
            if (i) out += ",";
            out += e.by_oid ? columns[i] : quoted(columns[i]);
        }
        out += ")";
    }
    return out;
}

void check_option_text(const std::uint8_t* data, std::size_t size) {
    // The option reaches the plugin as a C string: it ends at the first NUL.
    std::string value(reinterpret_cast<const char*>(data), strnlen(reinterpret_cast<const char*>(data), size));
    std::vector<Entry> entries;
    DocsyncTablesError error{};
    if (!parse(value, entries, error)) {
        if (error.offset > value.size() || error.expected == nullptr || *error.expected == '\0') __builtin_trap();
        return;
    }
    std::string again = canonical(entries);
    std::vector<Entry> reparsed;
    if (!parse(again, reparsed, error) || reparsed != entries) __builtin_trap();
}

// The bytes as watches: 3 bytes of relid (so relations repeat), a count, then 2 bytes per attnum.
void check_worker_round_trip(const std::uint8_t* data, std::size_t size) {
    docsync::Definitions defs;
    std::map<std::uint32_t, std::set<int>> expected;
    std::size_t i = 0;
    while (i + 4 <= size) {
        docsync::Watch w;
        w.relid = 1 + (std::uint32_t(data[i]) | std::uint32_t(data[i + 1]) << 8 | std::uint32_t(data[i + 2]) << 16);
        std::size_t n = data[i + 3] % 8;
        i += 4;
        auto& columns = expected[w.relid];
        for (std::size_t k = 0; k < n && i + 2 <= size; ++k, i += 2) {
            int attnum = 1 + ((data[i] | data[i + 1] << 8) % DOCSYNC_TABLES_MAX_ATTNUM);
            // Keys args and direct columns both end up in the table's column list.
            (k % 2 ? w.keys_args : w.columns).push_back({"c", attnum});
            columns.insert(attnum);
        }
        defs.watches.push_back(std::move(w));
    }
    std::vector<Entry> entries;
    DocsyncTablesError error{};
    if (!parse(docsync::plugin_tables(defs), entries, error)) __builtin_trap();
    if (entries.size() != expected.size()) __builtin_trap();
    auto want = expected.begin();
    for (const auto& e : entries) {
        if (!e.by_oid || e.relid != want->first || !e.columns.empty()) __builtin_trap();
        if (std::vector<int>(want->second.begin(), want->second.end()) != e.attnums) __builtin_trap();
        ++want;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    check_option_text(data, size);
    check_worker_round_trip(data, size);
    return 0;
}
