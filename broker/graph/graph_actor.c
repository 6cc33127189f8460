/*  graph_actor: the calls of an actor, in the order they were submitted,
    on the governor that runs its host.

    An actor is a "py" task with `actor` true (its host): it starts an
    instance in one executor and stays RUNNING while the actor lives,
    holding its cpus and resources like any running task. Each method call
    is a task with `call` naming the host. The scheduler never sees a call:
    the host's queue here sends its calls, once their inputs exist and the
    host is RUNNING, to the host's governor in order, up to S_WINDOW of
    them unfinished at once (the governor runs them in the order they came
    and writes several to the executor ahead: a call costs no round trip
    through the broker). A call with inputs the governor lacks goes only
    with no other call unfinished, and none goes behind it until it is
    final: the governor has to fetch them, and a call behind it must not
    overtake it there. Inputs already there (the large arguments the client
    put on the actor's governor, confirmed by its UPLOADED) are ready at
    once: such calls go in the window like the others. So order needs no
    graph edge (a call that raises does not fail the ones after it).

    A call is never run twice: sent once, it either ends on that instance
    or fails with SQ_E_ACTOR_LOST (its governor or executor died, the host
    was requeued or stopped). Calls not sent yet wait for the host's next
    attempt (max_retries of the host is the number of restarts), or fail
    with SQ_E_ACTOR_LOST once the host is final.

    State changes of hosts and calls happen deep inside graph operations
    (a failure walking downstream, a governor's loss), where failing more
    tasks would re-enter them; gx_set_state only marks the host, and
    graph_actors_settle does the work at the top of the broker's turn.

    Ownership: a host's task_extra owns its actor_t; the queue borrows the
    call tasks (same session, freed together). */
#include "graph_internal.h"
#include "grow.h"

struct _actor_t {
    task_t **calls;             //  unfinished calls, oldest at head
    uint32_t head;
    uint32_t count;             //  entries from head
    uint32_t cap;
    uint32_t sent;              //  entries from head sent to the host's governor
};

//  Calls sent to a governor and not final yet, at most: enough to keep
//  the governor's queue full across a few broker turns; its own queue
//  (governor/pyexec.c, S_CALLS_MAX) holds at least as many.
#define S_WINDOW 32
//  and of these configs' bytes together (one call always goes): a call
//  with big arguments goes alone, as it would gain nothing from company
//  but the memory of many copies in flight.
#define S_WINDOW_BYTES (256u << 10)

static task_t *
s_host_of (task_t *task)
{
    if (task->actor_host)
        return task;
    return task->extra? task->extra->host: NULL;
}

void
gx_actor_touch (graph_t *self, task_t *task)
{
    task_t *host = s_host_of (task);
    if (!host || host->actor_dirty)
        return;
    if (self->n_actors_dirty == self->cap_actors_dirty) {
        if (sq_grow ((void **) &self->actors_dirty, &self->cap_actors_dirty, self->n_actors_dirty + 1,
                     sizeof *self->actors_dirty, 16, SIZE_MAX)) {
            sq_error ("out of memory: actor %u of session %u waits for its next change",
                      sq_key_id (host->key), sq_key_session (host->key));
            return;
        }
    }
    host->actor_dirty = true;
    self->actors_dirty [self->n_actors_dirty++] = host->key;
}

//  Room for one more call in the host's queue (submit, before it may no
//  longer fail). 0, or -1 if out of memory.
int
gx_actor_reserve (task_t *host)
{
    task_extra_t *extra = graph_task_extra (host);
    if (!extra)
        return -1;
    if (!extra->actor && !(extra->actor = (actor_t *) calloc (1, sizeof (actor_t))))
        return -1;
    actor_t *actor = extra->actor;
    if (actor->head > 0 && actor->head >= actor->count) {
        memmove (actor->calls, actor->calls + actor->head, actor->count * sizeof (task_t *));
        actor->head = 0;
    }
    if (actor->head + actor->count < actor->cap)
        return 0;
    return sq_grow32 ((void **) &actor->calls, &actor->cap, (size_t) actor->cap + 1,
                      sizeof *actor->calls, 8, UINT32_MAX);
}

void
gx_actor_append (task_t *host, task_t *call)
{
    actor_t *actor = host->extra->actor;
    assert (actor && actor->head + actor->count < actor->cap);
    actor->calls [actor->head + actor->count++] = call;
}

//  A refused submit takes its calls back out, newest first.
void
gx_actor_unappend (task_t *host, task_t *call)
{
    actor_t *actor = host->extra->actor;
    if (actor->count && actor->calls [actor->head + actor->count - 1] == call)
        actor->count--;
}

void
gx_actor_free (actor_t **actor_p)
{
    actor_t *actor = *actor_p;
    if (actor) {
        free (actor->calls);
        free (actor);
    }
    *actor_p = NULL;
}

static void
s_lose (graph_t *self, task_t *call, const char *why)
{
    char message [600];
    task_t *host = call->extra->host;
    const char *name = task_extra (host)->name;
    snprintf (message, sizeof message, "actor %u%s%s%s: %s", sq_key_id (host->key),
              name? " (": "", name? name: "", name? ")": "", why);
    graph_task_failed (self, call, SQ_E_ACTOR_LOST, message);
}

failure_t *
gx_actor_input_lost (task_t *call, const char *why)
{
    char message [600];
    task_t *host = call->extra? call->extra->host: NULL;
    const char *name = host? task_extra (host)->name: NULL;
    snprintf (message, sizeof message, "actor %u%s%s%s: %s",
              host? sq_key_id (host->key): 0, name? " (": "", name? name: "", name? ")": "", why);
    return failure_new (sq_key_id (call->key), SQ_E_ACTOR_LOST, message);
}

//  A call's governor reports it failed. If its instance is no longer
//  there (the executor died, the constructor failed: the host's report
//  came first), the call is lost with the actor rather than failed by
//  its own code. True if so (the call has failed).
bool
gx_actor_call_lost (graph_t *self, task_t *call, uint32_t gov_id, const char *message)
{
    task_t *host = call->extra? call->extra->host: NULL;
    if (!host || (host->state == TASK_RUNNING && host->gov && host->gov->id == gov_id))
        return false;
    s_lose (self, call, message);
    return true;
}

//  Whether the call's governor would wait for an input: it has not
//  confirmed a copy of each (a copy on its way may come after the calls
//  behind this one).
static bool
s_fetches (task_t *call, gov_t *gov)
{
    for (uint32_t i = 0; i < call->n_inputs; i++) {
        location_t *loc = graph_object_location (call->io [i], gov);
        if (!loc || !loc->arrived)
            return true;
    }
    return false;
}

//  Brings one actor's queue up to date; returns the calls sent.
static size_t
s_settle (graph_t *self, task_t *host, graph_assign_fn *assign, void *arg)
{
    actor_t *actor = host->extra? host->extra->actor: NULL;
    if (!actor)
        return 0;
    if (gx_final (host)) {
        char why [400];
        if (host->state == TASK_CANCELLED)
            snprintf (why, sizeof why, "it was stopped");
        else
            snprintf (why, sizeof why, "it failed: %.360s",
                      host->failure? host->failure->message: "");
        //  Failing a call touches the host again: the queue is emptied
        //  first, so that the next settle finds nothing to do.
        uint32_t head = actor->head, count = actor->count;
        actor->head = actor->count = actor->sent = 0;
        for (uint32_t i = 0; i < count; i++)
            if (!gx_final (actor->calls [head + i]))
                s_lose (self, actor->calls [head + i], why);
        return 0;
    }
    //  Sent calls back from a governor without an outcome, or whose
    //  instance is gone: they may have run in part.
    for (uint32_t i = 0; i < actor->sent && i < actor->count; i++) {
        task_t *call = actor->calls [actor->head + i];
        if (gx_final (call))
            continue;
        bool on_host = (call->state == TASK_ASSIGNED || call->state == TASK_RUNNING)
                    && host->state == TASK_RUNNING && call->gov == host->gov;
        if (on_host)
            continue;
        s_lose (self, call, call->state == TASK_ASSIGNED || call->state == TASK_RUNNING
                ? "its instance was lost (governor or executor gone) while this call ran"
                : "its governor gave this call back unfinished (it left, or was lost)");
        if (gx_final (host))
            return 0;
    }
    while (actor->count && gx_final (actor->calls [actor->head])) {
        actor->head++;
        actor->count--;
        if (actor->sent)
            actor->sent--;
    }
    if (actor->count == 0)
        actor->head = actor->sent = 0;
    if (!actor->count || host->state != TASK_RUNNING || !host->gov)
        return 0;
    //  Unfinished calls sent, and whether one of them has inputs.
    uint32_t live = 0;
    size_t bytes = 0;
    bool fetching = false;
    for (uint32_t i = 0; i < actor->sent; i++) {
        task_t *call = actor->calls [actor->head + i];
        if (!gx_final (call)) {
            live++;
            bytes += call->config_size;
            fetching = fetching || (call->n_inputs > 0 && s_fetches (call, host->gov));
        }
    }
    size_t n = 0;
    while (actor->sent < actor->count && live < S_WINDOW && !fetching) {
        task_t *call = actor->calls [actor->head + actor->sent];
        if (gx_final (call)) {
            actor->sent++;      //  cancelled before it went
            continue;
        }
        bool fetches = call->n_inputs > 0 && s_fetches (call, host->gov);
        if (call->state != TASK_READY || (live > 0 && (fetches
                                  || bytes + call->config_size > S_WINDOW_BYTES)))
            break;              //  waits for its inputs, or for the calls before it
        fetching = fetches;
        actor->sent++;
        live++;
        bytes += call->config_size;
        assign (arg, call, host->gov);
        n++;
    }
    return n;
}

size_t
graph_actors_settle (graph_t *self, graph_assign_fn *assign, void *arg)
{
    if (self->n_actors_dirty == 0)
        return 0;
    //  Hosts touched while settling wait for the next call.
    uint64_t *keys = self->actors_dirty;
    size_t n = self->n_actors_dirty;
    self->actors_dirty = NULL;
    self->n_actors_dirty = self->cap_actors_dirty = 0;
    size_t sent = 0;
    for (size_t i = 0; i < n; i++) {
        task_t *host = graph_task (self, keys [i]);
        if (!host || !host->actor_host)
            continue;           //  its session closed
        host->actor_dirty = false;
        sent += s_settle (self, host, assign, arg);
    }
    free (keys);
    return sent;
}

bool
graph_actors_pending (graph_t *self)
{
    return self->n_actors_dirty > 0;
}
