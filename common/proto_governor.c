/*  proto_governor: the governor plane, governor <-> broker: UPDATE events,
    LOAD, SEND, DROP, STOP, RETRACT, KEYS (docs/protocol.md section 9);
    ASSIGN is the table's batch of ASSIGN_TASK records (proto.h). */
#include "proto_internal.h"

//  KEYS: a message of the table (its lists a kind, KEYLIST)

int
sq_keyset_decode (sq_keyset_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    return sq_msg_decode (SQ_MSG_KEYS, self, data, size, err);
}

void
sq_keyset_release (sq_keyset_t *self)
{
    free ((void *) self->governors.keys);
    free ((void *) self->clients.keys);
    memset (self, 0, sizeof *self);
}

void
sq_keyset_encode (sq_wbuf_t *w, const uint8_t *const *governors, uint32_t n_governors,
                  const uint8_t *const *clients, uint32_t n_clients)
{
    sq_keyset_t m = { { governors, n_governors }, { clients, n_clients } };
    sq_msg_encode (w, SQ_MSG_KEYS, &m);
}

//  UPDATE ---------------------------------------------------------------

int
sq_update_begin (sq_iter_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    return sqp_iter_begin (self, data, size, SQ_MSG_UPDATE, err, "UPDATE");
}

int
sq_update_next (sq_iter_t *self, sq_event_t *ev)
{
    int more = sqp_iter_more (self, "UPDATE");
    if (more > 0 && sq_event_read (self, ev))
        return sqp_error (&self->r, self->err, "UPDATE");
    return more;
}

//  The events' packers: an sq_event_t of the arguments, packed by the table

void
sq_pack_finished (msgpack_packer *pk, uint64_t task, uint32_t attempt,
                  const sq_output_ref_t *outputs, uint32_t n, uint64_t duration_us)
{
    sq_event_t ev = { .key = task, .attempt = attempt,
                      .outputs = (sq_output_ref_t *) outputs, .n_outputs = n,
                      .duration_us = duration_us };
    sqp_pack_EV_FINISHED (pk, &ev, 4);
}

//  FAILED with a reason, and an execute program's exit code if exited
static void
s_pack_failed (msgpack_packer *pk, uint64_t task, uint32_t attempt, const char *message,
               uint64_t duration_us, uint32_t reason, bool exited, int32_t exit_code)
{
    sq_event_t ev = { .type = SQ_EV_FAILED, .key = task, .attempt = attempt,
                      .message = { message, message? (uint32_t) strlen (message): 0 },
                      .duration_us = duration_us, .reason = reason,
                      .has_exit_code = exited, .exit_code = exit_code };
    sqp_pack_EV_FAILED (pk, &ev, exited? 6: 5);
}

void
sq_pack_failed_reason (msgpack_packer *pk, uint64_t task, uint32_t attempt,
                       const char *message, uint64_t duration_us, uint32_t reason)
{
    s_pack_failed (pk, task, attempt, message, duration_us, reason, false, 0);
}

void
sq_pack_failed_exit (msgpack_packer *pk, uint64_t task, uint32_t attempt,
                     const char *message, uint64_t duration_us, int32_t exit_code)
{
    s_pack_failed (pk, task, attempt, message, duration_us, SQ_FAIL_TASK, true, exit_code);
}

void
sq_pack_failed (msgpack_packer *pk, uint64_t task, uint32_t attempt,
                const char *message, uint64_t duration_us)
{
    sq_pack_failed_reason (pk, task, attempt, message, duration_us, SQ_FAIL_TASK);
}

//  The events of a key, an attempt, a size and a duration
#define S_EVENT(NAME, key_, attempt_, size_, duration_, n) \
    { sq_event_t ev = { .key = key_, .attempt = attempt_, .size = size_, \
                        .duration_us = duration_ }; \
      sqp_pack_EV_##NAME (pk, &ev, n); }
//  ... and of an object handed over on this host (its last field, local)
#define S_EVENT_LOCAL(NAME, n) \
    { sq_event_t ev = { .key = object, .size = size, .local = true }; \
      sqp_pack_EV_##NAME (pk, &ev, n); }

void
sq_pack_started (msgpack_packer *pk, uint64_t task, uint32_t attempt)
S_EVENT (STARTED, task, attempt, 0, 0, 2)

void
sq_pack_retracted (msgpack_packer *pk, uint64_t task, uint32_t attempt)
S_EVENT (RETRACTED, task, attempt, 0, 0, 2)

void
sq_pack_running (msgpack_packer *pk, uint64_t task, uint32_t attempt)
S_EVENT (RUNNING, task, attempt, 0, 0, 2)

void
sq_pack_refreshed (msgpack_packer *pk, uint64_t refreshes)
S_EVENT (REFRESHED, refreshes, 0, 0, 0, 1)

void
sq_pack_lost (msgpack_packer *pk, uint64_t object)
S_EVENT (LOST, object, 0, 0, 0, 1)

void
sq_pack_located (msgpack_packer *pk, uint64_t object, uint64_t size)
S_EVENT (LOCATED, object, 0, size, 0, 2)

void
sq_pack_located_in (msgpack_packer *pk, uint64_t object, uint64_t size, uint64_t duration_us)
S_EVENT (LOCATED, object, 0, size, duration_us, 3)

//  Handed over between governors of one host (LCOPY): the optional field
//  says so (duration_us, before it, 0: nothing was timed).
void
sq_pack_located_local (msgpack_packer *pk, uint64_t object, uint64_t size)
S_EVENT_LOCAL (LOCATED, 4)

void
sq_pack_uploaded (msgpack_packer *pk, uint64_t object, uint64_t size)
S_EVENT (UPLOADED, object, 0, size, 0, 2)

//  Handed over on this host (PUTLOCAL): the optional field says so.
void
sq_pack_uploaded_local (msgpack_packer *pk, uint64_t object, uint64_t size)
S_EVENT_LOCAL (UPLOADED, 3)

void
sq_pack_streamed (msgpack_packer *pk, uint64_t object, uint64_t bytes)
S_EVENT (STREAMED, object, 0, bytes, 0, 2)

void
sq_pack_streamlocal (msgpack_packer *pk, uint64_t object)
S_EVENT (STREAMLOCAL, object, 0, 0, 0, 1)

void
sq_pack_held (msgpack_packer *pk, uint64_t object, uint32_t version, uint64_t size)
S_EVENT (HELD, object, version, size, 0, 3)

void
sq_pack_inventory_end (msgpack_packer *pk)
S_EVENT (INVENTORY, 0, 0, 0, 0, 0)

void
sq_pack_seceded (msgpack_packer *pk, uint64_t task, uint32_t attempt, bool seceded)
{
    sq_event_t ev = { .type = SQ_EV_SECEDED, .key = task, .attempt = attempt,
                      .seceded = seceded };
    sqp_pack_EV_SECEDED (pk, &ev, 3);
}

void
sq_pack_taskkey (msgpack_packer *pk, uint64_t task, uint32_t attempt, const uint8_t *public_key)
{
    sq_event_t ev = { .type = SQ_EV_TASKKEY, .key = task, .attempt = attempt,
                      .public_key = { (const char *) public_key, 32 } };
    sqp_pack_EV_TASKKEY (pk, &ev, 3);
}

void
sq_pack_logtail_event (msgpack_packer *pk, uint64_t task, uint32_t attempt, uint32_t req,
                       const void *data, size_t size)
{
    sq_event_t ev = { .type = SQ_EV_LOGTAIL, .key = task, .attempt = attempt, .size = req,
                      .message = { (const char *) data, (uint32_t) size } };
    sqp_pack_EV_LOGTAIL (pk, &ev, 4);
}

void
sq_pack_ran (msgpack_packer *pk, uint64_t run, uint32_t answers, uint64_t size)
{
    sq_event_t ev = { .type = SQ_EV_RAN, .key = run, .attempt = answers, .size = size };
    sqp_pack_EV_RAN (pk, &ev, 3);
}

void
sq_pack_ran_result (msgpack_packer *pk, uint64_t pid, bool ok, const void *data, size_t size)
{
    sq_ran_result_t result = { pid, ok, { (const char *) data, (uint32_t) size } };
    sqp_pack_RAN_RESULT (pk, &result);
}

//  LOAD, HEARTBEAT, BYE -----------------------------------------------------

void
sq_bare_encode (sq_wbuf_t *w, uint32_t type)
{
    msgpack_pack_array (&w->pk, 1);
    msgpack_pack_uint32 (&w->pk, type);
}

void
sq_refresh_encode (sq_wbuf_t *w, const char *tenant)
{
    sq_refresh_t m = { .tenant = { tenant? tenant: "", tenant? (uint32_t) strlen (tenant): 0 } };
    sq_msg_encode (w, SQ_MSG_REFRESH, &m);
}

int
sq_refresh_decode (const void *data, size_t size, mpr_str_t *tenant, sq_errbuf_t *err)
{
    sq_refresh_t m;
    if (sq_msg_decode (SQ_MSG_REFRESH, &m, data, size, err))
        return -1;
    *tenant = m.tenant;
    return 0;
}

int
sq_bare_decode (const void *data, size_t size, uint32_t type, sq_errbuf_t *err)
{
    mpr_t r;
    sqp_begin (&r, data, size, type, 1);
    if (mpr_end (&r))
        return sqp_error (&r, err, sq_msg_name (type)? sq_msg_name (type): "message");
    return 0;
}

//  SEND, STREAM, UNSTREAM, STOP, RETRACT: batches of the table's records

void
sq_pack_send (msgpack_packer *pk, uint64_t key, uint32_t version, uint32_t to,
              const char *endpoint, const uint8_t *to_key)
{
    sq_send_t o = { key, version, to, { endpoint, endpoint? (uint32_t) strlen (endpoint): 0 },
                    { (const char *) to_key, to_key? 32: 0 } };
    sqp_pack_SEND_ORDER (pk, &o);
}

void
sq_pack_stream (msgpack_packer *pk, uint64_t key, uint32_t version, uint64_t consumer,
                uint32_t to, const char *endpoint, const uint8_t *to_key)
{
    sq_stream_order_t o = { key, version, consumer, to,
                            { endpoint, endpoint? (uint32_t) strlen (endpoint): 0 },
                            { (const char *) to_key, to_key? 32: 0 } };
    sqp_pack_STREAM_ORDER (pk, &o);
}

void
sq_pack_unstream (msgpack_packer *pk, uint64_t key, uint32_t version, uint64_t consumer)
{
    sq_stream_order_t o = { .key = key, .version = version, .consumer = consumer };
    sqp_pack_UNSTREAM_ORDER (pk, &o);
}

//  DROP's elements are bare keys (the table's SQ_RECORD_BARE DROP_KEY)
int
sq_drop_next (sq_iter_t *self, uint64_t *key)
{
    sq_drop_key_t k;
    int more = sq_batch_next (self, SQ_MSG_DROP, &k);
    if (more == 1)
        *key = k.key;
    return more;
}

//  STOP's and RETRACT's elements (errors name STOP for both)
int
sq_stop_next (sq_iter_t *self, uint64_t *key, uint32_t *attempt)
{
    sq_stop_task_t t;
    int more = sq_batch_next (self, SQ_MSG_STOP, &t);
    if (more == 1) {
        *key = t.task;
        *attempt = t.attempt;
    }
    return more;
}

void
sq_pack_drop (msgpack_packer *pk, uint64_t object)
{
    sq_drop_key_t k = { object };
    sqp_pack_DROP_KEY (pk, &k);
}

void
sq_pack_stop (msgpack_packer *pk, uint64_t task, uint32_t attempt)
{
    sq_stop_task_t t = { task, attempt };
    sqp_pack_STOP_TASK (pk, &t);
}
