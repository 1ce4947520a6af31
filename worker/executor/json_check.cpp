// JSON validation of doc query results.
#include "executor/json_check.hpp"

#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

namespace docsync {

bool valid_json(std::string_view text) {
    rapidjson::MemoryStream stream(text.data(), text.size());
    rapidjson::BaseReaderHandler<> handler;
    rapidjson::Reader reader;
    if (reader.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseStopWhenDoneFlag>(stream, handler)
            .IsError())
        return false;
    // Only whitespace may follow the value.
    for (std::size_t i = stream.Tell(); i < text.size(); ++i)
        if (text[i] != ' ' && text[i] != '\n' && text[i] != '\t' && text[i] != '\r') return false;
    return true;
}

}  // namespace docsync
