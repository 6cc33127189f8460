/*  compute_batch: what the compute thread tells the broker and the
    balance thread. Task events are packed into one pending UPDATE, sent
    when the thread has nothing more to read (or a bound is reached), held
    a moment while Python executors are busy; the load is published to
    the balance thread, which makes LOAD of it (balancer.h).

    Ownership: the pending events and payloads live in the compute_t
    (compute_internal.h); compute_flush hands them to the pipe. */
#ifndef GOV_COMPUTE_BATCH_H
#define GOV_COMPUTE_BATCH_H

#include "compute_internal.h"

//  An event was packed into self->events: sent at once past a bound.
void compute_event_added (compute_t *self);
//  Sends the pending UPDATE to the broker, if any event waits.
void compute_flush (compute_t *self);
//  Payload index of a blob added to the batch (1 = first), -1 if it
//  cannot be inlined.
int32_t compute_add_payload (compute_t *self, sq_blob_t *blob);
uint64_t compute_duration_us (task_t *task);
//  FAILED events (compute_failed: reason SQ_FAIL_TASK).
void compute_failed_reason (compute_t *self, uint64_t key, uint32_t attempt, const char *message,
                            uint64_t duration_us, uint32_t reason);
void compute_failed (compute_t *self, uint64_t key, uint32_t attempt, const char *message,
                     uint64_t duration_us);
//  Publishes the load to the balance thread (balancer.h), which alone
//  decides when LOAD goes: every turn of the loop, busy or idle.
void compute_publish_load (compute_t *self);
//  ms to hold the UPDATE while Python executors are busy, or -1.
long compute_py_hold (compute_t *self);

#endif
