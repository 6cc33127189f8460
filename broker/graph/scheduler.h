/*  scheduler: decides which ready task runs on which governor.

    Ready tasks wait in a heap per tenant (the share of their session,
    tenancy.h) ordered by user priority, then by the static order computed
    at submit (order.c: finish what was started before starting new
    roots). The next task is the head of the tenant furthest below its fair
    share (fewest cpus held per unit of weight; at equal shares the one
    served least recently); a tenant at its cpu cap waits. Each goes to the
    governor where it would start soonest, among those with a free slot and
    enough resources: waiting for a cpu there (from its running tasks' run
    times and its recent mean duration; cpus actors hold are never free)
    plus copying the inputs it lacks there (estimated: the broker sees no
    bytes move). Ties go to the most input bytes held, then the least
    loaded. The candidates are the
    governors holding its inputs and a rotating sample of those with a free
    slot (all of them only for a task that fits none of the sample), so
    placing a task costs the same on a large cluster. Every governor may hold
    cpus + prefetch assigned tasks, so that it never idles for a broker
    round trip; consumers whose inputs are all being produced on one
    governor are overbooked there. Everything outside this file sees only
    this interface.

    Ownership: the scheduler holds task keys, not pointers, so a task that
    left the READY state (cancelled, session closed) is simply skipped. It
    borrows the graph and the governors (added / removed by the broker). */
#ifndef SQ_SCHEDULER_H
#define SQ_SCHEDULER_H

#include "graph.h"
#include "gov.h"

typedef struct _scheduler_t scheduler_t;

//  Called for every decision; the callee assigns the task (state, batches).
typedef void (scheduler_assign_fn) (void *arg, task_t *task, gov_t *gov);

scheduler_t *scheduler_new (graph_t *graph);
void scheduler_destroy (scheduler_t **self_p);
void scheduler_task_ready (scheduler_t *self, task_t *task);
void scheduler_governor_add (scheduler_t *self, gov_t *gov);
void scheduler_governor_remove (scheduler_t *self, gov_t *gov);
//  True when a run could assign something (ready tasks and a free slot).
bool scheduler_has_work (scheduler_t *self);
//  Assigns as many ready tasks as fit; returns how many.
size_t scheduler_run (scheduler_t *self, scheduler_assign_fn *assign, void *arg);
size_t scheduler_ready_count (scheduler_t *self);

//  Work stealing (best effort): when a governor has idle cpus
//  and another has tasks queued but not started, asks the loaded one to
//  give some back (RETRACT); the broker re-places what it gives. Moves
//  toward the average load, damped by half, never leaving the sender less
//  loaded than the receiver; tasks with more than a MiB of input on the
//  sender stay there unless they would wait there longer than twice the
//  copy of their inputs to the receiver. Not while ready tasks could go to
//  an idle governor themselves. Called at most every `interval` by the
//  broker.
typedef void (scheduler_retract_fn) (void *arg, task_t *task);
size_t scheduler_rebalance (scheduler_t *self, scheduler_retract_fn *retract, void *arg);
//  A copy of `bytes` from one governor to another took `us` (a LOCATED
//  report that says): placement's estimate of the copy rate follows such
//  reports of copies of a MiB or more (1 GiB/s until one comes).
void scheduler_note_copy (scheduler_t *self, uint64_t bytes, uint64_t us);
//  The copy rate placement assumes, bytes per second.
double scheduler_copy_rate (scheduler_t *self);
//  Tasks no live governor has the resources for (waiting for one to join).
size_t scheduler_blocked_count (scheduler_t *self);

//  Placement outside the ready queue: every other "which governor" of the
//  broker asks here, so that one fit test and one load (with its penalty
//  for the governor a retried task failed on) decide them all. The
//  governors taken are those added and not removed. An actor's calls are
//  not placed: they run where their host runs (graph_actor.c), and the host
//  is placed by scheduler_run like any task.
//
//  Whether the governor could run the task at all: its cpus, its
//  resources, and the governors the task names (unless it only prefers
//  them, loose).
bool scheduler_fits (const gov_t *gov, const task_t *task);
//  Whether the governor takes new work and copies: not draining, leaving,
//  or reattaching.
bool scheduler_usable (const gov_t *gov);
//  A task that must start now whatever the slots say (a stream's reader,
//  streams.c): the least loaded governor it fits, preferring those it
//  names; NULL if none fits.
gov_t *scheduler_place_now (scheduler_t *self, const task_t *task);
//  Where a new copy of an object goes (PLACE, place.c): the governor with
//  the least memory in use among those `want` accepts; NULL if none.
typedef bool (scheduler_want_fn) (void *arg, const gov_t *gov);
gov_t *scheduler_place_copy (scheduler_t *self, scheduler_want_fn *want, void *arg);

//  Resource waits (reswait.h): a ready task no connected governor can run
//  waits up to wait_ms (of time with some governor connected) for one that
//  can, at most `max` tasks; wait_ms 0 fails such tasks at once. Default
//  0. 0, or -1 if out of memory.
int scheduler_set_resource_wait (scheduler_t *self, int64_t wait_ms, size_t max);
//  Time passes: fails the tasks whose wait is over. Call every turn.
void scheduler_tick (scheduler_t *self, int64_t now_ms);
size_t scheduler_waiting_count (scheduler_t *self);
//  The i-th waiting task: its key, ms of its wait left, and what it needs
//  ("cpus=1, gpu=2") in needs. False if there is no i-th.
bool scheduler_waiting_get (scheduler_t *self, size_t i, uint64_t *key, int64_t *left_ms,
                            char *needs, size_t needs_size);

#endif
