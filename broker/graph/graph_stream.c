/*  graph_stream: streams, objects read while their producer writes them
    (docs/protocol.md, "Streams").

    A stream is never stored: its bytes go from the producer's governor to
    each consumer's as they are written. So its consumers become ready
    when the producer starts (the stream "opens"), not when it finishes,
    and no member of a stream group (a producer and the consumers of its
    streams, transitively) can run again alone: when one leaves its
    attempt unfinished (its governor lost, its own failure retried), every
    unfinished member of the group is stopped and the group runs again,
    producers first. Members that finished keep their results. */
#include "graph_internal.h"
#include "grow.h"

uint32_t
graph_stream_consumers (const object_t *stream)
{
    uint32_t n = 0;
    task_t *const *consumers = object_consumers ((object_t *) stream);
    for (uint32_t c = 0; c < stream->n_consumers; c++)
        if (!gx_final (consumers [c]))
            n++;
    return n;
}

bool
graph_stream_placeable (const task_t *task)
{
    for (uint32_t i = 0; i < task->n_inputs; i++) {
        const object_t *input = task->io [i];
        if (input->stream
        &&  (!input->stream_open || !input->producer->gov
             || (input->producer->state != TASK_ASSIGNED && input->producer->state != TASK_RUNNING)))
            return false;
    }
    return true;
}

//  The producer started: its streams open, and consumers waiting only for
//  them become ready.
void
gx_stream_open (graph_t *self, task_t *producer)
{
    for (uint32_t i = 0; i < producer->n_outputs; i++) {
        object_t *o = producer->io [producer->n_inputs + i];
        if (!o->stream || o->stream_open || o->state != OBJ_UNFINISHED)
            continue;
        o->stream_open = true;
        uint64_t was = gx_stored (o);
        o->size = 0;
        gx_stored_update (o, was);
        gx_count_down (self, o);
    }
}

void
gx_stream_unread (graph_t *self, task_t *consumer)
{
    for (uint32_t i = 0; i < consumer->n_inputs; i++) {
        object_t *s = consumer->io [i];
        //  Counted by the writer's ASSIGN (it was not final then), whether
        //  the writer started or not.
        if (s->stream && s->state == OBJ_UNFINISHED && s->producer->gov
        &&  (s->producer->state == TASK_ASSIGNED || s->producer->state == TASK_RUNNING)
        &&  self->hooks.stream_unread)
            self->hooks.stream_unread (self->hooks.arg, s, consumer);
    }
}

//  A growable list of pointers, for the walk below.
typedef struct {
    void **items;
    size_t n, cap;
} s_list_t;

static int
s_add (s_list_t *list, void *item)
{
    if (list->n == list->cap
    &&  sq_grow ((void **) &list->items, &list->cap, list->n + 1, sizeof *list->items, 16, SIZE_MAX))
        return -1;
    list->items [list->n++] = item;
    return 0;
}

static void
s_add_streams (s_list_t *list, task_t *task, bool inputs, bool outputs)
{
    for (uint32_t i = 0; inputs && i < task->n_inputs; i++)
        if (task->io [i]->stream)
            s_add (list, task->io [i]);
    for (uint32_t i = 0; outputs && i < task->n_outputs; i++)
        if (task->io [task->n_inputs + i]->stream)
            s_add (list, task->io [task->n_inputs + i]);
}

//  Stops an assigned or running member (and what is overbooked behind
//  it); it waits again with a new attempt.
static void
s_stop (graph_t *self, task_t *task, s_list_t *touched)
{
    if (task->state == TASK_ASSIGNED || task->state == TASK_RUNNING) {
        gx_unbook (self, task);
        gx_stop_and_wait (self, task);
    }
    s_add (touched, task);
}

void
gx_stream_restart (graph_t *self, task_t *task)
{
    s_list_t work = { 0 }, touched = { 0 };
    s_add_streams (&work, task, true, true);
    while (work.n > 0) {
        object_t *s = (object_t *) work.items [--work.n];
        task_t *producer = s->producer;
        if (s->state == OBJ_FINISHED) {
            //  Its producer finished: it runs again through lineage, and so
            //  does whatever it read as a stream; consumers go back to wait.
            if (s->released)
                continue;       //  nobody needs it any more
            s_add_streams (&work, producer, true, false);
            for (uint32_t c = 0; c < s->n_consumers; c++)
                if (!gx_final (object_consumers (s) [c]))
                    s_add_streams (&work, object_consumers (s) [c], false, true);
            gx_recompute (self, s);
            continue;
        }
        if (s->state != OBJ_UNFINISHED || !s->stream_open)
            continue;
        s->stream_open = false;
        uint64_t was = gx_stored (s);
        s->size = 0;
        gx_stored_update (s, was);
        for (uint32_t c = 0; c < s->n_consumers; c++) {
            task_t *consumer = object_consumers (s) [c];
            if (gx_final (consumer))
                continue;
            consumer->unfinished++;
            if (consumer->state == TASK_READY)
                gx_set_state (self, consumer, TASK_WAITING);
            s_stop (self, consumer, &touched);
            s_add_streams (&work, consumer, false, true);
        }
        if (producer != task && (producer->state == TASK_ASSIGNED || producer->state == TASK_RUNNING)) {
            s_stop (self, producer, &touched);
            s_add_streams (&work, producer, true, false);
        }
    }
    //  Producers whose inputs are all there run again; consumers wait for
    //  their streams to open.
    for (size_t i = 0; i < touched.n; i++) {
        task_t *t = (task_t *) touched.items [i];
        if (t != task && t->state == TASK_WAITING && t->unfinished == 0) {
            gx_set_state (self, t, TASK_READY);
            self->hooks.task_ready (self->hooks.arg, t);
        }
    }
    free (work.items);
    free (touched.items);
}
