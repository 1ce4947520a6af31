#pragma once
// Decodes the binary records of shared/docsync_wire.h into the types of records.hpp.
//
// One Decoder per stream session (RELATION records are sent again in every session): it remembers
// each relation's projected column count so a tuple whose width disagrees with its RELATION is
// rejected. Anything malformed — a truncated or over-long varint, a length past the end, an unknown
// record type or value kind, trailing bytes, a change for a relation never described — throws
// DecodeError naming the record type and byte offset; no input can cause undefined behaviour.
//
// Thread ownership: the stream thread.

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>

#include "common/error.hpp"
#include "replication/records.hpp"

namespace docsync {

class DecodeError : public Error {
public:
    explicit DecodeError(const std::string& message) : Error(message) {}
};

class Decoder {
public:
    // Decodes one record (one logical decoding message). Throws DecodeError.
    Record decode(std::span<const std::uint8_t> message);

    // Forgets the relations seen (a new stream session).
    void reset() { relation_widths_.clear(); }

private:
    std::unordered_map<Oid, std::size_t> relation_widths_;
};

// A one-line readable rendering of a record, for logs and errors.
std::string describe(const Record& record);

}  // namespace docsync
