// Patch envelopes (docs/patches.md): their exact form, and that a reader tells them from whole docs.
#include <doctest/doctest.h>

#include <string>

#include "common/error.hpp"
#include "envelope/envelope.hpp"

using docsync::DocVersion;
using docsync::publish::EnvelopeKind;
using docsync::publish::make_envelope;
using docsync::publish::make_patch_envelope;
using docsync::publish::parse_envelope;
using docsync::publish::retained_doc;

TEST_CASE("a patch envelope is exactly the form docs/patches.md shows") {
    const std::string patch = R"([{"op":"replace","path":"/scores/1/score","value":97}])";
    auto envelope = make_patch_envelope("db:board:7", EnvelopeKind::JsonPatch, patch, DocVersion{3, 0x16B3E00},
                                        DocVersion{3, 0x16B3F28});
    CHECK(envelope ==
          R"({"channel":"db:board:7","patch":[{"op":"replace","path":"/scores/1/score","value":97}],)"
          R"("base_generation":3,"base_lsn":"0/16B3E00","generation":3,"lsn":"0/16B3F28"})");
    auto merge = make_patch_envelope("db:board:7", EnvelopeKind::MergePatch, R"({ "a" : null })", DocVersion{1, 1},
                                     DocVersion{2, 0x100000000});
    CHECK(merge == R"({"channel":"db:board:7","merge":{"a":null},"base_generation":1,"base_lsn":"0/1",)"
                   R"("generation":2,"lsn":"1/0"})");
    // The patch must be JSON of its form's type.
    CHECK_THROWS_AS(make_patch_envelope("db:a:1", EnvelopeKind::JsonPatch, R"({"a":1})", {1, 1}, {1, 2}), docsync::Error);
    CHECK_THROWS_AS(make_patch_envelope("db:a:1", EnvelopeKind::MergePatch, "[]", {1, 1}, {1, 2}), docsync::Error);
    CHECK_THROWS_AS(make_patch_envelope("db:a:1", EnvelopeKind::JsonPatch, "[1,", {1, 1}, {1, 2}), docsync::Error);
    CHECK_THROWS_AS(make_patch_envelope("db:a:1", EnvelopeKind::Doc, "[]", {1, 1}, {1, 2}), docsync::Error);
}

TEST_CASE("parse_envelope reads a patch's kind, base and version, and never takes it for a whole doc") {
    const std::string patch = R"([{"op":"add","path":"/a","value":{"generation":9,"lsn":"0/1"}}])";
    auto envelope = make_patch_envelope("db:q:\"1\"", EnvelopeKind::JsonPatch, patch, DocVersion{3, 0x10},
                                        DocVersion{4, 0x20});
    auto head = parse_envelope(envelope);
    REQUIRE(head);
    CHECK(head->is_patch());
    CHECK(head->kind == EnvelopeKind::JsonPatch);
    CHECK(head->channel == "db:q:\"1\"");
    CHECK(head->version == DocVersion{4, 0x20});
    REQUIRE(head->base);
    CHECK(*head->base == DocVersion{3, 0x10});
    CHECK(envelope.substr(head->doc_at, head->doc_size) == patch);
    // Not a retained doc: a reader of the key or of a file never takes a patch for the doc.
    CHECK_FALSE(retained_doc(envelope, "db:q:\"1\""));

    auto merge = parse_envelope(make_patch_envelope("db:m:1", EnvelopeKind::MergePatch, R"({"x":[1,2]})", {1, 1}, {1, 2}));
    REQUIRE(merge);
    CHECK(merge->kind == EnvelopeKind::MergePatch);
    CHECK(merge->doc_size == std::string(R"({"x":[1,2]})").size());

    // A whole doc's envelope is a doc, with no base.
    auto whole = parse_envelope(make_envelope("db:m:1", std::string(R"({"patch":[]})"), {1, 2}));
    REQUIRE(whole);
    CHECK(whole->kind == EnvelopeKind::Doc);
    CHECK_FALSE(whole->base);
    CHECK(retained_doc(make_envelope("db:m:1", std::string(R"({"patch":[]})"), {1, 2}), "db:m:1"));

    // Malformed patch envelopes are none.
    CHECK_FALSE(parse_envelope(R"({"channel":"db:x","patch":[],"generation":1,"lsn":"0/1"})"));  // no base
    CHECK_FALSE(parse_envelope(R"({"channel":"db:x","patch":{},"base_generation":1,"base_lsn":"0/1","generation":1,"lsn":"0/2"})"));
    CHECK_FALSE(parse_envelope(R"({"channel":"db:x","merge":[],"base_generation":1,"base_lsn":"0/1","generation":1,"lsn":"0/2"})"));
    CHECK_FALSE(parse_envelope(R"({"channel":"db:x","patch":[],"base_generation":-1,"base_lsn":"0/1","generation":1,"lsn":"0/2"})"));
    CHECK_FALSE(parse_envelope(R"({"channel":"db:x","patch":[],"base_generation":1,"base_lsn":"zz","generation":1,"lsn":"0/2"})"));
    CHECK_FALSE(parse_envelope(R"({"channel":"db:x","diff":[],"base_generation":1,"base_lsn":"0/1","generation":1,"lsn":"0/2"})"));
}
