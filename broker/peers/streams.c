/*  streams: where stream consumers run, and the orders that connect them
    to their producers (docs/protocol.md, "Streams").

    A stream consumer never goes through the scheduler: it is placed when
    its streams open (their producers started), on the least loaded
    governor that has its resources, whatever its slots say
    (scheduler_place_now), and its
    governor starts it at once, beside what runs there. Its producer waits
    for every reader before it writes a byte, and holds its cpus while it
    waits, so a consumer queued behind slots or cpus could wait for ever;
    a consumer runs at its producer's pace anyway. */
#include "broker_internal.h"
#include "grow.h"

//  Ready consumers wait here (keys) for the end of the turn.
int
bx_stream_ready (broker_t *self, task_t *task)
{
    if (self->n_stream_ready == self->cap_stream_ready
    &&  sq_grow ((void **) &self->stream_ready, &self->cap_stream_ready, self->n_stream_ready + 1,
                 sizeof *self->stream_ready, 64, SIZE_MAX))
        return -1;
    self->stream_ready [self->n_stream_ready++] = task->key;
    return 0;
}

size_t
bx_streams_place (broker_t *self)
{
    size_t placed = 0, kept = 0;
    for (size_t i = 0; i < self->n_stream_ready; i++) {
        task_t *task = graph_task (self->graph, self->stream_ready [i]);
        if (!task || task->state != TASK_READY || !graph_stream_placeable (task))
            continue;           //  gone, or its group started again
        gov_t *gov = scheduler_place_now (self->scheduler, task);
        if (!gov) {
            if (self->n_govs == 0) {
                self->stream_ready [kept++] = task->key;   //  until one joins
                continue;
            }
            graph_task_failed (self->graph, task, SQ_E_RESOURCES,
                               "no connected governor has the resources this stream reader "
                               "needs, and its producer cannot wait for one");
            continue;
        }
        bx_assign (self, task, gov);
        placed++;
    }
    self->n_stream_ready = kept;
    return placed;
}

void
bx_hook_stream_unread (void *arg, object_t *stream, task_t *consumer)
{
    (void) arg;
    task_t *producer = stream->producer;
    gov_order_unstream (producer->gov, stream->key, producer->attempt, consumer->key);
}

static bool
s_open (broker_t *self, uint64_t key, object_t **object_p)
{
    object_t *object = graph_object (self->graph, key);
    *object_p = object;
    return object && object->stream && object->stream_open && object->state == OBJ_UNFINISHED
        && object->producer->gov;
}

//  Listed for INFO while it is written, from its writer's STARTED on; the
//  list forgets streams that ended whenever it is read or full.
static void
s_list (broker_t *self, uint64_t key)
{
    size_t kept = 0;
    bool listed = false;
    for (size_t i = 0; i < self->n_open_streams; i++) {
        object_t *o;
        if (!s_open (self, self->open_streams [i], &o))
            continue;
        listed |= self->open_streams [i] == key;
        self->open_streams [kept++] = self->open_streams [i];
    }
    self->n_open_streams = kept;
    size_t cap = sizeof self->open_streams / sizeof self->open_streams [0];
    if (!listed && self->n_open_streams < cap)
        self->open_streams [self->n_open_streams++] = key;
}

void
bx_streams_started (broker_t *self, task_t *producer)
{
    for (uint32_t i = 0; i < producer->n_outputs; i++) {
        object_t *o;
        uint64_t key = producer->io [producer->n_inputs + i]->key;
        if (s_open (self, key, &o))
            s_list (self, key);
    }
}

void
bx_stream_progress (broker_t *self, gov_t *gov, uint64_t key, uint64_t bytes)
{
    object_t *object;
    if (!s_open (self, key, &object) || object->producer->gov != gov)
        return;
    object->size = bytes;
    s_list (self, key);
}

size_t
bx_streams_info (broker_t *self, const peer_t *viewer, bool all, sq_info_stream_t *out, size_t max)
{
    size_t n = 0, kept = 0;
    for (size_t i = 0; i < self->n_open_streams; i++) {
        object_t *o;
        if (!s_open (self, self->open_streams [i], &o))
            continue;
        self->open_streams [kept++] = self->open_streams [i];
        if (n < max && (all || bx_same_tenant (viewer, o->session)))
            out [n++] = (sq_info_stream_t) {
                sq_key_session (o->key), sq_key_id (o->key), o->producer->gov->id, o->size
            };
    }
    self->n_open_streams = kept;
    return n;
}
