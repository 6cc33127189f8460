/*  compute_tasks: the compute thread's task queue and resources. A task's
    life here: waiting (for its inputs) -> ready (FIFO, within the cpus and
    named resources) -> running (a program, a builtin, a Python executor)
    -> reported and freed; with it the timers that watch running tasks
    (deadlines, memory, the cgroup box) and their streams.

    Ownership: the functions work on the compute_t they are given
    (compute_internal.h); a task dropped or completed here is freed here. */
#ifndef GOV_COMPUTE_TASKS_H
#define GOV_COMPUTE_TASKS_H

#include "compute_internal.h"

//  Lists of waiters (task_t) or SEND orders (compute_order_t) per object
//  key; a list belongs to its map, an order to its list.
int compute_list_push (compute_list_t *list, void *item);
compute_list_t *compute_list_of (sq_idmap_t *map, uint64_t key);
void compute_order_free (compute_order_t *order);

//  A task's life: waiting for its inputs, ready, dropped unreported.
void compute_ready_push (compute_t *self, task_t *task);
void compute_wait_inputs (compute_t *self, task_t *task);
void compute_unpin (task_t *task);
void compute_task_drop (compute_t *self, task_t *task);
//  Starts ready tasks while they fit (once per loop turn).
void compute_schedule (compute_t *self);

//  Timers of running tasks: each *_due gives the ms until its check, or
//  -1; each check acts only when due.
long compute_memcheck_due (compute_t *self);
void compute_check_memory (compute_t *self);
long compute_boxcheck_due (compute_t *self);
void compute_check_box (compute_t *self);
void compute_fire_deadlines (compute_t *self);
//  The store's box callbacks (store_set_box); arg is the compute_t.
uint64_t compute_beside_store (void *arg, uint64_t store_memory);
void compute_relieve_box (void *arg);

//  Ends of running tasks: a child reaped, a stream gone out, a Python
//  executor's outcomes.
void compute_child_exited (compute_t *self, task_t *task);
void compute_stream_done (void *arg, uint64_t key, uint32_t attempt, uint64_t bytes, bool deserted);
void compute_stream_progress (void *arg, uint64_t object, uint64_t bytes);
void compute_stream_local (void *arg, uint64_t object);
void compute_reap_streams (compute_t *self);
void compute_py_outcomes (compute_t *self);

#endif
