/*  builtin: the built-in task kinds that run inside the compute thread
    (noop, sleep, concat, slice, load, store). Each is quick or bounded by
    one file operation, so none needs a process or a thread of its own.
    Sleep's waiting is the compute thread's timer; once it fires the task
    completes here like noop.

    Ownership: reads inputs from the store (borrowed); fills task->results
    with references the task owns. */
#ifndef GOV_BUILTIN_H
#define GOV_BUILTIN_H

#include <stddef.h>
#include "task.h"
#include "store.h"

//  Runs the task to completion. 0 with task->results filled, or -1 with a
//  message for the FAILED event in err. Every input must be in the store.
int builtin_run (task_t *task, store_t *store, char *err, size_t err_size);

#endif
