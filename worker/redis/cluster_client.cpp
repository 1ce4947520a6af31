// Routing of commands over a Redis Cluster: the slot map, redirects, per-node pools.
#include "redis/cluster_client.hpp"

#include <algorithm>
#include <thread>

#include "common/log.hpp"

namespace docsync::redis {

namespace {

constexpr std::chrono::milliseconds kMinRefresh{100};

}  // namespace

std::string ClusterClient::Endpoint::text() const {
    return host.find(':') != std::string::npos ? "[" + host + "]:" + std::to_string(port)
                                               : host + ":" + std::to_string(port);
}

ClusterClient::ClusterClient(RedisClusterAddress address, ClusterOptions options)
    : address_(std::move(address)), options_(options) {
    if (address_.seeds.empty()) throw misconfigured("a Redis Cluster address needs at least one HOST:PORT");
    refresh(true);
}

std::shared_ptr<const SlotMap> ClusterClient::map() const {
    MutexLock lock(mutex_);
    return map_;
}

ClusterClient::PooledConnection::~PooledConnection() {
    if (conn_ && answered_) client_->release(at_, std::move(conn_));
}

void ClusterClient::PooledConnection::answered() {
    answered_ = true;
    client_->answered(at_);
}

ClusterClient::PooledConnection ClusterClient::acquire(const Endpoint& at) {
    {
        MutexLock lock(mutex_);
        Pool& pool = pools_[at];
        if (!pool.idle.empty()) {
            auto conn = std::move(pool.idle.back());
            pool.idle.pop_back();
            return PooledConnection(*this, at, std::move(conn), true);
        }
        // Backing off: fail at once rather than hold up the commands of the other nodes.
        if (std::chrono::steady_clock::now() < pool.next_connect)
            throw unreachable("Redis Cluster node " + at.text() + " is unreachable (" + pool.last_error +
                              "); reconnecting with backoff");
    }
    return PooledConnection(*this, at, connect(at), false);
}

std::unique_ptr<RedisConnection> ClusterClient::connect(const Endpoint& at) {
    RedisAddress node = address_.seeds.front();
    node.host = at.host;
    node.port = at.port;
    node.db = 0;
    try {
        return RedisConnection::connect(node, options_.connect_timeout, options_.command_timeout);
    } catch (const Error& e) {
        failed(at, e.what());
        throw;
    }
}

void ClusterClient::drop_idle(const Endpoint& at) {
    std::vector<std::unique_ptr<RedisConnection>> dead;
    MutexLock lock(mutex_);
    dead.swap(pools_[at].idle);
}

std::vector<Reply> ClusterClient::exchange(const Endpoint& at, const std::vector<std::vector<std::string_view>>& batch) {
    PooledConnection conn(*this, at, connect(at), false);
    std::vector<Reply> replies;
    try {
        replies = conn->pipeline(batch);
    } catch (const Error& e) {
        failed(at, e.what());
        throw;
    }
    conn.answered();
    return replies;
}

void ClusterClient::release(const Endpoint& at, std::unique_ptr<RedisConnection> conn) {
    MutexLock lock(mutex_);
    pools_[at].idle.push_back(std::move(conn));
}

void ClusterClient::failed(const Endpoint& at, const std::string& why) {
    std::vector<std::unique_ptr<RedisConnection>> dead;
    bool first = false;
    {
        MutexLock lock(mutex_);
        Pool& pool = pools_[at];
        dead.swap(pool.idle);
        pool.backoff = pool.backoff.count() == 0 ? options_.initial_backoff : std::min(pool.backoff * 2, options_.max_backoff);
        pool.next_connect = std::chrono::steady_clock::now() + pool.backoff;
        pool.last_error = why;
        first = !pool.down;
        pool.down = true;
        stale_ = true;  // a failover may follow: ask for the map again
    }
    if (first)
        log_warning("publish", "lost Redis Cluster node " + at.text() + ": " + why +
                                   "; what hashes there is retried and holds the slot until it or a promoted replica "
                                   "answers, the other nodes go on");
}

void ClusterClient::answered(const Endpoint& at) {
    bool was_down = false;
    {
        MutexLock lock(mutex_);
        Pool& pool = pools_[at];
        was_down = pool.down;
        pool.down = false;
        pool.backoff = std::chrono::milliseconds(0);
    }
    if (was_down) log_info("publish", "Redis Cluster node " + at.text() + " answers again");
}

std::optional<SlotMap> ClusterClient::ask_map(const Endpoint& at, std::string& last_error) {
    try {
        Reply reply = command_on(at, {"CLUSTER", "SHARDS"});
        if (is_error(reply, "ERR") && reply_text(reply.get()).find("cluster support disabled") != std::string::npos)
            throw misconfigured("Redis at " + at.text() +
                            " is not a Redis Cluster node (cluster-enabled is off): for a single Redis give redis://" +
                                at.text() + ", or give the nodes of the cluster");
        if (is_error(reply, "NOAUTH"))
            throw misconfigured("Redis Cluster node " + at.text() + " requires a password (" + reply_text(reply.get()) +
                                "): give it in the URL, redis-cluster://:PASSWORD@HOST:PORT,... (USER:PASSWORD@ for "
                                "an ACL user)");
        if (is_error(reply))  // before Redis 7
            return parse_cluster_slots(command_on(at, {"CLUSTER", "SLOTS"}).get(), at.host);
        return parse_cluster_shards(reply.get(), at.host);
    } catch (const Error& e) {
        if (!e.transient()) throw;
        last_error = e.what();
        return std::nullopt;
    }
}

void ClusterClient::refresh(bool force) {
    // One refresh at a time; a publish that finds one running goes on with the map it has rather
    // than wait for nodes that may be slow to refuse.
    if (force)
        refresh_mutex_.lock();
    else if (!refresh_mutex_.try_lock())
        return;
    try {
        refresh_locked(force);
    } catch (...) {
        refresh_mutex_.unlock();
        throw;
    }
    refresh_mutex_.unlock();
}

void ClusterClient::refresh_locked(bool force) {
    std::vector<Endpoint> candidates;
    {
        MutexLock lock(mutex_);
        auto now = std::chrono::steady_clock::now();
        if (!force && (!stale_ || now - refreshed_ < kMinRefresh)) return;
        refreshed_ = now;
        if (map_) {
            for (const ClusterNode* m : map_->masters())
                if (m->healthy) candidates.push_back({m->host, m->port});
            for (const auto& n : map_->nodes) candidates.push_back({n.host, n.port});
        }
        for (const auto& seed : address_.seeds) candidates.push_back({seed.host, seed.port});
        // Nodes that just failed are asked last: a frozen one would hold the refresh (and the
        // command that runs it) for its whole timeout while the others answer at once.
        // (The set is read here, under the lock: a lambda is checked apart from the lock its caller holds.)
        std::set<Endpoint> down;
        for (const auto& [at, pool] : pools_)
            if (pool.down) down.insert(at);
        std::stable_partition(candidates.begin(), candidates.end(),
                              [&down](const Endpoint& at) { return down.count(at) == 0; });
    }
    std::set<Endpoint> asked;
    std::string tried, last_error;
    for (const auto& at : candidates) {
        if (!asked.insert(at).second) continue;
        tried += (tried.empty() ? "" : ", ") + at.text();
        auto map = ask_map(at, last_error);
        // A node that lost its view (just restarted, not yet joined) may answer with no slots.
        if (!map || map->covered() == 0) continue;
        MutexLock lock(mutex_);
        map_ = std::make_shared<const SlotMap>(std::move(*map));
        stale_ = false;
        return;
    }
    throw unreachable("no Redis Cluster node answered CLUSTER SHARDS (asked " + tried +
                    (last_error.empty() ? std::string() : "; the last: " + last_error) +
                      "); start the cluster, or fix HOST:PORT in the URL, redis-cluster://HOST:PORT[,HOST:PORT...]");
}

std::vector<Outcome> ClusterClient::run(const std::vector<KeyedCommand>& commands) {
    std::vector<Outcome> out(commands.size());
    try {
        refresh(false);
    } catch (const Error&) {
        // routed with the map we have; its nodes' failures say what is wrong
    }
    struct Route {
        std::optional<Endpoint> to;  // a redirect's node, else the slot's master
        bool ask = false;
        bool fallback = false;
    };
    std::vector<Route> routes(commands.size());
    std::vector<std::size_t> pending(commands.size());
    for (std::size_t i = 0; i < pending.size(); ++i) pending[i] = i;

    for (int round = 0; !pending.empty(); ++round) {
        if (round > options_.max_redirects) {
            for (auto i : pending)
                out[i].error = refused("Redis Cluster redirected the command for " + std::string(commands[i].key) +
                                       " " + std::to_string(options_.max_redirects) +
                                       " times: the slot map does not settle");
            break;
        }
        auto map = this->map();
        std::map<Endpoint, std::vector<std::size_t>> groups;
        for (auto i : pending) {
            if (routes[i].to) {
                groups[*routes[i].to].push_back(i);
                continue;
            }
            int slot = key_slot(commands[i].key);
            const ClusterNode* master = map ? map->master_of(slot) : nullptr;
            if (master == nullptr) {
                out[i].error = refused("no Redis Cluster node serves hash slot " + std::to_string(slot) + " (of " +
                                       std::string(commands[i].key) + ")");
                MutexLock lock(mutex_);
                stale_ = true;
                continue;
            }
            groups[{master->host, master->port}].push_back(i);
        }
        pending.clear();

        // Write every node's commands out, then read every node's replies.
        std::map<Endpoint, PooledConnection> flights;
        auto fail_group = [&](const std::vector<std::size_t>& group, const Error& e) {
            for (auto i : group) out[i].error = e;
        };
        const std::string wait_replicas = std::to_string(address_.wait_replicas);
        const std::string wait_timeout = std::to_string(address_.wait_timeout.count());
        std::map<Endpoint, bool> waits;  // the group ends with WAIT
        std::map<Endpoint, std::vector<std::vector<std::string_view>>> batches;
        std::vector<Endpoint> again;  // groups whose idle connection died: once more on a new one
        for (auto& [at, group] : groups) {
            auto& batch = batches[at];
            bool durable = false;
            for (auto i : group) {
                if (routes[i].ask) batch.push_back({"ASKING"});
                batch.push_back(routes[i].fallback ? commands[i].fallback : commands[i].args);
                durable = durable || commands[i].durable;
            }
            waits[at] = durable && address_.wait_replicas > 0;
            if (waits[at]) batch.push_back({"WAIT", wait_replicas, wait_timeout});
            std::optional<PooledConnection> flight;
            try {
                flight.emplace(acquire(at));
                (*flight)->send(batch);
                flights.emplace(at, std::move(*flight));
            } catch (const Error& e) {
                if (flight && flight->pooled()) {
                    drop_idle(at);
                    again.push_back(at);
                    continue;
                }
                if (flight) failed(at, e.what());
                fail_group(group, e);
            }
        }
        bool moved = false;
        // The replies of one node's group: each command's outcome, or its next route.
        auto settle = [&](const Endpoint& at, std::vector<Reply>& replies) {
            const auto& group = groups[at];
            // Fewer replicas than asked have the group's writes: a failover could lose them.
            std::optional<Error> unreplicated;
            if (waits[at]) {
                const Reply& wait = replies.back();
                if (kind_of(wait) != ReplyKind::Integer || wait->integer < address_.wait_replicas)
                    unreplicated = refused("Redis Cluster node " + at.text() + ": " +
                                           wait_shortfall(wait, address_.seeds.front()));
            }
            std::size_t r = 0;
            for (auto i : group) {
                if (routes[i].ask) ++r;  // ASKING's OK
                Reply& reply = replies[r++];
                Route next;
                if (auto redirect = is_error(reply) ? parse_redirect(std::string_view(reply->str, reply->len))
                                                    : std::nullopt) {
                    next.to = Endpoint{redirect->host.empty() ? at.host : redirect->host, redirect->port};
                    next.ask = redirect->ask;
                    log_debug("publish", std::string(redirect->ask ? "ASK" : "MOVED") + ": slot " +
                                             std::to_string(redirect->slot) + " of " + std::string(commands[i].key) +
                                             " from " + at.text() + " to " + next.to->text());
                    next.fallback = routes[i].fallback;
                    moved = moved || !redirect->ask;
                } else if (is_error(reply, "NOSCRIPT") && !commands[i].fallback.empty() && !routes[i].fallback) {
                    next = routes[i];
                    next.fallback = true;
                } else {
                    if (unreplicated && commands[i].durable && !is_error(reply))
                        out[i].error = unreplicated;
                    out[i].reply = std::move(reply);
                    continue;
                }
                routes[i] = next;
                pending.push_back(i);
            }
        };
        for (auto& [at, flight] : flights) {
            std::vector<Reply> replies;
            try {
                replies = flight->receive(batches[at].size());
            } catch (const Error& e) {
                flight.close();
                if (flight.pooled()) {
                    drop_idle(at);
                    again.push_back(at);
                } else {
                    failed(at, e.what());
                    fail_group(groups[at], e);
                }
                continue;
            }
            flight.answered();
            settle(at, replies);
        }
        // Resending is safe: a doc's script never lets a version replace a newer one.
        for (const auto& at : again) {
            std::vector<Reply> replies;
            try {
                replies = exchange(at, batches[at]);
            } catch (const Error& e) {
                fail_group(groups[at], e);
                continue;
            }
            settle(at, replies);
        }
        if (moved) {
            {
                MutexLock lock(mutex_);
                stale_ = true;
            }
            try {
                refresh(false);
            } catch (const Error&) {
                // the redirects name the nodes to go to
            }
        }
    }
    return out;
}

Outcome ClusterClient::run(const KeyedCommand& command) { return std::move(run(std::vector<KeyedCommand>{command}).front()); }

Reply ClusterClient::on_node(const ClusterNode& node, const std::vector<std::string_view>& args) {
    return command_on({node.host, node.port}, args);
}

Reply ClusterClient::command_on(const Endpoint& at, const std::vector<std::string_view>& args) {
    PooledConnection conn = acquire(at);
    Reply reply;
    try {
        reply = conn->command(args);
    } catch (const Error& e) {
        if (!conn.pooled()) {
            failed(at, e.what());
            throw;
        }
        // An idle connection may have died with a restart of the node: once more on a new one.
        conn.close();
        drop_idle(at);
        return std::move(exchange(at, {args}).front());
    }
    conn.answered();
    return reply;
}

std::unique_ptr<RedisConnection> ClusterClient::connect_any() {
    std::vector<Endpoint> candidates;
    if (auto m = map())
        for (const auto& n : m->nodes)
            if (n.healthy) candidates.push_back({n.host, n.port});
    for (const auto& seed : address_.seeds) candidates.push_back({seed.host, seed.port});
    std::string errors;
    for (const auto& at : candidates) {
        RedisAddress node = address_.seeds.front();
        node.host = at.host;
        node.port = at.port;
        try {
            return RedisConnection::connect(node, options_.connect_timeout, options_.command_timeout);
        } catch (const Error& e) {
            errors += (errors.empty() ? "" : "; ") + std::string(e.what());
        }
    }
    throw unreachable("no Redis Cluster node accepts a connection: " + errors);
}

}  // namespace docsync::redis
