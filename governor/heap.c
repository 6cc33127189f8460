/*  heap: mallopt and malloc_trim, glibc only. */
#include "heap.h"
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

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
    mallopt (M_TRIM_THRESHOLD, keep > INT_MAX? INT_MAX: (int) keep);
#else
    (void) memory_limit;
#endif
}

void
heap_release (void)
{
#ifdef __GLIBC__
    malloc_trim (0);
#endif
}
