/*  gov: a connected governor as the broker sees it. */
#include "gov.h"
#include "reattach.h"
#include "wire.h"
#include "blob.h"
#include "grow.h"
#include <stdlib.h>
#include <string.h>

static void
s_batch_init (gov_batch_t *batch)
{
    sq_wbuf_init (&batch->elements);
    batch->count = 0;
}

gov_t *
gov_new (uint32_t id, const sq_hello_t *hello, const void *identity,
         size_t identity_size, uint32_t prefetch)
{
    gov_t *self = (gov_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->id = id;
    self->fd = -1;
    self->name = mpr_strdup (hello->name);
    self->data_endpoint = mpr_strdup (hello->data_endpoint);
    self->serve_endpoint = mpr_strdup (hello->serve_endpoint);
    self->tasks = sq_idmap_new ();
    self->recopies = sq_idmap_new ();
    self->incarnation = hello->incarnation;
    if (identity_size > sizeof self->identity)
        identity_size = sizeof self->identity;
    memcpy (self->identity, identity, identity_size);
    self->identity_size = identity_size;
    self->cpus = 1;
    for (uint32_t i = 0; i < hello->n_resources; i++) {
        const sq_resource_t *res = &hello->resources [i];
        if (mpr_str_eq (res->name, SQ_RES_CPUS)) {
            self->cpus = res->amount > 65536? 65536: (uint32_t) res->amount;
            continue;
        }
        sq_resource_t *mine = &self->resources [self->n_resources++];
        mine->name.ptr = mpr_strdup (res->name);
        mine->name.len = res->name.len;
        mine->amount = res->amount;
    }
    //  Enough queued work to cover a broker round trip at full speed, and
    //  no more: what is queued on one governor cannot run on another, and
    //  roots started too early fill memory (Dask's root-task
    //  overproduction). Until durations are known, one task per cpu.
    self->prefetch_max = prefetch;
    self->queue_us = GOV_QUEUE_US;
    self->open_at = -1;
    //  A governor with no cpus still runs tasks that need none.
    uint32_t first = self->cpus? self->cpus: 1;
    self->slots = self->cpus + (prefetch < first? prefetch: first);
    if (self->slots == 0)
        self->slots = 1;
    s_batch_init (&self->assign);
    s_batch_init (&self->send);
    s_batch_init (&self->drop);
    s_batch_init (&self->stop);
    s_batch_init (&self->retract);
    s_batch_init (&self->stream);
    s_batch_init (&self->unstream);
    if (!self->name || !self->data_endpoint || !self->serve_endpoint || !self->tasks
    ||  !self->recopies)
        gov_destroy (&self);
    return self;
}

void
gov_destroy (gov_t **self_p)
{
    gov_t *self = *self_p;
    if (!self)
        return;
    free (self->name);
    free (self->data_endpoint);
    free (self->serve_endpoint);
    for (uint32_t i = 0; i < self->n_resources; i++)
        free ((char *) self->resources [i].name.ptr);
    sq_idmap_destroy (&self->tasks);
    sq_idmap_destroy (&self->recopies);
    inventory_destroy (&self->inventory);
    sq_wbuf_release (&self->assign.elements);
    sq_wbuf_release (&self->send.elements);
    sq_wbuf_release (&self->drop.elements);
    sq_wbuf_release (&self->stop.elements);
    sq_wbuf_release (&self->retract.elements);
    sq_wbuf_release (&self->stream.elements);
    sq_wbuf_release (&self->unstream.elements);
    for (size_t i = 0; i < self->n_payloads; i++)
        zmq_msg_close (&self->payloads [i]);
    free (self->payloads);
    free (self);
    *self_p = NULL;
}

uint64_t
gov_resource (const gov_t *self, mpr_str_t name)
{
    if (mpr_str_eq (name, SQ_RES_CPUS))
        return self->cpus;
    for (uint32_t i = 0; i < self->n_resources; i++)
        if (self->resources [i].name.len == name.len
        &&  memcmp (self->resources [i].name.ptr, name.ptr, name.len) == 0)
            return self->resources [i].amount;
    return 0;
}

static uint64_t
s_task_gpus (const task_t *task)
{
    const task_extra_t *extra = task_extra (task);
    for (uint32_t r = 0; r < extra->n_resources; r++)
        if (mpr_str_eq (extra->resources [r].name, SQ_RES_GPUS))
            return extra->resources [r].amount;
    return 0;
}

bool
gov_gpus_free (const gov_t *self, const task_t *task)
{
    uint64_t want = s_task_gpus (task);
    if (want == 0)
        return true;
    uint64_t offered = gov_resource (self, (mpr_str_t) { SQ_RES_GPUS, 4 });
    uint64_t frac_devices = (self->gpus_frac + SQ_GPU_MILLI - 1) / SQ_GPU_MILLI * SQ_GPU_MILLI;
    if (want % SQ_GPU_MILLI == 0)
        return self->gpus_whole + frac_devices + want <= offered;
    return self->gpus_whole + self->gpus_frac + want <= offered;
}

//  What a task takes of the governor's cpus for others: an actor host
//  holds its cpus while it lives; calls and stream readers take none.
static void
s_count (gov_t *self, const task_t *task, int sign)
{
    uint64_t gpus = s_task_gpus (task);
    if (gpus) {
        uint64_t *count = gpus % SQ_GPU_MILLI? &self->gpus_frac: &self->gpus_whole;
        *count = sign > 0? *count + gpus: *count >= gpus? *count - gpus: 0;
    }
    if (!task->actor_host && !task->actor_call && !task->stream_in)
        return;
    self->n_apart += sign;
    if (task->actor_host)
        self->held_cpus += sign * (int) task_extra (task)->cpus;
}

void
gov_task_secede (gov_t *self, task_t *task, bool seceded)
{
    if (task->seceded == seceded || sq_idmap_lookup (self->tasks, task->key) != task)
        return;
    task->seceded = seceded;
    self->n_apart += seceded? 1: -1;
    self->n_seceded += seceded? 1: -1;
}

int
gov_task_add (gov_t *self, task_t *task)
{
    if (sq_idmap_insert (self->tasks, task->key, task))
        return -1;
    task->seceded = false;          //  a new attempt holds its cpus
    s_count (self, task, 1);
    return 0;
}

task_t *
gov_task_remove (gov_t *self, uint64_t key)
{
    task_t *task = (task_t *) sq_idmap_remove (self->tasks, key);
    if (task && task->seceded) {
        task->seceded = false;
        self->n_apart--;
        self->n_seceded--;
    }
    if (task)
        s_count (self, task, -1);
    return task;
}

int
gov_attach (gov_t *self, sq_blob_t *blob)
{
    if (self->n_payloads + 1 >= SQ_MAX_FRAMES)
        return -1;
    if (self->n_payloads == self->cap_payloads
    &&  sq_grow ((void **) &self->payloads, &self->cap_payloads, self->n_payloads + 1,
                 sizeof *self->payloads, 16, SQ_MAX_FRAMES))
        return -1;
    if (sq_blob_msg (blob, &self->payloads [self->n_payloads]))
        return -1;
    return (int) ++self->n_payloads;
}

void
gov_note_duration (gov_t *self, uint64_t duration_us)
{
    double us = duration_us < 1? 1: (double) duration_us;
    self->avg_task_us = self->avg_task_us > 0? 0.9 * self->avg_task_us + 0.1 * us: us;
    double want = self->queue_us / self->avg_task_us * (self->cpus? self->cpus: 1);
    uint32_t prefetch = want < 1? 1: want > self->prefetch_max? self->prefetch_max: (uint32_t) want;
    self->slots = self->cpus + prefetch;
}

bool
gov_has_output (const gov_t *self)
{
    return self->assign.count || self->send.count || self->drop.count || self->stop.count
        || self->retract.count || self->stream.count || self->unstream.count;
}

//  One batch as one message: header [type, [..count..]] then the packed
//  elements appended.
static int
s_flush_batch (gov_t *self, void *router, gov_batch_t *batch, uint32_t type,
               zmq_msg_t *payloads, size_t n_payloads)
{
    if (batch->count == 0)
        return 0;
    sq_wbuf_t header;
    sq_wbuf_init (&header);
    sq_batch_header (&header, type, batch->count);
    msgpack_sbuffer_write (&header.buf, batch->elements.buf.data, batch->elements.buf.size);
    sq_wbuf_reset (&batch->elements);
    batch->count = 0;
    int rc = sq_send (router, self->identity, self->identity_size, &header,
                      payloads, n_payloads, ZMQ_DONTWAIT);
    sq_wbuf_release (&header);
    return rc;
}

int
gov_flush (gov_t *self, void *router, int64_t now)
{
    if (!gov_has_output (self))
        return 0;
    //  Order matters: copies are ordered before the tasks that need them
    //  are assigned elsewhere, and stops before new work.
    int rc = 0;
    rc |= s_flush_batch (self, router, &self->stop, SQ_MSG_STOP, NULL, 0);
    rc |= s_flush_batch (self, router, &self->retract, SQ_MSG_RETRACT, NULL, 0);
    rc |= s_flush_batch (self, router, &self->drop, SQ_MSG_DROP, NULL, 0);
    rc |= s_flush_batch (self, router, &self->send, SQ_MSG_SEND, NULL, 0);
    rc |= s_flush_batch (self, router, &self->assign, SQ_MSG_ASSIGN,
                         self->payloads, self->n_payloads);
    //  After ASSIGN: a stream's readers are named once its producer runs.
    rc |= s_flush_batch (self, router, &self->stream, SQ_MSG_STREAM, NULL, 0);
    rc |= s_flush_batch (self, router, &self->unstream, SQ_MSG_UNSTREAM, NULL, 0);
    self->n_payloads = 0;
    self->last_send = now;
    return rc? -1: 0;
}

void
gov_order_drop (gov_t *self, uint64_t key)
{
    sq_pack_drop (&self->drop.elements.pk, key);
    self->drop.count++;
}

static void
s_order_attempt (gov_batch_t *batch, uint64_t key, uint32_t attempt)
{
    sq_pack_stop (&batch->elements.pk, key, attempt);
    batch->count++;
}

void
gov_order_stop (gov_t *self, uint64_t key, uint32_t attempt)
{
    s_order_attempt (&self->stop, key, attempt);
}

void
gov_order_retract (gov_t *self, uint64_t key, uint32_t attempt)
{
    s_order_attempt (&self->retract, key, attempt);
}

void
gov_order_send (gov_t *self, uint64_t key, uint32_t version, const gov_t *to)
{
    sq_pack_send (&self->send.elements.pk, key, version, to->id, to->data_endpoint,
                  to->has_key? to->key: NULL);
    self->send.count++;
}

void
gov_order_stream (gov_t *self, uint64_t key, uint32_t version, uint64_t consumer, const gov_t *to)
{
    sq_pack_stream (&self->stream.elements.pk, key, version, consumer, to->id,
                    to->data_endpoint, to->has_key? to->key: NULL);
    self->stream.count++;
}

void
gov_order_unstream (gov_t *self, uint64_t key, uint32_t version, uint64_t consumer)
{
    sq_pack_unstream (&self->unstream.elements.pk, key, version, consumer);
    self->unstream.count++;
}
