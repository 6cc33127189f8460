/*  deadlines: a binary min-heap of tasks by deadline_ns (sleep ends and
    timeouts), so the compute thread finds the next timer in O(1) and adds or
    removes one in O(log n), however many tasks are running.

    Ownership: holds task pointers it does not own; a task in the heap keeps
    its position in task->heap_index (SIZE_MAX when out). */
#ifndef GOV_DEADLINES_H
#define GOV_DEADLINES_H

#include "task.h"

typedef struct _deadlines_t deadlines_t;

deadlines_t *deadlines_new (void);
void deadlines_destroy (deadlines_t **self_p);
//  Adds a task by its deadline_ns. 0, or -1 out of memory.
int deadlines_add (deadlines_t *self, task_t *task);
//  Removes the task if it is in the heap.
void deadlines_remove (deadlines_t *self, task_t *task);
//  Earliest task, NULL if empty.
task_t *deadlines_first (deadlines_t *self);

#endif
