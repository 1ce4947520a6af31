// Patch envelopes at the gateway; see patch_forms.hpp.
#include "gateway/patch_forms.hpp"

#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <charconv>

#include "common/error.hpp"

namespace docsync::gateway {

namespace {

constexpr std::string_view kHead = R"({"channel":")";
constexpr std::string_view kPatchKey = R"(,"patch":)";
constexpr std::string_view kMergeKey = R"(,"merge":)";  // as long as kPatchKey
constexpr std::string_view kBaseGenerationKey = R"(,"base_generation":)";
constexpr std::string_view kBaseLsnKey = R"(,"base_lsn":")";
constexpr std::string_view kGenerationKey = R"(,"generation":)";
constexpr std::string_view kLsnKey = R"(,"lsn":")";

// Where the channel's JSON string ends (one past its closing quote), or npos.
std::size_t channel_end(std::string_view text) {
    if (text.substr(0, kHead.size()) != kHead) return std::string_view::npos;
    std::size_t i = kHead.size();
    while (i < text.size() && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
    return i < text.size() ? i + 1 : std::string_view::npos;
}

std::optional<std::uint64_t> digits_at(std::string_view digits) {
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    return value;
}

// Validates the whole envelope as one JSON value (iterative: no depth can overflow the stack) and
// takes the top-level "channel" string unescaped.
class EnvelopeReader : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, EnvelopeReader> {
public:
    bool StartObject() { return ++depth_, true; }
    bool EndObject(rapidjson::SizeType) { return --depth_, true; }
    bool StartArray() { return ++depth_, true; }
    bool EndArray(rapidjson::SizeType) { return --depth_, true; }
    bool Key(const char* text, rapidjson::SizeType size, bool) {
        channel_next_ = depth_ == 1 && std::string_view(text, size) == "channel";
        return true;
    }
    bool String(const char* text, rapidjson::SizeType size, bool) {
        if (channel_next_) channel.assign(text, size);
        channel_next_ = false;
        return true;
    }
    bool Default() { return channel_next_ = false, true; }

    std::string channel;

private:
    int depth_ = 0;
    bool channel_next_ = false;
};

bool read_channel(std::string_view text, std::string& channel) {
    rapidjson::MemoryStream stream(text.data(), text.size());
    EnvelopeReader handler;
    rapidjson::Reader reader;
    constexpr unsigned flags =
        rapidjson::kParseValidateEncodingFlag | rapidjson::kParseStopWhenDoneFlag | rapidjson::kParseIterativeFlag;
    if (reader.Parse<flags>(stream, handler).IsError() || stream.Tell() != text.size()) return false;
    channel = std::move(handler.channel);
    return true;
}

}  // namespace

bool looks_like_patch(std::string_view text) {
    std::size_t end = channel_end(text);
    if (end == std::string_view::npos) return false;
    auto key = text.substr(end, kPatchKey.size());
    return key == kPatchKey || key == kMergeKey;
}

DocPtr make_patch(const std::string& channel, std::string envelope, std::string& why) {
    std::string_view text = envelope;
    std::size_t end = channel_end(text);
    if (end == std::string_view::npos || !looks_like_patch(text)) {
        why = "it does not start with {\"channel\":…,\"patch\": or {\"channel\":…,\"merge\":";
        return nullptr;
    }
    std::size_t patch_at = end + kPatchKey.size();
    // The tail is fixed: ,"base_generation":G,"base_lsn":"X/Y","generation":G,"lsn":"X/Y"}. Found
    // from the end, so that the same keys inside the patch are never taken for it.
    auto lsn_at = text.rfind(kLsnKey);
    auto gen_at = lsn_at == std::string_view::npos ? lsn_at : text.rfind(kGenerationKey, lsn_at);
    auto base_lsn_at = gen_at == std::string_view::npos ? gen_at : text.rfind(kBaseLsnKey, gen_at);
    auto base_gen_at = base_lsn_at == std::string_view::npos ? base_lsn_at : text.rfind(kBaseGenerationKey, base_lsn_at);
    if (base_gen_at == std::string_view::npos || base_gen_at <= patch_at || text.substr(text.size() - 2) != "\"}" ||
        text[gen_at - 1] != '"') {
        why = "its tail is not ,\"base_generation\":G,\"base_lsn\":\"X/Y\",\"generation\":G,\"lsn\":\"X/Y\"}";
        return nullptr;
    }
    auto base_generation = digits_at(text.substr(base_gen_at + kBaseGenerationKey.size(),
                                                 base_lsn_at - base_gen_at - kBaseGenerationKey.size()));
    auto base_lsn = parse_lsn(text.substr(base_lsn_at + kBaseLsnKey.size(), gen_at - 1 - base_lsn_at - kBaseLsnKey.size()));
    auto generation = digits_at(text.substr(gen_at + kGenerationKey.size(), lsn_at - gen_at - kGenerationKey.size()));
    auto lsn = parse_lsn(text.substr(lsn_at + kLsnKey.size(), text.size() - 2 - lsn_at - kLsnKey.size()));
    if (!base_generation || !base_lsn || !generation || !lsn) {
        why = "a version in its tail is malformed";
        return nullptr;
    }
    std::string named;
    if (!read_channel(text, named)) {
        why = "it is not one valid JSON value";
        return nullptr;
    }
    if (named != channel) {
        why = "it names another channel";
        return nullptr;
    }
    DocVersion version{*generation, *lsn}, base{*base_generation, *base_lsn};
    if (!(base < version)) {
        why = "its base version is not older than its version";
        return nullptr;
    }
    auto doc = std::make_shared<Doc>();
    doc->channel = channel;
    doc->version = version;
    doc->version_text = format_version(version);
    doc->base = base;
    doc->patch_only = true;
    doc->patch_form = text.substr(end, kPatchKey.size()) == kPatchKey ? patch::Form::JsonPatch : patch::Form::MergePatch;
    doc->patch_at = patch_at;
    doc->patch_size = base_gen_at - patch_at;
    doc->patch_envelope = std::move(envelope);
    return doc;
}

DocPtr apply_patch(const Doc& base, const Doc& incoming) {
    std::string_view patch_envelope = incoming.patch_envelope;
    patch::Patch patch{incoming.patch_form, std::string(patch_envelope.substr(incoming.patch_at, incoming.patch_size))};
    std::string text = patch::apply(std::string_view(base.envelope).substr(base.doc_at, base.doc_size), patch);
    // The whole envelope as the worker wrote it to the key: the base's head ({"channel":…,"doc":),
    // the new doc, the patch's version tail.
    std::string_view tail = patch_envelope.substr(patch_envelope.rfind(kGenerationKey));
    std::string envelope;
    envelope.reserve(base.doc_at + text.size() + tail.size());
    envelope.append(base.envelope, 0, base.doc_at).append(text).append(tail);

    auto doc = std::make_shared<Doc>();
    doc->channel = incoming.channel;
    doc->version = incoming.version;
    doc->version_text = incoming.version_text;
    set_doc_forms(*doc, std::move(envelope), base.doc_at, text.size());
    // A patch no shorter than the whole doc saves nothing: its clients get the whole doc.
    if (patch_envelope.size() >= doc->envelope.size()) return doc;
    std::string base_text = format_version(*incoming.base);
    doc->base = incoming.base;
    doc->patch_envelope = incoming.patch_envelope;
    doc->patch_ws_message.reserve(patch_envelope.size() + doc->version_text.size() + base_text.size() + 48);
    doc->patch_ws_message.append("{\"type\":\"patch\",\"version\":\"")
        .append(doc->version_text)
        .append("\",\"base\":\"")
        .append(base_text)
        .append("\",")
        .append(patch_envelope.substr(1));
    doc->patch_sse_head = "event: patch\nid: " + doc->version_text + "\ndata: ";
    doc->patch_sse_lines = sse_data_lines(patch_envelope);
    return doc;
}

}  // namespace docsync::gateway
