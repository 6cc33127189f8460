/*  reswait: ready tasks waiting for a governor that can run them.

    A ready task may find no connected governor with the cpus and resources
    it asks for: the cluster is still starting, grows with its work (a
    governor with gpus started once gpu tasks wait), or the governor
    offering them left and may come back. Instead
    of failing at once it waits here, for --resource-wait (the budget) of
    time during which at least one governor is connected: while none is,
    nothing could be judged and the budget is not spent. When a governor
    joins, the scheduler tries every waiting task again; a task placed or
    gone (cancelled, session closed) leaves; one whose budget runs out fails
    as before ("no live governor can run this task").

    The set is bounded (max entries): past it, a task fails at once.

    Ownership: the set owns its arrays and holds task keys only, never
    pointers. */
#ifndef SQ_RESWAIT_H
#define SQ_RESWAIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct _reswait_t reswait_t;
typedef void (reswait_fn) (void *arg, uint64_t key);

//  A set of at most `max` waiting tasks with `budget_ms` each. NULL if out
//  of memory.
reswait_t *reswait_new (size_t max, int64_t budget_ms);
void reswait_destroy (reswait_t **self_p);
//  Adds a task with a full budget; nothing if it is already there (its
//  budget goes on). 0, or -1 if the set is full or out of memory.
int reswait_add (reswait_t *self, uint64_t key);
void reswait_remove (reswait_t *self, uint64_t key);
size_t reswait_count (reswait_t *self);
//  The i-th entry (0 <= i < count): its key and how many ms of budget it has
//  left. For INFO.
void reswait_get (reswait_t *self, size_t i, uint64_t *key, int64_t *left_ms);
//  Time passes up to now_ms. With `counting` (a governor is connected) each
//  entry's budget shrinks by the time since the last tick; entries whose
//  budget is spent are removed and passed to fn. Without it, nothing is
//  spent.
void reswait_tick (reswait_t *self, int64_t now_ms, bool counting, reswait_fn *fn, void *arg);

#endif
