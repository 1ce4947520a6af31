// Parsing contract B's definitions JSON (docs/design.md) with RapidJSON.
#include "engine/definitions.hpp"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/error.hpp"

namespace docsync {

namespace {

using Value = rapidjson::Value;

[[noreturn]] void fail(const std::string& where, const std::string& what) {
    throw Error("malformed worker definitions: " + where + ": " + what +
                "; the document must be the output of docsync.worker_definitions() (check that the extension "
                "and the worker are the same version)");
}

const Value& member(const Value& object, const char* name, const std::string& where) {
    auto it = object.FindMember(name);
    if (it == object.MemberEnd()) fail(where, std::string("missing field \"") + name + "\"");
    return it->value;
}

std::string string_member(const Value& object, const char* name, const std::string& where) {
    const Value& v = member(object, name, where);
    if (!v.IsString()) fail(where, std::string("field \"") + name + "\" must be a string");
    return {v.GetString(), v.GetStringLength()};
}

// A string member that may be null or absent (then empty).
std::string optional_string_member(const Value& object, const char* name, const std::string& where) {
    auto it = object.FindMember(name);
    if (it == object.MemberEnd() || it->value.IsNull()) return {};
    if (!it->value.IsString()) fail(where, std::string("\"") + name + "\" must be a string or null");
    return {it->value.GetString(), it->value.GetStringLength()};
}

std::vector<WatchColumn> columns_member(const Value& object, const char* name, const std::string& where) {
    const Value& v = member(object, name, where);
    if (!v.IsArray()) fail(where, std::string("field \"") + name + "\" must be an array");
    std::vector<WatchColumn> out;
    for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
        std::string at = where + "." + name + "[" + std::to_string(i) + "]";
        const Value& c = v[i];
        if (!c.IsObject()) fail(at, "must be an object {\"name\", \"attnum\"}");
        WatchColumn column;
        column.name = string_member(c, "name", at);
        const Value& attnum = member(c, "attnum", at);
        if (!attnum.IsInt() || attnum.GetInt() <= 0 || attnum.GetInt() > 1664)
            fail(at, "\"attnum\" must be a positive column number");
        column.attnum = attnum.GetInt();
        out.push_back(std::move(column));
    }
    return out;
}

// Refuses `query`, whose `what` holds `bytes` bytes, past kMaxQueryTextBytes; its texts are dropped.
void refuse_long_text(DocQuery& query, const std::string& what, std::size_t bytes) {
    query.refused = what + " holds " + std::to_string(bytes) + " bytes, more than docsync-worker computes (" +
                    std::to_string(kMaxQueryTextBytes) + "): shorten it (comments count) and define it again";
    query.sql = "SELECT NULL WHERE false";  // never run: refused
    query.batch_sql.clear();
}

}  // namespace

const DocQuery* Definitions::find_query(std::string_view name) const {
    for (const auto& q : queries)
        if (q.name == name) return &q;
    return nullptr;
}

Definitions parse_definitions(std::string_view json) {
    rapidjson::Document doc;
    doc.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());
    if (doc.HasParseError())
        fail("offset " + std::to_string(doc.GetErrorOffset()), rapidjson::GetParseError_En(doc.GetParseError()));
    if (!doc.IsObject()) fail("top level", "must be an object");

    Definitions defs;
    const Value& generation = member(doc, "generation", "top level");
    if (!generation.IsUint64()) fail("top level", "\"generation\" must be a non-negative integer");
    defs.generation = generation.GetUint64();

    const Value& queries = member(doc, "queries", "top level");
    if (!queries.IsArray()) fail("top level", "\"queries\" must be an array");
    for (rapidjson::SizeType i = 0; i < queries.Size(); ++i) {
        std::string at = "queries[" + std::to_string(i) + "]";
        const Value& q = queries[i];
        if (!q.IsObject()) fail(at, "must be an object");
        DocQuery query;
        query.name = string_member(q, "name", at);
        if (query.name.empty()) fail(at, "\"name\" is empty");
        if (query.name.find(':') != std::string::npos) fail(at, "\"name\" contains ':'");
        query.sql = string_member(q, "sql", at);
        const Value& params = member(q, "params", at);
        if (!params.IsArray()) fail(at, "\"params\" must be an array of strings");
        for (const auto& p : params.GetArray()) {
            if (!p.IsString()) fail(at, "\"params\" must be an array of strings");
            query.params.emplace_back(p.GetString(), p.GetStringLength());
        }
        const Value& search_path = member(q, "search_path", at);
        if (search_path.IsNull()) {
            query.search_path.clear();
        } else if (search_path.IsString()) {
            query.search_path.assign(search_path.GetString(), search_path.GetStringLength());
        } else {
            fail(at, "\"search_path\" must be a string");
        }
        // why the query must not run now (docsync.refusal()), and a hash of the catalog state it
        // depends on (docsync.fingerprint()); each null or absent when there is none
        query.refused = optional_string_member(q, "refused", at);
        query.fingerprint = optional_string_member(q, "fingerprint", at);
        // the statement computing many docs at once (docsync.batch_sql()); null or absent: none
        query.batch_sql = optional_string_member(q, "batch_sql", at);
        // the role its computes run as (docsync.compute_as); null or absent: the pool role's own
        query.reader_role = optional_string_member(q, "reader_role", at);
        // the base type of each param, how channels spell its keys; null or absent: not checked
        if (q.HasMember("key_types") && !q["key_types"].IsNull()) {
            const Value& types = q["key_types"];
            if (!types.IsArray()) fail(at, "\"key_types\" must be an array of strings");
            for (const auto& t : types.GetArray()) {
                if (!t.IsString()) fail(at, "\"key_types\" must be an array of strings");
                query.key_types.emplace_back(t.GetString(), t.GetStringLength());
            }
            if (query.key_types.size() != query.params.size())
                fail(at, "\"key_types\" must have one entry per param");
        }
        if (defs.find_query(query.name)) fail(at, "query \"" + query.name + "\" is defined twice");
        if (query.sql.size() > kMaxQueryTextBytes) refuse_long_text(query, "its text", query.sql.size());
        defs.queries.push_back(std::move(query));
    }

    const Value& watches = member(doc, "watches", "top level");
    if (!watches.IsArray()) fail("top level", "\"watches\" must be an array");
    for (rapidjson::SizeType i = 0; i < watches.Size(); ++i) {
        std::string at = "watches[" + std::to_string(i) + "]";
        const Value& w = watches[i];
        if (!w.IsObject()) fail(at, "must be an object");
        Watch watch;
        watch.query = string_member(w, "query", at);
        const DocQuery* query = defs.find_query(watch.query);
        if (!query) fail(at, "watch names query \"" + watch.query + "\", which is not in \"queries\"");
        const Value& relid = member(w, "relid", at);
        if (!relid.IsUint() || relid.GetUint() == 0) fail(at, "\"relid\" must be a table OID");
        watch.relid = relid.GetUint();
        watch.schema = string_member(w, "schema", at);
        watch.table = string_member(w, "table", at);
        watch.columns = columns_member(w, "columns", at);
        const Value& keys_sql = member(w, "keys_sql", at);
        if (keys_sql.IsString()) {
            watch.keys_sql = std::string(keys_sql.GetString(), keys_sql.GetStringLength());
        } else if (!keys_sql.IsNull()) {
            fail(at, "\"keys_sql\" must be a string or null");
        }
        if (watch.keys_sql && watch.keys_sql->size() > kMaxQueryTextBytes) {
            for (auto& q : defs.queries)
                if (q.name == watch.query) refuse_long_text(q, "the keys query of its watch of " + watch.schema + "." +
                                                                watch.table, watch.keys_sql->size());
            watch.keys_sql = "SELECT NULL WHERE false";  // never run: its query is refused
        }
        watch.keys_args = columns_member(w, "keys_args", at);
        watch.keys_batch_sql = optional_string_member(w, "keys_batch_sql", at);
        watch.keys_reader_role = optional_string_member(w, "keys_reader_role", at);
        watch.keys_search_path = optional_string_member(w, "keys_search_path", at);
        // never the pool session's own path: a keys query without one resolves in pg_catalog alone
        if (watch.keys_search_path.empty()) watch.keys_search_path = "pg_catalog, pg_temp";
        if (!watch.reverse() && !watch.keys_batch_sql.empty()) fail(at, "a direct watch must have no \"keys_batch_sql\"");
        const Value& allow_broadcast = member(w, "allow_broadcast", at);
        if (!allow_broadcast.IsBool()) fail(at, "\"allow_broadcast\" must be a boolean");
        watch.allow_broadcast = allow_broadcast.GetBool();
        const Value& broadcast = member(w, "broadcast", at);
        if (!broadcast.IsBool()) fail(at, "\"broadcast\" must be a boolean");
        watch.broadcast = broadcast.GetBool();
        if (member(w, "read_columns", at).IsNull()) {
            watch.read_columns.reset();
        } else {
            if (!w["read_columns"].IsArray()) fail(at, "\"read_columns\" must be an array or null");
            watch.read_columns = columns_member(w, "read_columns", at);
        }
        if (watch.broadcast) {
            if (watch.reverse()) fail(at, "a broadcast watch must have no \"keys_sql\"");
            if (!watch.columns.empty()) fail(at, "a broadcast watch must have empty \"columns\"");
            if (!watch.keys_args.empty()) fail(at, "a broadcast watch must have empty \"keys_args\"");
        } else if (watch.reverse()) {
            if (!watch.columns.empty()) fail(at, "a reverse-index watch (keys_sql) must have empty \"columns\"");
            if (watch.keys_args.empty()) fail(at, "a reverse-index watch needs at least one \"keys_args\" column");
        } else {
            if (watch.columns.size() != query->params.size())
                fail(at, "a direct watch of query \"" + watch.query + "\" needs " +
                             std::to_string(query->params.size()) + " columns (one per param), it has " +
                             std::to_string(watch.columns.size()));
            if (!watch.keys_args.empty()) fail(at, "a direct watch must have empty \"keys_args\"");
        }
        defs.watches.push_back(std::move(watch));
    }

    if (doc.HasMember("unresolved")) {
        const Value& unresolved = doc["unresolved"];
        if (!unresolved.IsArray()) fail("top level", "\"unresolved\" must be an array");
        for (rapidjson::SizeType i = 0; i < unresolved.Size(); ++i) {
            std::string at = "unresolved[" + std::to_string(i) + "]";
            const Value& u = unresolved[i];
            if (!u.IsObject()) fail(at, "must be an object");
            const Value& id = member(u, "id", at);
            if (!id.IsUint64()) fail(at, "\"id\" must be a watch id");
            defs.unresolved.push_back("watch " + std::to_string(id.GetUint64()) + " of query \"" +
                                      string_member(u, "query", at) + "\": " + string_member(u, "problem", at));
        }
    }
    if (doc.HasMember("uncovered")) {
        const Value& uncovered = doc["uncovered"];
        if (!uncovered.IsArray()) fail("top level", "\"uncovered\" must be an array");
        for (rapidjson::SizeType i = 0; i < uncovered.Size(); ++i) {
            std::string at = "uncovered[" + std::to_string(i) + "]";
            const Value& u = uncovered[i];
            if (!u.IsObject()) fail(at, "must be an object");
            string_member(u, "query", at);
            defs.uncovered.push_back(string_member(u, "message", at));
        }
    }
    return defs;
}

std::string plugin_tables(const Definitions& definitions) {
    std::map<std::uint32_t, std::set<int>> tables;
    for (const auto& w : definitions.watches) {
        auto& columns = tables[w.relid];
        for (const auto& c : w.columns) columns.insert(c.attnum);
        for (const auto& c : w.keys_args) columns.insert(c.attnum);
        if (w.read_columns)
            for (const auto& c : *w.read_columns) columns.insert(c.attnum);
    }
    std::string out;
    for (const auto& [relid, columns] : tables) {
        if (!out.empty()) out.push_back(',');
        out += std::to_string(relid);
        if (columns.empty()) continue;
        out.push_back('(');
        bool first = true;
        for (int attnum : columns) {
            if (!first) out.push_back(',');
            first = false;
            out += std::to_string(attnum);
        }
        out.push_back(')');
    }
    return out;
}

}  // namespace docsync
