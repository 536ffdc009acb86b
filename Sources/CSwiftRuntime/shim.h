// The Swift concurrency runtime's global-executor hooks (swift/Runtime/Concurrency.h and
// swift/Runtime/ConcurrencyHooks, exported by libswift_Concurrency since Swift 5.5 and used by
// SwiftNIO to take the global executor over). Nothing to link: the symbols live in the Swift runtime
// every Swift program links, statically or not.
#ifndef CURFEW_CSWIFTRUNTIME_SHIM_H
#define CURFEW_CSWIFTRUNTIME_SHIM_H

#include <stdint.h>

// Hook variables: a function pointer of the Swift calling convention, or null for the default
// (libdispatch's global queues). Set once, before the first task is enqueued.
//   enqueueGlobal(job, original)
//   enqueueGlobalWithDelay(nanoseconds, job, original)
//   enqueueGlobalWithDeadline(sec, nsec, toleranceSec, toleranceNsec, clock, job, original)
extern void *_Nullable swift_task_enqueueGlobal_hook;
extern void *_Nullable swift_task_enqueueGlobalWithDelay_hook;
extern void *_Nullable swift_task_enqueueGlobalWithDeadline_hook;

// Sets the three hooks (from the thread that starts the program, before any task exists), and
// whether the first is set.
static inline void curfew_set_global_executor_hooks(void *_Nullable enqueue, void *_Nullable withDelay, void *_Nullable withDeadline) {
    swift_task_enqueueGlobal_hook = enqueue;
    swift_task_enqueueGlobalWithDelay_hook = withDelay;
    swift_task_enqueueGlobalWithDeadline_hook = withDeadline;
}

static inline int curfew_global_executor_hooked(void) { return swift_task_enqueueGlobal_hook != 0; }

// swift_job_run(Job *, SerialExecutorRef): runs a job on this thread as the given executor. A
// SerialExecutorRef is two words (identity, implementation); both zero is the generic executor, which
// is what the default global executor runs its jobs as (a task that then calls a nonisolated async
// function does not hop again).
struct curfew_serial_executor_ref {
    void *_Nullable identity;
    uintptr_t implementation;
};
extern __attribute__((swiftcall)) void swift_job_run(void *_Nonnull job, struct curfew_serial_executor_ref executor);

static inline void curfew_run_job_on_generic_executor(void *_Nonnull job) {
    struct curfew_serial_executor_ref generic = {0, 0};
    swift_job_run(job, generic);
}

// swift_get_time(seconds, nanoseconds, clock): the clocks a deadline of the hook above is on
// (1 continuous, 2 suspending).
extern __attribute__((swiftcall)) void swift_get_time(long long *_Nonnull seconds, long long *_Nonnull nanoseconds, int clock);

static inline long long curfew_swift_clock_nanoseconds(int clock) {
    long long seconds = 0, nanoseconds = 0;
    swift_get_time(&seconds, &nanoseconds, clock);
    return seconds * 1000000000LL + nanoseconds;
}

#endif
