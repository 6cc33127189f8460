/*  heap: the governor's malloc policy for object bytes.

    The chunks of copies arriving are ZeroMQ frames, malloc'd by ZeroMQ's
    I/O thread, and stay in the store as they are (transfer.h). A fresh
    page costs the kernel a fault, zeroing and accounting: about 0.4 s of
    CPU per GiB on the project's machines, as much as the copy itself,
    while a copy into pages malloc already holds costs none of it. So the
    governor keeps the memory of freed objects in malloc's heap for the
    next ones (up to a quarter of its memory limit, at most 2 GiB), and
    gives it back once nothing has been freed for a while (heap_release,
    called by the compute thread when it is idle). glibc only; elsewhere
    both calls do nothing.

    Ownership: process-wide; heap_configure runs in main before any other
    thread exists (ZeroMQ's included). */
#ifndef GOV_HEAP_H
#define GOV_HEAP_H

#include <stdint.h>

//  Idle time after the last freed object before heap_release is due.
#define HEAP_RELEASE_IDLE_MS 10000

//  memory_limit: the governor's --memory (0: none).
void heap_configure (uint64_t memory_limit);
//  Returns the heap's free memory to the system.
void heap_release (void);

#endif
