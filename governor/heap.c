/*  heap: mallopt and malloc_trim, glibc only; the pre-fault thread. */
#include "heap.h"
#include "log.h"
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#define S_PREFAULT_CHUNK (4u << 20)     //  as the copies' chunks, below the mmap threshold

static uint64_t s_keep;                 //  heap bytes kept free (M_TRIM_THRESHOLD)
static uint64_t s_prefault_bytes;
static pthread_t s_prefault_thread;
static bool s_prefault_running;
static atomic_bool s_prefault_stop;

void
heap_configure (uint64_t memory_limit)
{
#ifdef __GLIBC__
    //  One arena: memory freed by the compute thread is found again by
    //  ZeroMQ's I/O thread, and malloc_trim can return all of it (it
    //  cannot shrink the top of other arenas).
    mallopt (M_ARENA_MAX, 1);
    //  Chunks (4 MiB by default, SQ_CHUNK_MAX at most) from the heap, not
    //  from mappings that free unmaps.
    mallopt (M_MMAP_THRESHOLD, 32 << 20);
    uint64_t keep = memory_limit? memory_limit / 4: INT_MAX;
    s_keep = keep > INT_MAX? INT_MAX: keep;
    mallopt (M_TRIM_THRESHOLD, (int) s_keep);
#else
    (void) memory_limit;
#endif
}

uint64_t
heap_kept (void)
{
#ifdef __GLIBC__
    return s_keep;
#else
    return 0;
#endif
}

void
heap_release (void)
{
#ifdef __GLIBC__
    malloc_trim (0);
#endif
}

static void *
s_prefault (void *arg)
{
    (void) arg;
    //  The pool is for later: the governor's own threads come first.
    setpriority (PRIO_PROCESS, (id_t) syscall (SYS_gettid), 19);
    size_t n = (size_t) ((s_prefault_bytes + S_PREFAULT_CHUNK - 1) / S_PREFAULT_CHUNK), got = 0;
    void **chunks = (void **) calloc (n? n: 1, sizeof (void *));
    long page = sysconf (_SC_PAGESIZE);
    if (page <= 0)
        page = 4096;
    for (; chunks && got < n && !atomic_load (&s_prefault_stop); got++) {
        volatile uint8_t *p = (volatile uint8_t *) malloc (S_PREFAULT_CHUNK);
        if (!p)
            break;
        for (size_t o = 0; o < S_PREFAULT_CHUNK; o += (size_t) page)
            p [o] = 0;
        chunks [got] = (void *) p;
    }
    //  Last first: they coalesce into the heap's top, kept up to s_keep.
    for (size_t i = got; i-- > 0; )
        free (chunks [i]);
    free (chunks);
    sq_info ("pre-faulted %zu MiB of heap for the first copies", got * (S_PREFAULT_CHUNK >> 20));
    return NULL;
}

int
heap_prefault_start (uint64_t bytes)
{
#ifdef __GLIBC__
    if (bytes > s_keep)
        bytes = s_keep;
    if (bytes == 0 || s_prefault_running)
        return 0;
    s_prefault_bytes = bytes;
    atomic_store (&s_prefault_stop, false);
    if (pthread_create (&s_prefault_thread, NULL, s_prefault, NULL))
        return -1;
    s_prefault_running = true;
#else
    (void) bytes;
#endif
    return 0;
}

void
heap_prefault_stop (void)
{
    if (!s_prefault_running)
        return;
    atomic_store (&s_prefault_stop, true);
    pthread_join (s_prefault_thread, NULL);
    s_prefault_running = false;
}
