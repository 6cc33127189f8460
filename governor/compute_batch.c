/*  compute_batch: the UPDATE batch and the load published to the balance
    thread (compute_batch.h). */
#include "compute_batch.h"
#include "grow.h"

//  --------------------------------------------------------------------------
//  Events and the UPDATE batch

void
compute_event_added (compute_t *self)
{
    self->n_events++;
    if (self->n_events >= S_BATCH_EVENTS || self->payload_bytes >= S_BATCH_BYTES
    ||  self->n_payloads >= S_BATCH_FRAMES)
        compute_flush (self);
}

//  Payload index of a blob added to the batch (1 = first payload), -1 if
//  it cannot be inlined.
int32_t
compute_add_payload (compute_t *self, sq_blob_t *blob)
{
    if (self->n_payloads == self->cap_payloads
    &&  sq_grow ((void **) &self->payloads, &self->cap_payloads, self->n_payloads + 1,
                 sizeof *self->payloads, 64, SIZE_MAX))
        return -1;
    if (sq_blob_msg (blob, &self->payloads [self->n_payloads]))
        return -1;
    self->payload_bytes += sq_blob_size (blob);
    return (int32_t) ++self->n_payloads;
}

void
compute_flush (compute_t *self)
{
    if (self->n_events == 0)
        return;
    sq_wbuf_t header;
    sq_wbuf_init (&header);
    sq_batch_header (&header, SQ_MSG_UPDATE, self->n_events);
    msgpack_sbuffer_write (&header.buf, self->events.buf.data, self->events.buf.size);
    const char route = GOV_ROUTE_BROKER;
    if (sq_send (self->pipe, &route, 1, &header, self->payloads, self->n_payloads, 0))
        sq_warn ("cannot pass UPDATE on: %s", zmq_strerror (errno));
    sq_wbuf_release (&header);
    sq_wbuf_reset (&self->events);
    self->flushed_ns = task_now_ns ();
    self->n_events = 0;
    self->n_payloads = 0;
    self->payload_bytes = 0;
}

uint64_t
compute_duration_us (task_t *task)
{
    return task->start_ns? (task_now_ns () - task->start_ns) / 1000: 0;
}

void
compute_failed_reason (compute_t *self, uint64_t key, uint32_t attempt, const char *message,
                 uint64_t duration_us, uint32_t reason)
{
    sq_debug ("task %" PRIx64 "/%u failed: %s", key, attempt, message);
    sq_pack_failed_reason (&self->events.pk, key, attempt, message, duration_us, reason);
    compute_event_added (self);
}

void
compute_failed (compute_t *self, uint64_t key, uint32_t attempt, const char *message,
          uint64_t duration_us)
{
    compute_failed_reason (self, key, attempt, message, duration_us, SQ_FAIL_TASK);
}

void
compute_publish_load (compute_t *self)
{
    sq_load_t load = {
        .running = self->n_running - self->n_piped,
        .queued = self->n_queued + self->n_piped, .piped = self->n_piped,
        .memory = store_memory (self->store) + transfer_incoming_bytes (self->transfer)
                + stream_bytes (self->streams),
        .spilled = store_spilled (self->store), .shared = store_shared (self->store),
        .objects = store_count (self->store),
        .tasks = self->tasks_completed
    };
    //  The lock is taken only for a change.
    if (!balancer_load_equal (&load, &self->load_sent)) {
        balancer_load_set (self->load, &load);
        self->load_sent = load;
    }
}

//  While Python executors are busy their replies come within about a
//  millisecond, and an UPDATE per reply would cost the broker more than
//  the tasks: events then wait up to S_PY_HOLD_NS after the last UPDATE.
//  Returns the ms to hold, or -1 to flush now.
long
compute_py_hold (compute_t *self)
{
    if (self->n_events == 0 || pyexec_busy (self->pyexec) == 0)
        return -1;
    uint64_t now = task_now_ns ();
    return now - self->flushed_ns < S_PY_HOLD_NS? 1: -1;
}
