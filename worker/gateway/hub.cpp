// The followed channels and their newest docs.
#include "gateway/hub.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <charconv>

#include "common/log.hpp"
#include "envelope/envelope.hpp"
#include "gateway/patch_forms.hpp"

namespace docsync::gateway {

namespace asio = boost::asio;

constexpr std::size_t kDeferredReadsPerSecond = 1000;  // GETs of deferred channels (at least --warm-rate)
constexpr std::chrono::milliseconds kHealthBackstop{200};  // past the probe's timeout, the hub answers itself

std::string format_version(DocVersion version) {
    return std::to_string(version.generation) + "/" + format_lsn(version.lsn);
}

std::optional<DocVersion> parse_version(std::string_view text) {
    auto slash = text.find('/');
    if (slash == std::string_view::npos || slash == 0 || slash > 20) return std::nullopt;
    DocVersion version;
    auto [end, ec] = std::from_chars(text.data(), text.data() + slash, version.generation);
    if (ec != std::errc() || end != text.data() + slash) return std::nullopt;
    auto lsn = parse_lsn(text.substr(slash + 1));
    if (!lsn) return std::nullopt;
    version.lsn = *lsn;
    return version;
}

bool other_text(const Doc& doc, const Doc& held) {
    return doc.version == held.version && !doc.patch_only && !held.patch_only && doc.doc_text() != held.doc_text();
}

DocPtr make_doc(const std::string& channel, std::string envelope) {
    auto head = publish::parse_envelope(envelope);
    if (!head || head->channel != channel) {
        log_warning("gateway", "ignored a value on " + channel.substr(0, 200) +
                                   " that is not docsync's envelope of that channel");
        return nullptr;
    }
    auto doc = std::make_shared<Doc>();
    doc->channel = channel;
    doc->version = head->version;
    doc->version_text = format_version(head->version);
    set_doc_forms(*doc, std::move(envelope), head->doc_at, head->doc_size);
    return doc;
}

std::string sse_data_lines(std::string_view text) {
    std::string lines;
    // Two memchr scans: find_first_of tests each byte against the set, several times slower on a
    // 50 kB doc, and every message pays this once.
    if (text.find('\n') == std::string_view::npos && text.find('\r') == std::string_view::npos) return lines;
    // An event ends at its first blank line: each line of the text goes in a data line of its own
    // (the client joins them with LF, which JSON reads as the whitespace it was).
    lines.reserve(text.size() + 64);
    for (std::size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (c != '\r' && c != '\n') {
            lines.push_back(c);
            continue;
        }
        if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
        lines.append("\ndata: ");
    }
    return lines;
}

void set_doc_forms(Doc& doc, std::string envelope, std::size_t doc_at, std::size_t doc_size) {
    doc.ws_message.reserve(envelope.size() + doc.version_text.size() + 32);
    doc.ws_message.append("{\"type\":\"doc\",\"version\":\"").append(doc.version_text).append("\",");
    doc.ws_message.append(envelope, 1, std::string::npos);
    doc.sse_head = "event: doc\nid: " + doc.version_text + "\ndata: ";
    doc.sse_lines = sse_data_lines(envelope);
    doc.tombstone = envelope.compare(doc_at, doc_size, "null") == 0;
    doc.doc_at = doc_at;
    doc.doc_size = doc_size;
    doc.envelope = std::move(envelope);
}

Hub::Hub(asio::io_context& io, FeedPort& feed, unsigned warm_rate, std::size_t max_queued_bytes, std::size_t max_missing)
    : io_(io),
      feed_(feed),
      warm_rate_(std::max(1u, warm_rate)),
      warm_tokens_(warm_rate_),
      warm_refilled_(std::chrono::steady_clock::now()),
      max_missing_(max_missing),
      inbox_(max_queued_bytes) {}

bool Hub::take_warm_token() {
    using clock = std::chrono::steady_clock;
    constexpr auto repeat = std::chrono::seconds(10);
    auto now = clock::now();
    warm_tokens_ = std::min(warm_rate_, warm_tokens_ + warm_rate_ * std::chrono::duration<double>(now - warm_refilled_).count());
    warm_refilled_ = now;
    if (warm_tokens_ >= 1) {
        warm_tokens_ -= 1;
        return true;
    }
    ++warms_dropped_;
    if (now - warm_reported_ >= repeat) {
        warm_reported_ = now;
        log_warning("gateway", "asked the worker for no more than --warm-rate " + std::to_string(static_cast<long>(warm_rate_)) +
                                   " docs per second (" + std::to_string(warms_dropped_) +
                                   " requests for docs Redis does not hold deferred or left out so far)");
    }
    return false;
}

void Hub::warm(const std::string& channel) {
    using clock = std::chrono::steady_clock;
    constexpr auto repeat = std::chrono::seconds(10);
    auto now = clock::now();
    if (auto it = warmed_.find(channel); it != warmed_.end() && now - it->second < repeat) return;
    // A channel admitted as missing paid for its warm request when it was subscribed.
    if (!missing_.count(channel) && !take_warm_token()) return;
    if (warmed_.size() >= 100000) {
        for (auto it = warmed_.begin(); it != warmed_.end();)
            it = now - it->second >= repeat ? warmed_.erase(it) : std::next(it);
    }
    warmed_[channel] = now;
    feed_.announce(channel, true);
}

void Hub::follow(const std::string& channel, Follower* follower) {
    auto [it, fresh] = channels_.try_emplace(channel);
    if (!it->second.followers.insert(follower).second) return;
    channel_count_ = channels_.size();
    if (fresh) {
        probe(channel);  // read first; subscribed when Redis holds the doc or the budget allows
    } else if (it->second.latest) {
        follower->on_doc(it->second.latest);
    }
}

void Hub::probe(const std::string& channel) {
    auto& state = channels_[channel];
    state.sub = Sub::Probing;
    std::uint64_t ticket = ++state.reads;
    feed_.read(channel, [this, channel, ticket](FeedRead result) {
        asio::post(io_, [this, channel, ticket, result = std::move(result)]() mutable {
            auto it = channels_.find(channel);
            if (it == channels_.end() || it->second.reads != ticket || it->second.sub != Sub::Probing) return;
            // Redis is away: read again in a second (not subscribed unread, which would bypass the budget).
            if (!result.ok) return defer(channel, it->second, false);
            if (!result.value) return admit(channel, it->second);
            if (auto doc = make_doc(channel, std::move(*result.value))) offer(it->second, doc);
            subscribe(channel, it->second);  // held: `subscribed` follows, then the read again
        });
    });
}

void Hub::admit(const std::string& channel, Channel& state) {
    if (missing_.size() < max_missing_ && take_warm_token()) {
        missing_.insert(channel);
        missing_count_ = missing_.size();
        return subscribe(channel, state);  // the read after `subscribed` asks the worker for it
    }
    if (missing_.size() >= max_missing_) ++warms_dropped_;
    defer(channel, state, true);
}

void Hub::defer(const std::string& channel, Channel& state, bool tell) {
    if (deferred_.insert(channel).second) deferred_order_.push_back(channel);
    if (deferred_order_.size() > 2 * deferred_.size() + 1024) {
        // Channels dropped and followed again left entries behind: keep each deferred one once.
        std::unordered_set<std::string> kept;
        std::deque<std::string> order;
        for (auto& c : deferred_order_)
            if (deferred_.count(c) && kept.insert(c).second) order.push_back(std::move(c));
        deferred_order_.swap(order);
    }
    deferred_count_ = deferred_.size();
    state.sub = Sub::Deferred;
    if (tell && !state.told) {
        state.told = true;
        std::string message = "Redis holds no doc for this channel yet, and the gateway asks the worker for at most "
                              "--warm-rate docs per second and --max-missing-docs at once: it stays followed and "
                              "is asked for again each second";
        std::vector<Follower*> followers(state.followers.begin(), state.followers.end());
        for (auto* f : followers) f->on_notice(channel, "deferred", message);
    }
    if (!retry_scheduled_) {
        retry_scheduled_ = true;
        auto timer = std::make_shared<asio::steady_timer>(io_, std::chrono::seconds(1));
        timer->async_wait([this, timer](const boost::system::error_code&) {
            retry_scheduled_ = false;
            retry_deferred();
        });
    }
}

void Hub::retry_deferred() {
    // Reads are cheap next to computes, but bounded too: a crowd of deferred channels costs Redis
    // at most this many GETs a second, in turn.
    const std::size_t reads = std::max<std::size_t>(kDeferredReadsPerSecond, static_cast<std::size_t>(warm_rate_));
    std::vector<std::string> batch;
    while (!deferred_order_.empty() && batch.size() < reads) {
        std::string channel = std::move(deferred_order_.front());
        deferred_order_.pop_front();
        if (!deferred_.erase(channel)) continue;  // unfollowed since
        auto c = channels_.find(channel);
        if (c != channels_.end() && c->second.sub == Sub::Deferred) batch.push_back(std::move(channel));
    }
    deferred_count_ = deferred_.size();
    for (const auto& channel : batch) probe(channel);
    if (!deferred_.empty() && !retry_scheduled_) {
        retry_scheduled_ = true;
        auto timer = std::make_shared<asio::steady_timer>(io_, std::chrono::seconds(1));
        timer->async_wait([this, timer](const boost::system::error_code&) {
            retry_scheduled_ = false;
            retry_deferred();
        });
    }
}

void Hub::subscribe(const std::string& channel, Channel& state) {
    state.sub = Sub::Subscribed;
    feed_.set_following(channel, true);
}

void Hub::unfollow(const std::string& channel, Follower* follower) {
    auto it = channels_.find(channel);
    if (it == channels_.end() || it->second.followers.erase(follower) == 0) return;
    if (!it->second.followers.empty()) return;
    bool subscribed = it->second.sub == Sub::Subscribed;
    channels_.erase(it);
    channel_count_ = channels_.size();
    missing_.erase(channel);
    missing_count_ = missing_.size();
    deferred_.erase(channel);
    deferred_count_ = deferred_.size();
    if (subscribed) feed_.set_following(channel, false);
}

void Hub::offer(Channel& state, const DocPtr& doc) {
    if (state.latest && doc->version == state.latest->version && other_text(*doc, *state.latest)) {
        // Two computes of one version with different texts, the later the one Redis holds: it
        // replaces the held one, marked so that no patch is applied on either (a patch names its
        // base by version alone). Followers holding the other text get the next version whole.
        auto retexted = std::make_shared<Doc>(*doc);
        retexted->retexted = true;
        log_debug("gateway", "a second text of " + doc->channel.substr(0, 200) + " at " + doc->version_text +
                                 ": no patch applies on it");
        state.latest = std::move(retexted);
        std::vector<Follower*> followers(state.followers.begin(), state.followers.end());
        for (auto* f : followers) f->on_doc(state.latest);
        return;
    }
    if (state.latest && doc->version <= state.latest->version) {
        ++stale_;
        return;
    }
    state.latest = doc;
    if (!doc->tombstone && missing_.erase(doc->channel)) missing_count_ = missing_.size();
    // A follower may unfollow from inside on_doc (a client dropped for being too slow): copy first.
    std::vector<Follower*> followers(state.followers.begin(), state.followers.end());
    for (auto* f : followers) f->on_doc(doc);
}

void Hub::receive(const std::string& channel, std::string payload) {
    ++messages_;
    if (looks_like_patch(payload)) {
        ++patches_received_;
        std::string why;
        DocPtr patch = make_patch(channel, std::move(payload), why);
        if (!patch) {
            // The key holds the whole doc of the newest version: read it instead.
            ++patches_refused_;
            warn_patch(channel, nullptr, "a patch message that is not one: " + why);
            if (inbox_.reread(channel)) asio::post(io_, [this] { drain(); });
            return;
        }
        if (inbox_.put(std::move(patch))) asio::post(io_, [this] { drain(); });
        return;
    }
    auto doc = make_doc(channel, std::move(payload));
    if (doc && inbox_.put(std::move(doc))) asio::post(io_, [this] { drain(); });
}

void Hub::drain() {
    auto batch = inbox_.take();
    for (auto& doc : batch.docs) {
        auto it = channels_.find(doc->channel);
        if (it == channels_.end()) continue;  // unfollowed while it travelled
        if (!doc->patch_only) {
            offer(it->second, doc);
        } else if (DocPtr whole = apply_received(doc->channel, it->second, doc)) {
            offer(it->second, whole);
        }
    }
    for (const auto& channel : batch.reread)
        if (auto it = channels_.find(channel); it != channels_.end()) reread(channel, it->second);
}

DocPtr Hub::apply_received(const std::string& channel, Channel& state, const DocPtr& patch) {
    if (state.latest && patch->version <= state.latest->version) {
        ++stale_;
        return nullptr;
    }
    // Applied only to the very version it was made from. The Inbox keeps one message per channel,
    // so a patch that replaced another there (or one after a message Redis dropped) has a base the
    // hub never held: the key, written before the message was published, is at least as new.
    if (!state.latest || state.latest->tombstone || state.latest->retexted || state.latest->version != *patch->base) {
        ++patch_base_rereads_;
        log_debug("gateway", "a patch of " + channel.substr(0, 200) + " from " + format_version(*patch->base) +
                                 " found " + (state.latest ? state.latest->version_text : std::string("no doc")) +
                                 " held: reading the key");
        reread(channel, state, patch->version);
        return nullptr;
    }
    try {
        DocPtr whole = apply_patch(*state.latest, *patch);
        ++patches_applied_;
        return whole;
    } catch (const std::exception& e) {
        ++patches_refused_;
        warn_patch(channel, &state, std::string("a patch that does not apply to the doc held: ") + e.what());
        reread(channel, state, patch->version);
        return nullptr;
    }
}

void Hub::reread(const std::string& channel, Channel& state, std::optional<DocVersion> wanted) {
    if (state.sub != Sub::Subscribed) return;
    if (state.rereading) {
        // The read out may have been answered before this message was published (the key is
        // written before the message goes out, so a read made after it is at least as new): its
        // answer reads once more when it is older than this.
        // A request of no known version (a message the Inbox could not keep, or not a patch at
        // all) is never dropped: the key is read once more after the read out answers.
        if (!wanted) state.reread_again = true;
        else if (!state.reread_for || *state.reread_for < *wanted) state.reread_for = wanted;
        return;
    }
    state.rereading = true;
    state.reread_for.reset();
    state.reread_again = false;
    read_retained(channel, false);
}

void Hub::warn_patch(const std::string& channel, Channel* state, const std::string& why) {
    if (state) {
        if (state->patch_warned) return;
        state->patch_warned = true;
    }
    auto now = std::chrono::steady_clock::now();
    {
        std::lock_guard lock(patch_warning_mutex_);
        if (patch_warned_at_ != std::chrono::steady_clock::time_point{} && now - patch_warned_at_ < std::chrono::seconds(1))
            return;
        patch_warned_at_ = now;
    }
    log_warning("gateway", "ignored " + why.substr(0, 300) + " on " + channel.substr(0, 200) +
                               "; the whole doc is read from the key instead (patches_refused in /healthz counts them)");
}

void Hub::on_subscribed(const std::string& channel) {
    auto it = channels_.find(channel);
    if (it != channels_.end() && it->second.sub == Sub::Subscribed) read_retained(channel);
}

void Hub::read_retained(const std::string& channel, bool announce) {
    auto& state = channels_[channel];
    std::uint64_t ticket = ++state.reads;
    feed_.read(channel, [this, channel, ticket, announce](FeedRead result) {
        asio::post(io_, [this, channel, ticket, announce, result = std::move(result)]() mutable {
            auto it = channels_.find(channel);
            if (it == channels_.end() || it->second.reads != ticket) return;  // gone, or read again since
            it->second.rereading = false;
            if (!result.ok) {
                // The subscription may be fine while a reader failed: read again shortly. When the
                // subscriber fails too, its reconnect reads again anyway.
                log_warning("gateway", "reading " + channel.substr(0, 200) + " failed: " + result.error + "; retrying");
                auto timer = std::make_shared<asio::steady_timer>(io_, std::chrono::seconds(1));
                timer->async_wait([this, channel, ticket, timer](const boost::system::error_code& ec) {
                    auto again = channels_.find(channel);
                    if (!ec && again != channels_.end() && again->second.reads == ticket) read_retained(channel);
                });
                return;
            }
            auto& state = it->second;
            if (!result.value) {
                warm(channel);  // nothing retained: ask the worker to compute it
            } else {
                auto doc = make_doc(channel, std::move(*result.value));
                if (doc) offer(state, doc);
                if (announce) feed_.announce(channel, false);  // a subscriber: live at once, not at the next poll
            }
            if (state.reread_again || (state.reread_for && (!state.latest || state.latest->version < *state.reread_for))) {
                reread(channel, state);  // a message newer than the key was when read: read again
            } else {
                state.reread_for.reset();
            }
        });
    });
}

void Hub::read(const std::string& channel, std::function<void(DocPtr, std::string)> done) {
    feed_.read(channel, [this, channel, done = std::move(done)](FeedRead result) mutable {
        asio::post(io_, [this, channel, done = std::move(done), result = std::move(result)]() mutable {
            auto followed = channels_.find(channel);
            DocPtr held = followed == channels_.end() ? nullptr : followed->second.latest;
            if (!result.ok) return held ? done(held, {}) : done(nullptr, result.error);
            if (!result.value) {
                if (held) return done(held, {});  // a tombstone expired since, or a Redis that forgot
                warm(channel);
                return done(nullptr, {});
            }
            auto doc = make_doc(channel, std::move(*result.value));
            if (!doc) return done(nullptr, "Redis holds a value at " + channel + " that is not a docsync doc");
            // A followed channel's newer doc (or this one, when it is newer) answers.
            if (held && held->version > doc->version) doc = held;
            done(doc, {});
        });
    });
}

void Hub::health(std::chrono::milliseconds timeout, std::function<void(bool, std::string)> done) {
    auto waiter = std::make_shared<HealthWaiter>();
    waiter->done = std::move(done);
    health_waiters_.push_back(waiter);
    // The feed answers by `timeout`, naming the nodes that did not; this is the backstop.
    auto timer = std::make_shared<asio::steady_timer>(io_, timeout + kHealthBackstop);
    timer->async_wait([this, waiter, timer, timeout](const boost::system::error_code&) {
        if (waiter->answered) return;
        waiter->answered = true;
        std::erase(health_waiters_, waiter);
        waiter->done(false, "Redis did not answer PING within " + std::to_string(timeout.count()) + " ms");
    });
    if (probing_) return;
    probing_ = true;
    feed_.probe(timeout, [this](FeedRead result) {
        asio::post(io_, [this, result = std::move(result)] {
            probing_ = false;
            if (!result.ok) return answer_health(false, result.error);
            if (!feed_.up()) return answer_health(false, "the subscriber connection is down");
            answer_health(true, {});
        });
    });
}

void Hub::answer_health(bool up, const std::string& why) {
    auto waiters = std::move(health_waiters_);
    health_waiters_.clear();
    for (auto& w : waiters) {
        if (w->answered) continue;
        w->answered = true;
        w->done(up, why);
    }
}

HubStats Hub::stats() const {
    HubStats s;
    s.channels = channel_count_;
    s.followers = client_followers;
    s.messages = messages_;
    s.stale = stale_;
    s.replaced = inbox_.replaced();
    s.overflowed = inbox_.overflowed();
    s.missing = missing_count_;
    s.deferred = deferred_count_;
    s.warms_dropped = warms_dropped_;
    s.patches_received = patches_received_;
    s.patches_applied = patches_applied_;
    s.patch_base_rereads = patch_base_rereads_;
    s.patches_refused = patches_refused_;
    return s;
}

LocalHub::LocalHub(asio::io_context& io, asio::io_context& hub_io, Hub& hub) : io_(io), hub_io_(hub_io), hub_(hub) {}

void LocalHub::follow(const std::string& channel, Follower* follower) {
    auto [it, fresh] = channels_.try_emplace(channel);
    if (!it->second.followers.insert(follower).second) return;
    ++hub_.client_followers;
    if (fresh) {
        asio::post(hub_io_, [this, channel] { hub_.follow(channel, this); });
    } else if (it->second.latest) {
        follower->on_doc(it->second.latest);
    }
}

void LocalHub::unfollow(const std::string& channel, Follower* follower) {
    auto it = channels_.find(channel);
    if (it == channels_.end() || it->second.followers.erase(follower) == 0) return;
    --hub_.client_followers;
    if (!it->second.followers.empty()) return;
    channels_.erase(it);
    asio::post(hub_io_, [this, channel] { hub_.unfollow(channel, this); });
}

bool LocalHub::holds(const Follower* follower) const {
    for (const auto& [channel, state] : channels_)
        if (state.followers.count(const_cast<Follower*>(follower)) != 0) return true;
    return false;
}

void LocalHub::read(const std::string& channel, std::function<void(DocPtr, std::string)> done) {
    asio::post(hub_io_, [this, channel, done = std::move(done)]() mutable {
        hub_.read(channel, [this, done = std::move(done)](DocPtr doc, std::string error) mutable {
            asio::post(io_, [done = std::move(done), doc = std::move(doc), error = std::move(error)]() mutable {
                done(std::move(doc), std::move(error));
            });
        });
    });
}

void LocalHub::health(std::chrono::milliseconds timeout, std::function<void(bool, std::string)> done) {
    asio::post(hub_io_, [this, timeout, done = std::move(done)]() mutable {
        hub_.health(timeout, [this, done = std::move(done)](bool up, std::string why) mutable {
            asio::post(io_, [done = std::move(done), up, why = std::move(why)]() mutable { done(up, std::move(why)); });
        });
    });
}

void LocalHub::on_notice(const std::string& channel, const std::string& code, const std::string& message) {
    asio::post(io_, [this, channel, code, message] {
        auto it = channels_.find(channel);
        if (it == channels_.end()) return;
        std::vector<Follower*> followers(it->second.followers.begin(), it->second.followers.end());
        for (auto* f : followers) f->on_notice(channel, code, message);
    });
}

void LocalHub::on_doc(const DocPtr& doc) {
    if (arrived_.put(doc))
        asio::post(io_, [this] {
            for (const auto& d : arrived_.take().docs) deliver(d);
        });
}

void LocalHub::deliver(const DocPtr& doc) {
    auto it = channels_.find(doc->channel);
    if (it == channels_.end()) return;  // no follower left here
    auto& state = it->second;
    if (state.latest && doc->version <= state.latest->version && !(doc->retexted && other_text(*doc, *state.latest)))
        return;
    state.latest = doc;
    std::vector<Follower*> followers(state.followers.begin(), state.followers.end());
    for (auto* f : followers) f->on_doc(doc);
}

}  // namespace docsync::gateway
