/*  store: the governor's object store, key -> bytes + content type, with a
    memory limit.

    Objects are refcounted blobs, so handing one to a task, a peer or a
    client costs a reference, never a copy; removing an object that is still
    being sent only drops the store's reference.

    Memory limit (store_configure): bytes in memory (heap or received
    frames) are kept under it by *spilling*. When they pass
    STORE_SPILL_HIGH percent of the limit, objects that nobody but the store
    references (no running task, copy or fetch reads them), least recently
    used first, are written to a file in the spill directory, mapped back
    read-only (mmap) and the file is unlinked at once: the mapping keeps the
    bytes readable for as long as the object lives, the kernel may drop its
    pages at any time, and nothing is left on disk when the object is freed
    or the governor exits (or crashes). Spilling stops at STORE_SPILL_LOW
    percent. Mapped blobs (spilled objects, execute outputs, load) count as
    spilled bytes, not as memory. Nothing is ever lost by spilling: a spill
    that cannot be written leaves the object in memory. Objects marked
    shared (store_set_shared) are spilled only when the others are not
    enough.

    Ownership: the store owns one reference per object and a copy of each
    content type. store_put takes over the caller's reference. Pointers
    returned by store_get are borrowed: valid until the object is removed,
    replaced or spilled (take a reference to keep the blob longer; a
    referenced blob is never spilled). One thread only. */
#ifndef GOV_STORE_H
#define GOV_STORE_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include "blob.h"

#define STORE_SPILL_HIGH 70     //  percent of the limit that starts spilling
#define STORE_SPILL_LOW 50      //  percent it spills down to

typedef struct _store_t store_t;

store_t *store_new (void);
void store_destroy (store_t **self_p);
//  A governor's memory is not all its store's: its executors, the tasks
//  they run and the free heap it keeps for copies (heap.h) live beside it,
//  in the same container or Slurm step, and the kernel kills the box when
//  their sum passes its limit, before the store ever spills. So the store
//  gets what is left of `memory` (a governor's --memory, or its cgroup's
//  limit) after `heap_keep`, STORE_EXEC_RESERVE per CPU slot (one executor
//  and the task it runs each) and STORE_BASE_RESERVE (the governor itself,
//  ZeroMQ's buffers, a reply being read), and never less than a quarter
//  of memory. 0 (no limit) stays 0.
#define STORE_EXEC_RESERVE (128ull << 20)
#define STORE_BASE_RESERVE (64ull << 20)
uint64_t store_budget (uint64_t memory, uint32_t cpus, uint64_t heap_keep);

//  The box the governor runs in (its container, its Slurm step), whose
//  limit the kernel enforces on the store and everything beside it at
//  once. `beside` says how many bytes are in use in the box now besides
//  the store's memory (given to it): executors and their tasks, the
//  governor, its free heap. On puts (at most every STORE_BOX_CHECK_MS, or
//  after box_limit/64 more bytes) and on store_check_box, while the
//  store's memory plus that passes STORE_BOX_HIGH percent of box_limit,
//  the store spills down to STORE_BOX_LOW percent, then calls `relieve`
//  (if not NULL): memory freed into malloc's heap leaves the box only when
//  the heap gives it back. So it spills before the box's limit is
//  reached, whatever runs beside it. box_limit 0 or beside NULL: no box
//  (the default).
#define STORE_BOX_HIGH 85
#define STORE_BOX_LOW 75
#define STORE_BOX_CHECK_MS 100
typedef uint64_t (store_beside_fn) (void *arg, uint64_t store_memory);
typedef void (store_relieve_fn) (void *arg);
void store_set_box (store_t *self, uint64_t box_limit, store_beside_fn *beside,
                    store_relieve_fn *relieve, void *arg);
//  Looks at the box now (the compute thread calls it while tasks run: they
//  grow without the store knowing). True if it spilled.
bool store_check_box (store_t *self);

//  Sets the memory limit (0: none, never spill) and the directory spill
//  files go to (copied; must exist). 0, or -1 out of memory.
int store_configure (store_t *self, uint64_t memory_limit, const char *spill_dir);
//  Stores or replaces an object. Takes over `blob` (even on failure).
//  content_type may be NULL (""); it is copied. 0, or -1 out of memory.
//  May spill other objects (or this one) to stay under the limit.
int store_put (store_t *self, uint64_t key, sq_blob_t *blob,
               const char *content_type, size_t content_type_len);
//  The object's blob (borrowed) and content type, NULL if absent. Marks it
//  recently used.
sq_blob_t *store_get (store_t *self, uint64_t key, const char **content_type);
//  Like store_get, for readers that need the bytes in one buffer: a joined
//  blob (an object that arrived in chunks) is copied flat once and
//  replaces the stored one. NULL if absent or out of memory.
sq_blob_t *store_get_flat (store_t *self, uint64_t key, const char **content_type);
//  For a reader in another process (a Python executor maps it rather than
//  receiving a copy): the object as a shared segment (sq_blob_shm_fd), a
//  new reference. One that is not is copied into a sealed segment once,
//  which replaces the stored blob, except for a spilled object, which
//  stays spilled (the segment is then the caller's alone). NULL if absent,
//  empty or out of memory.
sq_blob_t *store_get_shared (store_t *self, uint64_t key, const char **content_type);
bool store_has (store_t *self, uint64_t key);
//  Which put made the object now under key (never 0, never reused: a
//  replaced object has another), 0 if absent. Spilling, flattening and
//  sharing keep it: they change how the bytes are held, not what they are.
uint64_t store_generation (store_t *self, uint64_t key);
//  `forget` (NULL: none) is called with an object's key and generation
//  when it leaves the store (removed, replaced, or the store destroyed),
//  before its blob is released; it must not touch the store. Readers that
//  keep something derived from an object elsewhere (the executors' input
//  caches, pyexec.c) drop it then.
typedef void (store_forget_fn) (void *arg, uint64_t key, uint64_t gen);
void store_set_forget (store_t *self, store_forget_fn *forget, void *arg);
//  The producer attempt the stored copy comes from (0 unless set), which
//  a reattaching governor reports with it.
void store_set_version (store_t *self, uint64_t key, uint32_t version);
//  Marks the object under key as shared with another governor of this
//  host (its segment was handed over by LCOPY, either way), if its blob is
//  still `blob`, a segment in memory: such pages stay while the other
//  holds them, so spilling it would free no memory, and it is spilled
//  after every unshared object. A guess, never a fact (the other may let
//  go unseen): it orders spilling, nothing else. It lasts until the
//  object's blob changes (spilled, replaced, removed).
void store_set_shared (store_t *self, uint64_t key, const sq_blob_t *blob);
//  Iterates over the objects: *cursor starts at 0; false at the end. The
//  store must not change during the iteration.
bool store_next (store_t *self, size_t *cursor, uint64_t *key, uint32_t *version,
                 uint64_t *size);
//  0 if removed, -1 if it was not there.
int store_remove (store_t *self, uint64_t key);
size_t store_count (store_t *self);
//  Bytes held in memory, and bytes held in file mappings.
uint64_t store_memory (store_t *self);
uint64_t store_spilled (store_t *self);
//  Of store_memory, the bytes of objects marked shared.
uint64_t store_shared (store_t *self);
uint64_t store_limit (store_t *self);
//  Spills until `need` more bytes fit under the high mark (before a big
//  allocation, e.g. an arriving copy). Returns true when they fit.
bool store_make_room (store_t *self, uint64_t need);
//  True when an object of `size` bytes should go straight to a file rather
//  than to memory (larger than half the limit).
bool store_too_big (store_t *self, uint64_t size);
//  Fills `path` with a fresh file name in the spill directory. 0, or -1
//  when there is none or it does not fit.
int store_spill_path (store_t *self, char *path, size_t size);

#endif
