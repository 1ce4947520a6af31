#pragma once
// Locking the compiler checks: Clang's thread-safety analysis (-Wthread-safety) over a mutex that
// says it is a capability. A member written `GUARDED_BY(mutex_)` may only be touched with mutex_
// held, a function `REQUIRES(mutex_)` only called with it held; a build with
// -DDOCSYNC_THREAD_SAFETY=ON (clang) fails on a path that breaks either. GCC ignores the attributes.
//
//   Mutex mutex_;
//   int count_ GUARDED_BY(mutex_) = 0;
//   void bump() { MutexLock lock(mutex_); ++count_; }
//
// A function that drops the lock around I/O calls mutex_.unlock() and mutex_.lock() itself, with a
// line saying why unlocking is safe there; the analysis checks that it holds the lock again after.
// A condition variable waits through the mutex (mutex_.wait_for(cv, …)), which holds it on return.

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define DOCSYNC_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define DOCSYNC_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) DOCSYNC_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY DOCSYNC_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) DOCSYNC_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) DOCSYNC_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) DOCSYNC_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define REQUIRES(...) DOCSYNC_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) DOCSYNC_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) DOCSYNC_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) DOCSYNC_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) DOCSYNC_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) DOCSYNC_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) DOCSYNC_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS DOCSYNC_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace docsync {

// std::mutex as a capability, and the waits of a std::condition_variable on it.
class CAPABILITY("mutex") Mutex {
public:
    Mutex() = default;
    Mutex(const Mutex&) = delete;
    Mutex& operator=(const Mutex&) = delete;

    void lock() ACQUIRE() { mutex_.lock(); }
    void unlock() RELEASE() { mutex_.unlock(); }
    bool try_lock() TRY_ACQUIRE(true) { return mutex_.try_lock(); }
    // Tells the analysis the mutex is held where it cannot see it: in a callback that another
    // component calls while its caller holds the lock (DocSet::for_each_live's, say).
    void assert_held() const ASSERT_CAPABILITY(this) {}

    // Waits on `cv`, which releases the mutex meanwhile; held again on return.
    void wait(std::condition_variable& cv) REQUIRES(this) {
        std::unique_lock<std::mutex> held(mutex_, std::adopt_lock);
        cv.wait(held);
        held.release();
    }
    template <class Predicate>
    void wait(std::condition_variable& cv, Predicate done) REQUIRES(this) {
        std::unique_lock<std::mutex> held(mutex_, std::adopt_lock);
        cv.wait(held, done);
        held.release();
    }
    template <class Rep, class Period>
    void wait_for(std::condition_variable& cv, std::chrono::duration<Rep, Period> timeout) REQUIRES(this) {
        std::unique_lock<std::mutex> held(mutex_, std::adopt_lock);
        cv.wait_for(held, timeout);
        held.release();
    }
    template <class Rep, class Period, class Predicate>
    bool wait_for(std::condition_variable& cv, std::chrono::duration<Rep, Period> timeout, Predicate done)
        REQUIRES(this) {
        std::unique_lock<std::mutex> held(mutex_, std::adopt_lock);
        bool result = cv.wait_for(held, timeout, done);
        held.release();
        return result;
    }

private:
    std::mutex mutex_;
};

// Holds a Mutex for its scope (std::lock_guard's job); unlock() and lock() drop and take it again
// within the scope.
class SCOPED_CAPABILITY MutexLock {
public:
    explicit MutexLock(Mutex& mutex) ACQUIRE(mutex) : mutex_(mutex) { mutex_.lock(); }
    ~MutexLock() RELEASE() {
        if (held_) mutex_.unlock();
    }
    MutexLock(const MutexLock&) = delete;
    MutexLock& operator=(const MutexLock&) = delete;

    void unlock() RELEASE() {
        mutex_.unlock();
        held_ = false;
    }
    void lock() ACQUIRE() {
        mutex_.lock();
        held_ = true;
    }

private:
    Mutex& mutex_;
    bool held_ = true;
};

}  // namespace docsync
