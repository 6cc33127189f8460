/*  graph_lineage: where each object's copies are, and what happens when
    copies are lost: an object still needed whose last copy went is
    recomputed from its producer, and recursively whatever of that
    producer's inputs is gone too; a governor lost takes its copies with it;
    a restarted broker recomputes what no governor reported. */
#include "graph_internal.h"
#include "grow.h"

//  --------------------------------------------------------------------------
//  Locations

location_t *
graph_object_location (object_t *object, gov_t *gov)
{
    location_t *locations = object_locations (object);
    for (uint32_t i = 0; i < object->n_locations; i++)
        if (locations [i].gov == gov)
            return &locations [i];
    return NULL;
}

void
graph_object_add_location (graph_t *self, object_t *object, gov_t *gov, bool arrived)
{
    (void) self;
    location_t *loc = graph_object_location (object, gov);
    if (loc) {
        loc->arrived |= arrived;
        return;
    }
    bool on_heap = object->locations_on_heap;
    if (gx_list_grow (&object->location_.one, (void **) &object->location_.many, &on_heap,
                     object->n_locations, sizeof (location_t)))
        return;                 //  out of memory: the copy is simply not used
    object->locations_on_heap = on_heap;
    location_t *locations = object_locations (object);
    locations [object->n_locations].gov = gov;
    locations [object->n_locations].arrived = arrived;
    uint64_t was = gx_stored (object);
    object->n_locations++;
    gx_stored_update (object, was);
}

static bool
s_has_copy (object_t *object)
{
    if (object->data)
        return true;
    location_t *locations = object_locations (object);
    for (uint32_t i = 0; i < object->n_locations; i++)
        if (locations [i].arrived)
            return true;
    return false;
}

static bool
s_needed (const object_t *object)
{
    return object->keep || object->pending > 0;
}

//  Consumers counted this object as available; it is not any more. Ready
//  ones wait again; assigned ones are stopped (their governor will never
//  get it) and wait again with a new attempt.
static void
s_unready_consumers (graph_t *self, object_t *object)
{
    for (uint32_t c = 0; c < object->n_consumers; c++) {
        task_t *consumer = object_consumers (object) [c];
        if (gx_final (consumer))
            continue;
        consumer->unfinished++;
        if (consumer->state == TASK_READY)
            gx_set_state (self, consumer, TASK_WAITING);
        else
        if (consumer->state == TASK_ASSIGNED || consumer->state == TASK_RUNNING) {
            gx_unbook (self, consumer);
            gx_stop_and_wait (self, consumer);
        }
    }
}

//  Lineage recomputation: re-runs the producer of a lost object and,
//  recursively, of whatever of its inputs has no copy left either, only as
//  far back as copies (or the broker's inline bytes) exist.
static void
s_recompute (graph_t *self, object_t *lost)
{
    size_t n = 0, cap = 16, n_reset = 0, cap_reset = 16;
    object_t **stack = (object_t **) malloc (cap * sizeof *stack);
    task_t **reset = (task_t **) malloc (cap_reset * sizeof *reset);
    if (!stack || !reset) {
        free (stack);
        free (reset);
        return;
    }
    stack [n++] = lost;
    while (n > 0) {
        object_t *o = stack [--n];
        if (o->state != OBJ_FINISHED || s_has_copy (o))
            continue;
        uint64_t was = gx_stored (o);
        o->n_locations = 0;
        gx_stored_update (o, was);
        task_t *producer = o->producer;
        if (!producer || producer->actor_call) {
            //  A constant whose only copy was on a governor: nothing to
            //  recompute it from. Nor is there for the result of an actor's
            //  call: running it again would change the actor's state.
            char message [500];
            if (producer)
                snprintf (message, sizeof message,
                          "the result of actor call %u was lost with the governor holding it; "
                          "an actor's calls are never run twice", sq_key_id (producer->key));
            else
            if (self->constant_why)
                snprintf (message, sizeof message, "%s", self->constant_why);
            else
                snprintf (message, sizeof message,
                          "constant object %u was lost with the governor holding it; submit it again",
                          sq_key_id (o->key));
            failure_t *failure = failure_new (sq_key_id (o->key),
                                              producer? SQ_E_ACTOR_LOST: SQ_E_LOST, message);
            if (!failure)
                continue;
            o->state = OBJ_FAILED;
            o->failure = gx_failure_ref (failure);
            for (uint32_t c = 0; c < o->n_consumers; c++) {
                task_t *consumer = object_consumers (o) [c];
                if (gx_final (consumer))
                    continue;
                //  An actor's call losing its large argument with the
                //  actor's governor (the client put it there), the actor
                //  gone with it: the call is lost with the actor, as the
                //  next settle would fail it (graph_actor.c).
                task_t *host = consumer->actor_call && consumer->extra
                             ? consumer->extra->host: NULL;
                failure_t *lost = host && !producer && gx_final (host)
                                ? gx_actor_input_lost (consumer, message): NULL;
                gx_fail (self, consumer, lost? lost: failure);
                failure_unref (&lost);
            }
            failure_unref (&failure);
            continue;
        }
        o->state = OBJ_UNFINISHED;
        o->stream_open = false;
        s_unready_consumers (self, o);
        if (producer->state != TASK_FINISHED)
            continue;           //  already being re-run for another output
        if (n_reset == cap_reset
        &&  sq_grow ((void **) &reset, &cap_reset, n_reset + 1, sizeof *reset, 16, SIZE_MAX))
            break;
        reset [n_reset++] = producer;
        self->recomputed++;
        producer->attempt++;
        gx_set_state (self, producer, TASK_WAITING);
        producer->session->unfinished++;
        producer->session->finished--;
        producer->unfinished = 0;
        for (uint32_t i = 0; i < producer->n_inputs; i++) {
            object_t *input = producer->io [i];
            input->pending++;
            if (input->state == OBJ_FINISHED && !s_has_copy (input)) {
                //  Lost or released too: recompute it first. Its own
                //  consumers (the producer among them) are counted then.
                if (n == cap && sq_grow ((void **) &stack, &cap, n + 1, sizeof *stack, 16, SIZE_MAX))
                    break;
                stack [n++] = input;
            }
            else
            if (input->state != OBJ_FINISHED && !(input->stream && input->stream_open))
                producer->unfinished++;
        }
    }
    free (stack);
    //  Re-run producers whose inputs all exist can start now; the others
    //  start when the inputs they wait for are recomputed. One with an
    //  input that failed since it last ran (a constant lost with its only
    //  governor, an object deleted by hand) can never run again: it fails
    //  as that input did, rather than wait for it for ever.
    for (size_t i = 0; i < n_reset; i++) {
        task_t *task = reset [i];
        failure_t *failed = NULL;
        for (uint32_t k = 0; k < task->n_inputs && !failed; k++)
            if (task->io [k]->state == OBJ_FAILED)
                failed = task->io [k]->failure;
        if (failed && !gx_final (task)) {
            gx_fail (self, task, failed);
            continue;
        }
        if (task->state == TASK_WAITING && task->unfinished == 0) {
            gx_set_state (self, task, TASK_READY);
            self->hooks.task_ready (self->hooks.arg, task);
        }
    }
    free (reset);
}

//  Drops one of object's copies (loc, one of its locations).
static void
s_location_drop (object_t *object, location_t *loc)
{
    uint64_t was = gx_stored (object);
    *loc = object_locations (object) [--object->n_locations];
    gx_stored_update (object, was);
}

//  A finished result that no governor holds any more and something still
//  needs: it is computed again.
static bool
s_is_lost (object_t *object)
{
    return object->state == OBJ_FINISHED && !object->released && !s_has_copy (object)
        && s_needed (object);
}

//  Lost results collected before any is computed again (recomputation
//  changes states under an iteration).
typedef struct {
    object_t **items;
    size_t n, cap;
} s_lost_t;

//  Adds object; true when out of memory (the collection stops there).
static bool
s_lost_add (s_lost_t *lost, object_t *object)
{
    if (lost->n == lost->cap
    &&  sq_grow ((void **) &lost->items, &lost->cap, lost->n + 1, sizeof *lost->items, 16, SIZE_MAX))
        return true;
    lost->items [lost->n++] = object;
    return false;
}

//  Computes each again and empties the list. Returns how many.
static size_t
s_lost_recompute (graph_t *self, s_lost_t *lost)
{
    for (size_t i = 0; i < lost->n; i++)
        s_recompute (self, lost->items [i]);
    free (lost->items);
    gx_flush_frees (self);
    return lost->n;
}

void
gx_recompute (graph_t *self, object_t *lost)
{
    s_recompute (self, lost);
}

void
graph_object_lost (graph_t *self, object_t *object, gov_t *gov)
{
    location_t *loc = graph_object_location (object, gov);
    if (loc)
        s_location_drop (object, loc);
    if (s_is_lost (object))
        s_recompute (self, object);
    gx_flush_frees (self);
}

void
graph_object_lost_why (graph_t *self, object_t *object, gov_t *gov, const char *why)
{
    self->constant_why = why;
    graph_object_lost (self, object, gov);
    self->constant_why = NULL;
}

//  Whether an object of a forgotten governor's may be lost: a copy it had
//  there is dropped, and copies still on their way, which may have come
//  from the dead governor, are ordered again from a copy that exists.
static bool
s_forget_at (graph_t *self, object_t *object, void *arg)
{
    location_t *loc = graph_object_location (object, (gov_t *) arg);
    if (!loc)
        return false;
    s_location_drop (object, loc);
    location_t *locations = object_locations (object);
    location_t *source = NULL;
    for (uint32_t i = 0; i < object->n_locations && !source; i++)
        if (locations [i].arrived)
            source = &locations [i];
    for (uint32_t i = 0; source && i < object->n_locations; i++)
        if (!locations [i].arrived && self->hooks.object_copy)
            self->hooks.object_copy (self->hooks.arg, object, source->gov, locations [i].gov);
    return true;
}

//  Every object of every session in turn; a walk starts zeroed. Objects may
//  change state during a walk, but none may be added or freed.
typedef struct {
    size_t s_cursor, cursor;
    session_t *session;
} s_walk_t;

static object_t *
s_walk_next (graph_t *self, s_walk_t *walk)
{
    while (true) {
        object_t *object = walk->session? graph_session_next_object (walk->session, &walk->cursor): NULL;
        if (object)
            return object;
        walk->session = (session_t *) sq_idmap_next (self->sessions, &walk->s_cursor, NULL);
        if (!walk->session)
            return NULL;
        walk->cursor = 0;
    }
}

//  Computes again every lost object of every session that `visit` (NULL:
//  all) says may be lost. Collects first: recomputation changes states
//  under the iteration. Returns how many.
static size_t
s_recover (graph_t *self, bool (*visit) (graph_t *, object_t *, void *), void *arg)
{
    s_lost_t lost = { NULL, 0, 0 };
    s_walk_t walk = { 0 };
    object_t *object;
    bool full = false;          //  out of memory: the rest is visited, not collected
    while ((object = s_walk_next (self, &walk)))
        if ((!visit || visit (self, object, arg)) && !full && s_is_lost (object))
            full = s_lost_add (&lost, object);
    return s_lost_recompute (self, &lost);
}

void
graph_forget_governor (graph_t *self, gov_t *gov)
{
    s_recover (self, s_forget_at, gov);
}

size_t
graph_recover_sweep (graph_t *self)
{
    return s_recover (self, NULL, NULL);
}

bool
graph_object_needed (const object_t *object)
{
    return s_needed (object);
}

void
graph_each_located (graph_t *self, gov_t *gov, graph_object_fn *fn, void *arg)
{
    s_walk_t walk = { 0 };
    object_t *object;
    while ((object = s_walk_next (self, &walk)))
        if (!object->released && graph_object_location (object, gov))
            fn (arg, object);
}
