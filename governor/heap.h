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
    thread exists (ZeroMQ's included); the pre-fault thread is heap.c's own,
    started and stopped by main. */
#ifndef GOV_HEAP_H
#define GOV_HEAP_H

#include <stdint.h>

//  Idle time after the last freed object before heap_release is due.
#define HEAP_RELEASE_IDLE_MS 10000

//  memory_limit: the governor's --memory (0: none).
void heap_configure (uint64_t memory_limit);
//  Returns the heap's free memory to the system.
void heap_release (void);
//  The free heap kept for copies (set by heap_configure), bytes; 0
//  without glibc.
uint64_t heap_kept (void);


//  Pre-faults `bytes` of heap (at most what heap_configure keeps: a quarter
//  of the memory limit, 2 GiB) from a low-priority thread: malloc'd in
//  chunks, every page touched, then freed into the heap, so that the first
//  copies a new governor receives land in pages that exist already (on a
//  virtual machine a page never touched can cost 2 s per GiB, five times
//  the copy itself). The bytes stay until heap_release gives them back
//  (after objects were freed and HEAP_RELEASE_IDLE_MS passed). 0, or -1 if
//  the thread could not start. Called once, after heap_configure.
int heap_prefault_start (uint64_t bytes);
//  Stops a pre-fault still under way and waits for its thread.
void heap_prefault_stop (void);

#endif
