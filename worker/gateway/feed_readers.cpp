// The gateway's reads of Redis: a lane (queue and reader threads) per node, and the sweeper that
// answers each command by its deadline.
#include "gateway/feed_readers.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "common/log.hpp"
#include "redis/cluster_map.hpp"

namespace docsync::gateway {

using publish::RedisConnection;
using publish::Reply;
using publish::reply_text;

namespace {

constexpr std::chrono::milliseconds kSweepInterval{50};  // how late past its deadline a command may be answered
// How long a command waits for the cluster's map when no seed has answered yet, so that a request
// made while no seed answers is told so at once rather than at its command timeout.
constexpr std::chrono::milliseconds kMapWait{1000};
// Between two rounds of asking every seed for the map, when none answered.
constexpr std::chrono::milliseconds kMapRetry{1000};
const char* const kStopping = "the gateway is stopping";

// The outcome of a reply: its text for a string or status, nothing for nil, the error of an error reply.
FeedRead outcome_of(const Reply& reply, const std::string& who) {
    FeedRead result;
    if (reply->type == REDIS_REPLY_ERROR) {
        result.error = who + " answered " + reply_text(reply.get());
        return result;
    }
    result.ok = true;
    if (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS) result.value = reply_text(reply.get());
    return result;
}

}  // namespace

void FeedReaders::Answer::give(FeedRead result) {
    std::function<void(FeedRead)> once;
    {
        std::lock_guard lock(mutex);
        once.swap(done);
    }
    if (once) once(std::move(result));
}

bool FeedReaders::Answer::given() {
    std::lock_guard lock(mutex);
    return !done;
}

FeedReaders::FeedReaders(publish::RedisAddress address, std::optional<publish::RedisClusterAddress> cluster,
                         std::string display, ReaderOptions options)
    : address_(std::move(address)), cluster_address_(std::move(cluster)), display_(std::move(display)), options_(options) {}

FeedReaders::~FeedReaders() { stop(); }

void FeedReaders::start() {
    std::lock_guard lock(mutex_);
    if (started_ || stopping_) return;
    started_ = true;
    lane("");
    sweeper_ = std::thread([this] { sweep_loop(); });
    if (cluster_address_) cluster_maker_ = std::thread([this] { make_cluster_loop(); });
}

void FeedReaders::stop() {
    std::vector<std::thread> threads;
    std::vector<Job> left;
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        for (auto& [endpoint, lane] : lanes_) {
            lane->cv.notify_all();
            for (auto& t : lane->threads) threads.push_back(std::move(t));
            lane->threads.clear();
        }
    }
    sweep_cv_.notify_all();
    {
        std::lock_guard lock(cluster_mutex_);
        cluster_stopping_ = true;
    }
    cluster_cv_.notify_all();
    // A reader out on the wire comes back by its command timeout.
    for (auto& t : threads)
        if (t.joinable()) t.join();
    if (sweeper_.joinable()) sweeper_.join();
    if (cluster_maker_.joinable()) cluster_maker_.join();  // its attempts end by the command timeout
    {
        std::lock_guard lock(mutex_);
        for (auto& [endpoint, lane] : lanes_) {
            for (auto& job : lane->jobs) left.push_back(std::move(job));
            lane->jobs.clear();
        }
    }
    // Commands never run are answered, so that no caller waits forever.
    for (auto& job : left) job.answer->give(FeedRead{false, std::nullopt, kStopping});
}

FeedReaders::Lane& FeedReaders::lane(const std::string& endpoint) {
    auto& slot = lanes_[endpoint];
    if (!slot) {
        slot = std::make_unique<Lane>();
        slot->endpoint = endpoint;
        Lane* made = slot.get();
        for (unsigned i = 0; i < std::max(1u, options_.readers); ++i)
            made->threads.emplace_back([this, made] { reader_loop(*made); });
    }
    return *slot;
}

std::shared_ptr<publish::ClusterClient> FeedReaders::cluster_now() {
    std::lock_guard lock(cluster_mutex_);
    return cluster_;
}

std::shared_ptr<publish::ClusterClient> FeedReaders::cluster_by(clock::time_point until) {
    std::unique_lock lock(cluster_mutex_);
    cluster_cv_.wait_until(lock, until, [&] { return cluster_ || cluster_stopping_; });
    return cluster_;
}

std::string FeedReaders::no_map_yet() {
    std::lock_guard lock(cluster_mutex_);
    return "no seed of " + display_ + " has answered CLUSTER SHARDS yet" +
           (cluster_error_.empty() ? std::string(" (still asking)") : ": " + cluster_error_);
}

void FeedReaders::make_cluster_loop() {
    const auto& seeds = cluster_address_->seeds;
    publish::ClusterOptions o;
    o.connect_timeout = options_.connect_timeout;
    o.command_timeout = options_.command_timeout;
    for (;;) {
        // One attempt per seed, each starting with its own seed (the others follow, for the
        // client's later refreshes); the first client made is kept, the later ones dropped.
        struct Round {
            std::mutex mutex;
            std::condition_variable cv;
            std::size_t left = 0;
            std::shared_ptr<publish::ClusterClient> made;
            std::string error;
        };
        auto round = std::make_shared<Round>();
        round->left = seeds.size();
        std::vector<std::thread> attempts;
        for (std::size_t i = 0; i < seeds.size(); ++i) {
            publish::RedisClusterAddress address = *cluster_address_;
            std::rotate(address.seeds.begin(), address.seeds.begin() + static_cast<std::ptrdiff_t>(i), address.seeds.end());
            attempts.emplace_back([round, address = std::move(address), o] {
                std::shared_ptr<publish::ClusterClient> client;
                std::string error;
                try {
                    client = std::make_shared<publish::ClusterClient>(address, o);
                } catch (const std::exception& e) {
                    error = e.what();
                }
                std::lock_guard lock(round->mutex);
                if (client && !round->made) round->made = std::move(client);
                if (!error.empty()) round->error = error;
                --round->left;
                round->cv.notify_all();
            });
        }
        std::shared_ptr<publish::ClusterClient> made;
        std::string error;
        {
            std::unique_lock lock(round->mutex);
            round->cv.wait(lock, [&] { return round->made || round->left == 0; });
            made = round->made;
            error = round->error;
        }
        if (made) {
            {
                std::lock_guard lock(cluster_mutex_);
                cluster_ = std::move(made);
            }
            cluster_cv_.notify_all();
            log_info("gateway", "learned the slot map of " + display_);
        } else {
            std::lock_guard lock(cluster_mutex_);
            cluster_error_ = error;
        }
        // The attempts still out (on a seed that does not answer) end by the command timeout.
        for (auto& t : attempts) t.join();
        if (made) return;
        log_warning("gateway", no_map_yet() + "; asking again");
        std::unique_lock lock(cluster_mutex_);
        if (cluster_cv_.wait_for(lock, kMapRetry, [&] { return cluster_stopping_; })) return;
    }
}

std::string FeedReaders::route(const std::string& key) {
    if (!cluster_address_) return {};
    std::shared_ptr<const publish::SlotMap> map;
    if (auto client = cluster_now()) map = client->map();
    if (!map) return {};  // the map is not known yet: the default lane waits for it
    const publish::ClusterNode* master = map->master_of(publish::key_slot(key));
    return master ? master->endpoint() : std::string();
}

void FeedReaders::run(std::vector<std::string> args, std::string key, std::function<void(FeedRead)> done) {
    Job job;
    job.args = std::move(args);
    job.key = std::move(key);
    job.deadline = clock::now() + options_.command_timeout;
    job.timeout = options_.command_timeout;
    job.answer = std::make_shared<Answer>();
    job.answer->done = std::move(done);
    submit(std::move(job), false);
}

void FeedReaders::probe(std::chrono::milliseconds timeout, std::function<void(FeedRead)> done) {
    // What each PING found, gathered: the answer goes out when the last one is in (the sweeper
    // answers those that pass the timeout).
    struct Gather {
        std::mutex mutex;
        std::size_t left = 0;
        std::vector<std::string> errors;
        std::function<void(FeedRead)> done;
    };
    auto gather = std::make_shared<Gather>();
    gather->done = std::move(done);
    std::vector<Job> pings;
    auto deadline = clock::now() + timeout;
    auto make = [&](std::optional<publish::ClusterNode> node) {
        Job job;
        job.args = {"PING"};
        job.key = "docsync:health";  // any node answers PING; the key only picks one
        job.node = std::move(node);
        job.deadline = deadline;
        job.timeout = timeout;
        job.answer = std::make_shared<Answer>();
        job.answer->done = [gather](FeedRead r) {
            std::function<void(FeedRead)> finish;
            FeedRead all;
            {
                std::lock_guard lock(gather->mutex);
                if (!r.ok) gather->errors.push_back(r.error);
                if (--gather->left > 0) return;
                finish.swap(gather->done);
                all.ok = gather->errors.empty();
                for (const auto& e : gather->errors) all.error += (all.error.empty() ? "" : "; ") + e;
            }
            if (finish) finish(std::move(all));
        };
        pings.push_back(std::move(job));
    };
    std::shared_ptr<const publish::SlotMap> map;
    if (cluster_address_)
        if (auto client = cluster_now()) map = client->map();
    if (map && !map->masters().empty()) {
        for (const publish::ClusterNode* m : map->masters()) make(*m);
    } else {
        make(std::nullopt);  // the single Redis, or a cluster whose map is not known yet
    }
    gather->left = pings.size();
    for (auto& job : pings) submit(std::move(job), true);
}

void FeedReaders::submit(Job job, bool urgent) {
    std::string endpoint = job.node ? job.node->endpoint() : route(job.key);
    job.where = endpoint.empty() ? display_ : "Redis Cluster node " + endpoint;
    std::unique_lock lock(mutex_);
    if (stopping_) {
        lock.unlock();
        job.answer->give(FeedRead{false, std::nullopt, kStopping});
        return;
    }
    Lane& l = lane(endpoint);
    if (urgent) l.jobs.push_front(std::move(job));
    else l.jobs.push_back(std::move(job));
    l.cv.notify_one();
}

void FeedReaders::reader_loop(Lane& lane) {
    std::unique_ptr<RedisConnection> conn;  // this reader's (a single Redis); a cluster's are pooled
    for (;;) {
        Job job;
        {
            std::unique_lock lock(mutex_);
            lane.cv.wait(lock, [&] { return stopping_ || !lane.jobs.empty(); });
            if (stopping_) return;
            job = std::move(lane.jobs.front());
            lane.jobs.pop_front();
            if (job.answer->given()) continue;  // the sweeper answered it while it waited
            lane.running.push_back(&job);
        }
        FeedRead result = execute(conn, job);
        {
            std::lock_guard lock(mutex_);
            std::erase(lane.running, &job);
        }
        job.answer->give(std::move(result));
    }
}

FeedRead FeedReaders::execute(std::unique_ptr<RedisConnection>& conn, const Job& job) {
    FeedRead result;
    std::vector<std::string_view> args(job.args.begin(), job.args.end());
    if (cluster_address_) {
        // Until a seed answers, a command waits for the map a moment only (and never past its deadline).
        auto until = std::min(clock::now() + kMapWait, job.deadline - 2 * kSweepInterval);
        std::shared_ptr<publish::ClusterClient> made = cluster_by(until);
        if (!made) {
            result.error = no_map_yet();
            return result;
        }
        publish::ClusterClient& client = *made;
        try {
            if (job.node) {
                client.refresh(false);  // a map marked stale (a node failed) is asked for again first
                return outcome_of(client.on_node(*job.node, args), job.where);
            }
            auto outcome = client.run(publish::KeyedCommand{job.key, args, {}, false});
            if (outcome.error) result.error = outcome.error->what();
            else result = outcome_of(outcome.reply, display_);
        } catch (const std::exception& e) {
            result.error = job.node ? job.where + ": " + e.what() : std::string(e.what());
        }
        return result;
    }
    // One attempt on a pooled connection that may have died idle, then one on a fresh one.
    for (int attempt = 0; attempt < 2; ++attempt) {
        bool fresh = !conn;
        try {
            if (!conn) conn = RedisConnection::connect(address_, options_.connect_timeout, options_.command_timeout);
            return outcome_of(conn->command(args), display_);
        } catch (const std::exception& e) {
            conn.reset();
            result.error = e.what();
            if (fresh) break;
        }
    }
    return result;
}

std::string FeedReaders::too_late(const Job& job) {
    return job.where + " did not answer " + job.args.front() + " within " + std::to_string(job.timeout.count()) + " ms";
}

void FeedReaders::sweep_loop() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
        sweep_cv_.wait_for(lock, kSweepInterval, [&] { return stopping_; });
        if (stopping_) return;
        auto now = clock::now();
        std::vector<std::pair<std::shared_ptr<Answer>, std::string>> late;  // an answer and its error
        for (auto& [endpoint, lane] : lanes_) {
            for (auto it = lane->jobs.begin(); it != lane->jobs.end();) {
                if (it->deadline > now) {
                    ++it;
                    continue;
                }
                late.emplace_back(it->answer, too_late(*it));
                it = lane->jobs.erase(it);
            }
            for (Job* job : lane->running)
                if (job->deadline <= now && !job->answer->given()) late.emplace_back(job->answer, too_late(*job));
        }
        if (late.empty()) continue;
        // Answered unlocked: an answer may post to another thread, never back into this object.
        lock.unlock();
        for (auto& [answer, error] : late) answer->give(FeedRead{false, std::nullopt, std::move(error)});
        lock.lock();
    }
}

}  // namespace docsync::gateway
