// The batched forms' plumbing; the contract is in batch_forms.hpp.
#include "executor/batch_forms.hpp"

#include <charconv>

#include "common/sqlstate.hpp"

namespace docsync::batch_forms {

namespace {

void append_element(std::string& array, const SqlValue& value) {
    if (!value) {
        array += "NULL";
        return;
    }
    array += '"';
    for (char c : *value) {
        if (c == '"' || c == '\\') array += '\\';
        array += c;
    }
    array += '"';
}

}  // namespace

std::string text_array(const SqlArgs& values) {
    std::string array = "{";
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (i) array += ',';
        append_element(array, values[i]);
    }
    return array + '}';
}

SqlArgs batch_params(const std::vector<SqlArgs>& args) {
    std::size_t count = args.front().size();
    SqlArgs out(count, std::string("{"));
    for (std::size_t k = 0; k < count; ++k) {
        std::string& array = *out[k];
        for (std::size_t i = 0; i < args.size(); ++i) {
            if (i) array += ',';
            append_element(array, args[i][k]);
        }
        array += '}';
    }
    return out;
}

std::vector<std::vector<int>> rows_by_ordinal(const pg::Result& r, std::size_t count) {
    std::vector<std::vector<int>> out(count);
    for (int row = 0; row < r.rows(); ++row) {
        std::size_t ordinal = 0;
        auto text = r.get(row, 0);
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ordinal);
        if (ec != std::errc() || end != text.data() + text.size() || ordinal < 1 || ordinal > count) return {};
        if (!r.is_null(row, 1)) out[ordinal - 1].push_back(row);
    }
    return out;
}

bool form_may_be_at_fault(const std::string& sqlstate) {
    return sqlstate.rfind("42", 0) == 0 || sqlstate == "0A000";
}

std::string set_aside_reason(const std::string& what, const std::string& error, const std::string& sqlstate) {
    std::string cause = error.starts_with(what + " failed: ") ? error.substr(what.size() + 9) : error;
    if (cause.starts_with("ERROR:")) cause = cause.substr(cause.find_first_not_of(' ', 6));
    if (auto context = cause.find(". LINE "); context != std::string::npos) cause.erase(context);
    std::string out = what + ": batched form set aside until the definitions reload (";
    out += sqlstate.empty() ? std::string("failed") : "SQLSTATE " + sqlstate;
    if (sqlstate == docsync::sqlstate::kInsufficientPrivilege)
        out += "; docsync.grant_reader(<pool role>) grants USAGE on its param types' schemas";
    return out + "): " + cause;
}

}  // namespace docsync::batch_forms
