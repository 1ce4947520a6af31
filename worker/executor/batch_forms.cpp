// The batched forms' plumbing; the contract is in batch_forms.hpp.
#include "executor/batch_forms.hpp"

#include <charconv>

#include "common/sqlstate.hpp"

namespace docsync::batch_forms {

SqlArgs batch_params(const std::vector<SqlArgs>& args) {
    SqlArgs out;
    for (std::size_t k = 0; k < args.front().size(); ++k) {
        SqlArgs column;
        for (const auto& set : args) column.push_back(set[k]);
        out.push_back(pg::text_array(column));
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
