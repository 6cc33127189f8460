/*  deadlines: array-backed binary heap with back-pointers for removal. */
#include "deadlines.h"
#include "grow.h"
#include <stdlib.h>

struct _deadlines_t {
    task_t **heap;
    size_t n;
    size_t cap;
};

deadlines_t *
deadlines_new (void)
{
    return (deadlines_t *) calloc (1, sizeof (deadlines_t));
}

void
deadlines_destroy (deadlines_t **self_p)
{
    deadlines_t *self = *self_p;
    if (!self)
        return;
    for (size_t i = 0; i < self->n; i++)
        self->heap [i]->heap_index = SIZE_MAX;
    free (self->heap);
    free (self);
    *self_p = NULL;
}

static void
s_set (deadlines_t *self, size_t i, task_t *task)
{
    self->heap [i] = task;
    task->heap_index = i;
}

static void
s_up (deadlines_t *self, size_t i)
{
    task_t *task = self->heap [i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (self->heap [parent]->deadline_ns <= task->deadline_ns)
            break;
        s_set (self, i, self->heap [parent]);
        i = parent;
    }
    s_set (self, i, task);
}

static void
s_down (deadlines_t *self, size_t i)
{
    task_t *task = self->heap [i];
    while (1) {
        size_t child = 2 * i + 1;
        if (child >= self->n)
            break;
        if (child + 1 < self->n
        &&  self->heap [child + 1]->deadline_ns < self->heap [child]->deadline_ns)
            child++;
        if (task->deadline_ns <= self->heap [child]->deadline_ns)
            break;
        s_set (self, i, self->heap [child]);
        i = child;
    }
    s_set (self, i, task);
}

int
deadlines_add (deadlines_t *self, task_t *task)
{
    if (self->n == self->cap
    &&  sq_grow ((void **) &self->heap, &self->cap, self->n + 1, sizeof *self->heap, 64, SIZE_MAX))
        return -1;
    s_set (self, self->n++, task);
    s_up (self, self->n - 1);
    return 0;
}

void
deadlines_remove (deadlines_t *self, task_t *task)
{
    size_t i = task->heap_index;
    if (i == SIZE_MAX || i >= self->n || self->heap [i] != task)
        return;
    task->heap_index = SIZE_MAX;
    task_t *last = self->heap [--self->n];
    if (i == self->n)
        return;
    s_set (self, i, last);
    s_up (self, i);
    s_down (self, last->heap_index);
}

task_t *
deadlines_first (deadlines_t *self)
{
    return self->n? self->heap [0]: NULL;
}
