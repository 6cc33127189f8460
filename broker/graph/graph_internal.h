/*  graph_internal: what graph.c shares with graph_submit.c (validating
    and committing a SUBMIT) and graph_lineage.c (where copies are, and
    recomputing what was lost). Not for use outside broker/graph*.c. */
#ifndef SQ_GRAPH_INTERNAL_H
#define SQ_GRAPH_INTERNAL_H

#include "graph.h"
#include "taskconf.h"
#include "order.h"
#include "gov.h"
#include "log.h"
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct _graph_t {
    graph_hooks_t hooks;
    const char *constant_why;   //  graph_object_lost_why: why a constant went
    sq_idmap_t *sessions;
    uint32_t next_session;
    uint64_t counts [TASK_STATE_COUNT_];
    object_t **maybe_free;
    size_t n_maybe_free;
    size_t cap_maybe_free;
    task_t **stack;             //  failure propagation work list
    size_t cap_stack;
    size_t live_objects;        //  objects not released
    uint64_t recomputed;
    uint64_t next_order;        //  static priorities, across submits
    //  Actors whose host or calls changed state: keys of hosts, settled by
    //  graph_actors_settle (graph_actor.c) outside any graph operation.
    uint64_t *actors_dirty;
    size_t n_actors_dirty;
    size_t cap_actors_dirty;
};

int gx_add_consumer (object_t *object, task_t *task);
void gx_count_down (graph_t *self, object_t *object);
void gx_fail (graph_t *self, task_t *task, failure_t *failure);
failure_t *gx_failure_ref (failure_t *self);
void gx_flush_frees (graph_t *self);
int gx_list_grow (void *one, void **many, bool *on_heap, uint32_t count, size_t item);
void gx_object_destroy (object_t **self_p);
void gx_put (session_t *session, uint32_t id, void *item);
void gx_queue_free_check (graph_t *self, object_t *object);
int gx_reserve (session_t *session, const sq_submit_t *sub);
void *gx_session_next (session_t *session, size_t *cursor);
void gx_set_state (graph_t *self, task_t *task, task_state_t state);
void gx_stop_and_wait (graph_t *self, task_t *task);
void gx_task_destroy (task_t **self_p);
void gx_unbook (graph_t *self, task_t *task);
//  After a change to what gx_stored reads (size, inline data, locations,
//  released) of `object`, whose gx_stored was `was` before it: its
//  session's and share's `stored` follow.
void gx_stored_update (object_t *object, uint64_t was);
//  graph_actor.c
void gx_actor_touch (graph_t *self, task_t *task);
int gx_actor_reserve (task_t *host);
void gx_actor_append (task_t *host, task_t *call);
void gx_actor_unappend (task_t *host, task_t *call);
void gx_actor_free (struct _actor_t **actor_p);
bool gx_actor_call_lost (graph_t *self, task_t *call, uint32_t gov_id, const char *message);
//  The failure of an actor's call whose input went with its governor (a
//  large argument the client put there): lost with the actor, naming it.
//  NULL if out of memory.
failure_t *gx_actor_input_lost (task_t *call, const char *why);

//  graph_lineage.c: re-runs the producer of a finished object no copy is
//  left of (and, recursively, of its inputs without copies).
void gx_recompute (graph_t *self, object_t *lost);
//  graph_stream.c
void gx_stream_open (graph_t *self, task_t *producer);
//  A member of a stream group leaves its attempt unfinished: closes the
//  group's streams and sends its other unfinished members back to wait.
void gx_stream_restart (graph_t *self, task_t *task);
//  A consumer of streams failed or was cancelled: producers assigned or
//  running expect one reader less (the stream_unread hook).
void gx_stream_unread (graph_t *self, task_t *consumer);

//  Small enough to inline in every file of the graph.

//  Tasks and objects share a session's id space, so one table holds both:
//  objects are stored with the pointer's low bit set.
static inline void *
gx_item_object (object_t *object)
{
    return (void *) ((uintptr_t) object | 1);
}

static inline task_t *
gx_as_task (void *item)
{
    return item && !((uintptr_t) item & 1)? (task_t *) item: NULL;
}

static inline object_t *
gx_as_object (void *item)
{
    return item && ((uintptr_t) item & 1)? (object_t *) ((uintptr_t) item & ~(uintptr_t) 1): NULL;
}

//  A task's outputs live in the task's own block, after the task: a task
//  and its output are one allocation, and objects are never freed before
//  their producer (both go when the session closes).
static inline object_t *
gx_embedded (task_t *task)
{
    return (object_t *) (task + 1);
}

//  The bytes an object counts for in its session's `stored`.
static inline uint64_t
gx_stored (const object_t *object)
{
    return object->producer && !object->released && object->n_locations && !object->data?
           object->size: 0;
}

static inline bool
gx_final (const task_t *task)
{
    return task->state >= TASK_FINISHED;
}

//  The session's item (tagged task or object pointer) with this id, or NULL.
static inline void *
gx_item (session_t *session, uint32_t id)
{
    void *item = id < session->cap_items? session->items [id]: NULL;
    if (!item && session->sparse)
        item = sq_idmap_lookup (session->sparse, id);
    return item;
}

#endif
