// Envelopes: validating, compacting and embedding doc JSON, and reading envelopes back.
#include "publish/envelope.hpp"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdio>

#include "common/error.hpp"

namespace docsync::publish {

namespace {

// Iterative parsing: a deeply nested doc cannot exhaust the stack. Numbers travel as their digits
// (RawNumber), so a numeric beyond double precision is kept exactly as the database printed it.
constexpr unsigned kParseFlags =
    rapidjson::kParseIterativeFlag | rapidjson::kParseNumbersAsStringsFlag | rapidjson::kParseValidateEncodingFlag;

void compact_into(std::string_view json, rapidjson::Writer<rapidjson::StringBuffer>& writer,
                  std::string_view what) {
    rapidjson::Reader reader;
    rapidjson::MemoryStream in(json.data(), json.size());
    rapidjson::ParseResult ok = reader.Parse<kParseFlags>(in, writer);
    if (ok && in.Tell() != json.size()) {
        // The stream reports a NUL byte as its end: text after one would be silently ignored.
        ok.Set(rapidjson::kParseErrorDocumentRootNotSingular, in.Tell());
    }
    if (!ok) {
        throw Error(std::string(what) + " is not valid JSON: " + rapidjson::GetParseError_En(ok.Code()) +
                    " at byte " + std::to_string(ok.Offset()) +
                    "; a doc query must return one json or jsonb value");
    }
}

}  // namespace

std::string compact_json(std::string_view json) {
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
    compact_into(json, writer, "the value");
    return std::string(buffer.GetString(), buffer.GetSize());
}

std::string make_envelope(std::string_view channel, const std::optional<std::string>& doc, DocVersion version) {
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
    writer.StartObject();
    writer.Key("channel");
    writer.String(channel.data(), static_cast<rapidjson::SizeType>(channel.size()));
    writer.Key("doc");
    if (doc) {
        compact_into(*doc, writer, "the doc for " + std::string(channel));
    } else {
        writer.Null();
    }
    writer.Key("generation");
    writer.Uint64(version.generation);
    writer.Key("lsn");
    std::string lsn = format_lsn(version.lsn);
    writer.String(lsn.data(), static_cast<rapidjson::SizeType>(lsn.size()));
    writer.EndObject();
    return std::string(buffer.GetString(), buffer.GetSize());
}

std::optional<EnvelopeHead> parse_envelope(std::string_view text) {
    rapidjson::Document d;
    d.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag>(text.data(), text.size());
    if (d.HasParseError() || !d.IsObject()) return std::nullopt;
    auto channel = d.FindMember("channel");
    auto doc = d.FindMember("doc");
    auto generation = d.FindMember("generation");
    auto lsn = d.FindMember("lsn");
    if (channel == d.MemberEnd() || !channel->value.IsString() || doc == d.MemberEnd() ||
        generation == d.MemberEnd() || !generation->value.IsUint64() || lsn == d.MemberEnd() ||
        !lsn->value.IsString())
        return std::nullopt;
    auto parsed_lsn = parse_lsn(std::string_view(lsn->value.GetString(), lsn->value.GetStringLength()));
    if (!parsed_lsn) return std::nullopt;
    EnvelopeHead head;
    head.channel.assign(channel->value.GetString(), channel->value.GetStringLength());
    head.version = DocVersion{generation->value.GetUint64(), *parsed_lsn};
    return head;
}

}  // namespace docsync::publish
