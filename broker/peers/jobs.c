/*  jobs: sessions that outlive their client (docs/protocol.md, "Jobs").

    Over 800 lines: the job requests (SESSIONS, ATTACH, SESSION_WAIT, TASKS,
    RESUBMIT, FORGET, JOB_CANCEL) all read the compact records of array
    tasks' elements kept here. */
#include "jobs.h"
#include "grow.h"

struct _jobwait_t {
    peer_t *peer;
    uint32_t req;
    uint32_t session;
    int64_t deadline;           //  monotonic ms, < 0 for none
};

//  --------------------------------------------------------------------------
//  Array tasks: one record per array task; its elements become tasks only
//  when they are to be placed, at most S_WINDOW of an array at a time, and
//  leave a compact record when they end.

#define S_WINDOW 1024           //  elements of one array that are tasks at once
#define S_CHUNK 1024            //  compact records allocated together

//  An element's compact record (32 bytes), made when it first becomes a task.
typedef struct {
    int64_t started_ms, ended_ms;
    int32_t exit_code;
    uint32_t gov;
    uint32_t task;              //  S_LIVE: its task's id
    uint16_t attempts;
    uint8_t state;              //  0: not ended; else sq_done_state_t
    uint8_t flags;              //  S_HAS_EXIT, S_LIVE, S_RESTORED
} s_elem_t;
#define S_HAS_EXIT 1
#define S_LIVE 2                //  a task now
#define S_RESTORED 4            //  ended in an earlier life of the broker (no task)

struct _jobarray_t {
    session_t *session;
    task_t *parent;             //  set when the array task is made ready
    uint32_t parent_id;
    uint8_t kind;               //  SQ_ARRAY_RANGE, SQ_ARRAY_ITEMS
    uint32_t first, step, size;
    uint8_t *items;             //  ITEMS: the raw msgpack array, and where each
    uint32_t *item_at;          //  string starts in it
    size_t items_size;
    s_elem_t **chunks;          //  size / S_CHUNK + 1 pointers, NULL until used
    uint32_t next;              //  no element below it waits to be made a task
    uint32_t live;              //  elements that are tasks and have not ended
    uint32_t made;              //  elements made tasks in this life (session tasks)
    uint32_t restored [4];      //  elements ended in an earlier life, by state
    uint32_t ended;             //  elements ended, all lives
    uint32_t failed, cancelled;
    uint32_t superseded [4];    //  tasks of elements run again since, by state
    bool feeding;               //  its inputs are there: elements may be made
    bool stopped;               //  cancelled: the rest never run
    bool dirty;                 //  on the broker's list to settle
    sq_idmap_t *errors;         //  k + 1 -> message (char *) of failed elements
};

struct _jobx_t {
    struct _jobarray_t **arrays;
    uint32_t n_arrays, cap_arrays;
    uint32_t next_element;      //  ids from GRAPH_ELEMENT_IDS (elements, ADOPT)
    //  A children's session "nested/S/T": the key of its task T. Adopted:
    //  ADOPT made tasks of S read objects of it, so it closes with S,
    //  not when T ends (graph_adopt's inputs point into it).
    uint64_t parent;
    bool adopted;
    //  --after: the jobs (session ids) whose end its tasks wait for, 0 once
    //  they all finished; its ready tasks held meanwhile (jobs_hold).
    uint32_t *after;
    uint32_t n_after;
    task_t **held;
    size_t n_held, cap_held;
};

void
jobx_destroy (struct _jobx_t **self_p)
{
    struct _jobx_t *self = *self_p;
    if (!self)
        return;
    //  Arrays go with their tasks, before this.
    free (self->arrays);
    free (self->after);
    free (self->held);
    free (self);
    *self_p = NULL;
}

static struct _jobx_t *
s_jobx (session_t *session)
{
    if (!session->jobx) {
        session->jobx = (struct _jobx_t *) calloc (1, sizeof (struct _jobx_t));
        if (session->jobx)
            session->jobx->next_element = GRAPH_ELEMENT_IDS;
    }
    return session->jobx;
}

struct _jobarray_t *
jobarray_new (task_t *task, const sq_task_spec_t *spec)
{
    session_t *session = task->session;
    struct _jobx_t *x = s_jobx (session);
    if (!x)
        return NULL;
    if (x->n_arrays == x->cap_arrays
    &&  sq_grow32 ((void **) &x->arrays, &x->cap_arrays, (size_t) x->n_arrays + 1,
                   sizeof *x->arrays, 4, UINT32_MAX))
        return NULL;
    struct _jobarray_t *self = (struct _jobarray_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->session = session;
    self->parent = task;
    self->parent_id = spec->id;
    self->kind = spec->array;
    self->first = spec->array_first;
    self->step = spec->array_step? spec->array_step: 1;
    self->size = spec->array_size;
    self->chunks = (s_elem_t **) calloc (self->size / S_CHUNK + 1, sizeof (s_elem_t *));
    self->errors = sq_idmap_new ();
    bool ok = self->chunks && self->errors;
    if (ok && self->kind == SQ_ARRAY_ITEMS) {
        self->items = (uint8_t *) malloc (spec->array_items_size);
        self->items_size = spec->array_items_size;
        self->item_at = (uint32_t *) malloc (self->size * sizeof (uint32_t));
        ok = self->items && self->item_at;
        if (ok) {
            memcpy (self->items, spec->array_items, spec->array_items_size);
            //  Checked by the decoder: an array of `size` strings.
            mpr_t r;
            uint32_t n;
            mpr_init (&r, self->items, spec->array_items_size);
            mpr_array (&r, &n);
            for (uint32_t i = 0; i < self->size && mpr_ok (&r); i++) {
                mpr_str_t s;
                self->item_at [i] = (uint32_t) r.pos;
                mpr_str (&r, &s, SQ_MAX_NAME);
            }
            ok = mpr_ok (&r);
        }
    }
    if (!ok) {
        jobarray_destroy (&self);
        return NULL;
    }
    x->arrays [x->n_arrays++] = self;
    return self;
}

void
jobarray_destroy (struct _jobarray_t **self_p)
{
    struct _jobarray_t *self = *self_p;
    if (!self)
        return;
    struct _jobx_t *x = self->session->jobx;
    for (uint32_t i = 0; x && i < x->n_arrays; i++)
        if (x->arrays [i] == self) {
            x->arrays [i] = x->arrays [--x->n_arrays];
            break;
        }
    for (uint32_t c = 0; self->chunks && c <= self->size / S_CHUNK; c++)
        free (self->chunks [c]);
    free (self->chunks);
    if (self->errors) {
        size_t cursor = 0;
        uint64_t key;
        void *message;
        while ((message = sq_idmap_next (self->errors, &cursor, &key)))
            free (message);
    }
    sq_idmap_destroy (&self->errors);
    free (self->items);
    free (self->item_at);
    free (self);
    *self_p = NULL;
}

//  An element's record, made on first use when `make` (NULL: out of
//  memory, or not made yet).
static s_elem_t *
s_elem (struct _jobarray_t *self, uint32_t k, bool make)
{
    s_elem_t **chunk = &self->chunks [k / S_CHUNK];
    if (!*chunk && make)
        *chunk = (s_elem_t *) calloc (S_CHUNK, sizeof (s_elem_t));
    return *chunk? &(*chunk) [k % S_CHUNK]: NULL;
}

static int64_t
s_index (const struct _jobarray_t *self, uint32_t k)
{
    return self->kind == SQ_ARRAY_RANGE? (int64_t) self->first + (int64_t) k * self->step: k;
}

static mpr_str_t
s_item (const struct _jobarray_t *self, uint32_t k)
{
    mpr_str_t s = { "", 0 };
    if (self->kind == SQ_ARRAY_ITEMS) {
        mpr_t r;
        mpr_init (&r, self->items + self->item_at [k], self->items_size - self->item_at [k]);
        mpr_str (&r, &s, SQ_MAX_NAME);
    }
    return s;
}

//  --------------------------------------------------------------------------
//  What a job is now

static uint32_t s_pending (const struct _jobarray_t *a);
static uint32_t s_unmade (const struct _jobarray_t *a);
static void s_element_ended (broker_t *self, task_t *task);
static uint64_t s_array_again (struct _jobarray_t *a);

//  Tasks and elements of the session that have not ended: an array task
//  that ended (cancelled, or failed before a RESUBMIT) no longer counts
//  its elements still to run.
static uint64_t
s_unfinished (const session_t *session)
{
    uint64_t n = session->unfinished;
    const struct _jobx_t *x = session->jobx;
    for (uint32_t i = 0; x && i < x->n_arrays; i++)
        if (x->arrays [i]->parent->state >= TASK_FINISHED)
            n += s_pending (x->arrays [i]);
    return n;
}

static void
s_job_info (const session_t *session, sq_job_info_t *job)
{
    memset (job, 0, sizeof *job);
    job->id = session->id;
    if (session->name)
        job->name = (mpr_str_t) { session->name, (uint32_t) strlen (session->name) };
    job->detached = session->job;
    job->attached = session->client != NULL;
    const uint32_t *c = session->counts;
    job->tasks [0] = (uint64_t) c [TASK_WAITING] + c [TASK_READY] + c [TASK_ASSIGNED];
    job->tasks [1] = c [TASK_RUNNING];
    job->tasks [2] = c [TASK_FINISHED];
    job->tasks [3] = c [TASK_FAILED];
    job->tasks [4] = c [TASK_CANCELLED];
    //  An array task counts as its elements: those that are tasks are in
    //  the session's counts (less the ones run again since), the others
    //  here.
    const struct _jobx_t *x = session->jobx;
    for (uint32_t i = 0; x && i < x->n_arrays; i++) {
        const struct _jobarray_t *a = x->arrays [i];
        uint8_t ps = a->parent->state;
        job->tasks [ps <= TASK_ASSIGNED? 0: ps - TASK_RUNNING + 1]--;
        for (int s = 1; s <= 3; s++)
            job->tasks [1 + s] += (uint64_t) a->restored [s] - a->superseded [s];
        job->tasks [a->stopped? 4: 0] += s_unmade (a);
    }
    if (s_unfinished (session))
        job->state = SQ_JOBSTATE_RUNNING;
    else
    if (job->tasks [3])
        job->state = SQ_JOBSTATE_FAILED;
    else
    if (job->tasks [4])
        job->state = SQ_JOBSTATE_CANCELLED;
    else
        job->state = SQ_JOBSTATE_FINISHED;
    job->created_ms = (uint64_t) session->created_ms;
    job->ended_ms = job->state == SQ_JOBSTATE_RUNNING? 0: (uint64_t) session->ended_ms;
}

//  The session named by id or name, if this peer may see it.
static session_t *
s_find (broker_t *self, peer_t *peer, uint32_t id, const sq_request_t *q)
{
    session_t *session = NULL;
    if (id)
        session = graph_session (self->graph, id);
    else
    if (q && q->has_name) {
        size_t cursor = 0;
        session_t *s;
        while ((s = graph_session_next (self->graph, &cursor)))
            if (s->name && strlen (s->name) == q->name.len
            &&  memcmp (s->name, q->name.ptr, q->name.len) == 0 && bx_same_tenant (peer, s)) {
                session = s;
                break;
            }
    }
    if (session && !bx_same_tenant (peer, session))
        session = NULL;
    return session;
}

//  The same answer for a job that is not there and another tenant's.
static void
s_unknown (broker_t *self, peer_t *peer, const sq_request_t *q, uint32_t id)
{
    char message [200];
    if (!id && q->has_name)
        snprintf (message, sizeof message, "no job named %.*s", (int) q->name.len, q->name.ptr);
    else
        snprintf (message, sizeof message, "no job %u", id);
    bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_SESSION, message, 0);
}

static void
s_reply_job (broker_t *self, peer_t *peer, uint32_t req, const session_t *session)
{
    sq_job_info_t job;
    s_job_info (session, &job);
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, req);
    sq_pack_job (&self->out.pk, &job);
    bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

//  --------------------------------------------------------------------------
//  Children's sessions: a job named "nested/S/T" holds the tasks that task T
//  of session S submitted (docs/protocol.md, "Jobs"). It lives while that
//  task has not ended, whatever becomes of the connections of its attempts,
//  so that an attempt run again finds the children of the one before.

#define S_NESTED "nested/"

//  The parent's key of a name "nested/S/T" (S, T decimal, non-zero, no
//  leading zeros), or 0 if the name is not of that form.
static uint64_t
s_nested_parent (const char *name, size_t len)
{
    size_t prefix = strlen (S_NESTED);
    if (len <= prefix || memcmp (name, S_NESTED, prefix) != 0)
        return 0;
    uint64_t part [2] = { 0, 0 };
    size_t at = prefix;
    for (int k = 0; k < 2; k++) {
        size_t start = at;
        while (at < len && name [at] >= '0' && name [at] <= '9' && at - start < 10)
            part [k] = part [k] * 10 + (uint64_t) (name [at++] - '0');
        if (at == start || name [start] == '0' || part [k] > UINT32_MAX)
            return 0;
        if (k == 0 && (at >= len || name [at++] != '/'))
            return 0;
    }
    return at == len? sq_key ((uint32_t) part [0], (uint32_t) part [1]): 0;
}

static bool
s_task_ended (const task_t *task)
{
    return task->state == TASK_FINISHED || task->state == TASK_FAILED
        || task->state == TASK_CANCELLED;
}

//  0 if the peer may open the children's session of this parent; else the
//  error, with its message.
static int
s_nested_check (broker_t *self, peer_t *peer, const sq_request_t *q,
                char *message, size_t message_size)
{
    uint64_t parent = s_nested_parent (q->name.ptr, q->name.len);
    session_t *session = parent? graph_session (self->graph, sq_key_session (parent)): NULL;
    task_t *task = session && bx_same_tenant (peer, session)?
                   graph_task (self->graph, parent): NULL;
    if (!q->detached || !task || s_task_ended (task)) {
        snprintf (message, message_size, "a name beginning %s is the children's session of "
                  "a task not ended, %sS/T, opened detached: %.*s is not one", S_NESTED,
                  S_NESTED, (int) q->name.len, q->name.ptr);
        return SQ_E_INVALID;
    }
    return SQ_OK;
}

//  The children's session of a task that has not ended is found from the
//  task's key (self->nested), so that the task's end closes it (queued by
//  jobs_task_done, closed by jobs_settle outside graph calls), and its
//  session's close closes it first.
static int
s_nested_link (broker_t *self, session_t *session, uint64_t parent)
{
    struct _jobx_t *jx = s_jobx (session);
    if (!jx || (!self->nested && !(self->nested = sq_idmap_new ())))
        return -1;
    //  One left by a session closed without jobs_session_closing (an open
    //  that failed later) is replaced.
    sq_idmap_remove (self->nested, parent);
    if (sq_idmap_insert (self->nested, parent, (void *) (uintptr_t) session->id))
        return -1;
    jx->parent = parent;
    return 0;
}

//  The tasks of an adopted children's session that no ADOPT task needs
//  (directly or upstream) are cancelled, all of them if `all` (the parent
//  failed or was cancelled: its result, and so what it adopted, reaches
//  nobody), and nothing of it stays kept: the parent's client is gone.
static void
s_nested_release (broker_t *self, session_t *session, bool all)
{
    size_t cursor = 0, n = 0, cap = 0;
    object_t *object;
    task_t **stack = NULL;
    sq_idmap_t *needed = all? NULL: sq_idmap_new ();
    if (!all && !needed)
        return;                 //  out of memory: they run on; closed with the session
    while ((object = graph_session_next_object (session, &cursor))) {
        bool adopted = false;
        for (uint32_t i = 0; i < object->n_consumers && !adopted; i++)
            adopted = object_consumers (object) [i]->session != session;
        if (object->keep)
            graph_keep (self->graph, object, false);
        if (!adopted || all || !object->producer)
            continue;
        //  Upstream of an adopted object, within the session
        if (n == cap && sq_grow ((void **) &stack, &cap, n + 1, sizeof *stack, 16, SIZE_MAX))
            goto done;
        stack [n++] = object->producer;
        while (n) {
            task_t *task = stack [--n];
            if (sq_idmap_lookup (needed, task->key))
                continue;
            if (sq_idmap_insert (needed, task->key, task))
                goto done;
            for (uint32_t i = 0; i < task->n_inputs; i++) {
                task_t *up = task->io [i]->producer;
                if (!up || up->session != session || sq_idmap_lookup (needed, up->key))
                    continue;
                if (n == cap && sq_grow ((void **) &stack, &cap, n + 1, sizeof *stack, 16, SIZE_MAX))
                    goto done;
                stack [n++] = up;
            }
        }
    }
    cursor = 0;
    task_t *task;
    while ((task = graph_session_next_task (session, &cursor)))
        if (task->state < TASK_FINISHED && (all || !sq_idmap_lookup (needed, task->key)))
            graph_cancel (self->graph, task);
done:
    free (stack);
    sq_idmap_destroy (&needed);
}

//  A task's end (jobs_task_done) queued its key: its children's session
//  closes, or, adopted, lets go of what nobody adopted.
static void
s_nested_settle (broker_t *self)
{
    for (size_t i = 0; i < self->n_nested_ended; i++) {
        uint64_t parent = self->nested_ended [i];
        uint32_t id = (uint32_t) (uintptr_t) sq_idmap_lookup (self->nested, parent);
        session_t *session = id? graph_session (self->graph, id): NULL;
        task_t *task = graph_task (self->graph, parent);
        if (!session) {
            sq_idmap_remove (self->nested, parent);
            continue;
        }
        if (session->jobx && session->jobx->adopted) {
            sq_debug ("session %u: its task ended; what it adopted stays until session %u closes",
                      session->id, sq_key_session (parent));
            s_nested_release (self, session, !task || task->state != TASK_FINISHED);
            continue;
        }
        sq_idmap_remove (self->nested, parent);
        sq_debug ("session %u closed: the task it holds the children of has ended", session->id);
        bx_session_close (self, session);
    }
    self->n_nested_ended = 0;
}

//  A broker restarted from its journal: children's sessions find their
//  tasks again, and those whose task ended (or is gone) close. Once.
void
jobs_recovered (broker_t *self)
{
    size_t cursor = 0, n = 0;
    session_t *s, **ended = NULL;
    while ((s = graph_session_next (self->graph, &cursor))) {
        uint64_t parent = s->job && s->name && !(s->jobx && s->jobx->parent)
                        ? s_nested_parent (s->name, strlen (s->name)): 0;
        if (!parent)
            continue;
        task_t *task = graph_task (self->graph, parent);
        if (task && !s_task_ended (task) && s_nested_link (self, s, parent) == 0)
            continue;
        session_t **p = (session_t **) realloc (ended, (n + 1) * sizeof *p);
        if (!p)
            break;
        ended = p;
        ended [n++] = s;
    }
    for (size_t i = 0; i < n; i++)
        bx_session_close (self, ended [i]);
    free (ended);
}

//  ADOPT: objects of a task's children's session, which this connection
//  holds (the task's own client), become objects of the task's session,
//  the one its caller reads: same tenant by construction (the children's
//  session was opened as that tenant, checked from the transport, and the
//  parent's session is checked again here).
void
jobs_adopt (broker_t *self, peer_t *peer, const sq_request_t *q, session_t *session)
{
    char message [200];
    uint64_t parent = session->jobx? session->jobx->parent: 0;
    session_t *to = parent? graph_session (self->graph, sq_key_session (parent)): NULL;
    task_t *task = to && bx_same_tenant (peer, to)? graph_task (self->graph, parent): NULL;
    if (!task || s_task_ended (task)) {
        snprintf (message, sizeof message, "session %u is not the children's session (%sS/T) "
                  "of a task that has not ended: nothing of it can be adopted",
                  session->id, S_NESTED);
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_INVALID,
                        message, 0);
        return;
    }
    for (uint32_t i = 0; i < q->n_ids; i++) {
        object_t *object = graph_object (self->graph, sq_key (session->id, q->ids [i]));
        if (!object || object->released || object->stream) {
            snprintf (message, sizeof message, "id %u is not an object of session %u "
                      "(or was already released, or is a stream)", q->ids [i], session->id);
            bx_reply_error (self, peer->identity, peer->identity_size, q->req,
                            SQ_E_UNKNOWN_ID, message, q->ids [i]);
            return;
        }
    }
    struct _jobx_t *jx = s_jobx (to);
    uint32_t *made = (uint32_t *) malloc ((q->n_ids + 1) * sizeof *made);
    if (!jx || !made) {
        free (made);
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_NOMEM,
                        "out of memory", 0);
        return;
    }
    made [0] = to->id;
    for (uint32_t i = 0; i < q->n_ids; i++) {
        object_t *object = graph_object (self->graph, sq_key (session->id, q->ids [i]));
        //  Two free ids in a row: the task and its output.
        while (jx->next_element < UINT32_MAX - 1
        &&  (graph_task (self->graph, sq_key (to->id, jx->next_element))
             || graph_object (self->graph, sq_key (to->id, jx->next_element))
             || graph_task (self->graph, sq_key (to->id, jx->next_element + 1))
             || graph_object (self->graph, sq_key (to->id, jx->next_element + 1))))
            jx->next_element++;
        task_t *adopt = jx->next_element < UINT32_MAX - 1
                      ? graph_adopt (self->graph, to, jx->next_element, object): NULL;
        if (!adopt) {
            free (made);
            bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_NOMEM,
                            "out of memory (or no ids left in the session)", 0);
            return;
        }
        session->jobx->adopted = true;
        made [i + 1] = jx->next_element + 1;
        jx->next_element += 2;
    }
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, q->req);
    sq_pack_holders (&self->out.pk, made, q->n_ids + 1);
    bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
    free (made);
}

//  An adopted children's session closes with its parent's session only.
int
jobs_close_check (const session_t *session, char *message, size_t message_size)
{
    if (!session->jobx || !session->jobx->adopted)
        return SQ_OK;
    snprintf (message, message_size, "session %u holds objects its task's caller adopted "
              "(session %u reads them): it closes with that session",
              session->id, sq_key_session (session->jobx->parent));
    return SQ_E_INVALID;
}

//  --------------------------------------------------------------------------
//  --after: a job whose tasks wait in the broker until other jobs ended.
//  Its ready tasks are held here (not queued for the scheduler); when the
//  last of those jobs finished they are queued; when one failed, was
//  cancelled or is gone, its tasks are cancelled with that job named.

const uint32_t *
jobs_after (const session_t *session)
{
    return session->jobx? session->jobx->after: NULL;
}

uint32_t
jobs_n_after (const session_t *session)
{
    return session->jobx? session->jobx->n_after: 0;
}

int
jobs_set_after (session_t *session, const uint32_t *ids, uint32_t n)
{
    struct _jobx_t *x = s_jobx (session);
    uint32_t *after = x? (uint32_t *) malloc (n * sizeof (uint32_t)): NULL;
    if (!after)
        return -1;
    memcpy (after, ids, n * sizeof (uint32_t));
    free (x->after);
    x->after = after;
    x->n_after = n;
    return 0;
}

//  What the jobs it waits for say: 0 still running, 1 all finished, -1
//  one did not finish (message says which and how).
static int
s_after_state (broker_t *self, session_t *session, char *message, size_t message_size)
{
    struct _jobx_t *x = session->jobx;
    int state = 1;
    for (uint32_t i = 0; x && i < x->n_after; i++) {
        session_t *target = graph_session (self->graph, x->after [i]);
        if (!target) {
            snprintf (message, message_size, "job %u it waits for (--after) is gone "
                      "(forgotten)", x->after [i]);
            return -1;
        }
        sq_job_info_t job;
        s_job_info (target, &job);
        if (job.state == SQ_JOBSTATE_RUNNING)
            state = 0;
        else
        if (job.state != SQ_JOBSTATE_FINISHED) {
            snprintf (message, message_size, "job %u it waits for (--after) %s", target->id,
                      job.state == SQ_JOBSTATE_FAILED? "failed": "was cancelled");
            return -1;
        }
    }
    return state;
}

static int
s_after_open (broker_t *self, peer_t *peer, session_t *session, const sq_request_t *q,
              char *message, size_t message_size)
{
    for (uint32_t i = 0; i < q->n_ids; i++)
        if (!s_find (self, peer, q->ids [i], NULL) || q->ids [i] == session->id) {
            snprintf (message, message_size, "--after: no job %u", q->ids [i]);
            return SQ_E_SESSION;
        }
    if (jobs_set_after (session, q->ids, q->n_ids)) {
        snprintf (message, message_size, "out of memory");
        return SQ_E_NOMEM;
    }
    //  Ended already: nothing to wait for, or a job refused before any of
    //  its tasks could be held.
    int state = s_after_state (self, session, message, message_size);
    if (state < 0)
        return SQ_E_INVALID;
    if (state > 0)
        session->jobx->n_after = 0;
    return SQ_OK;
}

bool
jobs_hold (broker_t *self, task_t *task)
{
    (void) self;
    struct _jobx_t *x = task->session->jobx;
    if (!x || !x->n_after)
        return false;
    if (x->n_held == x->cap_held
    &&  sq_grow ((void **) &x->held, &x->cap_held, x->n_held + 1, sizeof *x->held, 16, SIZE_MAX))
        return false;           //  out of memory: it runs now rather than never
    x->held [x->n_held++] = task;
    return true;
}

//  One job waiting for others: settled if they ended.
static void
s_after_settle (broker_t *self, session_t *session)
{
    struct _jobx_t *x = session->jobx;
    char message [200];
    int state = s_after_state (self, session, message, sizeof message);
    if (state == 0)
        return;
    x->n_after = 0;
    if (state > 0) {
        //  Held tasks still ready (none was cancelled since) are queued.
        for (size_t i = 0; i < x->n_held; i++)
            if (x->held [i]->state == TASK_READY)
                bx_hook_task_ready (self, x->held [i]);
    }
    else {
        size_t cursor = 0;
        task_t *task;
        while ((task = graph_session_next_task (session, &cursor)))
            if (task->state < TASK_FINISHED && !task->array_element)
                graph_cancel_why (self->graph, task, message);
        sq_info ("job %u: its tasks are cancelled: %s", session->id, message);
    }
    free (x->held);
    x->held = NULL;
    x->n_held = x->cap_held = 0;
}

//  A job ended (or a journal was replayed): the jobs waiting for it settle.
static void
s_after_check (broker_t *self, uint32_t ended)
{
    //  Settling cancels tasks and ends jobs, which comes back here, but
    //  opens and closes no session: the walk stays valid. A job settles
    //  once (it waits for nothing after).
    size_t cursor = 0;
    session_t *s;
    while ((s = graph_session_next (self->graph, &cursor)))
        if (s->jobx && s->jobx->n_after) {
            bool names = ended == 0;
            for (uint32_t i = 0; i < s->jobx->n_after && !names; i++)
                names = s->jobx->after [i] == ended;
            if (names)
                s_after_settle (self, s);
        }
}

void
jobs_after_replayed (broker_t *self)
{
    s_after_check (self, 0);
}

//  --------------------------------------------------------------------------
//  Opening

int
jobs_open (broker_t *self, peer_t *peer, session_t *session, const sq_request_t *q,
           char *message, size_t message_size)
{
    session->created_ms = (int64_t) sq_wall_ms ();
    session->ended_ms = session->created_ms;
    if (q->n_ids) {
        int code = s_after_open (self, peer, session, q, message, message_size);
        if (code)
            return code;
    }
    if (!q->has_name && !q->detached)
        return SQ_OK;
    uint64_t parent = 0;
    if (q->has_name && q->name.len >= strlen (S_NESTED)
    &&  memcmp (q->name.ptr, S_NESTED, strlen (S_NESTED)) == 0) {
        int code = s_nested_check (self, peer, q, message, message_size);
        if (code)
            return code;
        parent = s_nested_parent (q->name.ptr, q->name.len);
    }
    if (q->has_name) {
        size_t cursor = 0;
        session_t *s;
        while ((s = graph_session_next (self->graph, &cursor)))
            if (s != session && s->name && strlen (s->name) == q->name.len
            &&  memcmp (s->name, q->name.ptr, q->name.len) == 0
            &&  (s->tenant? peer->tenant && strcmp (s->tenant, peer->tenant) == 0: !peer->tenant)) {
                snprintf (message, message_size, "a job named %.*s exists (job %u)",
                          (int) q->name.len, q->name.ptr, s->id);
                return SQ_E_DUPLICATE_ID;
            }
        session->name = mpr_strdup (q->name);
        if (!session->name) {
            snprintf (message, message_size, "out of memory");
            return SQ_E_NOMEM;
        }
    }
    session->job = q->detached;
    if (parent && s_nested_link (self, session, parent)) {
        snprintf (message, message_size, "out of memory");
        return SQ_E_NOMEM;
    }
    return SQ_OK;
}

//  --------------------------------------------------------------------------
//  Parked SESSION_WAITs

static void
s_wait_remove (broker_t *self, size_t i)
{
    peer_t *peer = self->jobwaits [i].peer;
    if (peer->outstanding)
        peer->outstanding--;
    self->jobwaits [i] = self->jobwaits [--self->n_jobwaits];
}

//  Answers the waits on a session that stopped running.
static void
s_waits_answer (broker_t *self, session_t *session)
{
    for (size_t i = 0; i < self->n_jobwaits; )
        if (self->jobwaits [i].session == session->id) {
            s_reply_job (self, self->jobwaits [i].peer, self->jobwaits [i].req, session);
            s_wait_remove (self, i);
        }
        else
            i++;
}

static void
s_session_wait (broker_t *self, peer_t *peer, const sq_request_t *q, session_t *session)
{
    if (!s_unfinished (session)) {
        s_reply_job (self, peer, q->req, session);
        return;
    }
    if (q->timeout_ms == 0) {
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_TIMEOUT,
                        "the job is still running", 0);
        return;
    }
    if (peer->outstanding >= self->config.max_requests) {
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_BUSY,
                        "too many waits and fetches outstanding on this connection", 0);
        return;
    }
    if (self->n_jobwaits == self->cap_jobwaits
    &&  sq_grow ((void **) &self->jobwaits, &self->cap_jobwaits, self->n_jobwaits + 1,
                 sizeof *self->jobwaits, 16, SIZE_MAX)) {
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_NOMEM,
                        "out of memory", 0);
        return;
    }
    peer->outstanding++;
    self->jobwaits [self->n_jobwaits++] = (struct _jobwait_t) {
        peer, q->req, session->id, bx_deadline (q->timeout_ms)
    };
}

void
jobs_session_closing (broker_t *self, session_t *session)
{
    //  Its tasks' children's sessions close first: ADOPT tasks of this
    //  session read their objects.
    uint64_t key;
    void *value;
    size_t cursor = 0, n = 0;
    uint64_t *children = NULL;
    while (self->nested && (value = sq_idmap_next (self->nested, &cursor, &key)))
        if (sq_key_session (key) == session->id) {
            uint64_t *p = (uint64_t *) realloc (children, (n + 1) * sizeof *p);
            if (!p)
                break;
            children = p;
            children [n++] = key;
        }
    //  Out of the map first (not while walking it), then closed.
    for (size_t i = 0; i < n; i++)
        children [i] = (uint64_t) (uintptr_t) sq_idmap_remove (self->nested, children [i]);
    for (size_t i = 0; i < n; i++) {
        session_t *child = graph_session (self->graph, (uint32_t) children [i]);
        if (child) {
            sq_debug ("session %u closed: the session of the task it holds the children of "
                      "closes", child->id);
            bx_session_close (self, child);
        }
    }
    free (children);
    if (self->nested && session->jobx && session->jobx->parent
    &&  (uint32_t) (uintptr_t) sq_idmap_lookup (self->nested, session->jobx->parent) == session->id)
        sq_idmap_remove (self->nested, session->jobx->parent);

    for (size_t i = 0; i < self->n_jobwaits; )
        if (self->jobwaits [i].session == session->id) {
            peer_t *peer = self->jobwaits [i].peer;
            char message [80];
            snprintf (message, sizeof message, "job %u was closed", session->id);
            bx_reply_error (self, peer->identity, peer->identity_size, self->jobwaits [i].req,
                            SQ_E_SESSION, message, 0);
            s_wait_remove (self, i);
        }
        else
            i++;
}

void
jobs_drop_client (broker_t *self, peer_t *peer)
{
    for (size_t i = 0; i < self->n_jobwaits; )
        if (self->jobwaits [i].peer == peer)
            s_wait_remove (self, i);
        else
            i++;
}

//  --------------------------------------------------------------------------
//  Events

static task_extra_t *
s_run_extra (task_t *task)
{
    return task->session->job || task->array_element? graph_task_extra (task): NULL;
}

static void
s_count_run (task_extra_t *extra, task_t *task, gov_t *gov)
{
    extra->run_gov = gov->id;
    if (extra->run_attempt != task->attempt + 1) {
        extra->run_attempt = task->attempt + 1;
        extra->runs++;
        extra->started_ms = (int64_t) sq_wall_ms ();
        extra->has_exit_code = false;
    }
}

void
jobs_task_started (broker_t *self, task_t *task, gov_t *gov)
{
    (void) self;
    task_extra_t *extra = s_run_extra (task);
    if (extra)
        s_count_run (extra, task, gov);
}

void
jobs_task_ran (broker_t *self, task_t *task, gov_t *gov, bool has_exit, int32_t exit_code)
{
    (void) self;
    task_extra_t *extra = s_run_extra (task);
    if (!extra)
        return;
    s_count_run (extra, task, gov);
    extra->has_exit_code = has_exit;
    extra->exit_code = exit_code;
}

void
jobs_task_ending (broker_t *self, task_t *task)
{
    (void) self;
    if ((task->session->job || task->array_element) && task->extra
    &&  !persist_replaying (self->persist))
        task->extra->ended_ms = (int64_t) sq_wall_ms ();
}

void
jobs_task_done (broker_t *self, task_t *task)
{
    session_t *session = task->session;
    if (self->nested && sq_idmap_lookup (self->nested, task->key)) {
        if (self->n_nested_ended == self->cap_nested_ended)
            sq_grow ((void **) &self->nested_ended, &self->cap_nested_ended, self->n_nested_ended + 1,
                     sizeof *self->nested_ended, 16, SIZE_MAX);
        if (self->n_nested_ended < self->cap_nested_ended) {
            self->nested_ended [self->n_nested_ended++] = task->key;
            self->jobs_dirty = true;
        }
        else
            sq_error ("out of memory: the children of task %u of session %u run on until "
                      "its session closes", sq_key_id (task->key), session->id);
    }
    if (task->array_element)
        s_element_ended (self, task);
    if (task->array_parent && task->state == TASK_CANCELLED && task->extra->array) {
        task->extra->array->stopped = true;
        self->jobs_dirty = true;
    }
    if (!s_unfinished (session)) {
        session->ended_ms = (int64_t) sq_wall_ms ();
        s_waits_answer (self, session);
        if (!persist_replaying (self->persist))
            s_after_check (self, session->id);
    }
}

void
jobs_submitted (broker_t *self, session_t *session)
{
    (void) self;
    if (s_unfinished (session))
        session->ended_ms = 0;
}

//  --------------------------------------------------------------------------
//  Requests

static int
s_by_id (const void *a, const void *b)
{
    uint32_t x = (*(session_t *const *) a)->id, y = (*(session_t *const *) b)->id;
    return x < y? -1: x > y;
}

static void
s_sessions (broker_t *self, peer_t *peer, const sq_request_t *q)
{
    //  Oldest first: sessions are listed in id order.
    size_t cursor = 0, n = 0;
    session_t *s;
    session_t **list = NULL;
    size_t cap = 0;
    while ((s = graph_session_next (self->graph, &cursor))) {
        if (!bx_same_tenant (peer, s))
            continue;
        if (q->session && s->id != q->session)
            continue;
        if (q->has_name && !(s->name && strlen (s->name) == q->name.len
                             && memcmp (s->name, q->name.ptr, q->name.len) == 0))
            continue;
        sq_job_info_t job;
        s_job_info (s, &job);
        if (q->states && !(q->states & job.state))
            continue;
        if (n == cap && sq_grow ((void **) &list, &cap, n + 1, sizeof *list, 64, SIZE_MAX)) {
            free (list);
            bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_NOMEM,
                            "out of memory", 0);
            return;
        }
        list [n++] = s;
    }
    //  The session map is not ordered: by id is by age.
    if (n > 1)
        qsort (list, n, sizeof *list, s_by_id);
    if (n > SQ_JOBS_MAX)
        n = SQ_JOBS_MAX;
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, q->req);
    msgpack_pack_array (&self->out.pk, (uint32_t) n);
    for (size_t i = 0; i < n; i++) {
        sq_job_info_t job;
        s_job_info (list [i], &job);
        sq_pack_job (&self->out.pk, &job);
    }
    free (list);
    bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

//  ATTACH: the session onto this connection, as RESUME without its token
//  (being of its tenant is the right).
static void
s_attach (broker_t *self, peer_t *peer, const sq_request_t *q)
{
    if ((q->session != 0) == q->has_name) {
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_INVALID,
                        "ATTACH names a job by id or by name: one of them", 0);
        return;
    }
    session_t *session = s_find (self, peer, q->session, q);
    if (!session) {
        s_unknown (self, peer, q, q->session);
        return;
    }
    if (bx_session_take (self, peer, session, q->req, "attached"))
        return;
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, q->req);
    sq_pack_attached (&self->out.pk, session->max_id, session->id, session->token);
    bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

static uint32_t
s_task_bit (const task_t *task)
{
    switch (task->state) {
        case TASK_RUNNING: return 2;
        case TASK_FINISHED: return 4;
        case TASK_FAILED: return 8;
        case TASK_CANCELLED: return 16;
        default: return 1;
    }
}

static void
s_task_info (const task_t *task, sq_task_info_t *info)
{
    memset (info, 0, sizeof *info);
    const task_extra_t *extra = task_extra (task);
    info->id = sq_key_id (task->key);
    info->state = s_task_bit (task);
    info->exit_code = (sq_opt_int_t) { extra->has_exit_code, extra->exit_code };
    info->governor = task->gov? task->gov->id: extra->run_gov;
    info->attempts = extra->runs;
    info->started_ms = (uint64_t) extra->started_ms;
    info->ended_ms = task->state >= TASK_FINISHED? (uint64_t) extra->ended_ms: 0;
    if (task->failure && task->failure->message)
        info->error = (mpr_str_t) { task->failure->message,
                                    (uint32_t) strlen (task->failure->message) };
    const char *name = extra->name? extra->name: "";
    info->name = (mpr_str_t) { name, (uint32_t) strlen (name) };
}

//  Element k of an array as a TASKS record (false: it does not match states).
static bool
s_element_info (broker_t *self, const struct _jobarray_t *a, uint32_t k, uint32_t states,
                sq_task_info_t *info)
{
    s_elem_t *e = a->chunks [k / S_CHUNK]? &a->chunks [k / S_CHUNK] [k % S_CHUNK]: NULL;
    task_t *task = e && (e->flags & S_LIVE)
                 ? graph_task (self->graph, sq_key (a->session->id, e->task)): NULL;
    uint32_t bit = task? s_task_bit (task):
                   e && e->state? 4u << (e->state - 1): a->stopped? 16: 1;
    if (states && !(states & bit))
        return false;
    if (!info)
        return true;
    if (task)
        s_task_info (task, info);
    else {
        memset (info, 0, sizeof *info);
        info->name = (mpr_str_t) { "", 0 };
        if (e && e->state) {
            info->exit_code = (sq_opt_int_t) { (e->flags & S_HAS_EXIT) != 0, e->exit_code };
            info->governor = e->gov;
            info->attempts = e->attempts;
            info->started_ms = (uint64_t) e->started_ms;
            info->ended_ms = (uint64_t) e->ended_ms;
        }
        const char *error = sq_idmap_lookup (a->errors, (uint64_t) k + 1);
        if (error)
            info->error = (mpr_str_t) { error, (uint32_t) strlen (error) };
        else
        if (bit == 16)
            info->error = (mpr_str_t) { "cancelled", 9 };
        const task_extra_t *pe = task_extra (a->parent);
        if (pe->name)
            info->name = (mpr_str_t) { pe->name, (uint32_t) strlen (pe->name) };
    }
    info->id = a->parent_id;
    info->index = (sq_opt_int_t) { true, s_index (a, k) };
    info->state = bit;
    //  Its task stays in the graph until the session closes, so LOG can
    //  read its output by this id; none for an element not made yet or
    //  ended before a broker restart.
    if (e && e->task) {
        task_t *own = task? task: graph_task (self->graph, sq_key (a->session->id, e->task));
        if (own && own->array_element && own->extra
        &&  own->extra->parent == a->parent && own->extra->element == k)
            info->task = e->task;
    }
    return true;
}

static void
s_tasks (broker_t *self, peer_t *peer, const sq_request_t *q, session_t *session)
{
    uint32_t limit = q->limit? q->limit: SQ_TASKS_PAGE_MAX;
    const struct _jobx_t *x = session->jobx;
    //  Two passes: the total, then the page. Plain tasks by id, then each
    //  array's elements by index.
    uint64_t total = 0;
    size_t cursor = 0;
    task_t *task;
    while ((task = graph_session_next_task (session, &cursor)))
        if (!task->array_parent && !task->array_element
        &&  (!q->states || (q->states & s_task_bit (task))))
            total++;
    for (uint32_t i = 0; x && i < x->n_arrays; i++)
        for (uint32_t k = 0; k < x->arrays [i]->size; k++)
            total += s_element_info (self, x->arrays [i], k, q->states, NULL);
    uint64_t skip = q->offset;
    uint32_t n = total > skip? (uint32_t) (total - skip < limit? total - skip: limit): 0;
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, q->req);
    sq_pack_tasks_head (&self->out.pk, total, n);
    cursor = 0;
    uint32_t packed = 0;
    sq_task_info_t info;
    while (packed < n && (task = graph_session_next_task (session, &cursor))) {
        if (task->array_parent || task->array_element
        ||  (q->states && !(q->states & s_task_bit (task))))
            continue;
        if (skip) {
            skip--;
            continue;
        }
        s_task_info (task, &info);
        sq_pack_task_info (&self->out.pk, &info);
        packed++;
    }
    for (uint32_t i = 0; x && i < x->n_arrays && packed < n; i++)
        for (uint32_t k = 0; k < x->arrays [i]->size && packed < n; k++) {
            if (!s_element_info (self, x->arrays [i], k, q->states, NULL))
                continue;
            if (skip) {
                skip--;
                continue;
            }
            s_element_info (self, x->arrays [i], k, q->states, &info);
            sq_pack_task_info (&self->out.pk, &info);
            packed++;
        }
    bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

//  Cancels every unfinished task of the session.
static void
s_cancel_all (broker_t *self, session_t *session)
{
    size_t cursor = 0, n = 0, cap = 0;
    task_t *task, **list = NULL;
    //  Collected first: cancelling changes the states the walk reads.
    while ((task = graph_session_next_task (session, &cursor)))
        if (task->state < TASK_FINISHED) {
            if (n == cap && sq_grow ((void **) &list, &cap, n + 1, sizeof *list, 64, SIZE_MAX))
                break;
            list [n++] = task;
        }
    for (size_t i = 0; i < n; i++)
        if (list [i]->state < TASK_FINISHED)
            graph_cancel (self->graph, list [i]);
    free (list);
    persist_ids (self->persist, SQ_REC_CANCEL, session->id, NULL, 0);
}

bool
jobs_request (broker_t *self, peer_t *peer, const sq_request_t *q)
{
    switch (q->type) {
        case SQ_MSG_SESSIONS:
            s_sessions (self, peer, q);
            return true;
        case SQ_MSG_ATTACH:
            s_attach (self, peer, q);
            return true;
        case SQ_MSG_SESSION_WAIT: case SQ_MSG_TASKS: case SQ_MSG_RESUBMIT:
        case SQ_MSG_FORGET: case SQ_MSG_JOB_CANCEL:
            break;
        default:
            return false;
    }
    session_t *session = s_find (self, peer, q->session, NULL);
    if (!session) {
        s_unknown (self, peer, q, q->session);
        return true;
    }
    switch (q->type) {
        case SQ_MSG_SESSION_WAIT:
            s_session_wait (self, peer, q, session);
            break;
        case SQ_MSG_TASKS:
            s_tasks (self, peer, q, session);
            break;
        case SQ_MSG_RESUBMIT: {
            uint64_t again = 0;
            uint32_t bad = 0;
            int rc = jobs_resubmit (self, session, q->ids, q->n_ids, &again, &bad);
            if (rc) {
                char message [120];
                snprintf (message, sizeof message, rc == SQ_E_INVALID
                          ? "task %u of job %u is an array's element: name its array task"
                          : "task %u is not a task of job %u", bad, session->id);
                bx_reply_error (self, peer->identity, peer->identity_size, q->req, rc, message, bad);
                break;
            }
            sq_wbuf_reset (&self->out);
            sq_reply_begin (&self->out, q->req);
            sq_record_pack (&self->out.pk, SQ_REC_COUNT, &(sq_count_t) { again });
            bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
            break;
        }
        case SQ_MSG_FORGET: {
            char message [200];
            int code = jobs_close_check (session, message, sizeof message);
            if (code) {
                bx_reply_error (self, peer->identity, peer->identity_size, q->req, code,
                                message, 0);
                break;
            }
            peer_t *owner = (peer_t *) session->client;
            if (owner)
                bx_peer_remove_session (owner, session->id);
            sq_info ("job %u forgotten by client %u (%s)", session->id, peer->id, peer->name);
            bx_session_close (self, session);
            bx_reply_nil (self, peer, q->req);
            break;
        }
        case SQ_MSG_JOB_CANCEL:
            s_cancel_all (self, session);
            bx_reply_nil (self, peer, q->req);
            break;
        default:
            break;
    }
    return true;
}

//  --------------------------------------------------------------------------
//  Deadlines and retention

static int
s_by_ended (const void *a, const void *b)
{
    int64_t x = (*(session_t *const *) a)->ended_ms, y = (*(session_t *const *) b)->ended_ms;
    return x < y? -1: x > y;
}

//  Jobs that ended and that no client holds go after --job-retention, and
//  the oldest beyond --job-limit.
static void
s_retention (broker_t *self)
{
    int64_t wall = (int64_t) sq_wall_ms ();
    size_t cursor = 0, n = 0, cap = 0;
    session_t *s, **idle = NULL;
    while ((s = graph_session_next (self->graph, &cursor)))
        if (s->job && !s->client && !s_unfinished (s) && !(s->jobx && s->jobx->parent)) {
            if (n == cap && sq_grow ((void **) &idle, &cap, n + 1, sizeof *idle, 64, SIZE_MAX))
                break;
            idle [n++] = s;
        }
    if (n == 0) {
        free (idle);
        return;
    }
    qsort (idle, n, sizeof *idle, s_by_ended);
    for (size_t i = 0; i < n; i++) {
        bool over = n - i > self->config.job_limit;
        bool old = self->config.job_retention_ms > 0
                && wall - idle [i]->ended_ms >= self->config.job_retention_ms;
        if (!over && !old)
            continue;
        sq_info ("job %u dropped: %s", idle [i]->id,
                 over? "more ended jobs than --job-limit": "ended longer ago than --job-retention");
        bx_session_close (self, idle [i]);
    }
    free (idle);
}

int64_t
jobs_tick (broker_t *self, int64_t now)
{
    int64_t next = -1;
    for (size_t i = 0; i < self->n_jobwaits; ) {
        struct _jobwait_t *w = &self->jobwaits [i];
        if (w->deadline >= 0 && w->deadline <= now) {
            bx_reply_error (self, w->peer->identity, w->peer->identity_size, w->req,
                            SQ_E_TIMEOUT, "the job is still running", 0);
            s_wait_remove (self, i);
            continue;
        }
        if (w->deadline >= 0 && (next < 0 || w->deadline < next))
            next = w->deadline;
        i++;
    }
    return next;
}

void
jobs_expire (broker_t *self)
{
    s_retention (self);
}

static void
s_pack_resubmit (msgpack_packer *pk, const sq_rec_t *rec)
{
    sq_rec_pack_ids (pk, SQ_REC_RESUBMIT, rec->session, rec->ids, rec->n_ids);
}

//  RESUBMIT's plain tasks: those named (all of the session's with none
//  named) that failed or were cancelled, and what they failed or cancelled
//  downstream, wait again (graph_tasks_again). Returns how many; 0 too
//  when out of memory (nothing changed then).
static uint64_t
s_plain_again (graph_t *graph, session_t *session, const uint32_t *ids, uint32_t n)
{
    size_t cap = (size_t) session->failed + 1, count = 0;
    task_t **tasks = (task_t **) malloc (cap * sizeof (task_t *));
    if (!tasks)
        return 0;
    size_t cursor = 0;
    task_t *task;
    while (count < cap && (task = graph_session_next_task (session, &cursor))) {
        if (task->array_parent || task->array_element
        ||  (task->state != TASK_FAILED && task->state != TASK_CANCELLED))
            continue;
        bool named = n == 0;
        for (uint32_t j = 0; j < n && !named; j++)
            named = ids [j] == sq_key_id (task->key);
        if (named)
            tasks [count++] = task;
    }
    uint64_t again = count? graph_tasks_again (graph, tasks, count, cap): 0;
    free (tasks);
    return again;
}

int
jobs_resubmit (broker_t *self, session_t *session, const uint32_t *ids, uint32_t n,
               uint64_t *again, uint32_t *bad)
{
    *again = 0;
    for (uint32_t i = 0; i < n; i++) {
        task_t *task = graph_task (self->graph, sq_key (session->id, ids [i]));
        if (!task) {
            *bad = ids [i];
            return SQ_E_UNKNOWN_ID;
        }
        if (task->array_element) {
            *bad = ids [i];
            return SQ_E_INVALID;
        }
    }
    *again += s_plain_again (self->graph, session, ids, n);
    struct _jobx_t *x = session->jobx;
    for (uint32_t i = 0; x && i < x->n_arrays; i++) {
        bool named = n == 0;
        for (uint32_t j = 0; j < n && !named; j++)
            named = ids [j] == x->arrays [i]->parent_id;
        if (named)
            *again += s_array_again (x->arrays [i]);
    }
    sq_rec_t rec = { .type = SQ_REC_RESUBMIT, .session = session->id,
                     .ids = (uint32_t *) ids, .n_ids = n };
    persist_record (self->persist, s_pack_resubmit, &rec);
    if (*again) {
        session->ended_ms = 0;
        self->jobs_dirty = true;
    }
    return SQ_OK;
}

//  --------------------------------------------------------------------------
//  An element's config: the array task's, with %{JOB_ID}, %{TASK_ID},
//  %{ARRAY_SIZE}, %{ITEM} and %% replaced in every string, and SQUALL_*
//  added to its env. %{CWD} and anything else stay for the governor.

typedef struct {
    char job [16], task [24], size [16];
    mpr_str_t item;
    char *buf;                  //  scratch for one expanded string
    size_t cap;
} s_subst_t;

static int
s_append (s_subst_t *x, size_t *len, const char *s, size_t n)
{
    if (*len + n + 1 > x->cap && sq_grow ((void **) &x->buf, &x->cap, *len + n + 1, 1, 64, SIZE_MAX))
        return -1;
    memcpy (x->buf + *len, s, n);
    *len += n;
    return 0;
}

static int
s_pack_expanded (msgpack_packer *pk, mpr_str_t s, s_subst_t *x)
{
    size_t len = 0;
    int rc = 0;
    for (uint32_t i = 0; i < s.len && rc == 0; ) {
        const char *p = s.ptr + i;
        size_t left = s.len - i;
        #define S_IS(tok) (left >= sizeof tok - 1 && memcmp (p, tok, sizeof tok - 1) == 0)
        if (S_IS ("%%")) {
            rc = s_append (x, &len, "%", 1);
            i += 2;
        }
        else
        if (S_IS ("%{JOB_ID}")) {
            rc = s_append (x, &len, x->job, strlen (x->job));
            i += 9;
        }
        else
        if (S_IS ("%{TASK_ID}")) {
            rc = s_append (x, &len, x->task, strlen (x->task));
            i += 10;
        }
        else
        if (S_IS ("%{ARRAY_SIZE}")) {
            rc = s_append (x, &len, x->size, strlen (x->size));
            i += 13;
        }
        else
        if (S_IS ("%{ITEM}")) {
            rc = s_append (x, &len, x->item.ptr, x->item.len);
            i += 7;
        }
        else {
            rc = s_append (x, &len, p, 1);
            i++;
        }
        #undef S_IS
    }
    if (rc)
        return -1;
    msgpack_pack_str (pk, len);
    msgpack_pack_str_body (pk, x->buf? x->buf: "", len);
    return 0;
}

//  Copies one value, expanding its strings. depth bounds the recursion
//  (the config was checked at submit; this is belt and braces).
static int
s_copy_value (mpr_t *r, msgpack_packer *pk, msgpack_sbuffer *out, s_subst_t *x, int depth)
{
    if (depth > 40)
        return -1;
    uint32_t n;
    switch (mpr_peek (r)) {
        case MPR_STR: {
            mpr_str_t s;
            if (mpr_str (r, &s, SQ_MAX_CONFIG))
                return -1;
            return s_pack_expanded (pk, s, x);
        }
        case MPR_ARRAY:
            if (mpr_array (r, &n))
                return -1;
            msgpack_pack_array (pk, n);
            for (uint32_t i = 0; i < n; i++)
                if (s_copy_value (r, pk, out, x, depth + 1))
                    return -1;
            return 0;
        case MPR_MAP:
            if (mpr_map (r, &n))
                return -1;
            msgpack_pack_map (pk, n);
            for (uint32_t i = 0; i < 2 * n; i++)
                if (s_copy_value (r, pk, out, x, depth + 1))
                    return -1;
            return 0;
        default: {
            const uint8_t *raw;
            size_t size;
            if (mpr_skip (r, &raw, &size))
                return -1;
            msgpack_sbuffer_write (out, (const char *) raw, size);
            return 0;
        }
    }
}

static void
s_pack_env (msgpack_packer *pk, const char *name, const char *value, size_t len)
{
    size_t n = strlen (name);
    msgpack_pack_str (pk, n + 1 + len);
    msgpack_pack_str_body (pk, name, n);
    msgpack_pack_str_body (pk, "=", 1);
    msgpack_pack_str_body (pk, value, len);
}

//  The element's config into out. 0, or -1 (out of memory, or a config
//  that is not a map: then the element fails).
static int
s_element_config (struct _jobarray_t *self, uint32_t k, msgpack_sbuffer *out, s_subst_t *x)
{
    snprintf (x->job, sizeof x->job, "%u", self->session->id);
    snprintf (x->task, sizeof x->task, "%" PRId64, s_index (self, k));
    snprintf (x->size, sizeof x->size, "%u", self->size);
    x->item = s_item (self, k);
    msgpack_packer pk;
    msgpack_packer_init (&pk, out, msgpack_sbuffer_write);
    const task_t *parent = self->parent;
    mpr_t r;
    uint32_t n;
    mpr_init (&r, task_config (parent), parent->config_size);
    if (mpr_map (&r, &n))
        return -1;
    //  A first pass finds whether it has an env to add to.
    bool has_env = false;
    mpr_t scan = r;
    for (uint32_t i = 0; i < n && mpr_ok (&scan); i++) {
        mpr_str_t key;
        if (mpr_str (&scan, &key, 64))
            break;
        if (mpr_str_eq (key, "env"))
            has_env = true;
        mpr_skip (&scan, NULL, NULL);
    }
    uint32_t extra = self->kind == SQ_ARRAY_ITEMS? 4: 3;
    msgpack_pack_map (&pk, n + (has_env? 0: 1));
    bool env_done = false;
    for (uint32_t i = 0; i < n; i++) {
        mpr_str_t key;
        if (mpr_str (&r, &key, 64))
            return -1;
        msgpack_pack_str (&pk, key.len);
        msgpack_pack_str_body (&pk, key.ptr, key.len);
        if (!mpr_str_eq (key, "env")) {
            if (s_copy_value (&r, &pk, out, x, 0))
                return -1;
            continue;
        }
        uint32_t m = 0;
        if (!mpr_try_nil (&r) && mpr_array (&r, &m))
            return -1;
        msgpack_pack_array (&pk, m + extra);
        for (uint32_t j = 0; j < m; j++)
            if (s_copy_value (&r, &pk, out, x, 1))
                return -1;
        env_done = true;
        s_pack_env (&pk, "SQUALL_JOB_ID", x->job, strlen (x->job));
        s_pack_env (&pk, "SQUALL_TASK_ID", x->task, strlen (x->task));
        s_pack_env (&pk, "SQUALL_ARRAY_SIZE", x->size, strlen (x->size));
        if (self->kind == SQ_ARRAY_ITEMS)
            s_pack_env (&pk, "SQUALL_ARRAY_ITEM", x->item.ptr, x->item.len);
    }
    if (!env_done) {
        msgpack_pack_str (&pk, 3);
        msgpack_pack_str_body (&pk, "env", 3);
        msgpack_pack_array (&pk, extra);
        s_pack_env (&pk, "SQUALL_JOB_ID", x->job, strlen (x->job));
        s_pack_env (&pk, "SQUALL_TASK_ID", x->task, strlen (x->task));
        s_pack_env (&pk, "SQUALL_ARRAY_SIZE", x->size, strlen (x->size));
        if (self->kind == SQ_ARRAY_ITEMS)
            s_pack_env (&pk, "SQUALL_ARRAY_ITEM", x->item.ptr, x->item.len);
    }
    return mpr_end (&r) == 0? 0: -1;
}

//  --------------------------------------------------------------------------
//  Elements as tasks

//  Elements not ended that are still to run (none once the array was
//  cancelled).
static uint32_t
s_pending (const struct _jobarray_t *a)
{
    return a->stopped? 0: a->size - a->ended;
}

static uint32_t
s_restored_total (const struct _jobarray_t *a)
{
    return a->restored [1] + a->restored [2] + a->restored [3];
}

//  Elements that are neither a task now nor ended in an earlier life.
static uint32_t
s_unmade (const struct _jobarray_t *a)
{
    uint32_t superseded = a->superseded [1] + a->superseded [2] + a->superseded [3];
    return a->size - (a->made - superseded) - s_restored_total (a);
}

void
jobarray_spec (const struct _jobarray_t *self, sq_task_spec_t *spec)
{
    spec->array = self->kind;
    spec->array_size = self->size;
    spec->array_first = self->first;
    spec->array_step = self->step;
    spec->array_last = self->first + (self->size - 1) * self->step;
    spec->array_items = self->items;
    spec->array_items_size = self->items_size;
}

static void
s_element_record (const struct _jobarray_t *a, uint32_t k, const s_elem_t *e, sq_rec_t *rec)
{
    memset (rec, 0, sizeof *rec);
    rec->type = SQ_REC_ELEMENT;
    rec->session = a->session->id;
    rec->id = a->parent_id;
    rec->k = k;
    rec->state = e->state;
    rec->has_exit_code = (e->flags & S_HAS_EXIT) != 0;
    rec->exit_code = e->exit_code;
    rec->governor = e->gov;
    rec->attempts = e->attempts;
    rec->started_ms = (uint64_t) e->started_ms;
    rec->ended_ms = (uint64_t) e->ended_ms;
}

int
jobarray_snapshot (const struct _jobarray_t *self, msgpack_sbuffer *buf, msgpack_packer *pk)
{
    for (uint32_t k = 0; k < self->size; k++) {
        s_elem_t *e = self->chunks [k / S_CHUNK]? &self->chunks [k / S_CHUNK] [k % S_CHUNK]: NULL;
        if (!e) {
            k = (k / S_CHUNK + 1) * S_CHUNK - 1;
            continue;
        }
        if (!e->state)
            continue;
        sq_rec_t rec;
        s_element_record (self, k, e, &rec);
        size_t offset = sq_rec_begin (buf);
        sq_rec_pack_element (pk, &rec);
        sq_rec_end (buf, offset);
    }
    return 0;
}

//  The array task of a session by its id.
static struct _jobarray_t *
s_array_of (graph_t *graph, uint32_t session, uint32_t id)
{
    task_t *task = graph_task (graph, sq_key (session, id));
    return task && task->array_parent && task->extra? task->extra->array: NULL;
}

//  Sets an ended element (or one run again) back to not ended.
static void
s_element_again (struct _jobarray_t *a, uint32_t k, s_elem_t *e)
{
    if (e->flags & S_RESTORED)
        a->restored [e->state]--;
    else
        a->superseded [e->state]++;
    if (e->state == SQ_STATE_FAILED)
        a->failed--;
    if (e->state == SQ_STATE_CANCELLED)
        a->cancelled--;
    a->ended--;
    free (sq_idmap_remove (a->errors, (uint64_t) k + 1));
    memset (e, 0, sizeof *e);
    if (k < a->next)
        a->next = k;
}

//  RESUBMIT of one array: its failed and cancelled elements, and those a
//  cancel kept from running. Returns how many will run.
static uint64_t
s_array_again (struct _jobarray_t *a)
{
    uint64_t again = 0;
    if (a->stopped) {
        a->stopped = false;
        again += s_unmade (a);
        a->next = 0;
    }
    for (uint32_t k = 0; k < a->size; k++) {
        s_elem_t *e = a->chunks [k / S_CHUNK]? &a->chunks [k / S_CHUNK] [k % S_CHUNK]: NULL;
        if (!e) {
            k = (k / S_CHUNK + 1) * S_CHUNK - 1;
            continue;
        }
        if (e->state == SQ_STATE_FAILED || e->state == SQ_STATE_CANCELLED) {
            s_element_again (a, k, e);
            again++;
        }
    }
    if (again)
        a->feeding = a->feeding || a->parent->state >= TASK_READY;
    return again;
}

int
jobs_replay (graph_t *graph, const void *record)
{
    const sq_rec_t *rec = (const sq_rec_t *) record;
    session_t *session = graph_session (graph, rec->session);
    if (!session)
        return -1;
    if (rec->type == SQ_REC_RESUBMIT) {
        s_plain_again (graph, session, rec->ids, rec->n_ids);
        struct _jobx_t *x = session->jobx;
        for (uint32_t i = 0; x && i < x->n_arrays; i++) {
            bool named = rec->n_ids == 0;
            for (uint32_t j = 0; j < rec->n_ids && !named; j++)
                named = rec->ids [j] == x->arrays [i]->parent_id;
            if (named)
                s_array_again (x->arrays [i]);
        }
        return 0;
    }
    struct _jobarray_t *a = s_array_of (graph, rec->session, rec->id);
    if (!a || rec->k >= a->size)
        return -1;
    s_elem_t *e = s_elem (a, (uint32_t) rec->k, true);
    if (!e)
        return -1;
    if (e->state)
        s_element_again (a, (uint32_t) rec->k, e);
    e->state = (uint8_t) rec->state;
    e->flags = S_RESTORED | (rec->has_exit_code? S_HAS_EXIT: 0);
    e->exit_code = rec->exit_code;
    e->gov = rec->governor;
    e->attempts = rec->attempts > UINT16_MAX? UINT16_MAX: (uint16_t) rec->attempts;
    e->started_ms = (int64_t) rec->started_ms;
    e->ended_ms = (int64_t) rec->ended_ms;
    a->restored [e->state]++;
    a->ended++;
    if (e->state == SQ_STATE_FAILED)
        a->failed++;
    if (e->state == SQ_STATE_CANCELLED)
        a->cancelled++;
    return 0;
}

//  An array task's inputs are there (it has none: at once): its elements
//  may become tasks.
void
jobs_array_ready (broker_t *self, task_t *task)
{
    struct _jobarray_t *a = task->extra? task->extra->array: NULL;
    if (!a)
        return;
    a->feeding = true;
    self->jobs_dirty = true;
}

static int
s_make_element (broker_t *self, struct _jobarray_t *a, uint32_t k, s_subst_t *x,
                msgpack_sbuffer *cfg)
{
    struct _jobx_t *jx = s_jobx (a->session);
    s_elem_t *e = s_elem (a, k, true);
    if (!jx || !e)
        return -1;
    msgpack_sbuffer_clear (cfg);
    if (s_element_config (a, k, cfg, x))
        return -1;
    while (jx->next_element < UINT32_MAX
    &&  (graph_task (self->graph, sq_key (a->session->id, jx->next_element))
         || graph_object (self->graph, sq_key (a->session->id, jx->next_element))))
        jx->next_element++;
    if (jx->next_element == UINT32_MAX)
        return -1;
    uint32_t id = jx->next_element++;
    task_t *task = graph_element_new (self->graph, a->parent, id, k,
                                      (const uint8_t *) cfg->data, cfg->size);
    if (!task)
        return -1;
    e->flags |= S_LIVE;
    e->task = id;
    a->live++;
    a->made++;
    return 0;
}

//  Cancels an array's elements that are tasks (its array task was).
static void
s_cancel_live (broker_t *self, struct _jobarray_t *a)
{
    size_t cursor = 0, n = 0;
    task_t *task, **list = (task_t **) malloc ((a->live + 1) * sizeof *list);
    if (!list)
        return;
    while (n < a->live && (task = graph_session_next_task (a->session, &cursor)))
        if (task->array_element && task->state < TASK_FINISHED && task->extra->parent == a->parent)
            list [n++] = task;
    for (size_t i = 0; i < n; i++)
        if (list [i]->state < TASK_FINISHED)
            graph_cancel (self->graph, list [i]);
    free (list);
}

//  Each array: elements made tasks while it has room, its array task ended
//  once every element did. Once per reactor turn, outside graph calls.
size_t
jobs_settle (broker_t *self)
{
    size_t made = 0;
    if (!self->jobs_dirty || self->recovering)
        return 0;
    self->jobs_dirty = false;
    if (self->n_nested_ended)
        s_nested_settle (self);
    s_subst_t x = { .buf = NULL };
    msgpack_sbuffer cfg;
    msgpack_sbuffer_init (&cfg);
    size_t cursor = 0;
    session_t *session;
    while ((session = graph_session_next (self->graph, &cursor))) {
        struct _jobx_t *jx = session->jobx;
        for (uint32_t i = 0; jx && i < jx->n_arrays; i++) {
            struct _jobarray_t *a = jx->arrays [i];
            if (a->stopped && a->live)
                s_cancel_live (self, a);
            while (a->feeding && !a->stopped && a->live < S_WINDOW && a->next < a->size) {
                uint32_t k = a->next++;
                s_elem_t *e = s_elem (a, k, false);
                if (e && (e->state || (e->flags & S_LIVE)))
                    continue;
                if (s_make_element (self, a, k, &x, &cfg)) {
                    sq_error ("out of memory: element %u of task %u of session %u waits",
                              k, a->parent_id, session->id);
                    a->next--;
                    self->jobs_dirty = true;
                    break;
                }
                made++;
            }
            task_t *parent = a->parent;
            if (parent->state < TASK_FINISHED && (a->stopped || a->ended == a->size) && a->live == 0) {
                if (a->failed) {
                    char message [300];
                    snprintf (message, sizeof message, "%u of the %u elements of array task "
                              "%u failed (TASKS lists them)", a->failed, a->size, a->parent_id);
                    graph_task_failed (self->graph, parent, SQ_E_TASK_FAILED, message);
                }
                else
                if (a->cancelled || a->stopped)
                    graph_cancel (self->graph, parent);
                else
                    graph_task_restore_finished (self->graph, parent, NULL, parent->attempt,
                                                 NULL, NULL, 0);
            }
        }
    }
    free (x.buf);
    msgpack_sbuffer_destroy (&cfg);
    return made;
}

//  An element that is a task ended: its compact record.
static void
s_element_ended (broker_t *self, task_t *task)
{
    task_t *parent = task->extra->parent;
    struct _jobarray_t *a = parent->extra? parent->extra->array: NULL;
    uint32_t k = task->extra->element;
    s_elem_t *e = a? s_elem (a, k, false): NULL;
    if (!e || !(e->flags & S_LIVE))
        return;
    const task_extra_t *extra = task->extra;
    e->flags &= (uint8_t) ~S_LIVE;
    e->state = task->state == TASK_FINISHED? SQ_STATE_FINISHED:
               task->state == TASK_FAILED? SQ_STATE_FAILED: SQ_STATE_CANCELLED;
    if (extra->has_exit_code)
        e->flags |= S_HAS_EXIT;
    e->exit_code = extra->exit_code;
    e->gov = extra->run_gov;
    e->attempts = extra->runs > UINT16_MAX? UINT16_MAX: (uint16_t) extra->runs;
    e->started_ms = extra->started_ms;
    e->ended_ms = extra->ended_ms;
    a->live--;
    a->ended++;
    if (e->state == SQ_STATE_FAILED) {
        a->failed++;
        if (task->failure && task->failure->message) {
            char *message = strdup (task->failure->message);
            if (message && sq_idmap_insert (a->errors, (uint64_t) k + 1, message))
                free (message);
        }
    }
    if (e->state == SQ_STATE_CANCELLED)
        a->cancelled++;
    sq_rec_t rec;
    s_element_record (a, k, e, &rec);
    persist_record (self->persist, sq_rec_pack_element, &rec);
    self->jobs_dirty = true;
}
