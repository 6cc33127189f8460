/*  order: the static priority of tasks, computed once per submit, in the
    spirit of dask.order: number the tasks by a depth-first,
    post-order walk from the graph's final tasks down through their inputs,
    visiting the input with the longest chain behind it first. Running
    ready tasks in that order finishes a branch (and frees its
    intermediates) before opening the next one, and keeps the critical path
    moving.

    Numbers grow across submits (and sessions), so earlier work keeps
    precedence over later work. User priorities (task->priority) come on
    top of this in the scheduler.

    Ownership: works on the caller's tasks; allocates only scratch. */
#ifndef SQ_ORDER_H
#define SQ_ORDER_H

#include "graph.h"

//  Gives tasks [0, n) their `order`, drawing numbers from *next. Inputs
//  produced outside the batch are ignored. 0, or -1 if out of memory (the
//  tasks are then numbered in batch order).
int order_assign (task_t **tasks, uint32_t n, uint64_t *next);

#endif
