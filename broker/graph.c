/*  graph: tasks, objects, sessions and their state transitions.

    Objects are freed lazily: any change that may make an object unneeded
    puts it on `maybe_free`, and every public operation ends by freeing what
    on that list is really unneeded. Freeing in the middle of a walk over
    consumers (failure propagation, input release) would pull objects out
    from under the walk.
*/
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
};

static const char *s_state_names [TASK_STATE_COUNT_] = {
    "waiting", "ready", "assigned", "running", "finished", "failed", "cancelled"
};

const char *
task_state_name (task_state_t state)
{
    return state < TASK_STATE_COUNT_? s_state_names [state]: "?";
}

const task_extra_t task_extra_default = { .cpus = 1 };

//  Makes room for one more element in a list whose first element lives in
//  its record (`one`, in a union with `many`, see graph.h). From the second
//  element on the list is on the heap, its capacity the power of two from 4
//  up that holds `count`: counts only shrink below what was allocated, so
//  no capacity needs storing.
static int
s_list_grow (void *one, void **many, bool *on_heap, uint32_t count, size_t item)
{
    if (!*on_heap) {
        if (count == 0)
            return 0;
        void *p = malloc (4 * item);
        if (!p)
            return -1;
        memcpy (p, one, item);
        *many = p;
        *on_heap = true;
        return 0;
    }
    uint32_t cap = 4;
    while (cap < count)
        cap *= 2;
    if (count < cap)
        return 0;
    void *p = realloc (*many, (size_t) cap * 2 * item);
    if (!p)
        return -1;
    *many = p;
    return 0;
}

static int
s_add_consumer (object_t *object, task_t *task)
{
    bool on_heap = object->consumers_on_heap;
    if (s_list_grow (&object->consumer_.one, (void **) &object->consumer_.many, &on_heap,
                     object->n_consumers, sizeof (task_t *)))
        return -1;
    object->consumers_on_heap = on_heap;
    object_consumers (object) [object->n_consumers++] = task;
    return 0;
}

task_extra_t *
graph_task_extra (task_t *task)
{
    if (!task->extra) {
        task->extra = (task_extra_t *) malloc (sizeof (task_extra_t));
        if (task->extra)
            *task->extra = task_extra_default;
    }
    return task->extra;
}

//  Tasks and objects share a session's id space, so one table holds both:
//  objects are stored with the pointer's low bit set.
static inline void *
s_item_object (object_t *object)
{
    return (void *) ((uintptr_t) object | 1);
}

static inline task_t *
s_as_task (void *item)
{
    return item && !((uintptr_t) item & 1)? (task_t *) item: NULL;
}

static inline object_t *
s_as_object (void *item)
{
    return item && ((uintptr_t) item & 1)? (object_t *) ((uintptr_t) item & ~(uintptr_t) 1): NULL;
}

failure_t *
failure_new (uint32_t root, int code, const char *message)
{
    failure_t *self = (failure_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->refs = 1;
    self->root = root;
    self->code = code;
    self->message = strdup (message? message: "");
    return self;
}

static failure_t *
s_failure_ref (failure_t *self)
{
    if (self)
        self->refs++;
    return self;
}

void
failure_unref (failure_t **self_p)
{
    failure_t *self = *self_p;
    if (self && --self->refs == 0) {
        free (self->message);
        free (self);
    }
    *self_p = NULL;
}

graph_t *
graph_new (const graph_hooks_t *hooks)
{
    graph_t *self = (graph_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->hooks = *hooks;
    self->sessions = sq_idmap_new ();
    self->next_session = 1;
    if (!self->sessions)
        graph_destroy (&self);
    return self;
}

static void s_session_destroy (graph_t *self, session_t **session_p);

void
graph_destroy (graph_t **self_p)
{
    graph_t *self = *self_p;
    if (!self)
        return;
    size_t cursor = 0;
    session_t *session;
    if (self->sessions)
        while ((session = (session_t *) sq_idmap_next (self->sessions, &cursor, NULL)))
            s_session_destroy (self, &session);
    sq_idmap_destroy (&self->sessions);
    free (self->maybe_free);
    free (self->stack);
    free (self);
    *self_p = NULL;
}

//  --------------------------------------------------------------------------
//  Task and object life

//  A task's outputs live in the task's own block, after the task: a task
//  and its output are one allocation, and objects are never freed before
//  their producer (both go when the session closes).
static inline object_t *
s_embedded (task_t *task)
{
    return (object_t *) (task + 1);
}

//  Frees what an object record points to, not the record.
static void
s_object_free_parts (object_t *self)
{
    free (self->content_type);
    sq_blob_unref (&self->data);
    failure_unref (&self->failure);
    if (self->consumers_on_heap)
        free (self->consumer_.many);
    if (self->locations_on_heap)
        free (self->location_.many);
}

//  Destroys a constant; task outputs go with their task.
static void
s_object_destroy (object_t **self_p)
{
    object_t *self = *self_p;
    if (!self)
        return;
    assert (!self->embedded);
    s_object_free_parts (self);
    free (self);
    *self_p = NULL;
}

//  Destroys the task with the outputs embedded in it.
static void
s_task_destroy (task_t **self_p)
{
    task_t *self = *self_p;
    if (!self)
        return;
    for (uint32_t i = 0; i < self->n_outputs; i++)
        s_object_free_parts (&s_embedded (self) [i]);
    if (self->extra) {
        for (uint32_t i = 0; i < self->extra->n_resources; i++)
            free ((char *) self->extra->resources [i].name.ptr);
        free (self->extra->resources);
        free (self->extra->name);
        free (self->extra);
    }
    failure_unref (&self->failure);
    free (self);
    *self_p = NULL;
}

static void
s_set_state (graph_t *self, task_t *task, task_state_t state)
{
    self->counts [task->state]--;
    task->session->counts [task->state]--;
    task->state = (uint8_t) state;
    self->counts [state]++;
    task->session->counts [state]++;
}

static bool
s_final (const task_t *task)
{
    return task->state >= TASK_FINISHED;
}

static void
s_queue_free_check (graph_t *self, object_t *object)
{
    if (object->free_queued)
        return;
    if (self->n_maybe_free == self->cap_maybe_free) {
        size_t cap = self->cap_maybe_free? self->cap_maybe_free * 2: 64;
        object_t **p = (object_t **) realloc (self->maybe_free, cap * sizeof *p);
        if (!p)
            return;             //  the object stays until its session closes
        self->maybe_free = p;
        self->cap_maybe_free = cap;
    }
    object->free_queued = true;
    self->maybe_free [self->n_maybe_free++] = object;
}

//  Constants are never unneeded before their session closes: they are the
//  ends of every lineage, and nothing could recompute them (the broker
//  holds those sent inside SUBMIT; uploaded ones stay on their governor).
static bool
s_unneeded (const object_t *object)
{
    return object->producer && object->state != OBJ_UNFINISHED && !object->keep
        && object->pending == 0;
}

//  Drops an object's copies everywhere; its record stays as lineage.
static void
s_object_release (graph_t *self, object_t *object)
{
    if (object->n_locations && self->hooks.object_drop)
        self->hooks.object_drop (self->hooks.arg, object);
    object->n_locations = 0;
    sq_blob_unref (&object->data);
    if (!object->released)
        self->live_objects--;
    object->released = true;
}

static void
s_flush_frees (graph_t *self)
{
    for (size_t i = 0; i < self->n_maybe_free; i++) {
        object_t *object = self->maybe_free [i];
        object->free_queued = false;
        if (!object->released && s_unneeded (object))
            s_object_release (self, object);
    }
    self->n_maybe_free = 0;
}

//  A task reached a final state: its inputs may be released, counters
//  move. The config stays: a lost output may need the task again.
static void
s_task_done (graph_t *self, task_t *task)
{
    for (uint32_t i = 0; i < task->n_inputs; i++) {
        object_t *input = task->io [i];
        input->pending--;
        s_queue_free_check (self, input);
    }
    task->gov = NULL;
    session_t *session = task->session;
    session->unfinished--;
    if (task->state == TASK_FINISHED)
        session->finished++;
    else {
        session->failed++;
        if (session->n_failures < 64)
            session->failures [session->n_failures++] = task;
    }
    if (self->hooks.task_done)
        self->hooks.task_done (self->hooks.arg, task);
}

static void s_finish (graph_t *self, task_t *task, gov_t *gov);

static int
s_push (graph_t *self, size_t *n, task_t *task)
{
    if (*n == self->cap_stack) {
        size_t cap = self->cap_stack? self->cap_stack * 2: 64;
        task_t **p = (task_t **) realloc (self->stack, cap * sizeof *p);
        if (!p)
            return -1;
        self->stack = p;
        self->cap_stack = cap;
    }
    self->stack [(*n)++] = task;
    return 0;
}

//  One task fails: its outputs fail with it *before* the task_done hook
//  runs, so that the waits and fetches it answers see them failed.
static void
s_fail_one (graph_t *self, task_t *task, failure_t *failure, task_state_t final)
{
    if ((task->state == TASK_ASSIGNED || task->state == TASK_RUNNING) && self->hooks.task_stop)
        self->hooks.task_stop (self->hooks.arg, task);
    task->failure = s_failure_ref (failure);
    s_set_state (self, task, final);
    for (uint32_t i = 0; i < task->n_outputs; i++) {
        object_t *out = task->io [task->n_inputs + i];
        if (out->state != OBJ_UNFINISHED)
            continue;
        out->state = OBJ_FAILED;
        failure_unref (&out->failure);
        out->failure = s_failure_ref (failure);
        s_queue_free_check (self, out);
    }
    s_task_done (self, task);
}

//  Walks downstream of a task through the consumers of its outputs: for
//  each, `visit` acts and says whether to go on below it. Iterative: chains
//  can be long. Out of memory, the walk stops short.
typedef bool (s_visit_fn) (graph_t *self, task_t *consumer, object_t *output, void *arg);

static void
s_downstream (graph_t *self, task_t *task, s_visit_fn *visit, void *arg)
{
    size_t n = 0;
    if (s_push (self, &n, task))
        return;
    while (n > 0) {
        task_t *t = self->stack [--n];
        for (uint32_t i = 0; i < t->n_outputs; i++) {
            object_t *output = t->io [t->n_inputs + i];
            for (uint32_t c = 0; c < output->n_consumers; c++) {
                task_t *consumer = object_consumers (output) [c];
                if (visit (self, consumer, output, arg) && s_push (self, &n, consumer))
                    return;
            }
        }
    }
}

typedef struct {
    failure_t *failure;
    task_state_t final;
} s_failing_t;

static bool
s_fail_visit (graph_t *self, task_t *consumer, object_t *output, void *arg)
{
    s_failing_t *failing = (s_failing_t *) arg;
    (void) output;
    if (s_final (consumer))
        return false;
    s_fail_one (self, consumer, failing->failure, failing->final);
    return true;
}

//  Fails (or cancels) a task and everything downstream of it that is not
//  done yet, sharing one failure.
static void
s_fail (graph_t *self, task_t *task, failure_t *failure)
{
    s_failing_t failing = {
        failure, failure->code == SQ_E_CANCELLED? TASK_CANCELLED: TASK_FAILED
    };
    s_fail_one (self, task, failure, failing.final);
    s_downstream (self, task, s_fail_visit, &failing);
}

//  --------------------------------------------------------------------------
//  Sessions

session_t *
graph_session_open_as (graph_t *self, uint32_t id, void *client)
{
    if (id == 0 || sq_idmap_lookup (self->sessions, id))
        return NULL;
    session_t *session = (session_t *) calloc (1, sizeof *session);
    if (!session)
        return NULL;
    session->id = id;
    session->client = client;
    if (sq_idmap_insert (self->sessions, session->id, session)) {
        free (session);
        return NULL;
    }
    if (id >= self->next_session)
        self->next_session = id + 1;
    return session;
}

session_t *
graph_session_open (graph_t *self, void *client)
{
    //  Ids are never reused while the broker lives (or its journal).
    while (self->next_session == 0 || sq_idmap_lookup (self->sessions, self->next_session))
        self->next_session++;
    return graph_session_open_as (self, self->next_session, client);
}

uint32_t
graph_next_session (graph_t *self)
{
    return self->next_session;
}

void
graph_set_next_session (graph_t *self, uint32_t next)
{
    if (next > self->next_session)
        self->next_session = next;
}

session_t *
graph_session_next (graph_t *self, size_t *cursor)
{
    return (session_t *) sq_idmap_next (self->sessions, cursor, NULL);
}

session_t *
graph_session (graph_t *self, uint32_t id)
{
    return (session_t *) sq_idmap_lookup (self->sessions, id);
}

//  The session's item (tagged task or object pointer) with this id, or NULL.
static inline void *
s_item (session_t *session, uint32_t id)
{
    void *item = id < session->cap_items? session->items [id]: NULL;
    if (!item && session->sparse)
        item = sq_idmap_lookup (session->sparse, id);
    return item;
}

//  Iterates over a session's items: the id array, then the sparse map.
static void *
s_session_next (session_t *session, size_t *cursor)
{
    while (*cursor < session->cap_items) {
        void *item = session->items [(*cursor)++];
        if (item)
            return item;
    }
    if (!session->sparse)
        return NULL;
    size_t in_map = *cursor - session->cap_items;
    void *item = sq_idmap_next (session->sparse, &in_map, NULL);
    *cursor = session->cap_items + in_map;
    return item;
}

task_t *
graph_session_next_task (session_t *session, size_t *cursor)
{
    void *item;
    while ((item = s_session_next (session, cursor)))
        if (s_as_task (item))
            return (task_t *) item;
    return NULL;
}

object_t *
graph_session_next_object (session_t *session, size_t *cursor)
{
    void *item;
    object_t *object;
    while ((item = s_session_next (session, cursor)))
        if ((object = s_as_object (item)))
            return object;
    return NULL;
}

//  Makes room for the ids of a submit, so that s_put cannot fail. The id
//  array grows to cover an id only while it stays at least a quarter full:
//  ids past that go to the sparse map.
static int
s_reserve (session_t *session, const sq_submit_t *sub)
{
    uint64_t n_new = (uint64_t) sub->n_objects + sub->n_tasks;
    uint64_t limit = 4 * ((uint64_t) session->n_tasks + session->n_objects + n_new) + 4096;
    if (limit > (1u << 31))
        limit = 1u << 31;
    uint64_t want = session->cap_items;
    size_t n_sparse = 0;
    for (uint32_t i = 0; i < n_new; i++) {
        uint32_t id = i < sub->n_objects? sub->objects [i].id: sub->tasks [i - sub->n_objects].id;
        if (id < limit)
            want = (uint64_t) id + 1 > want? (uint64_t) id + 1: want;
        else
            n_sparse++;
    }
    if (want > session->cap_items) {
        uint64_t cap = 1024;
        while (cap < want)
            cap *= 2;
        void **items = (void **) realloc (session->items, cap * sizeof (void *));
        if (!items)
            return -1;
        memset (items + session->cap_items, 0, (cap - session->cap_items) * sizeof (void *));
        session->items = items;
        session->cap_items = (uint32_t) cap;
    }
    if (n_sparse && !session->sparse)
        session->sparse = sq_idmap_new ();
    if (n_sparse && (!session->sparse || sq_idmap_reserve (session->sparse, n_sparse)))
        return -1;
    return 0;
}

//  Adds an item reserved by s_reserve.
static void
s_put (session_t *session, uint32_t id, void *item)
{
    if (id < session->cap_items)
        session->items [id] = item;
    else {
        int rc = sq_idmap_insert (session->sparse, id, item);
        assert (rc == 0);
        (void) rc;
    }
}

//  Frees every task and object of the session, then the session.
static void
s_session_destroy (graph_t *self, session_t **session_p)
{
    session_t *session = *session_p;
    size_t cursor = 0;
    void *item;
    //  Constants first: task outputs go with their tasks.
    while ((item = s_session_next (session, &cursor))) {
        object_t *object = s_as_object (item);
        if (object && !object->embedded)
            s_object_destroy (&object);
    }
    cursor = 0;
    while ((item = s_session_next (session, &cursor))) {
        task_t *task = s_as_task (item);
        if (task) {
            self->counts [task->state]--;
            s_task_destroy (&task);
        }
    }
    free (session->items);
    sq_idmap_destroy (&session->sparse);
    free (session->tenant);
    free (session->owner);
    free (session);
    *session_p = NULL;
}

void
graph_session_close (graph_t *self, session_t **session_p)
{
    session_t *session = *session_p;
    if (!session)
        return;
    *session_p = NULL;
    //  Stop what governors run, then drop everything: no propagation needed,
    //  the whole session goes.
    size_t cursor = 0;
    task_t *task;
    while ((task = graph_session_next_task (session, &cursor)))
        if ((task->state == TASK_ASSIGNED || task->state == TASK_RUNNING) && self->hooks.task_stop)
            self->hooks.task_stop (self->hooks.arg, task);
    //  Pending frees may point into this session: settle them first.
    s_flush_frees (self);
    cursor = 0;
    void *item;
    while ((item = s_session_next (session, &cursor))) {
        object_t *object = s_as_object (item);
        if (object && !object->released)
            s_object_release (self, object);
    }
    sq_idmap_remove (self->sessions, session->id);
    s_session_destroy (self, &session);
}

size_t
graph_session_count (graph_t *self)
{
    return sq_idmap_size (self->sessions);
}

//  --------------------------------------------------------------------------
//  Submit: validate everything, then commit. Nothing enters the graph
//  unless the whole submit is valid.

//  Index of a submit's items by id: value = (index << 1 | is_task) + 1.
//  Ids of one submit are usually consecutive: then an array from the
//  smallest indexes them, else a map.
typedef struct {
    uint32_t base;
    uint32_t span;
    uintptr_t *dense;
    sq_idmap_t *map;
} s_ids_t;

static int
s_ids_init (s_ids_t *self, const sq_submit_t *sub)
{
    memset (self, 0, sizeof *self);
    uint64_t n = (uint64_t) sub->n_objects + sub->n_tasks;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t id = i < sub->n_objects? sub->objects [i].id: sub->tasks [i - sub->n_objects].id;
        lo = id < lo? id: lo;
        hi = id > hi? id: hi;
    }
    if (n && (uint64_t) hi - lo < 2 * n + 1024) {
        self->base = lo;
        self->span = hi - lo + 1;
        self->dense = (uintptr_t *) calloc (self->span, sizeof (uintptr_t));
        return self->dense? 0: -1;
    }
    self->map = sq_idmap_new ();
    return self->map && sq_idmap_reserve (self->map, n) == 0? 0: -1;
}

static void
s_ids_destroy (s_ids_t *self)
{
    free (self->dense);
    sq_idmap_destroy (&self->map);
}

static uintptr_t
s_ids_get (s_ids_t *self, uint32_t id)
{
    if (self->dense)
        return id - self->base < self->span? self->dense [id - self->base]: 0;
    return (uintptr_t) sq_idmap_lookup (self->map, id);
}

//  0, or -1 if the id is there already (room was reserved by s_ids_init).
static int
s_ids_put (s_ids_t *self, uint32_t id, uintptr_t value)
{
    if (self->dense) {
        if (self->dense [id - self->base])
            return -1;
        self->dense [id - self->base] = value;
        return 0;
    }
    return sq_idmap_insert (self->map, id, (void *) value);
}

typedef struct {
    s_ids_t ids;
    const sq_submit_t *submit;
    int32_t *producer;          //  per object: index of the producing task, -1
} s_check_t;

static int
s_refuse (char *message, size_t size, uint32_t *bad_id, uint32_t id, int code,
          const char *format, ...) __attribute__ ((format (printf, 6, 7)));

static int
s_refuse (char *message, size_t size, uint32_t *bad_id, uint32_t id, int code,
          const char *format, ...)
{
    va_list args;
    va_start (args, format);
    vsnprintf (message, size, format, args);
    va_end (args);
    *bad_id = id;
    return code;
}

static inline uintptr_t s_entry (uint32_t index, bool task) { return (((uintptr_t) index << 1) | task) + 1; }

static int
s_validate (session_t *session, s_check_t *check, size_t n_payloads,
            graph_resource_fn *resource_ok, void *resource_arg,
            char *msg, size_t msg_size, uint32_t *bad_id)
{
    const sq_submit_t *sub = check->submit;
    //  Ids: unique within the submit and new to the session
    for (uint32_t i = 0; i < sub->n_objects + sub->n_tasks; i++) {
        bool is_task = i >= sub->n_objects;
        uint32_t index = is_task? i - sub->n_objects: i;
        uint32_t id = is_task? sub->tasks [index].id: sub->objects [index].id;
        if (s_item (session, id))
            return s_refuse (msg, msg_size, bad_id, id, SQ_E_DUPLICATE_ID,
                             "id %u is already used in session %u", id, session->id);
        if (s_ids_put (&check->ids, id, s_entry (index, is_task)))
            return s_refuse (msg, msg_size, bad_id, id, SQ_E_DUPLICATE_ID,
                             "id %u appears twice in the submit", id);
    }
    for (uint32_t i = 0; i < sub->n_objects; i++) {
        const sq_object_spec_t *o = &sub->objects [i];
        check->producer [i] = -1;
        if (o->frame == 0 || (o->frame > 0 && (size_t) o->frame > n_payloads))
            return s_refuse (msg, msg_size, bad_id, o->id, SQ_E_INVALID,
                             "object %u refers to payload frame %d, the message has %zu",
                             o->id, o->frame, n_payloads);
        if (o->flags & ~(uint32_t) SQ_OBJ_KEEP)
            return s_refuse (msg, msg_size, bad_id, o->id, SQ_E_INVALID,
                             "object %u has unknown flags %u", o->id, o->flags);
    }
    for (uint32_t t = 0; t < sub->n_tasks; t++) {
        const sq_task_spec_t *task = &sub->tasks [t];
        int kind = sq_kind_lookup (task->kind);
        if (kind < 0)
            return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_UNKNOWN_KIND,
                             "task %u has unknown kind '%.*s'", task->id,
                             (int) (task->kind.len > 100? 100: task->kind.len), task->kind.ptr);
        sq_taskconf_t conf;
        sq_errbuf_t err;
        if (sq_taskconf_decode (&conf, (sq_kind_t) kind, task->config, task->config_size,
                                task->n_inputs, task->n_outputs, &err))
            return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_BAD_CONFIG,
                             "task %u: %s", task->id, err.text);
        sq_taskconf_release (&conf);
        for (uint32_t i = 0; i < task->n_inputs; i++) {
            uint32_t id = task->inputs [i];
            uintptr_t entry = s_ids_get (&check->ids, id);
            if (entry && ((entry - 1) & 1))
                return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_UNKNOWN_ID,
                                 "task %u: input %u is a task, not a data object", task->id, id);
            if (!entry) {
                if (s_as_task (s_item (session, id)))
                    return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_UNKNOWN_ID,
                                     "task %u: input %u is a task, not a data object", task->id, id);
                object_t *old = s_as_object (s_item (session, id));
                if (!old || old->released)
                    //  The reply names the task, as for every other
                    //  fault of a task's spec (docs/protocol.md).
                    return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_UNKNOWN_ID,
                                     "task %u: input %u is not an object of session %u "
                                     "(never declared, or already released because nobody kept it)",
                                     task->id, id, session->id);
            }
        }
        for (uint32_t i = 0; i < task->n_outputs; i++) {
            uint32_t id = task->outputs [i];
            uintptr_t entry = s_ids_get (&check->ids, id);
            if (!entry || ((entry - 1) & 1))
                return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_UNKNOWN_ID,
                                 "task %u: output %u must be an object declared in the same submit",
                                 task->id, id);
            uint32_t index = (uint32_t) ((entry - 1) >> 1);
            if (sub->objects [index].frame != -1)
                return s_refuse (msg, msg_size, bad_id, id, SQ_E_INVALID,
                                 "object %u has data and is also the output of task %u", id, task->id);
            if (check->producer [index] >= 0)
                return s_refuse (msg, msg_size, bad_id, id, SQ_E_DUPLICATE_ID,
                                 "object %u is the output of two tasks (%u and %u)", id,
                                 sub->tasks [check->producer [index]].id, task->id);
            check->producer [index] = (int32_t) t;
        }
        for (uint32_t r = 0; r < task->n_resources; r++) {
            const sq_resource_t *res = &task->resources [r];
            if (resource_ok && !resource_ok (resource_arg, res->name, res->amount))
                return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_RESOURCES,
                                 "task %u needs %.*s=%llu but no governor has ever offered that much",
                                 task->id, (int) (res->name.len > 100? 100: res->name.len),
                                 res->name.ptr, (unsigned long long) res->amount);
        }
    }
    for (uint32_t i = 0; i < sub->n_objects; i++)
        if (sub->objects [i].frame == -1 && check->producer [i] < 0)
            return s_refuse (msg, msg_size, bad_id, sub->objects [i].id, SQ_E_NO_PRODUCER,
                             "object %u has neither data nor a task producing it",
                             sub->objects [i].id);
    return SQ_OK;
}

//  Kahn's algorithm over the submitted tasks: edges run from a producer to
//  the tasks of this submit consuming its outputs. Objects of earlier
//  submits cannot depend on new tasks, so cycles can only lie inside.
static int
s_check_cycles (s_check_t *check, char *msg, size_t msg_size, uint32_t *bad_id)
{
    const sq_submit_t *sub = check->submit;
    uint32_t n = sub->n_tasks;
    if (n == 0)
        return SQ_OK;
    uint32_t *indegree = (uint32_t *) calloc (n, sizeof (uint32_t));
    uint32_t *queue = (uint32_t *) malloc (n * sizeof (uint32_t));
    //  consumers of each task, as a CSR adjacency list
    uint32_t *first = (uint32_t *) calloc (n + 1, sizeof (uint32_t));
    size_t n_edges = 0;
    for (uint32_t t = 0; t < n; t++)
        n_edges += sub->tasks [t].n_inputs;
    uint32_t *edges = (uint32_t *) malloc ((n_edges + 1) * sizeof (uint32_t));
    int rc = SQ_OK;
    if (!indegree || !queue || !first || !edges) {
        rc = s_refuse (msg, msg_size, bad_id, 0, SQ_E_NOMEM, "out of memory");
        goto done;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t t = 0; t < n; t++) {
            const sq_task_spec_t *task = &sub->tasks [t];
            for (uint32_t i = 0; i < task->n_inputs; i++) {
                uintptr_t entry = s_ids_get (&check->ids, task->inputs [i]);
                if (!entry)
                    continue;   //  an object of an earlier submit
                int32_t producer = check->producer [(entry - 1) >> 1];
                if (producer < 0)
                    continue;   //  a constant
                if (pass == 0) {
                    first [producer + 1]++;
                    indegree [t]++;
                }
                else
                    edges [first [producer]++] = t;
            }
        }
        if (pass == 0)
            for (uint32_t t = 0; t < n; t++)
                first [t + 1] += first [t];
    }
    //  The second pass advanced first[p] to the end of p's edges.
    uint32_t head = 0, tail = 0;
    for (uint32_t t = 0; t < n; t++)
        if (indegree [t] == 0)
            queue [tail++] = t;
    while (head < tail) {
        uint32_t t = queue [head++];
        uint32_t begin = t == 0? 0: first [t - 1];
        for (uint32_t e = begin; e < first [t]; e++)
            if (--indegree [edges [e]] == 0)
                queue [tail++] = edges [e];
    }
    if (tail < n) {
        for (uint32_t t = 0; t < n; t++)
            if (indegree [t]) {
                rc = s_refuse (msg, msg_size, bad_id, sub->tasks [t].id, SQ_E_CYCLE,
                               "task %u is part of a dependency cycle", sub->tasks [t].id);
                break;
            }
    }
done:
    free (indegree);
    free (queue);
    free (first);
    free (edges);
    return rc;
}

static char *
s_strndup_or_null (mpr_str_t s)
{
    return s.len? mpr_strdup (s): NULL;
}

//  The rare fields of a task spec go out of line; *extra_p stays NULL when
//  all are defaults. On failure what was made is left for s_task_destroy.
static int
s_extra_from_spec (task_extra_t **extra_p, const sq_task_spec_t *spec)
{
    bool needed = spec->name.len || spec->priority || spec->max_retries || spec->timeout_ms;
    for (uint32_t r = 0; r < spec->n_resources && !needed; r++)
        needed = !mpr_str_eq (spec->resources [r].name, SQ_RES_CPUS)
              || spec->resources [r].amount != 1;
    if (!needed)
        return 0;
    task_extra_t *extra = (task_extra_t *) malloc (sizeof *extra);
    if (!extra)
        return -1;
    *extra = task_extra_default;
    *extra_p = extra;
    extra->priority = spec->priority;
    extra->max_retries = spec->max_retries;
    extra->timeout_ms = spec->timeout_ms;
    extra->name = s_strndup_or_null (spec->name);
    if (spec->name.len && !extra->name)
        return -1;
    if (spec->n_resources) {
        extra->resources = (sq_resource_t *) calloc (spec->n_resources, sizeof (sq_resource_t));
        if (!extra->resources)
            return -1;
    }
    for (uint32_t r = 0; r < spec->n_resources; r++) {
        const sq_resource_t *res = &spec->resources [r];
        if (mpr_str_eq (res->name, SQ_RES_CPUS)) {
            extra->cpus = res->amount > UINT32_MAX? UINT32_MAX: (uint32_t) res->amount;
            continue;
        }
        char *name = mpr_strdup (res->name);
        if (!name)
            return -1;
        extra->resources [extra->n_resources].name.ptr = name;
        extra->resources [extra->n_resources].name.len = res->name.len;
        extra->resources [extra->n_resources].amount = res->amount;
        extra->n_resources++;
    }
    return 0;
}

//  A task in one block with its outputs, its io array and its config:
//  one allocation per task, and objects never freed before their producer
//  (both go when the session closes).
static task_t *
s_task_new (session_t *session, const sq_task_spec_t *spec)
{
    size_t n_io = (size_t) spec->n_inputs + spec->n_outputs;
    size_t config_size = spec->config_size == 1 && spec->config [0] == 0xc0? 0: spec->config_size;
    task_t *task = (task_t *) calloc (1, sizeof (task_t) + spec->n_outputs * sizeof (object_t)
                                         + n_io * sizeof (object_t *) + config_size);
    if (!task)
        return NULL;
    task->key = sq_key (session->id, spec->id);
    task->session = session;
    task->kind = (uint8_t) sq_kind_lookup (spec->kind);
    task->n_inputs = spec->n_inputs;
    task->n_outputs = spec->n_outputs;
    task->io = (object_t **) (s_embedded (task) + spec->n_outputs);
    for (uint32_t i = 0; i < spec->n_outputs; i++) {
        object_t *output = &s_embedded (task) [i];
        output->embedded = true;
        output->producer = task;
        output->producer_output = i;
        task->io [task->n_inputs + i] = output;
    }
    if (config_size)
        memcpy (task->io + n_io, spec->config, config_size);
    task->config_size = (uint32_t) config_size;
    if (s_extra_from_spec (&task->extra, spec))
        s_task_destroy (&task);
    return task;
}

//  Fills an object record from its spec.
static int
s_object_init (object_t *o, session_t *session, const sq_object_spec_t *spec,
               zmq_msg_t *payloads)
{
    o->key = sq_key (session->id, spec->id);
    o->session = session;
    o->keep = (spec->flags & SQ_OBJ_KEEP) != 0;
    o->content_type = s_strndup_or_null (spec->content_type);
    if (spec->content_type.len && !o->content_type)
        return -1;
    if (spec->frame > 0) {
        zmq_msg_t copy;
        zmq_msg_init (&copy);
        if (zmq_msg_copy (&copy, &payloads [spec->frame - 1]))
            return -1;
        o->data = sq_blob_from_msg (&copy);
        if (!o->data)
            return -1;
        o->size = sq_blob_size (o->data);
        o->state = OBJ_FINISHED;
    }
    else
    if (spec->frame == SQ_FRAME_UPLOADED) {
        //  Data plane: already on a governor, which broker.c records as
        //  its location once the submit is committed.
        o->size = spec->size;
        o->state = OBJ_FINISHED;
    }
    return 0;
}

int
graph_submit (graph_t *self, session_t *session, const sq_submit_t *sub,
              zmq_msg_t *payloads, size_t n_payloads,
              graph_resource_fn *resource_ok, void *resource_arg,
              char *msg, size_t msg_size, uint32_t *bad_id)
{
    *bad_id = 0;
    s_check_t check = { .submit = sub };
    check.producer = (int32_t *) malloc ((sub->n_objects + 1) * sizeof (int32_t));
    int rc = SQ_OK;
    if (s_ids_init (&check.ids, sub) || !check.producer)
        rc = s_refuse (msg, msg_size, bad_id, 0, SQ_E_NOMEM, "out of memory");
    if (rc == SQ_OK)
        rc = s_validate (session, &check, n_payloads, resource_ok, resource_arg,
                         msg, msg_size, bad_id);
    if (rc == SQ_OK)
        rc = s_check_cycles (&check, msg, msg_size, bad_id);
    if (rc == SQ_OK && s_reserve (session, sub))
        rc = s_refuse (msg, msg_size, bad_id, 0, SQ_E_NOMEM, "out of memory");

    //  Create every task (with its outputs) and constant; on allocation
    //  failure, undo.
    object_t **objects = NULL;
    task_t **tasks = NULL;
    if (rc == SQ_OK) {
        objects = (object_t **) calloc (sub->n_objects + 1, sizeof *objects);
        tasks = (task_t **) calloc (sub->n_tasks + 1, sizeof *tasks);
        if (!objects || !tasks)
            rc = s_refuse (msg, msg_size, bad_id, 0, SQ_E_NOMEM, "out of memory");
    }
    for (uint32_t t = 0; rc == SQ_OK && t < sub->n_tasks; t++) {
        tasks [t] = s_task_new (session, &sub->tasks [t]);
        if (!tasks [t]) { rc = SQ_E_NOMEM; break; }
        for (uint32_t i = 0; i < sub->tasks [t].n_outputs; i++) {
            uintptr_t entry = s_ids_get (&check.ids, sub->tasks [t].outputs [i]);
            objects [(entry - 1) >> 1] = &s_embedded (tasks [t]) [i];
        }
    }
    for (uint32_t i = 0; rc == SQ_OK && i < sub->n_objects; i++) {
        if (!objects [i])
            objects [i] = (object_t *) calloc (1, sizeof (object_t));
        if (!objects [i] || s_object_init (objects [i], session, &sub->objects [i], payloads))
            rc = SQ_E_NOMEM;
    }
    //  Consumer lists of objects of earlier submits must grow without
    //  failing later: reserve first.
    for (uint32_t t = 0; rc == SQ_OK && t < sub->n_tasks; t++) {
        const sq_task_spec_t *spec = &sub->tasks [t];
        for (uint32_t i = 0; rc == SQ_OK && i < spec->n_inputs; i++) {
            uintptr_t entry = s_ids_get (&check.ids, spec->inputs [i]);
            object_t *o = entry? objects [(entry - 1) >> 1]
                               : s_as_object (s_item (session, spec->inputs [i]));
            tasks [t]->io [i] = o;
            if (s_add_consumer (o, tasks [t]))
                rc = SQ_E_NOMEM;
        }
    }
    if (rc == SQ_OK) {
        //  The submit is accepted from here on: nothing below can fail.
        for (uint32_t i = 0; i < sub->n_objects; i++)
            if (sub->objects [i].id > session->max_id)
                session->max_id = sub->objects [i].id;
        for (uint32_t t = 0; t < sub->n_tasks; t++)
            if (sub->tasks [t].id > session->max_id)
                session->max_id = sub->tasks [t].id;
        for (uint32_t i = 0; i < sub->n_objects; i++) {
            s_put (session, sub->objects [i].id, s_item_object (objects [i]));
            session->n_objects++;
            self->live_objects++;
        }
        for (uint32_t t = 0; t < sub->n_tasks; t++) {
            task_t *task = tasks [t];
            s_put (session, sub->tasks [t].id, task);
            session->n_tasks++;
            session->unfinished++;
            task->state = TASK_WAITING;
            self->counts [TASK_WAITING]++;
            session->counts [TASK_WAITING]++;
            for (uint32_t i = 0; i < task->n_inputs; i++) {
                task->io [i]->pending++;
                if (task->io [i]->state != OBJ_FINISHED)
                    task->unfinished++;
            }
        }
        order_assign (tasks, sub->n_tasks, &self->next_order);
        //  Tasks fed by failed objects of earlier submits fail now.
        for (uint32_t t = 0; t < sub->n_tasks; t++) {
            task_t *task = tasks [t];
            for (uint32_t i = 0; i < task->n_inputs && !s_final (task); i++)
                if (task->io [i]->state == OBJ_FAILED)
                    s_fail (self, task, task->io [i]->failure);
        }
        for (uint32_t t = 0; t < sub->n_tasks; t++) {
            task_t *task = tasks [t];
            if (task->state == TASK_WAITING && task->unfinished == 0) {
                s_set_state (self, task, TASK_READY);
                self->hooks.task_ready (self->hooks.arg, task);
            }
        }
        for (uint32_t i = 0; i < sub->n_objects; i++)
            s_queue_free_check (self, objects [i]);
        s_flush_frees (self);
    }
    else {
        //  Undo: unlink from consumer lists of older objects, free the new
        //  (constants before tasks: task outputs live in the tasks).
        for (uint32_t t = 0; tasks && t < sub->n_tasks && tasks [t]; t++)
            for (uint32_t i = 0; i < tasks [t]->n_inputs; i++) {
                object_t *o = tasks [t]->io [i];
                if (o && o->n_consumers && object_consumers (o) [o->n_consumers - 1] == tasks [t])
                    o->n_consumers--;
            }
        for (uint32_t i = 0; objects && i < sub->n_objects; i++)
            if (objects [i] && !objects [i]->embedded)
                s_object_destroy (&objects [i]);
        for (uint32_t t = 0; tasks && t < sub->n_tasks; t++)
            s_task_destroy (&tasks [t]);
        if (rc == SQ_E_NOMEM)
            s_refuse (msg, msg_size, bad_id, 0, SQ_E_NOMEM, "out of memory");
    }
    free (objects);
    free (tasks);
    free (check.producer);
    s_ids_destroy (&check.ids);
    return rc;
}

static void *
s_lookup (graph_t *self, uint64_t key)
{
    session_t *session = graph_session (self, sq_key_session (key));
    return session? s_item (session, sq_key_id (key)): NULL;
}

task_t *
graph_task (graph_t *self, uint64_t key)
{
    return s_as_task (s_lookup (self, key));
}

object_t *
graph_object (graph_t *self, uint64_t key)
{
    return s_as_object (s_lookup (self, key));
}

//  --------------------------------------------------------------------------
//  Governor reports

void
graph_task_assigned (graph_t *self, task_t *task, gov_t *gov)
{
    s_set_state (self, task, TASK_ASSIGNED);
    task->gov = gov;
    task->retracting = false;
}

void
graph_task_started (graph_t *self, task_t *task)
{
    if (task->state == TASK_ASSIGNED)
        s_set_state (self, task, TASK_RUNNING);
}

int
graph_task_finished (graph_t *self, task_t *task, gov_t *gov,
                     const sq_output_ref_t *outputs, uint32_t n_outputs,
                     zmq_msg_t *payloads, size_t n_payloads, size_t inline_max)
{
    char why [160] = "";
    if (n_outputs != task->n_outputs)
        snprintf (why, sizeof why, "governor reported %u outputs, the task has %u",
                  n_outputs, task->n_outputs);
    for (uint32_t i = 0; !*why && i < n_outputs; i++) {
        object_t *o = task->io [task->n_inputs + i];
        if (o && outputs [i].key != o->key)
            snprintf (why, sizeof why, "governor reported output %u, expected %u",
                      sq_key_id (outputs [i].key), sq_key_id (o->key));
        else
        if (outputs [i].frame == 0 || (outputs [i].frame > 0
            && ((size_t) outputs [i].frame > n_payloads
                || zmq_msg_size (&payloads [outputs [i].frame - 1]) != outputs [i].size
                || outputs [i].size > inline_max)))
            snprintf (why, sizeof why, "governor sent inconsistent inline data for output %u", i);
    }
    if (*why) {
        //  A report that does not match the task is not trusted: the task
        //  runs again (elsewhere if possible) rather than fail for a fault
        //  that is not its own, or finish on bytes nobody can vouch for.
        sq_warn ("task %u of session %u: %s; running it again", sq_key_id (task->key),
                 sq_key_session (task->key), why);
        task_extra_t *extra = graph_task_extra (task);
        if (extra)
            extra->last_gov = gov? gov->id: 0;
        graph_task_requeue (self, task);
        return -1;
    }
    for (uint32_t i = 0; i < n_outputs; i++) {
        object_t *o = task->io [task->n_inputs + i];
        o->size = outputs [i].size;
        if (outputs [i].frame > 0 && !o->data) {
            zmq_msg_t copy;
            zmq_msg_init (&copy);
            if (zmq_msg_copy (&copy, &payloads [outputs [i].frame - 1]) == 0)
                o->data = sq_blob_from_msg (&copy);
            else
                zmq_msg_close (&copy);
        }
    }
    s_finish (self, task, gov);
    return 0;
}

//  A task finished with its outputs' sizes and inline bytes set: they are
//  finished (and on gov, unless NULL), consumers count down.
static void
s_finish (graph_t *self, task_t *task, gov_t *gov)
{
    s_set_state (self, task, TASK_FINISHED);
    uint32_t attempt = task->attempt;
    //  Outputs first: the task_done hook answers waits and fetches, which
    //  must see the outputs finished and located.
    for (uint32_t i = 0; i < task->n_outputs; i++) {
        object_t *o = task->io [task->n_inputs + i];
        //  A re-run for a lost sibling also reports outputs that never went
        //  away: their consumers did not count them as missing.
        bool was_unfinished = o->state == OBJ_UNFINISHED;
        if (o->released) {
            o->released = false;
            self->live_objects++;
        }
        o->version = attempt;
        if (gov)
            graph_object_add_location (self, o, gov, true);
        o->state = OBJ_FINISHED;
        for (uint32_t c = 0; was_unfinished && c < o->n_consumers; c++) {
            task_t *consumer = object_consumers (o) [c];
            //  Overbooked consumers (already assigned) count down too, so
            //  that a requeue knows what they still wait for.
            if (s_final (consumer) || consumer->unfinished == 0)
                continue;
            if (--consumer->unfinished == 0 && consumer->state == TASK_WAITING) {
                s_set_state (self, consumer, TASK_READY);
                self->hooks.task_ready (self->hooks.arg, consumer);
            }
        }
        s_queue_free_check (self, o);
    }
    s_task_done (self, task);
    s_flush_frees (self);
}

void
graph_task_restore_finished (graph_t *self, task_t *task, gov_t *gov, uint32_t attempt,
                             const uint64_t *sizes, sq_blob_t **data, uint32_t n)
{
    if (s_final (task) || n != task->n_outputs) {
        for (uint32_t i = 0; i < n; i++)
            sq_blob_unref (&data [i]);
        return;
    }
    task->attempt = attempt;
    task->gov = NULL;
    for (uint32_t i = 0; i < n; i++) {
        object_t *o = task->io [task->n_inputs + i];
        o->size = sizes [i];
        if (data [i] && !o->data)
            o->data = data [i];
        else
            sq_blob_unref (&data [i]);
        data [i] = NULL;
    }
    s_finish (self, task, gov);
}

bool
graph_task_adopt (graph_t *self, task_t *task, gov_t *gov, uint32_t attempt, bool running)
{
    if (task->state != TASK_READY || task->gov)
        return false;
    task->attempt = attempt;
    graph_task_assigned (self, task, gov);
    if (running)
        s_set_state (self, task, TASK_RUNNING);
    return true;
}

void
graph_task_failed (graph_t *self, task_t *task, int code, const char *message)
{
    if (s_final (task))
        return;
    failure_t *failure = failure_new (sq_key_id (task->key), code, message);
    if (!failure)
        return;
    s_fail (self, task, failure);
    failure_unref (&failure);
    s_flush_frees (self);
}

//  An assigned task will not run where it is: it is stopped there and
//  waits again, with a new attempt.
static void
s_stop_and_wait (graph_t *self, task_t *task)
{
    if (self->hooks.task_stop)
        self->hooks.task_stop (self->hooks.arg, task);
    task->attempt++;
    task->gov = NULL;
    s_set_state (self, task, TASK_WAITING);
}

static bool
s_unbook_visit (graph_t *self, task_t *consumer, object_t *output, void *gov)
{
    if (output->state == OBJ_FINISHED       //  the consumer has it
    ||  consumer->state != TASK_ASSIGNED || consumer->gov != gov || consumer->unfinished == 0)
        return false;
    s_stop_and_wait (self, consumer);
    return true;
}

//  A task leaves its governor unfinished: consumers overbooked there behind
//  it wait for outputs that will now be made elsewhere (or later). They are
//  stopped and wait again, and so on down the chain of tasks overbooked
//  behind them; the scheduler places them anew once their inputs exist.
static void
s_unbook (graph_t *self, task_t *task)
{
    s_downstream (self, task, s_unbook_visit, task->gov);
}

void
graph_task_requeue (graph_t *self, task_t *task)
{
    if (task->state != TASK_ASSIGNED && task->state != TASK_RUNNING)
        return;
    s_unbook (self, task);
    task->attempt++;
    task->gov = NULL;
    //  An overbooked task may still wait for inputs.
    if (task->unfinished) {
        s_set_state (self, task, TASK_WAITING);
        return;
    }
    s_set_state (self, task, TASK_READY);
    self->hooks.task_ready (self->hooks.arg, task);
}

int
graph_keep (graph_t *self, object_t *object, bool keep)
{
    object->keep = keep;
    if (!keep) {
        s_queue_free_check (self, object);
        s_flush_frees (self);
    }
    return 0;
}

void
graph_cancel (graph_t *self, task_t *task)
{
    if (s_final (task))
        return;
    failure_t *failure = failure_new (sq_key_id (task->key), SQ_E_CANCELLED, "cancelled");
    if (!failure)
        return;
    s_fail (self, task, failure);
    failure_unref (&failure);
    s_flush_frees (self);
}

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
    if (s_list_grow (&object->location_.one, (void **) &object->location_.many, &on_heap,
                     object->n_locations, sizeof (location_t)))
        return;                 //  out of memory: the copy is simply not used
    object->locations_on_heap = on_heap;
    location_t *locations = object_locations (object);
    locations [object->n_locations].gov = gov;
    locations [object->n_locations].arrived = arrived;
    object->n_locations++;
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
        if (s_final (consumer))
            continue;
        consumer->unfinished++;
        if (consumer->state == TASK_READY)
            s_set_state (self, consumer, TASK_WAITING);
        else
        if (consumer->state == TASK_ASSIGNED || consumer->state == TASK_RUNNING) {
            s_unbook (self, consumer);
            s_stop_and_wait (self, consumer);
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
        o->n_locations = 0;
        task_t *producer = o->producer;
        if (!producer) {
            //  A constant whose only copy was on a governor: nothing to
            //  recompute it from.
            char message [500];
            if (self->constant_why)
                snprintf (message, sizeof message, "%s", self->constant_why);
            else
                snprintf (message, sizeof message,
                          "constant object %u was lost with the governor holding it; submit it again",
                          sq_key_id (o->key));
            failure_t *failure = failure_new (sq_key_id (o->key), SQ_E_LOST, message);
            if (!failure)
                continue;
            o->state = OBJ_FAILED;
            o->failure = s_failure_ref (failure);
            for (uint32_t c = 0; c < o->n_consumers; c++)
                if (!s_final (object_consumers (o) [c]))
                    s_fail (self, object_consumers (o) [c], failure);
            failure_unref (&failure);
            continue;
        }
        o->state = OBJ_UNFINISHED;
        s_unready_consumers (self, o);
        if (producer->state != TASK_FINISHED)
            continue;           //  already being re-run for another output
        if (n_reset == cap_reset) {
            task_t **p = (task_t **) realloc (reset, (cap_reset *= 2) * sizeof *p);
            if (!p)
                break;
            reset = p;
        }
        reset [n_reset++] = producer;
        self->recomputed++;
        producer->attempt++;
        s_set_state (self, producer, TASK_WAITING);
        producer->session->unfinished++;
        producer->session->finished--;
        producer->unfinished = 0;
        for (uint32_t i = 0; i < producer->n_inputs; i++) {
            object_t *input = producer->io [i];
            input->pending++;
            if (input->state == OBJ_FINISHED && !s_has_copy (input)) {
                //  Lost or released too: recompute it first. Its own
                //  consumers (the producer among them) are counted then.
                if (n == cap) {
                    object_t **p = (object_t **) realloc (stack, (cap *= 2) * sizeof *p);
                    if (!p)
                        break;
                    stack = p;
                }
                stack [n++] = input;
            }
            else
            if (input->state != OBJ_FINISHED)
                producer->unfinished++;
        }
    }
    free (stack);
    //  Re-run producers whose inputs all exist can start now; the others
    //  start when the inputs they wait for are recomputed.
    for (size_t i = 0; i < n_reset; i++) {
        task_t *task = reset [i];
        if (task->state == TASK_WAITING && task->unfinished == 0) {
            s_set_state (self, task, TASK_READY);
            self->hooks.task_ready (self->hooks.arg, task);
        }
    }
    free (reset);
}

void
graph_object_lost (graph_t *self, object_t *object, gov_t *gov)
{
    location_t *loc = graph_object_location (object, gov);
    if (loc)
        *loc = object_locations (object) [--object->n_locations];
    if (object->state == OBJ_FINISHED && !object->released && !s_has_copy (object)
    &&  s_needed (object))
        s_recompute (self, object);
    s_flush_frees (self);
}

void
graph_object_lost_why (graph_t *self, object_t *object, gov_t *gov, const char *why)
{
    self->constant_why = why;
    graph_object_lost (self, object, gov);
    self->constant_why = NULL;
}

void
graph_forget_governor (graph_t *self, gov_t *gov)
{
    //  Collect first: recomputation changes states under the iteration.
    size_t n_lost = 0, cap = 0;
    object_t **lost = NULL;
    size_t s_cursor = 0;
    session_t *session;
    while ((session = (session_t *) sq_idmap_next (self->sessions, &s_cursor, NULL))) {
        size_t cursor = 0;
        void *item;
        while ((item = s_session_next (session, &cursor))) {
            object_t *object = s_as_object (item);
            location_t *loc = object? graph_object_location (object, gov): NULL;
            if (!loc)
                continue;
            location_t *locations = object_locations (object);
            *loc = locations [--object->n_locations];
            //  Copies still on their way may have come from the dead
            //  governor: order them again from a copy that exists.
            location_t *source = NULL;
            for (uint32_t i = 0; i < object->n_locations && !source; i++)
                if (locations [i].arrived)
                    source = &locations [i];
            for (uint32_t i = 0; source && i < object->n_locations; i++)
                if (!locations [i].arrived && self->hooks.object_copy)
                    self->hooks.object_copy (self->hooks.arg, object, source->gov, locations [i].gov);
            if (object->state == OBJ_FINISHED && !object->released && !s_has_copy (object)
            &&  s_needed (object)) {
                if (n_lost == cap) {
                    cap = cap? cap * 2: 16;
                    object_t **p = (object_t **) realloc (lost, cap * sizeof *p);
                    if (!p)
                        break;
                    lost = p;
                }
                lost [n_lost++] = object;
            }
        }
    }
    for (size_t i = 0; i < n_lost; i++)
        s_recompute (self, lost [i]);
    free (lost);
    s_flush_frees (self);
}

size_t
graph_recover_sweep (graph_t *self)
{
    size_t n_lost = 0, cap = 0;
    object_t **lost = NULL;
    size_t s_cursor = 0;
    session_t *session;
    while ((session = (session_t *) sq_idmap_next (self->sessions, &s_cursor, NULL))) {
        size_t cursor = 0;
        void *item;
        while ((item = s_session_next (session, &cursor))) {
            object_t *object = s_as_object (item);
            if (!object || object->state != OBJ_FINISHED || object->released
            ||  s_has_copy (object) || !s_needed (object))
                continue;
            if (n_lost == cap) {
                cap = cap? cap * 2: 16;
                object_t **p = (object_t **) realloc (lost, cap * sizeof *p);
                if (!p)
                    break;
                lost = p;
            }
            lost [n_lost++] = object;
        }
    }
    for (size_t i = 0; i < n_lost; i++)
        s_recompute (self, lost [i]);
    free (lost);
    s_flush_frees (self);
    return n_lost;
}

uint64_t
graph_task_count (graph_t *self, task_state_t state)
{
    return self->counts [state];
}

size_t
graph_object_count (graph_t *self)
{
    return self->live_objects;
}

uint64_t
graph_recomputed (graph_t *self)
{
    return self->recomputed;
}
