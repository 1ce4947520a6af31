// The --warm channels checked against the definitions.
#include "config/warm.hpp"

#include "common/error.hpp"
#include "engine/channel.hpp"

namespace docsync {

void check_warm(const std::vector<std::string>& channels, const Definitions& defs) {
    for (const auto& channel : channels) {
        ParsedChannel parsed;
        if (!parse_channel(channel, parsed)) throw Error("--warm \"" + channel + "\" is not a doc channel");
        const DocQuery* query = defs.find_query(parsed.query);
        if (!query) {
            std::string names;
            for (const auto& q : defs.queries) names += (names.empty() ? "" : ", ") + q.name;
            throw Error("--warm \"" + channel + "\": no doc query is named \"" + parsed.query + "\" (" +
                        (names.empty() ? std::string("none is defined") : "defined: " + names) +
                        "); fix the channel: SELECT docsync.channel('<query>', '<value>') spells one");
        }
        if (query->params.size() != parsed.values.size()) {
            std::string params;
            for (const auto& p : query->params) params += (params.empty() ? "" : ", ") + p;
            throw Error("--warm \"" + channel + "\": doc query \"" + query->name + "\" takes " +
                        std::to_string(query->params.size()) + " value(s) (" + params + "), the channel gives " +
                        std::to_string(parsed.values.size()) + "; fix the channel: SELECT docsync.channel('" +
                        query->name + "', …) spells it");
        }
    }
}

}  // namespace docsync
