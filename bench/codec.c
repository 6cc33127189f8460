/*  codec: what the table codec (proto_messages.def) costs per message next
    to the code it replaced, in the same run. The reference encoders and
    decoders here are the hand-written ones of CHUNK, KEEP and a STOP
    batch as they were before the table (git 0d8a831^), UPDATE's, and
    ASSIGN's (git 20def1f), SUBMIT's (git 626d9c8), REPLY's (git b42c4ad);
    they are the yardstick,
    not code squall uses. Over 800 lines: each yardstick is the old code
    whole, as it ran, so that the comparison is with what was replaced.

    usage: squall-bench-codec [ROUNDS [hand|table [0|1|2|3|4|5|6]]]
    Prints one line per message: ns per encode+decode by hand and by the
    table, and their ratio (table / hand). The machine's load moves both
    alike; compare the ratio, not the times. With hand or table it runs
    that side only, once (only CHUNK, KEEP, STOP, UPDATE, ASSIGN, SUBMIT or REPLY
    with 0 to 6): for
    counting instructions,
    valgrind --tool=callgrind squall-bench-codec 10000 table (and hand). */
#include "proto_internal.h"
#include <time.h>

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

//  The hand-written references ----------------------------------------------
//  They lived in the library, called from other files: not inlined here
//  either, or the yardstick would be shorter than it was.
#define S_LIBRARY __attribute__ ((noinline))

static S_LIBRARY int
s_chunk_decode_hand (sq_chunk_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    sqp_begin (&r, data, size, SQ_MSG_CHUNK, 9);
    mpr_field (&r, "transfer");
    mpr_u32 (&r, &self->transfer);
    mpr_field (&r, "object");
    mpr_uint (&r, &self->key);
    mpr_field (&r, "version");
    mpr_u32 (&r, &self->version);
    mpr_field (&r, "offset");
    mpr_uint (&r, &self->offset);
    mpr_field (&r, "size");
    mpr_uint (&r, &self->size);
    mpr_field (&r, "content_type");
    mpr_str (&r, &self->content_type, SQ_MAX_NAME);
    mpr_field (&r, "from");
    mpr_u32 (&r, &self->from);
    mpr_field (&r, "reply_to");
    mpr_str (&r, &self->reply_to, SQ_MAX_NAME);
    if (mpr_ok (&r) && self->offset > self->size)
        mpr_fail (&r, "offset past the end of the object");
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return sqp_error (&r, err, "CHUNK");
    return 0;
}

static S_LIBRARY void
s_chunk_encode_hand (sq_wbuf_t *w, const sq_chunk_t *m)
{
    msgpack_pack_array (&w->pk, 9);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_CHUNK);
    msgpack_pack_uint32 (&w->pk, m->transfer);
    msgpack_pack_uint64 (&w->pk, m->key);
    msgpack_pack_uint32 (&w->pk, m->version);
    msgpack_pack_uint64 (&w->pk, m->offset);
    msgpack_pack_uint64 (&w->pk, m->size);
    sq_pack_mstr (&w->pk, m->content_type);
    msgpack_pack_uint32 (&w->pk, m->from);
    sq_pack_mstr (&w->pk, m->reply_to);
}

static S_LIBRARY int
s_keep_decode_hand (sq_request_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    memset (self, 0, sizeof *self);
    self->type = SQ_MSG_KEEP;
    sqp_begin (&r, data, size, SQ_MSG_KEEP, 4);
    mpr_field (&r, "req");
    mpr_u32 (&r, &self->req);
    mpr_field (&r, "session");
    mpr_u32 (&r, &self->session);
    mpr_field (&r, "ids");
    if (mpr_ok (&r))
        sqp_ids (&r, &self->ids, &self->n_ids);
    mpr_field (&r, NULL);
    if (mpr_end (&r)) {
        sq_request_release (self);
        return sqp_error (&r, err, "KEEP");
    }
    return 0;
}

static S_LIBRARY void
s_keep_encode_hand (sq_wbuf_t *w, const sq_request_t *q)
{
    msgpack_pack_array (&w->pk, 4);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_KEEP);
    msgpack_pack_uint32 (&w->pk, q->req);
    msgpack_pack_uint32 (&w->pk, q->session);
    sqp_pack_ids (&w->pk, q->ids, q->n_ids);
}

static S_LIBRARY int
s_stop_next_hand (sq_iter_t *self, uint64_t *key, uint32_t *attempt)
{
    int more = sqp_iter_more (self, "STOP");
    if (more <= 0)
        return more;
    mpr_t *r = &self->r;
    mpr_field (r, "task");
    mpr_array_exact (r, 2);
    mpr_uint (r, key);
    mpr_u32 (r, attempt);
    if (!mpr_ok (r))
        return sqp_error (r, self->err, "STOP");
    return 1;
}

static S_LIBRARY void
s_pack_stop_hand (msgpack_packer *pk, uint64_t task, uint32_t attempt)
{
    msgpack_pack_array (pk, 2);
    msgpack_pack_uint64 (pk, task);
    msgpack_pack_uint32 (pk, attempt);
}

//  UPDATE's reader as it was, for the events the broker sees most (every
//  task: STARTED, then FINISHED); the others' cases cost nothing here.
static S_LIBRARY int
s_update_next_hand (sq_iter_t *self, sq_event_t *ev)
{
    int more = sqp_iter_more (self, "UPDATE");
    if (more <= 0)
        return more;
    mpr_t *r = &self->r;
    uint32_t n;
    memset (ev, 0, sizeof *ev);
    mpr_field (r, "event");
    mpr_array (r, &n);
    mpr_field (r, "event.type");
    mpr_u32 (r, &ev->type);
    if (!mpr_ok (r))
        return sqp_error (r, self->err, "UPDATE");
    uint32_t want = ev->type == SQ_EV_FINISHED? 5:
                    ev->type == SQ_EV_STREAMED? 3:
                    ev->type == SQ_EV_LOGTAIL? 5:
                    ev->type == SQ_EV_FAILED? 6:
                    ev->type == SQ_EV_STARTED? 3: 0;
    if (want == 0)
        mpr_fail (r, "unknown event type");
    else
    if (n != want)
        mpr_fail (r, "wrong number of fields");
    mpr_field (r, "event.key");
    mpr_uint (r, &ev->key);
    mpr_field (r, "event.attempt");
    mpr_u32 (r, &ev->attempt);
    if (ev->type == SQ_EV_FINISHED) {
        mpr_field (r, "event.outputs");
        if (mpr_array (r, &n) == 0) {
            sq_output_ref_t *outs = (sq_output_ref_t *) sqp_scratch (self, sizeof (sq_output_ref_t) * (n + 1));
            for (uint32_t i = 0; outs && i < n; i++) {
                mpr_array_exact (r, 3);
                mpr_uint (r, &outs [i].key);
                mpr_uint (r, &outs [i].size);
                sqp_frame_index (r, &outs [i].frame);
                if (mpr_ok (r) && outs [i].frame == SQ_FRAME_STREAM)
                    mpr_fail (r, "an output frame index of -2");
            }
            ev->outputs = outs;
            ev->n_outputs = n;
        }
        mpr_field (r, "event.duration_us");
        mpr_uint (r, &ev->duration_us);
    }
    if (!mpr_ok (r))
        return sqp_error (r, self->err, "UPDATE");
    return 1;
}

static S_LIBRARY void
s_pack_started_hand (msgpack_packer *pk, uint64_t task, uint32_t attempt)
{
    msgpack_pack_array (pk, 3);
    msgpack_pack_uint32 (pk, SQ_EV_STARTED);
    msgpack_pack_uint64 (pk, task);
    msgpack_pack_uint32 (pk, attempt);
}

static S_LIBRARY void
s_pack_finished_hand (msgpack_packer *pk, uint64_t task, uint32_t attempt,
                      const sq_output_ref_t *outputs, uint32_t n, uint64_t duration_us)
{
    msgpack_pack_array (pk, 5);
    msgpack_pack_uint32 (pk, SQ_EV_FINISHED);
    msgpack_pack_uint64 (pk, task);
    msgpack_pack_uint32 (pk, attempt);
    msgpack_pack_array (pk, n);
    for (uint32_t i = 0; i < n; i++) {
        msgpack_pack_array (pk, 3);
        msgpack_pack_uint64 (pk, outputs [i].key);
        msgpack_pack_uint64 (pk, outputs [i].size);
        msgpack_pack_int32 (pk, outputs [i].frame);
    }
    msgpack_pack_uint64 (pk, duration_us);
}

//  ASSIGN's task as proto_governor.c read and packed it before the table
//  (git 20def1f)
static S_LIBRARY int
s_assign_next_hand (sq_iter_t *self, sq_assign_t *t)
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

static S_LIBRARY void
s_pack_assign_hand (msgpack_packer *pk, const sq_assign_t *t)
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

//  SUBMIT as proto_client.c read and packed it before the table (git
//  626d9c8): a counting pass sizes two pools, then the reading pass
typedef struct {
    sq_submit_t s;
    uint32_t *id_pool;
    sq_resource_t *res_pool;
} s_submit_hand_t;

static void
s_submit_release_hand (s_submit_hand_t *hand)
{
    free (hand->s.objects);
    free (hand->s.tasks);
    free (hand->id_pool);
    free (hand->res_pool);
    memset (hand, 0, sizeof *hand);
}

//  A task's options map {"governors": [u32...], "loose": bool}, each key
//  at most once, no other. Fills t (governors into its pool slot, room
//  for SQ_MAX_TASK_GOVERNORS) unless t is NULL (the counting pass);
//  returns the number of governors read.
static uint32_t
s_options_hand (mpr_t *r, sq_task_spec_t *t)
{
    uint32_t n = 0, n_governors = 0;
    bool seen_governors = false, seen_loose = false;
    mpr_field (r, "task.options");
    mpr_map (r, &n);
    for (uint32_t k = 0; k < n && mpr_ok (r); k++) {
        mpr_str_t key;
        mpr_str (r, &key, SQ_MAX_NAME);
        if (!mpr_ok (r))
            break;
        if (mpr_str_eq (key, "governors") && !seen_governors) {
            seen_governors = true;
            mpr_field (r, "task.options.governors");
            if (mpr_array (r, &n_governors) == 0
            &&  (n_governors == 0 || n_governors > SQ_MAX_TASK_GOVERNORS))
                mpr_fail (r, "1 to 64 governors");
            for (uint32_t g = 0; g < n_governors && mpr_ok (r); g++) {
                uint32_t id = 0;
                mpr_u32 (r, &id);
                if (mpr_ok (r) && id == 0)
                    mpr_fail (r, "governor id 0");
                if (t)
                    t->governors [g] = id;
            }
        }
        else
        if (mpr_str_eq (key, "loose") && !seen_loose) {
            seen_loose = true;
            bool loose = false;
            mpr_field (r, "task.options.loose");
            mpr_bool (r, &loose);
            if (t)
                t->loose = loose;
        }
        else
            mpr_fail (r, "unknown or repeated key");
    }
    if (mpr_ok (r) && !seen_governors)
        mpr_fail (r, "governors missing");
    if (!mpr_ok (r))
        return 0;
    if (t)
        t->n_governors = n_governors;
    return n_governors;
}

//  Counts the ids and resources of n tasks on a copy of the reader; leaves
//  the counts alone unless the whole list reads cleanly.
static void
s_submit_count_hand (mpr_t r, uint32_t n_tasks, size_t *n_ids, size_t *n_res)
{
    size_t ids = 0, res = 0;
    for (uint32_t i = 0; i < n_tasks && mpr_ok (&r); i++) {
        uint32_t n, fields = 0;
        if (mpr_array (&r, &fields) == 0 && fields != 10 && fields != 11 && fields != 12)
            mpr_fail (&r, "a task of neither 10, 11 nor 12 fields");
        mpr_skip (&r, NULL, NULL);                  //  id
        mpr_skip (&r, NULL, NULL);                  //  kind
        for (int list = 0; list < 2; list++) {      //  inputs, outputs
            if (mpr_array (&r, &n) == 0) {
                ids += n;
                for (uint32_t j = 0; j < n; j++)
                    mpr_skip (&r, NULL, NULL);
            }
        }
        mpr_skip (&r, NULL, NULL);                  //  config
        if (!mpr_try_nil (&r) && mpr_map (&r, &n) == 0) {
            res += n;
            for (uint32_t j = 0; j < 2 * n; j++)
                mpr_skip (&r, NULL, NULL);
        }
        //  priority .. name (, array); fields is 10, 11 or 12 unless r failed
        for (uint32_t j = 0; j < 4 + (fields >= 11) && mpr_ok (&r); j++)
            mpr_skip (&r, NULL, NULL);
        if (fields == 12)                           //  options: its governors
            ids += s_options_hand (&r, NULL);
    }
    if (mpr_ok (&r)) {
        *n_ids = ids;
        *n_res = res;
    }
}

//  A task's array: nil, [first, last, step], or a list of strings.
static void
s_array_spec_hand (mpr_t *r, sq_task_spec_t *t)
{
    if (mpr_try_nil (r))
        return;
    uint32_t n;
    size_t start = r->pos;
    if (mpr_array (r, &n))
        return;
    if (n == 0) {
        mpr_fail (r, "an empty array");
        return;
    }
    if (mpr_peek (r) == MPR_UINT) {
        if (n != 3) {
            mpr_fail (r, "a range is [first, last, step]");
            return;
        }
        mpr_u32 (r, &t->array_first);
        mpr_u32 (r, &t->array_last);
        mpr_u32 (r, &t->array_step);
        if (!mpr_ok (r))
            return;
        if (t->array_first > t->array_last || t->array_step == 0) {
            mpr_fail (r, "a range needs first <= last and a step of at least 1");
            return;
        }
        if ((t->array_last - t->array_first) / t->array_step >= SQ_ARRAY_MAX) {
            mpr_fail (r, "more than 2^24 elements");
            return;
        }
        t->array = SQ_ARRAY_RANGE;
        t->array_size = (t->array_last - t->array_first) / t->array_step + 1;
        return;
    }
    if (n > SQ_ARRAY_MAX) {
        mpr_fail (r, "more than 2^24 elements");
        return;
    }
    for (uint32_t i = 0; i < n && mpr_ok (r); i++) {
        mpr_str_t item;
        if (mpr_str (r, &item, SQ_MAX_NAME) == 0 && memchr (item.ptr, 0, item.len))
            mpr_fail (r, "an item with a NUL");
    }
    if (!mpr_ok (r))
        return;
    t->array = SQ_ARRAY_ITEMS;
    t->array_size = n;
    t->array_items = r->data + start;
    t->array_items_size = r->pos - start;
}

//  A task's array of ids, into the pool (sized by the counting pass)
static uint32_t *
s_pooled_ids_hand (mpr_t *r, uint32_t *pool, size_t *used, uint32_t *n)
{
    uint32_t *ids = pool + *used;
    if (mpr_array (r, n))
        return NULL;
    for (uint32_t j = 0; j < *n; j++)
        mpr_u32 (r, &pool [(*used)++]);
    return ids;
}

static S_LIBRARY int
s_submit_decode_hand (s_submit_hand_t *hand, const void *data, size_t size, sq_errbuf_t *err)
{
    sq_submit_t *self = &hand->s;
    mpr_t r;
    memset (self, 0, sizeof *self);
    sqp_begin (&r, data, size, SQ_MSG_SUBMIT, 5);
    mpr_field (&r, "req");
    mpr_u32 (&r, &self->req);
    mpr_field (&r, "session");
    mpr_u32 (&r, &self->session);
    mpr_field (&r, "objects");
    uint32_t n_objects = 0;
    mpr_array (&r, &n_objects);
    if (!mpr_ok (&r))
        return sqp_error (&r, err, "SUBMIT");
    if (n_objects) {
        self->objects = (sq_object_spec_t *) calloc (n_objects, sizeof (sq_object_spec_t));
        if (!self->objects)
            mpr_fail (&r, "out of memory");
    }
    for (uint32_t i = 0; i < n_objects && mpr_ok (&r); i++) {
        sq_object_spec_t *o = &self->objects [i];
        int64_t frame;
        mpr_field (&r, "object");
        mpr_array_exact (&r, 5);
        mpr_field (&r, "object.id");
        mpr_u32 (&r, &o->id);
        mpr_field (&r, "object.flags");
        mpr_u32 (&r, &o->flags);
        mpr_field (&r, "object.content_type");
        mpr_str (&r, &o->content_type, SQ_MAX_NAME);
        mpr_field (&r, "object.frame");
        if (mpr_peek (&r) == MPR_ARRAY) {
            //  [governor, size]: a constant the client uploaded there.
            mpr_array_exact (&r, 2);
            mpr_field (&r, "object.frame.governor");
            mpr_u32 (&r, &o->governor);
            mpr_field (&r, "object.frame.size");
            mpr_uint (&r, &o->size);
            frame = SQ_FRAME_UPLOADED;
        }
        else {
            mpr_int (&r, &frame);
            if (mpr_ok (&r) && (frame < -1 || frame >= SQ_MAX_FRAMES))
                mpr_fail (&r, "frame index out of range");
        }
        o->frame = (int32_t) frame;
        mpr_field (&r, "object.name");
        mpr_str (&r, &o->name, SQ_MAX_NAME);
        self->n_objects = i + 1;
    }
    mpr_field (&r, "tasks");
    uint32_t n_tasks = 0;
    mpr_array (&r, &n_tasks);
    if (!mpr_ok (&r)) {
        s_submit_release_hand (hand);
        return sqp_error (&r, err, "SUBMIT");
    }
    //  A first, counting pass sizes the id and resource pools exactly: a
    //  bound from the bytes left would reserve several times the message
    //  for the usual task with one output and no resources. If it stops
    //  early (malformed input), the bound is used and the real pass below
    //  reports the error: every id takes at least one byte, a resource two.
    size_t left = r.size - r.pos, n_ids = left + 1, n_res = left / 2 + 1;
    s_submit_count_hand (r, n_tasks, &n_ids, &n_res);
    if (n_tasks) {
        self->tasks = (sq_task_spec_t *) calloc (n_tasks, sizeof (sq_task_spec_t));
        hand->id_pool = (uint32_t *) malloc (sizeof (uint32_t) * (n_ids + 1));
        hand->res_pool = (sq_resource_t *) malloc (sizeof (sq_resource_t) * (n_res + 1));
        if (!self->tasks || !hand->id_pool || !hand->res_pool)
            mpr_fail (&r, "out of memory");
    }
    size_t ids_used = 0, res_used = 0;
    for (uint32_t i = 0; i < n_tasks && mpr_ok (&r); i++) {
        sq_task_spec_t *t = &self->tasks [i];
        int64_t priority;
        uint32_t fields = 0;
        mpr_field (&r, "task");
        if (mpr_array (&r, &fields) == 0 && fields != 10 && fields != 11 && fields != 12)
            mpr_fail (&r, "a task of neither 10, 11 nor 12 fields");
        mpr_field (&r, "task.id");
        mpr_u32 (&r, &t->id);
        mpr_field (&r, "task.kind");
        mpr_str (&r, &t->kind, SQ_MAX_NAME);
        mpr_field (&r, "task.inputs");
        t->inputs = s_pooled_ids_hand (&r, hand->id_pool, &ids_used, &t->n_inputs);
        mpr_field (&r, "task.outputs");
        t->outputs = s_pooled_ids_hand (&r, hand->id_pool, &ids_used, &t->n_outputs);
        mpr_field (&r, "task.config");
        mpr_skip (&r, &t->config, &t->config_size);
        if (mpr_ok (&r) && t->config_size > SQ_MAX_CONFIG)
            mpr_fail (&r, "config too large");
        mpr_field (&r, "task.resources");
        t->resources = hand->res_pool + res_used;
        sqp_resources (&r, t->resources, &t->n_resources, SQ_MAX_RESOURCES);
        res_used += t->n_resources;
        mpr_field (&r, "task.priority");
        mpr_int (&r, &priority);
        if (mpr_ok (&r) && (priority < INT32_MIN || priority > INT32_MAX))
            mpr_fail (&r, "priority out of 32-bit range");
        t->priority = (int32_t) priority;
        mpr_field (&r, "task.max_retries");
        mpr_u32 (&r, &t->max_retries);
        mpr_field (&r, "task.timeout_ms");
        mpr_u32 (&r, &t->timeout_ms);
        mpr_field (&r, "task.name");
        mpr_str (&r, &t->name, SQ_MAX_NAME);
        if (fields >= 11) {
            mpr_field (&r, "task.array");
            s_array_spec_hand (&r, t);
        }
        if (fields == 12 && mpr_ok (&r)) {
            //  Counted with the ids (or within the bound of the bytes
            //  left: each takes one at least).
            mpr_field (&r, "task.options");
            t->governors = hand->id_pool + ids_used;
            ids_used += s_options_hand (&r, t);
        }
        self->n_tasks = i + 1;
    }
    if (sqp_end (&r, err, "SUBMIT")) {
        s_submit_release_hand (hand);
        return -1;
    }
    return 0;
}


static S_LIBRARY void
s_pack_object_spec_hand (msgpack_packer *pk, uint32_t id, uint32_t flags,
                         const char *content_type, int32_t frame, const char *name)
{
    msgpack_pack_array (pk, 5);
    msgpack_pack_uint32 (pk, id);
    msgpack_pack_uint32 (pk, flags);
    sq_pack_cstr (pk, content_type);
    msgpack_pack_int32 (pk, frame);
    sq_pack_cstr (pk, name);
}

static S_LIBRARY void
s_pack_task_spec_hand (msgpack_packer *pk, const sq_task_spec_t *t)
{
    msgpack_pack_array (pk, t->n_governors? 12: t->array? 11: 10);
    msgpack_pack_uint32 (pk, t->id);
    sq_pack_mstr (pk, t->kind);
    sqp_pack_ids (pk, t->inputs, t->n_inputs);
    sqp_pack_ids (pk, t->outputs, t->n_outputs);
    if (t->config && t->config_size)
        msgpack_pack_str_body (pk, t->config, t->config_size);
    else
        msgpack_pack_nil (pk);
    sqp_pack_resources (pk, t->resources, t->n_resources);
    msgpack_pack_int32 (pk, t->priority);
    msgpack_pack_uint32 (pk, t->max_retries);
    msgpack_pack_uint32 (pk, t->timeout_ms);
    sq_pack_mstr (pk, t->name);
}


//  REPLY as proto.c read and packed it before the table (git b42c4ad)
static S_LIBRARY int
s_reply_decode_hand (sq_reply_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    memset (self, 0, sizeof *self);
    if (sqp_begin (&r, data, size, SQ_MSG_REPLY, 4))
        return sqp_error (&r, err, "REPLY");
    mpr_field (&r, "req");
    mpr_u32 (&r, &self->req);
    mpr_field (&r, "code");
    mpr_u32 (&r, &self->code);
    mpr_field (&r, "body");
    if (mpr_ok (&r) && self->code >= SQ_E_COUNT_)
        mpr_fail (&r, "unknown error code");
    if (mpr_ok (&r) && self->code == SQ_OK)
        mpr_skip (&r, &self->body, &self->body_size);
    else
    if (mpr_ok (&r)) {
        sq_fault_t fault;
        if (sq_record_read (&r, SQ_REC_FAULT, &fault, "body") == 0) {
            self->message = fault.message;
            self->err_id = fault.id;
            self->err_root = fault.root;
        }
    }
    return sqp_end (&r, err, "REPLY");
}

static S_LIBRARY void
s_reply_encode_error_hand (sq_wbuf_t *w, uint32_t req, int code, const char *message,
                           uint32_t id, uint32_t root)
{
    sq_fault_t fault = { { message, message? (uint32_t) strlen (message): 0 }, id, root };
    msgpack_pack_array (&w->pk, 4);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_REPLY);
    msgpack_pack_uint32 (&w->pk, req);
    msgpack_pack_uint32 (&w->pk, (uint32_t) code);
    sq_record_pack (&w->pk, SQ_REC_FAULT, &fault);
}

//  The rounds -----------------------------------------------------------------

#define S_STOPS 16
static uint64_t s_sink;

static void
s_chunk_round (sq_wbuf_t *w, const sq_chunk_t *m, bool table)
{
    sq_chunk_t d;
    sq_errbuf_t err;
    sq_wbuf_reset (w);
    if (table)
        sq_chunk_encode (w, m);
    else
        s_chunk_encode_hand (w, m);
    int rc = table? sq_chunk_decode (&d, w->buf.data, w->buf.size, &err)
                  : s_chunk_decode_hand (&d, w->buf.data, w->buf.size, &err);
    s_sink += (uint64_t) rc + d.offset;
}

static void
s_keep_round (sq_wbuf_t *w, const sq_request_t *q, bool table)
{
    sq_request_t d;
    sq_errbuf_t err;
    sq_wbuf_reset (w);
    if (table)
        sq_request_encode (w, q);
    else
        s_keep_encode_hand (w, q);
    int rc = table? sq_request_decode (&d, w->buf.data, w->buf.size, &err)
                  : s_keep_decode_hand (&d, w->buf.data, w->buf.size, &err);
    s_sink += (uint64_t) rc + d.n_ids;
    sq_request_release (&d);
}

static void
s_stop_round (sq_wbuf_t *w, bool table)
{
    sq_iter_t it;
    sq_errbuf_t err;
    uint64_t key;
    uint32_t attempt;
    sq_wbuf_reset (w);
    sq_batch_header (w, SQ_MSG_STOP, S_STOPS);
    for (uint32_t i = 0; i < S_STOPS; i++)
        if (table)
            sq_pack_stop (&w->pk, 0x100000000ull + i, i);
        else
            s_pack_stop_hand (&w->pk, 0x100000000ull + i, i);
    sq_batch_begin (&it, SQ_MSG_STOP, w->buf.data, w->buf.size, &err);
    int more;
    while ((more = table? sq_stop_next (&it, &key, &attempt)
                        : s_stop_next_hand (&it, &key, &attempt)) == 1)
        s_sink += key + attempt;
    sq_iter_release (&it);
}

//  An UPDATE of 8 tasks' STARTED and FINISHED (one output each)
static void
s_update_round (sq_wbuf_t *w, bool table)
{
    sq_iter_t it;
    sq_errbuf_t err;
    sq_event_t ev;
    sq_wbuf_reset (w);
    sq_batch_header (w, SQ_MSG_UPDATE, 16);
    for (uint32_t i = 0; i < 8; i++) {
        sq_output_ref_t out = { 0x100000100ull + i, 4096, -1 };
        if (table) {
            sq_pack_started (&w->pk, 0x100000000ull + i, 1);
            sq_pack_finished (&w->pk, 0x100000000ull + i, 1, &out, 1, 1500);
        }
        else {
            s_pack_started_hand (&w->pk, 0x100000000ull + i, 1);
            s_pack_finished_hand (&w->pk, 0x100000000ull + i, 1, &out, 1, 1500);
        }
    }
    sq_update_begin (&it, w->buf.data, w->buf.size, &err);
    while ((table? sq_update_next (&it, &ev): s_update_next_hand (&it, &ev)) == 1)
        s_sink += ev.key + ev.n_outputs;
    sq_iter_release (&it);
}

//  An ASSIGN of 8 tasks, two inputs and one output each, a config
#define S_ASSIGNS 8
static void
s_assign_round (sq_wbuf_t *w, bool table)
{
    sq_iter_t it;
    sq_errbuf_t err;
    sq_assign_t t;
    static const uint8_t config [] = { 0x81, 0xa1, 'n', 0x01 };
    sq_input_ref_t ins [2] = { { 0x100000001ull, 4096, 1, { "text/plain", 10 } },
                               { 0x100000002ull, 1 << 20, -1, { "", 0 } } };
    sq_out_decl_t out = { 0x100000003ull, { "application/octet-stream", 24 }, false, 0 };
    sq_wbuf_reset (w);
    sq_batch_header (w, SQ_MSG_ASSIGN, S_ASSIGNS);
    for (uint32_t i = 0; i < S_ASSIGNS; i++) {
        sq_assign_t a = { .key = 0x100000100ull + i, .attempt = 1, .kind = { "py", 2 },
                          .config = config, .config_size = sizeof config,
                          .n_inputs = 2, .inputs = ins, .n_outputs = 1, .outputs = &out,
                          .cpus = 1, .timeout_ms = 0, .name = { "inc", 3 },
                          .tenant = { "team-a", 6 } };
        if (table)
            sq_pack_assign (&w->pk, &a);
        else
            s_pack_assign_hand (&w->pk, &a);
    }
    sq_assign_begin (&it, w->buf.data, w->buf.size, &err);
    while ((table? sq_assign_next (&it, &t): s_assign_next_hand (&it, &t)) == 1)
        s_sink += t.key + t.n_inputs + t.n_outputs;
    sq_iter_release (&it);
}


//  A SUBMIT of 8 tasks, two inputs and one output each, a config, one of
//  them with resources; 9 objects, one a constant
#define S_SUBMITS 8
static void
s_submit_round (sq_wbuf_t *w, bool table)
{
    sq_errbuf_t err;
    static const uint8_t config [] = { 0x81, 0xa1, 'n', 0x01 };
    sq_resource_t res [2] = { { { "cpus", 4 }, 2 }, { { "memory", 6 }, 1 << 30 } };
    sq_wbuf_reset (w);
    sq_pack_submit_begin (&w->pk, 7, 1);
    sq_pack_submit_objects (&w->pk, S_SUBMITS + 1);
    for (uint32_t i = 0; i <= S_SUBMITS; i++)
        if (table)
            sq_pack_object_spec (&w->pk, 100 + i, i == 0, "", i == 0? 1: -1, "");
        else
            s_pack_object_spec_hand (&w->pk, 100 + i, i == 0, "", i == 0? 1: -1, "");
    sq_pack_submit_tasks (&w->pk, S_SUBMITS);
    for (uint32_t i = 0; i < S_SUBMITS; i++) {
        uint32_t ins [2] = { 100, 100 + i }, out = 101 + i;
        sq_task_spec_t t = { .id = 200 + i, .kind = { "py", 2 }, .n_inputs = 2, .inputs = ins,
                             .n_outputs = 1, .outputs = &out, .config = config,
                             .config_size = sizeof config, .n_resources = i == 0? 2: 0,
                             .resources = res, .name = { "inc", 3 } };
        if (table)
            sq_pack_task_spec (&w->pk, &t);
        else
            s_pack_task_spec_hand (&w->pk, &t);
    }
    int rc;
    if (table) {
        sq_submit_t s;
        rc = sq_submit_decode (&s, w->buf.data, w->buf.size, &err);
        if (rc == 0)
            s_sink += s.n_tasks + s.tasks [1].inputs [1] + s.tasks [0].n_resources;
        sq_submit_release (&s);
    }
    else {
        s_submit_hand_t s;
        rc = s_submit_decode_hand (&s, w->buf.data, w->buf.size, &err);
        if (rc == 0)
            s_sink += s.s.n_tasks + s.s.tasks [1].inputs [1] + s.s.tasks [0].n_resources;
        s_submit_release_hand (&s);
    }
    if (rc) {                   //  (a bench of errors would measure nothing)
        fprintf (stderr, "SUBMIT: %s\n", err.text);
        exit (1);
    }
}

//  A REPLY: one OK (its body packed by the caller) and one error, each
//  encoded and decoded
static void
s_reply_round (sq_wbuf_t *w, bool table)
{
    sq_reply_t r;
    sq_errbuf_t err;
    sq_wbuf_reset (w);
    sq_reply_begin (w, 42);
    msgpack_pack_array (&w->pk, 2);
    msgpack_pack_uint32 (&w->pk, 5);
    sq_pack_cstr (&w->pk, "x");
    int rc = table? sq_reply_decode (&r, w->buf.data, w->buf.size, &err)
                  : s_reply_decode_hand (&r, w->buf.data, w->buf.size, &err);
    s_sink += (uint64_t) rc + r.body_size;
    sq_wbuf_reset (w);
    if (table)
        sq_reply_encode_error (w, 3, SQ_E_UPSTREAM_FAILED, "task 9 failed", 9, 7);
    else
        s_reply_encode_error_hand (w, 3, SQ_E_UPSTREAM_FAILED, "task 9 failed", 9, 7);
    rc = table? sq_reply_decode (&r, w->buf.data, w->buf.size, &err)
              : s_reply_decode_hand (&r, w->buf.data, w->buf.size, &err);
    s_sink += (uint64_t) rc + r.err_id;
}

typedef enum { S_CHUNK, S_KEEP, S_STOP, S_UPDATE, S_ASSIGN, S_SUBMIT, S_REPLY, S_LAST = S_REPLY } s_which_t;

static double
s_time (s_which_t which, bool table, long rounds)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_chunk_t chunk = { .transfer = 7, .key = 0x300000005ull, .version = 2,
                         .offset = 1 << 20, .size = 64 << 20,
                         .content_type = { "application/octet-stream", 24 },
                         .from = 3, .reply_to = { "tcp://127.0.0.1:40000", 21 } };
    uint32_t ids [8] = { 1, 2, 3, 4, 5, 600, 70000, 8 };
    sq_request_t keep = { .type = SQ_MSG_KEEP, .req = 9, .session = 1, .ids = ids, .n_ids = 8 };
    double start = s_now ();
    for (long i = 0; i < rounds; i++)
        if (which == S_CHUNK)
            s_chunk_round (&w, &chunk, table);
        else
        if (which == S_KEEP)
            s_keep_round (&w, &keep, table);
        else
        if (which == S_STOP)
            s_stop_round (&w, table);
        else
        if (which == S_UPDATE)
            s_update_round (&w, table);
        else
        if (which == S_ASSIGN)
            s_assign_round (&w, table);
        else
        if (which == S_SUBMIT)
            s_submit_round (&w, table);
        else
            s_reply_round (&w, table);
    double took = s_now () - start;
    sq_wbuf_release (&w);
    return took * 1e9 / rounds;
}

int
main (int argc, char *argv [])
{
    long rounds = argc > 1? atol (argv [1]): 1000000;
    const char *side = argc > 2? argv [2]: NULL;
    if (rounds <= 0 || (side && strcmp (side, "hand") && strcmp (side, "table"))) {
        fprintf (stderr, "usage: squall-bench-codec [ROUNDS [hand|table [0|1|2|3|4|5|6]]]\n");
        return 1;
    }
    if (side) {
        for (int which = S_CHUNK; which <= S_LAST; which++)
            if (argc < 4 || atoi (argv [3]) == which)
                s_time ((s_which_t) which, strcmp (side, "table") == 0, rounds);
        return s_sink == 42? 2: 0;
    }
    const char *names [] = { "CHUNK", "KEEP", "STOP x16", "UPDATE x16", "ASSIGN x8",
                             "SUBMIT x8", "REPLY x2" };
    for (int which = S_CHUNK; which <= S_LAST; which++) {
        //  Alternated, best of five each: the load of a shared machine
        //  comes and goes.
        double hand = 1e18, table = 1e18;
        long n = which >= S_STOP? rounds / 8: rounds;
        for (int k = 0; k < 5; k++) {
            double h = s_time ((s_which_t) which, false, n);
            double t = s_time ((s_which_t) which, true, n);
            hand = h < hand? h: hand;
            table = t < table? t: table;
        }
        printf ("%-9s hand %7.1f ns  table %7.1f ns  table/hand %.3f\n",
                names [which], hand, table, table / hand);
    }
    return s_sink == 42? 2: 0;
}
