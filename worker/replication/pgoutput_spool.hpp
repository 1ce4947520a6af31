#pragma once
// The messages of pgoutput's streamed transactions (protocol version 2), held from their first block
// until their STREAM COMMIT, when they are read back in order and decoded as the transaction would
// have been had it come whole, or until their STREAM ABORT drops them.
//
// What is held: each message of a watched relation's change, a docsync message, or a RELATION, with
// the (sub)transaction that sent it (the xid field removed, so a message reads back as protocol
// version 1 has it). Held messages of all open transactions together stay within `memory_limit`
// bytes (each counted with its bookkeeping); past it, the transaction holding the most in memory is
// written to an unnamed temporary file in `dir` (O_TMPFILE, or a name unlinked at once: nothing is
// left behind by a kill -9), and everything that transaction gets later goes there too. The files'
// size is bounded only by the disk, as the server's own spill files are.
//
// A subtransaction's abort drops its messages as PostgreSQL's own apply worker does: from its first
// held change to the end. The server sends STREAM ABORT as it decodes the abort record, so every
// held message is older than that record, and everything written between the subtransaction's first
// change and its abort was written by it or by subtransactions it contains, which abort with it. A
// RELATION among the dropped ones is kept (moved to the end, in order): it describes the relation as
// the server has it, and pgoutput does not send it again for the same transaction. It is marked as
// kept, as is a RELATION the aborted subtransaction sent before its first change.
//
// Thread ownership: the stream thread.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace docsync {

class StreamSpool {
public:
    StreamSpool(std::size_t memory_limit, std::string dir);
    ~StreamSpool();
    StreamSpool(const StreamSpool&) = delete;
    StreamSpool& operator=(const StreamSpool&) = delete;

    // Starts holding transaction `xid`; false when it is held already.
    bool open(std::uint32_t xid);
    bool holds(std::uint32_t xid) const { return txns_.count(xid) != 0; }
    // Holds one message of `xid` (which must be held), sent by (sub)transaction `subxid`. A `sticky`
    // one (a RELATION) survives the abort of its subtransaction. Throws Error (transient) when the
    // temporary file cannot be written.
    void append(std::uint32_t xid, std::uint32_t subxid, bool sticky, std::span<const std::uint8_t> message);
    // Subtransaction `subxid` of `xid` aborted: its messages and every later one go, sticky ones aside.
    void abort_subtransaction(std::uint32_t xid, std::uint32_t subxid);
    // `xid` aborted, or was read back: everything it held goes.
    void drop(std::uint32_t xid);
    // Every transaction goes (a new stream session).
    void clear();

    // Reads `xid`'s messages back in order: each call of next() yields one, false at the end, when
    // `xid` is dropped. Only one transaction is read back at a time. `kept`: a sticky message kept
    // from an aborted subtransaction.
    void start_reading(std::uint32_t xid);
    bool reading() const { return reading_; }
    bool next(std::string& message, bool& kept);
    // Reading back ends early: the transaction read is dropped.
    void stop_reading() {
        if (reading_) drop(reading_xid_);
    }

    std::size_t open_transactions() const { return txns_.size(); }
    std::size_t memory_bytes() const { return memory_; }
    // Bytes written to temporary files since the spool was made.
    std::uint64_t spilled_bytes() const { return spilled_; }
    // Messages `xid` holds (tests).
    std::size_t held_messages(std::uint32_t xid) const;
    bool spilled(std::uint32_t xid) const;

private:
    enum : std::uint8_t { kPlain = 0, kSticky = 1, kKept = 2 };
    struct Entry {
        std::uint32_t subxid = 0;
        std::uint8_t kind = kPlain;
        std::string bytes;
    };
    // Where a subtransaction's first message is.
    struct First {
        std::uint32_t subxid = 0;
        std::size_t index = 0;      // among the transaction's messages
        std::uint64_t offset = 0;   // in its file, when spilled
    };
    // Where a sticky message is.
    struct Sticky {
        std::uint32_t subxid = 0;
        std::size_t index = 0;
        std::uint64_t offset = 0;
    };
    struct Txn {
        std::vector<Entry> memory;  // every message, until the transaction is spilled
        std::size_t memory_bytes = 0;
        int fd = -1;                // once spilled: every message is in the file
        std::uint64_t file_size = 0;  // written, the buffer included
        std::string buffer;         // written to the file at file_size - buffer.size()
        std::size_t messages = 0;
        std::vector<First> firsts;  // in order of position
        std::unordered_map<std::uint32_t, std::size_t> first_of;  // subxid -> index into firsts
        std::vector<Sticky> stickies;  // in order of position
    };

    static std::size_t cost(const Entry& entry) { return sizeof(Entry) + entry.bytes.size(); }
    void spill(std::uint32_t xid, Txn& txn);
    void write(Txn& txn, const Entry& entry);
    // Holds `entry` as the transaction's next message (memory or file).
    void push(Txn& txn, Entry&& entry);
    void flush(Txn& txn);
    // Reads the file's entry at `offset`; false at the end of the file.
    bool read_at(const Txn& txn, std::uint64_t& offset, Entry& entry) const;
    void release(Txn& txn);

    std::size_t limit_;
    std::string dir_;
    std::unordered_map<std::uint32_t, Txn> txns_;
    std::size_t memory_ = 0;
    std::uint64_t spilled_ = 0;
    bool reading_ = false;
    std::uint32_t reading_xid_ = 0;
    std::size_t read_index_ = 0;
    std::uint64_t read_offset_ = 0;
};

}  // namespace docsync
