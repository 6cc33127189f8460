/*  graph: tasks, objects, sessions and their state transitions.

    Objects are freed lazily: any change that may make an object unneeded
    puts it on `maybe_free`, and every public operation ends by freeing what
    on that list is really unneeded. Freeing in the middle of a walk over
    consumers (failure propagation, input release) would pull objects out
    from under the walk.

    Over 800 lines: every state transition of tasks, objects and sessions
    ends with the lazy freeing above; kept in one file so that a transition
    is read beside the invariants it keeps.
*/
#include "graph_internal.h"
#include "grow.h"


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
int
gx_list_grow (void *one, void **many, bool *on_heap, uint32_t count, size_t item)
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

int
gx_add_consumer (object_t *object, task_t *task)
{
    bool on_heap = object->consumers_on_heap;
    if (gx_list_grow (&object->consumer_.one, (void **) &object->consumer_.many, &on_heap,
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

failure_t *
gx_failure_ref (failure_t *self)
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
    free (self->actors_dirty);
    free (self);
    *self_p = NULL;
}

//  --------------------------------------------------------------------------
//  Task and object life


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
void
gx_object_destroy (object_t **self_p)
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
void
gx_task_destroy (task_t **self_p)
{
    task_t *self = *self_p;
    if (!self)
        return;
    for (uint32_t i = 0; i < self->n_outputs; i++)
        s_object_free_parts (&gx_embedded (self) [i]);
    if (self->extra) {
        for (uint32_t i = 0; i < self->extra->n_resources; i++)
            free ((char *) self->extra->resources [i].name.ptr);
        free (self->extra->resources);
        free (self->extra->governors);
        free (self->extra->name);
        gx_actor_free (&self->extra->actor);
        jobarray_destroy (&self->extra->array);
        free (self->extra);
    }
    failure_unref (&self->failure);
    free (self);
    *self_p = NULL;
}

static inline bool
s_holds_cpus (uint8_t state)
{
    return state == TASK_ASSIGNED || state == TASK_RUNNING;
}

//  Counted in share_t.cpuless: a task of 0 cpus from its tenant's queue
//  (an actor and its calls live on the actor's cpus, outside the queue).
static inline bool
s_cpuless (const task_t *task)
{
    return task_extra (task)->cpus == 0 && !task->actor_call && !task->actor_host;
}

void
gx_set_state (graph_t *self, task_t *task, task_state_t state)
{
    if (s_holds_cpus (task->state) != s_holds_cpus ((uint8_t) state) && task->session->share) {
        share_t *share = task->session->share;
        if (s_holds_cpus ((uint8_t) state)) {
            share->cpus += task_extra (task)->cpus;
            share->cpuless += s_cpuless (task);
        }
        else {
            share->cpus -= task_extra (task)->cpus;
            share->cpuless -= s_cpuless (task);
        }
    }
    self->counts [task->state]--;
    task->session->counts [task->state]--;
    task->state = (uint8_t) state;
    self->counts [state]++;
    task->session->counts [state]++;
    if (task->actor_host || task->actor_call)
        gx_actor_touch (self, task);
}


void
gx_queue_free_check (graph_t *self, object_t *object)
{
    if (object->free_queued)
        return;
    if (self->n_maybe_free == self->cap_maybe_free
    &&  sq_grow ((void **) &self->maybe_free, &self->cap_maybe_free, self->n_maybe_free + 1,
                 sizeof *self->maybe_free, 64, SIZE_MAX))
        return;                 //  the object stays until its session closes
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

void
gx_stored_update (object_t *object, uint64_t was)
{
    uint64_t now = gx_stored (object);
    if (now == was)
        return;
    session_t *session = object->session;
    session->stored = session->stored - was + now;
    if (session->share)
        session->share->stored = session->share->stored - was + now;
}

//  Drops an object's copies everywhere; its record stays as lineage.
static void
s_object_release (graph_t *self, object_t *object)
{
    if (object->n_locations && self->hooks.object_drop)
        self->hooks.object_drop (self->hooks.arg, object);
    uint64_t was = gx_stored (object);
    object->n_locations = 0;
    sq_blob_unref (&object->data);
    if (!object->released) {
        self->live_objects--;
        object->session->live_objects--;
    }
    object->released = true;
    gx_stored_update (object, was);
}

void
gx_flush_frees (graph_t *self)
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
//  A job's failed or cancelled task keeps its inputs (RESUBMIT runs it
//  again from them, not what made them) until the job is forgotten.
static bool
s_pins_inputs (const task_t *task)
{
    return task->session->job && task->state != TASK_FINISHED;
}

static void
s_task_done (graph_t *self, task_t *task)
{
    for (uint32_t i = 0; i < task->n_inputs && !s_pins_inputs (task); i++) {
        object_t *input = task->io [i];
        input->pending--;
        gx_queue_free_check (self, input);
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

//  The object can be read now (finished, or a stream opened): its
//  consumers count it, and one waiting for nothing else is ready.
//  Overbooked consumers (already assigned) count down too, so that a
//  requeue knows what they still wait for.
void
gx_count_down (graph_t *self, object_t *object)
{
    for (uint32_t c = 0; c < object->n_consumers; c++) {
        task_t *consumer = object_consumers (object) [c];
        if (gx_final (consumer) || consumer->unfinished == 0)
            continue;
        if (--consumer->unfinished == 0 && consumer->state == TASK_WAITING) {
            gx_set_state (self, consumer, TASK_READY);
            self->hooks.task_ready (self->hooks.arg, consumer);
        }
    }
}

static int
s_push (graph_t *self, size_t *n, task_t *task)
{
    if (*n == self->cap_stack
    &&  sq_grow ((void **) &self->stack, &self->cap_stack, *n + 1, sizeof *self->stack, 64, SIZE_MAX))
        return -1;
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
    if (task->stream_in)
        gx_stream_unread (self, task);
    task->failure = gx_failure_ref (failure);
    gx_set_state (self, task, final);
    for (uint32_t i = 0; i < task->n_outputs; i++) {
        object_t *out = task->io [task->n_inputs + i];
        if (out->state != OBJ_UNFINISHED)
            continue;
        out->state = OBJ_FAILED;
        failure_unref (&out->failure);
        out->failure = gx_failure_ref (failure);
        gx_queue_free_check (self, out);
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
    if (gx_final (consumer))
        return false;
    s_fail_one (self, consumer, failing->failure, failing->final);
    return true;
}

//  Fails (or cancels) a task and everything downstream of it that is not
//  done yet, sharing one failure.
void
gx_fail (graph_t *self, task_t *task, failure_t *failure)
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


//  Iterates over a session's items: the id array, then the sparse map.
void *
gx_session_next (session_t *session, size_t *cursor)
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
    while ((item = gx_session_next (session, cursor)))
        if (gx_as_task (item))
            return (task_t *) item;
    return NULL;
}

object_t *
graph_session_next_object (session_t *session, size_t *cursor)
{
    void *item;
    object_t *object;
    while ((item = gx_session_next (session, cursor)))
        if ((object = gx_as_object (item)))
            return object;
    return NULL;
}

//  Makes room for the ids of a submit, so that gx_put cannot fail. The id
//  array grows to cover an id only while it stays at least a quarter full:
//  ids past that go to the sparse map.
int
gx_reserve (session_t *session, const sq_submit_t *sub)
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

//  Adds an item reserved by gx_reserve.
void
gx_put (session_t *session, uint32_t id, void *item)
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
    while ((item = gx_session_next (session, &cursor))) {
        object_t *object = gx_as_object (item);
        if (object && !object->embedded)
            gx_object_destroy (&object);
    }
    cursor = 0;
    while ((item = gx_session_next (session, &cursor))) {
        task_t *task = gx_as_task (item);
        if (task) {
            self->counts [task->state]--;
            if (session->share && s_holds_cpus (task->state)) {
                session->share->cpus -= task_extra (task)->cpus;
                session->share->cpuless -= s_cpuless (task);
            }
            gx_task_destroy (&task);
        }
    }
    if (session->share) {
        session->share->sessions--;
        session->share->constants -= session->constants;
        session->share->stored -= session->stored;
    }
    free (session->items);
    sq_idmap_destroy (&session->sparse);
    free (session->tenant);
    free (session->owner);
    free (session->name);
    jobx_destroy (&session->jobx);
    free (session);
    *session_p = NULL;
}

void
graph_session_set_share (graph_t *self, session_t *session, share_t *share)
{
    (void) self;
    if (session->share || !share)
        return;
    session->share = share;
    share->sessions++;
    share->constants += session->constants;
    share->stored += session->stored;
    //  A session restored from the journal may hold tasks already.
    size_t cursor = 0;
    task_t *task;
    while ((task = graph_session_next_task (session, &cursor)))
        if (s_holds_cpus (task->state)) {
            share->cpus += task_extra (task)->cpus;
            share->cpuless += s_cpuless (task);
        }
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
    gx_flush_frees (self);
    cursor = 0;
    void *item;
    while ((item = gx_session_next (session, &cursor))) {
        object_t *object = gx_as_object (item);
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

static void *
s_lookup (graph_t *self, uint64_t key)
{
    session_t *session = graph_session (self, sq_key_session (key));
    return session? gx_item (session, sq_key_id (key)): NULL;
}

task_t *
graph_task (graph_t *self, uint64_t key)
{
    return gx_as_task (s_lookup (self, key));
}

object_t *
graph_object (graph_t *self, uint64_t key)
{
    return gx_as_object (s_lookup (self, key));
}

//  --------------------------------------------------------------------------
//  Governor reports

void
graph_task_assigned (graph_t *self, task_t *task, gov_t *gov)
{
    gx_set_state (self, task, TASK_ASSIGNED);
    task->gov = gov;
    task->ran_gov = gov->id;
    task->ran_attempt = task->attempt;
    task->retracting = false;
}

void
graph_task_started (graph_t *self, task_t *task)
{
    if (task->state == TASK_ASSIGNED)
        gx_set_state (self, task, TASK_RUNNING);
    if (task->stream_out)
        gx_stream_open (self, task);
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
        else
        if (o && o->stream && (!o->stream_open || outputs [i].frame != -1))
            snprintf (why, sizeof why, "governor reported stream %u finished without starting "
                      "it, or with its bytes", sq_key_id (o->key));
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
        uint64_t was = gx_stored (o);
        o->size = outputs [i].size;
        if (outputs [i].frame > 0 && !o->data) {
            zmq_msg_t copy;
            zmq_msg_init (&copy);
            if (zmq_msg_copy (&copy, &payloads [outputs [i].frame - 1]) == 0)
                o->data = sq_blob_from_msg (&copy);
            else
                zmq_msg_close (&copy);
        }
        gx_stored_update (o, was);
    }
    s_finish (self, task, gov);
    return 0;
}

//  A task finished with its outputs' sizes and inline bytes set: they are
//  finished (and on gov, unless NULL), consumers count down.
static void
s_finish (graph_t *self, task_t *task, gov_t *gov)
{
    gx_set_state (self, task, TASK_FINISHED);
    uint32_t attempt = task->attempt;
    //  Outputs first: the task_done hook answers waits and fetches, which
    //  must see the outputs finished and located.
    for (uint32_t i = 0; i < task->n_outputs; i++) {
        object_t *o = task->io [task->n_inputs + i];
        //  A re-run for a lost sibling also reports outputs that never went
        //  away: their consumers did not count them as missing.
        bool was_unfinished = o->state == OBJ_UNFINISHED;
        if (o->state == OBJ_FAILED) {
            //  Deleted by hand (graph_object_delete) while a sibling was
            //  being recomputed: it stays deleted, and this new copy goes.
            if (gov)
                graph_object_add_location (self, o, gov, true);
            s_object_release (self, o);
            continue;
        }
        if (o->released) {
            uint64_t was = gx_stored (o);
            o->released = false;
            self->live_objects++;
            o->session->live_objects++;
            gx_stored_update (o, was);
        }
        o->version = attempt;
        //  A stream has no copy: its consumers read it as it was written,
        //  and counted it when it opened.
        if (gov && !o->stream)
            graph_object_add_location (self, o, gov, true);
        o->state = OBJ_FINISHED;
        if (was_unfinished && !o->stream_open)
            gx_count_down (self, o);
        gx_queue_free_check (self, o);
    }
    s_task_done (self, task);
    gx_flush_frees (self);
}

void
graph_task_restore_finished (graph_t *self, task_t *task, gov_t *gov, uint32_t attempt,
                             const uint64_t *sizes, sq_blob_t **data, uint32_t n)
{
    if (gx_final (task) || n != task->n_outputs) {
        for (uint32_t i = 0; i < n; i++)
            sq_blob_unref (&data [i]);
        return;
    }
    task->attempt = attempt;
    task->gov = NULL;
    if (gov) {
        task->ran_gov = gov->id;        //  a reattached governor's log is there
        task->ran_attempt = attempt;
    }
    for (uint32_t i = 0; i < n; i++) {
        object_t *o = task->io [task->n_inputs + i];
        uint64_t was = gx_stored (o);
        o->size = sizes [i];
        if (data [i] && !o->data)
            o->data = data [i];
        else
            sq_blob_unref (&data [i]);
        data [i] = NULL;
        gx_stored_update (o, was);
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
        graph_task_started (self, task);
    return true;
}

void
graph_task_failed (graph_t *self, task_t *task, int code, const char *message)
{
    if (gx_final (task))
        return;
    failure_t *failure = failure_new (sq_key_id (task->key), code, message);
    if (!failure)
        return;
    gx_fail (self, task, failure);
    failure_unref (&failure);
    gx_flush_frees (self);
}

//  An assigned task will not run where it is: it is stopped there and
//  waits again, with a new attempt.
void
gx_stop_and_wait (graph_t *self, task_t *task)
{
    if (self->hooks.task_stop)
        self->hooks.task_stop (self->hooks.arg, task);
    task->attempt++;
    task->gov = NULL;
    gx_set_state (self, task, TASK_WAITING);
}

static bool
s_unbook_visit (graph_t *self, task_t *consumer, object_t *output, void *gov)
{
    if (output->state == OBJ_FINISHED       //  the consumer has it
    ||  consumer->state != TASK_ASSIGNED || consumer->gov != gov || consumer->unfinished == 0)
        return false;
    gx_stop_and_wait (self, consumer);
    return true;
}

//  A task leaves its governor unfinished: consumers overbooked there behind
//  it wait for outputs that will now be made elsewhere (or later). They are
//  stopped and wait again, and so on down the chain of tasks overbooked
//  behind them; the scheduler places them anew once their inputs exist.
void
gx_unbook (graph_t *self, task_t *task)
{
    s_downstream (self, task, s_unbook_visit, task->gov);
}

void
graph_task_requeue (graph_t *self, task_t *task)
{
    if (task->state != TASK_ASSIGNED && task->state != TASK_RUNNING)
        return;
    if (task->stream_in || task->stream_out) {
        //  The streams it read or wrote are gone: its group runs again.
        gx_stream_restart (self, task);
        if (task->state != TASK_ASSIGNED && task->state != TASK_RUNNING)
            return;             //  sent back to wait as a consumer
    }
    gx_unbook (self, task);
    task->attempt++;
    task->gov = NULL;
    //  An overbooked task may still wait for inputs.
    if (task->unfinished) {
        gx_set_state (self, task, TASK_WAITING);
        return;
    }
    gx_set_state (self, task, TASK_READY);
    self->hooks.task_ready (self->hooks.arg, task);
}

graph_outcome_t
graph_task_attempt_failed (graph_t *self, task_t *task, uint32_t gov_id, uint32_t reason,
                           const char *message, uint32_t allowed_failures)
{
    task_extra_t *extra;
    if (task->actor_call && gx_actor_call_lost (self, task, gov_id, message))
        return GRAPH_FAILED;
    if (reason == SQ_FAIL_MEMORY && task_extra (task)->crashes < allowed_failures
    &&  (extra = graph_task_extra (task))) {
        extra->crashes++;
        extra->last_gov = gov_id;
        for (uint32_t r = 0; r < extra->n_resources; r++)
            if (mpr_str_eq (extra->resources [r].name, "memory"))
                extra->resources [r].amount *= 2;
        graph_task_requeue (self, task);
        return GRAPH_RETRY_MEMORY;
    }
    if (task_extra (task)->retries < task_extra (task)->max_retries
    &&  (extra = graph_task_extra (task))) {
        extra->retries++;
        extra->last_gov = gov_id;
        graph_task_requeue (self, task);
        return GRAPH_RETRY;
    }
    graph_task_failed (self, task, SQ_E_TASK_FAILED, message);
    return GRAPH_FAILED;
}

int
graph_keep (graph_t *self, object_t *object, bool keep)
{
    object->keep = keep;
    if (!keep) {
        gx_queue_free_check (self, object);
        gx_flush_frees (self);
    }
    return 0;
}

int
graph_object_delete (graph_t *self, object_t *object, const char *message)
{
    if (object->state != OBJ_FINISHED || object->released)
        return -1;
    failure_t *failure = failure_new (sq_key_id (object->key), SQ_E_DELETED, message);
    if (!failure)
        return -1;
    object->state = OBJ_FAILED;
    object->failure = gx_failure_ref (failure);
    //  Every consumer not done fails, running ones too: they are stopped
    //  rather than left to finish on bytes that no longer exist anywhere
    //  else (a retry of theirs could not run).
    for (uint32_t c = 0; c < object->n_consumers; c++) {
        task_t *consumer = object_consumers (object) [c];
        if (!gx_final (consumer))
            gx_fail (self, consumer, failure);
    }
    failure_unref (&failure);
    s_object_release (self, object);
    gx_flush_frees (self);
    return 0;
}

void
graph_cancel (graph_t *self, task_t *task)
{
    graph_cancel_why (self, task, "cancelled");
}

void
graph_cancel_why (graph_t *self, task_t *task, const char *message)
{
    if (gx_final (task))
        return;
    failure_t *failure = failure_new (sq_key_id (task->key), SQ_E_CANCELLED, message);
    if (!failure)
        return;
    gx_fail (self, task, failure);
    failure_unref (&failure);
    gx_flush_frees (self);
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

//  --------------------------------------------------------------------------
//  RESUBMIT of plain tasks (jobs.c): failed and cancelled tasks wait again,
//  in two passes so that their order does not matter: first every one is
//  reset and its outputs are unfinished again, then each counts the inputs
//  it waits for. What finished stays finished; an input with no copy left
//  (its governor died) is made again by lineage.

static bool
s_again_visit (graph_t *self, task_t *consumer, object_t *output, void *arg)
{
    (void) self; (void) output;
    task_t ***list = (task_t ***) arg;
    if (consumer->state != TASK_FAILED && consumer->state != TASK_CANCELLED)
        return false;
    for (task_t **t = list [0]; t < list [1]; t++)
        if (*t == consumer)
            return false;
    if (list [1] == list [2])
        return false;           //  the caller's array is full: the rest stay
    *list [1]++ = consumer;
    return true;
}

size_t
graph_tasks_again (graph_t *self, task_t **tasks, size_t n, size_t cap)
{
    //  Those named, then what they cancelled or failed downstream.
    task_t **list [3] = { tasks, tasks + n, tasks + cap };
    for (size_t i = 0; i < n; i++)
        s_downstream (self, tasks [i], s_again_visit, list);
    n = (size_t) (list [1] - tasks);
    for (size_t i = 0; i < n; i++) {
        task_t *task = tasks [i];
        session_t *session = task->session;
        for (uint32_t f = 0; f < session->n_failures; f++)
            if (session->failures [f] == task) {
                session->failures [f] = session->failures [--session->n_failures];
                break;
            }
        session->failed--;
        session->unfinished++;
        for (uint32_t k = 0; k < task->n_inputs && !s_pins_inputs (task); k++)
            task->io [k]->pending++;
        failure_unref (&task->failure);
        if (task->extra)
            task->extra->retries = task->extra->crashes = 0;
        task->attempt++;
        task->unfinished = 0;
        gx_set_state (self, task, TASK_WAITING);
        for (uint32_t j = 0; j < task->n_outputs; j++) {
            object_t *out = task->io [task->n_inputs + j];
            if (out->state != OBJ_FAILED)
                continue;
            out->state = OBJ_UNFINISHED;
            failure_unref (&out->failure);
            if (out->released) {
                out->released = false;
                self->live_objects++;
                session->live_objects++;
            }
        }
    }
    //  Inputs lost since are made again first (nothing if a copy is
    //  left); that moves waiting consumers' counts, so counting comes after.
    for (size_t i = 0; i < n; i++)
        for (uint32_t k = 0; k < tasks [i]->n_inputs; k++)
            if (tasks [i]->io [k]->state == OBJ_FINISHED)
                gx_recompute (self, tasks [i]->io [k]);
    for (size_t i = 0; i < n; i++) {
        task_t *task = tasks [i];
        failure_t *failed = NULL;
        if (gx_final (task))
            continue;           //  failed below by an input of another
        task->unfinished = 0;
        for (uint32_t k = 0; k < task->n_inputs; k++) {
            object_t *input = task->io [k];
            if (input->state == OBJ_FAILED && !failed)
                failed = input->failure;
            else
            if (input->state == OBJ_UNFINISHED && !(input->stream && input->stream_open))
                task->unfinished++;
        }
        if (failed)
            gx_fail (self, task, failed);       //  what it reads cannot be made
    }
    for (size_t i = 0; i < n; i++)
        if (tasks [i]->state == TASK_WAITING && tasks [i]->unfinished == 0) {
            gx_set_state (self, tasks [i], TASK_READY);
            self->hooks.task_ready (self->hooks.arg, tasks [i]);
        }
    gx_flush_frees (self);
    return n;
}
