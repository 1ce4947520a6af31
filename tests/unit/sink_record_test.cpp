// The live journal's batches go to PostgreSQL as one text[] parameter (executor/sink_record.hpp):
// every channel must come back as it was, whatever its key holds.
#include <doctest/doctest.h>

#include "executor/sink_record.hpp"

using docsync::text_array_literal;

TEST_CASE("a batch of channels is one text[] literal that quotes every element") {
    CHECK(text_array_literal({}) == "{}");
    CHECK(text_array_literal({"db:order:1"}) == R"({"db:order:1"})");
    CHECK(text_array_literal({"db:a:x,y", "db:a:{z}", "db:a:NULL", ""}) == R"({"db:a:x,y","db:a:{z}","db:a:NULL",""})");
    CHECK(text_array_literal({R"(db:a:say "hi")", R"(db:a:back\slash)"}) == R"({"db:a:say \"hi\"","db:a:back\\slash"})");
}
