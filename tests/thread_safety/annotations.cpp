// The lock annotations bite: compiled by clang with -Wthread-safety -Werror=thread-safety (ctest
// "unit/thread-safety: …"), this file compiles as is, and fails with -DDOCSYNC_VIOLATION, which reads
// a GUARDED_BY member without its mutex, as a change to the engine, the coordinator or the Redis
// client that forgot the lock would. CI compiles those rooms with the same flags
// (-DDOCSYNC_THREAD_SAFETY=ON in packaging/run-tests.sh).
#include "common/thread_annotations.hpp"

namespace {

class Counter {
public:
    void bump() {
        docsync::MutexLock lock(mutex_);
        ++value_;
        // Unlocking is safe: nothing between unlock() and lock() touches value_.
        lock.unlock();
        lock.lock();
        ++value_;
    }
    int read() const {
#ifdef DOCSYNC_VIOLATION
        return value_;
#else
        docsync::MutexLock lock(mutex_);
        return value_;
#endif
    }
    void bump_locked() REQUIRES(mutex_) { ++value_; }
    void bump_twice() {
        docsync::MutexLock lock(mutex_);
        bump_locked();
        bump_locked();
    }

private:
    mutable docsync::Mutex mutex_;
    int value_ GUARDED_BY(mutex_) = 0;
};

}  // namespace

int main() {
    Counter counter;
    counter.bump();
    counter.bump_twice();
    return counter.read() == 4 ? 0 : 1;
}
