/*  drain: governors that leave cleanly. */
#include "drain.h"

#define S_DRAIN_TICK_MS 100     //  how often drains are moved on

void
drain_start (broker_t *self, gov_t *gov, const char *why)
{
    if (gov->draining)
        return;
    gov->draining = true;
    gov->drain_started = bx_now ();
    //  No new task; and tasks that need what only it has now wait for
    //  the copies below rather than be placed there.
    scheduler_governor_remove (self->scheduler, gov);
    size_t cursor = 0, retracted = 0;
    task_t *task;
    while ((task = (task_t *) sq_idmap_next (gov->tasks, &cursor, NULL)))
        if (task->state == TASK_ASSIGNED && !task->retracting) {
            task->retracting = true;
            gov_order_retract (gov, task->key, task->attempt);
            retracted++;
        }
    sq_info ("governor %u (%s) drains (%s): %zu unstarted tasks taken back, %zu running",
             gov->id, gov->name, why, retracted, sq_idmap_size (gov->tasks) - retracted);
    if (self->next_drain < 0 || self->next_drain > gov->drain_started)
        self->next_drain = gov->drain_started;
}

typedef struct {
    broker_t *self;
    gov_t *gov;
    gov_t *targets [GOV_MAX];
    uint64_t bytes [GOV_MAX];     //  memory in use, plus what was sent there now
    size_t n_targets;
    size_t waiting;                     //  needed objects with no copy elsewhere yet
    size_t ordered;
} s_drain_t;

//  One object located on a draining governor: needed, and its only copy
//  there? Then a copy goes to the governor with the least memory in use.
static void
s_object (void *arg, object_t *object)
{
    s_drain_t *d = (s_drain_t *) arg;
    location_t *here = graph_object_location (object, d->gov);
    if (!here || !here->arrived || object->data || !graph_object_needed (object))
        return;
    location_t *locations = object_locations (object);
    bool elsewhere = false, coming = false;
    for (uint32_t i = 0; i < object->n_locations; i++)
        if (locations [i].gov != d->gov && !locations [i].gov->draining) {
            if (locations [i].arrived)
                elsewhere = true;
            else
                coming = true;
        }
    if (elsewhere)
        return;
    d->waiting++;
    if (coming || d->n_targets == 0)
        return;
    size_t best = 0;
    for (size_t i = 1; i < d->n_targets; i++)
        if (d->bytes [i] < d->bytes [best])
            best = i;
    gov_t *to = d->targets [best];
    d->bytes [best] += object->size;
    bx_hook_object_copy (d->self, object, d->gov, to);
    graph_object_add_location (d->self->graph, object, to, false);
    d->ordered++;
}

static void
s_leave (broker_t *self, gov_t *gov, const char *how)
{
    gov->leaving = true;
    sq_wbuf_reset (&self->out);
    sq_bare_encode (&self->out, SQ_MSG_LEAVE);
    bx_send_to (self, gov->identity, gov->identity_size, &self->out, NULL);
    sq_info ("governor %u (%s) drained in %lld ms (%s): it may leave", gov->id, gov->name,
             (long long) (bx_now () - gov->drain_started), how);
}

int64_t
drain_tick (broker_t *self, int64_t now)
{
    if (self->next_drain < 0 || now < self->next_drain)
        return self->next_drain;
    bool any = false;
    for (size_t g = 0; g < self->n_govs; g++) {
        gov_t *gov = self->govs [g];
        if (!gov->draining || gov->leaving)
            continue;
        any = true;
        //  Running tasks finish and taken-back ones come back first: their
        //  outputs may be what must move.
        if (sq_idmap_size (gov->tasks) > 0 || gov->inventory)
            continue;
        static s_drain_t d;             //  64 KiB: not for the stack; one thread
        memset (&d, 0, sizeof d);
        d.self = self;
        d.gov = gov;
        for (size_t t = 0; t < self->n_govs && d.n_targets < GOV_MAX; t++) {
            gov_t *other = self->govs [t];
            if (other != gov && !other->draining && !other->inventory) {
                d.targets [d.n_targets] = other;
                d.bytes [d.n_targets++] = other->load.memory;
            }
        }
        graph_each_located (self->graph, gov, s_object, &d);
        if (d.ordered)
            sq_info ("governor %u (%s) drains: %zu objects only it holds copied to other "
                     "governors", gov->id, gov->name, d.ordered);
        if (d.waiting == 0)
            s_leave (self, gov, "nothing left only there");
        else
        if (d.n_targets == 0)
            s_leave (self, gov, "no other governor to take what it holds");
    }
    self->next_drain = any? now + S_DRAIN_TICK_MS: -1;
    return self->next_drain;
}
