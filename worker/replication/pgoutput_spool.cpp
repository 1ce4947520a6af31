// Held messages of streamed transactions (see pgoutput_spool.hpp).
#include "replication/pgoutput_spool.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.hpp"
#include "common/log.hpp"

namespace docsync {

namespace {

constexpr std::string_view kComponent = "stream";
// An entry in a file: Int32 subxid, Int8 kind (plain, sticky, kept), Int32 length, then the message.
constexpr std::size_t kHeader = 9;
// Writes to a file are gathered up to this much.
constexpr std::size_t kWriteBuffer = 256 * 1024;

std::string system_error(const std::string& what, const std::string& dir) {
    return what + " in " + dir + " for a streamed transaction: " + std::strerror(errno) +
           " (the worker holds streamed transactions past --stream-memory there: set TMPDIR to a writable "
           "directory with room, or raise --stream-memory)";
}

int open_temporary(const std::string& dir) {
    int fd = -1;
#ifdef O_TMPFILE
    fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) return fd;
#endif
    std::string path = dir + "/docsync-stream-XXXXXX";
    fd = ::mkostemp(path.data(), O_CLOEXEC);
    if (fd < 0) throw Error(system_error("could not create a temporary file", dir), {}, true);
    ::unlink(path.c_str());
    return fd;
}

void put32(std::string& out, std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

std::uint32_t get32(const char* p) {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
    return v;
}

}  // namespace

StreamSpool::StreamSpool(std::size_t memory_limit, std::string dir) : limit_(memory_limit), dir_(std::move(dir)) {
    if (dir_.empty()) {
        const char* tmp = std::getenv("TMPDIR");
        dir_ = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    }
}

StreamSpool::~StreamSpool() { clear(); }

bool StreamSpool::open(std::uint32_t xid) { return txns_.try_emplace(xid).second; }

void StreamSpool::append(std::uint32_t xid, std::uint32_t subxid, bool sticky, std::span<const std::uint8_t> message) {
    Txn& txn = txns_.at(xid);
    Entry entry{subxid, sticky ? kSticky : kPlain, std::string(reinterpret_cast<const char*>(message.data()), message.size())};
    if (sticky) {
        txn.stickies.push_back(Sticky{subxid, txn.messages, txn.file_size});
    } else if (subxid != xid && txn.first_of.count(subxid) == 0) {
        txn.first_of.emplace(subxid, txn.firsts.size());
        txn.firsts.push_back(First{subxid, txn.messages, txn.file_size});
    }
    push(txn, std::move(entry));
    // Over the bound: the transaction holding the most in memory goes to its file.
    while (memory_ > limit_) {
        auto largest = std::max_element(txns_.begin(), txns_.end(), [](const auto& a, const auto& b) {
            return a.second.memory_bytes < b.second.memory_bytes;
        });
        if (largest == txns_.end() || largest->second.memory_bytes == 0) break;
        spill(largest->first, largest->second);
    }
}

void StreamSpool::push(Txn& txn, Entry&& entry) {
    ++txn.messages;
    if (txn.fd >= 0) {
        write(txn, entry);
        return;
    }
    std::size_t c = cost(entry);
    txn.memory_bytes += c;
    memory_ += c;
    txn.memory.push_back(std::move(entry));
}

void StreamSpool::spill(std::uint32_t xid, Txn& txn) {
    txn.fd = open_temporary(dir_);
    log_info(kComponent, "streamed transaction " + std::to_string(xid) + " holds " + std::to_string(txn.memory_bytes) +
                             " bytes, over --stream-memory " + std::to_string(limit_) +
                             " with the others: its messages go to a temporary file in " + dir_ + " until it ends");
    // The positions recorded so far were indexes only: the file offsets follow as it is written.
    std::vector<std::uint64_t> offsets;
    offsets.reserve(txn.memory.size() + 1);
    for (const Entry& entry : txn.memory) {
        offsets.push_back(txn.file_size);
        write(txn, entry);
    }
    offsets.push_back(txn.file_size);
    for (First& first : txn.firsts) first.offset = offsets[std::min(first.index, offsets.size() - 1)];
    for (Sticky& sticky : txn.stickies) sticky.offset = offsets[std::min(sticky.index, offsets.size() - 1)];
    memory_ -= txn.memory_bytes;
    txn.memory_bytes = 0;
    txn.memory.clear();
    txn.memory.shrink_to_fit();
}

void StreamSpool::write(Txn& txn, const Entry& entry) {
    put32(txn.buffer, entry.subxid);
    txn.buffer.push_back(static_cast<char>(entry.kind));
    put32(txn.buffer, static_cast<std::uint32_t>(entry.bytes.size()));
    txn.buffer += entry.bytes;
    txn.file_size += kHeader + entry.bytes.size();
    spilled_ += kHeader + entry.bytes.size();
    if (txn.buffer.size() >= kWriteBuffer) flush(txn);
}

void StreamSpool::flush(Txn& txn) {
    std::uint64_t at = txn.file_size - txn.buffer.size();
    std::size_t done = 0;
    while (done < txn.buffer.size()) {
        ssize_t n = ::pwrite(txn.fd, txn.buffer.data() + done, txn.buffer.size() - done, static_cast<off_t>(at + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw Error(system_error("could not write a temporary file", dir_), {}, true);
        done += static_cast<std::size_t>(n);
    }
    txn.buffer.clear();
}

bool StreamSpool::read_at(const Txn& txn, std::uint64_t& offset, Entry& entry) const {
    if (offset >= txn.file_size) return false;
    auto read_exact = [&](char* into, std::size_t n, std::uint64_t at) {
        std::size_t done = 0;
        while (done < n) {
            ssize_t got = ::pread(txn.fd, into + done, n - done, static_cast<off_t>(at + done));
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) throw Error(system_error("could not read back a temporary file", dir_), {}, true);
            done += static_cast<std::size_t>(got);
        }
    };
    char header[kHeader];
    read_exact(header, kHeader, offset);
    entry.subxid = get32(header);
    entry.kind = static_cast<std::uint8_t>(header[4]);
    if (entry.kind > kKept)
        throw Error("a temporary file of a streamed transaction in " + dir_ + " is damaged (an unknown entry kind)", {},
                    true);
    std::uint32_t n = get32(header + 5);
    if (offset + kHeader + n > txn.file_size)
        throw Error("a temporary file of a streamed transaction in " + dir_ + " is damaged (an entry runs past its end)",
                    {}, true);
    entry.bytes.resize(n);
    if (n > 0) read_exact(entry.bytes.data(), n, offset + kHeader);
    offset += kHeader + n;
    return true;
}

void StreamSpool::abort_subtransaction(std::uint32_t xid, std::uint32_t subxid) {
    auto it = txns_.find(xid);
    if (it == txns_.end()) return;
    Txn& txn = it->second;
    if (txn.fd >= 0) flush(txn);
    auto f = txn.first_of.find(subxid);
    const std::size_t cut_index = f == txn.first_of.end() ? txn.messages : txn.firsts[f->second].index;
    const std::uint64_t cut_offset = f == txn.first_of.end() ? txn.file_size : txn.firsts[f->second].offset;
    // A RELATION it sent before its first change stays where it is, marked as kept.
    for (const Sticky& sticky : txn.stickies) {
        if (sticky.index >= cut_index || sticky.subxid != subxid) continue;
        if (txn.fd < 0) {
            txn.memory[sticky.index].kind = kKept;
            continue;
        }
        const char kind = static_cast<char>(kKept);
        while (::pwrite(txn.fd, &kind, 1, static_cast<off_t>(sticky.offset + 4)) != 1)
            if (errno != EINTR) throw Error(system_error("could not write a temporary file", dir_), {}, true);
    }
    if (f == txn.first_of.end()) return;  // none of its changes is held
    // The subtransactions that began after it go with it.
    while (!txn.firsts.empty() && txn.firsts.back().index >= cut_index) {
        txn.first_of.erase(txn.firsts.back().subxid);
        txn.firsts.pop_back();
    }
    while (!txn.stickies.empty() && txn.stickies.back().index >= cut_index) txn.stickies.pop_back();
    std::vector<Entry> kept;
    if (txn.fd < 0) {
        for (std::size_t i = cut_index; i < txn.memory.size(); ++i) {
            std::size_t c = cost(txn.memory[i]);
            txn.memory_bytes -= c;
            memory_ -= c;
            if (txn.memory[i].kind != kPlain) kept.push_back(std::move(txn.memory[i]));
        }
        txn.memory.erase(txn.memory.begin() + static_cast<std::ptrdiff_t>(cut_index), txn.memory.end());
    } else {
        std::uint64_t offset = cut_offset;
        Entry entry;
        while (read_at(txn, offset, entry))
            if (entry.kind != kPlain) kept.push_back(entry);
        while (::ftruncate(txn.fd, static_cast<off_t>(cut_offset)) != 0)
            if (errno != EINTR) throw Error(system_error("could not truncate a temporary file", dir_), {}, true);
        txn.file_size = cut_offset;
    }
    txn.messages = cut_index;
    for (Entry& entry : kept) {
        entry.kind = kKept;
        txn.stickies.push_back(Sticky{entry.subxid, txn.messages, txn.file_size});
        push(txn, std::move(entry));
    }
}

void StreamSpool::release(Txn& txn) {
    memory_ -= txn.memory_bytes;
    if (txn.fd >= 0) ::close(txn.fd);
    txn.fd = -1;
}

void StreamSpool::drop(std::uint32_t xid) {
    auto it = txns_.find(xid);
    if (it == txns_.end()) return;
    release(it->second);
    txns_.erase(it);
    if (reading_ && reading_xid_ == xid) reading_ = false;
}

void StreamSpool::clear() {
    for (auto& [xid, txn] : txns_) release(txn);
    txns_.clear();
    reading_ = false;
}

void StreamSpool::start_reading(std::uint32_t xid) {
    Txn& txn = txns_.at(xid);
    if (txn.fd >= 0) flush(txn);
    reading_ = true;
    reading_xid_ = xid;
    read_index_ = 0;
    read_offset_ = 0;
}

bool StreamSpool::next(std::string& message, bool& kept) {
    if (!reading_) return false;
    Txn& txn = txns_.at(reading_xid_);
    if (txn.fd < 0) {
        if (read_index_ < txn.memory.size()) {
            // Moved out: what is read back is never read again.
            Entry& entry = txn.memory[read_index_++];
            kept = entry.kind == kKept;
            message = std::move(entry.bytes);
            return true;
        }
    } else {
        Entry entry;
        if (read_at(txn, read_offset_, entry)) {
            kept = entry.kind == kKept;
            message = std::move(entry.bytes);
            return true;
        }
    }
    drop(reading_xid_);
    return false;
}

std::size_t StreamSpool::held_messages(std::uint32_t xid) const {
    auto it = txns_.find(xid);
    return it == txns_.end() ? 0 : it->second.messages;
}

bool StreamSpool::spilled(std::uint32_t xid) const {
    auto it = txns_.find(xid);
    return it != txns_.end() && it->second.fd >= 0;
}

}  // namespace docsync
