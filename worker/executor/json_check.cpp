// JSON validation of doc query results.
#include "executor/json_check.hpp"

#include <cctype>
#include <string>

#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

namespace docsync {

bool valid_json(std::string_view text) {
    rapidjson::MemoryStream stream(text.data(), text.size());
    rapidjson::BaseReaderHandler<> handler;
    rapidjson::Reader reader;
    // Iterative: a doc nested a million levels deep is refused, not a stack overflow.
    if (reader
            .Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseStopWhenDoneFlag |
                   rapidjson::kParseIterativeFlag>(stream, handler)
            .IsError())
        return false;
    // Only whitespace may follow the value.
    for (std::size_t i = stream.Tell(); i < text.size(); ++i)
        if (text[i] != ' ' && text[i] != '\n' && text[i] != '\t' && text[i] != '\r') return false;
    return true;
}

bool looks_like_select(std::string_view sql) {
    std::size_t i = 0;
    const std::size_t n = sql.size();
    for (;;) {  // skip white space, comments and opening parentheses
        while (i < n && (std::isspace(static_cast<unsigned char>(sql[i])) || sql[i] == '(')) ++i;
        if (sql.compare(i, 2, "--") == 0) {
            while (i < n && sql[i] != '\n') ++i;
        } else if (sql.compare(i, 2, "/*") == 0) {
            int depth = 0;  // SQL block comments nest
            do {
                if (sql.compare(i, 2, "/*") == 0) {
                    ++depth;
                    i += 2;
                } else if (sql.compare(i, 2, "*/") == 0) {
                    --depth;
                    i += 2;
                } else {
                    ++i;
                }
            } while (depth > 0 && i < n);
        } else {
            break;
        }
    }
    std::size_t start = i;
    while (i < n && std::isalpha(static_cast<unsigned char>(sql[i]))) ++i;
    std::string word(sql.substr(start, i - start));
    for (auto& c : word) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return word == "SELECT" || word == "WITH" || word == "VALUES" || word == "TABLE";
}

}  // namespace docsync
