/*  proto_governor: the governor plane, governor <-> broker: UPDATE events,
    LOAD, ASSIGN, SEND, DROP, STOP, RETRACT, KEYS (docs/protocol.md
    section 9). */
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

void
sq_pack_failed_reason (msgpack_packer *pk, uint64_t task, uint32_t attempt,
                       const char *message, uint64_t duration_us, uint32_t reason)
{
    sq_event_t ev = { .type = SQ_EV_FAILED, .key = task, .attempt = attempt,
                      .message = { message, message? (uint32_t) strlen (message): 0 },
                      .duration_us = duration_us, .reason = reason };
    sqp_pack_EV_FAILED (pk, &ev, 5);
}

void
sq_pack_failed_exit (msgpack_packer *pk, uint64_t task, uint32_t attempt,
                     const char *message, uint64_t duration_us, int32_t exit_code)
{
    sq_event_t ev = { .type = SQ_EV_FAILED, .key = task, .attempt = attempt,
                      .message = { message, message? (uint32_t) strlen (message): 0 },
                      .duration_us = duration_us, .reason = SQ_FAIL_TASK,
                      .has_exit_code = true, .exit_code = exit_code };
    sqp_pack_EV_FAILED (pk, &ev, 6);
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
{
    sq_event_t ev = { .key = object, .size = size, .local = true };
    sqp_pack_EV_LOCATED (pk, &ev, 4);
}

void
sq_pack_uploaded (msgpack_packer *pk, uint64_t object, uint64_t size)
S_EVENT (UPLOADED, object, 0, size, 0, 2)

//  Handed over on this host (PUTLOCAL): the optional field says so.
void
sq_pack_uploaded_local (msgpack_packer *pk, uint64_t object, uint64_t size)
{
    sq_event_t ev = { .key = object, .size = size, .local = true };
    sqp_pack_EV_UPLOADED (pk, &ev, 3);
}

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

//  ASSIGN ---------------------------------------------------------------

int
sq_assign_begin (sq_iter_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    return sqp_iter_begin (self, data, size, SQ_MSG_ASSIGN, err, "ASSIGN");
}

int
sq_assign_next (sq_iter_t *self, sq_assign_t *t)
{
    int more = sqp_iter_more (self, "ASSIGN");
    if (more <= 0)
        return more;
    mpr_t *r = &self->r;
    uint32_t n_in = 0, n_out = 0;
    memset (t, 0, sizeof *t);
    mpr_field (r, "task");
    mpr_array_exact (r, 11);
    mpr_field (r, "task.key");
    mpr_uint (r, &t->key);
    mpr_field (r, "task.attempt");
    mpr_u32 (r, &t->attempt);
    mpr_field (r, "task.kind");
    mpr_str (r, &t->kind, SQ_MAX_NAME);
    mpr_field (r, "task.config");
    mpr_skip (r, &t->config, &t->config_size);
    //  Inputs and outputs share one scratch block: inputs first. The counts
    //  are bounded by the bytes left, so the block is too.
    mpr_field (r, "task.inputs");
    mpr_array (r, &n_in);
    size_t in_bytes = sizeof (sq_input_ref_t) * n_in;
    size_t out_max = r->size - r->pos;
    char *block = mpr_ok (r)? (char *) sqp_scratch (self, in_bytes + sizeof (sq_out_decl_t) * (out_max + 1)): NULL;
    if (!block)
        return sqp_error (r, self->err, "ASSIGN");
    t->inputs = (sq_input_ref_t *) block;
    for (uint32_t i = 0; i < n_in && mpr_ok (r); i++) {
        sq_input_ref_t *in = &t->inputs [i];
        mpr_array_exact (r, 4);
        mpr_uint (r, &in->key);
        mpr_uint (r, &in->size);
        sqp_frame_index (r, &in->frame);
        mpr_str (r, &in->content_type, SQ_MAX_NAME);
    }
    t->n_inputs = n_in;
    mpr_field (r, "task.outputs");
    mpr_array (r, &n_out);
    t->outputs = (sq_out_decl_t *) (block + in_bytes);
    for (uint32_t i = 0; i < n_out && mpr_ok (r); i++) {
        uint32_t fields = 0;
        mpr_array (r, &fields);
        if (mpr_ok (r) && fields != 2 && fields != 3)
            mpr_fail (r, "an output is [object, content_type] or [object, content_type, consumers]");
        mpr_uint (r, &t->outputs [i].key);
        mpr_str (r, &t->outputs [i].content_type, SQ_MAX_NAME);
        t->outputs [i].stream = fields == 3;
        t->outputs [i].consumers = 0;
        if (fields == 3 && mpr_u32 (r, &t->outputs [i].consumers) == 0
        &&  t->outputs [i].consumers > SQ_MAX_STREAM_CONSUMERS)
            mpr_fail (r, "more stream consumers than allowed");
    }
    t->n_outputs = n_out;
    mpr_field (r, "task.cpus");
    mpr_u32 (r, &t->cpus);
    mpr_field (r, "task.timeout_ms");
    mpr_u32 (r, &t->timeout_ms);
    mpr_field (r, "task.name");
    mpr_str (r, &t->name, SQ_MAX_NAME);
    mpr_field (r, "task.resources");
    sqp_resources (r, t->resources, &t->n_resources, SQ_MAX_RESOURCES);
    mpr_field (r, "task.tenant");
    mpr_str (r, &t->tenant, SQ_MAX_NAME);
    if (!mpr_ok (r))
        return sqp_error (r, self->err, "ASSIGN");
    return 1;
}

void
sq_pack_assign (msgpack_packer *pk, const sq_assign_t *t)
{
    msgpack_pack_array (pk, 11);
    msgpack_pack_uint64 (pk, t->key);
    msgpack_pack_uint32 (pk, t->attempt);
    sq_pack_mstr (pk, t->kind);
    if (t->config && t->config_size)
        msgpack_pack_str_body (pk, t->config, t->config_size);
    else
        msgpack_pack_nil (pk);
    msgpack_pack_array (pk, t->n_inputs);
    for (uint32_t i = 0; i < t->n_inputs; i++) {
        msgpack_pack_array (pk, 4);
        msgpack_pack_uint64 (pk, t->inputs [i].key);
        msgpack_pack_uint64 (pk, t->inputs [i].size);
        msgpack_pack_int32 (pk, t->inputs [i].frame);
        sq_pack_mstr (pk, t->inputs [i].content_type);
    }
    msgpack_pack_array (pk, t->n_outputs);
    for (uint32_t i = 0; i < t->n_outputs; i++) {
        msgpack_pack_array (pk, t->outputs [i].stream? 3: 2);
        msgpack_pack_uint64 (pk, t->outputs [i].key);
        sq_pack_mstr (pk, t->outputs [i].content_type);
        if (t->outputs [i].stream)
            msgpack_pack_uint32 (pk, t->outputs [i].consumers);
    }
    msgpack_pack_uint32 (pk, t->cpus);
    msgpack_pack_uint32 (pk, t->timeout_ms);
    sq_pack_mstr (pk, t->name);
    sqp_pack_resources (pk, t->resources, t->n_resources);
    sq_pack_mstr (pk, t->tenant);
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
