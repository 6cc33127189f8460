/*  codec: what the table codec (proto_messages.def) costs per message next
    to the code it replaced, in the same run. The reference encoders and
    decoders here are the hand-written ones of CHUNK, KEEP and a STOP
    batch as they were before the table (git 0d8a831^), UPDATE's, and
    ASSIGN's (git 20def1f); they are the yardstick, not code squall uses.

    usage: squall-bench-codec [ROUNDS [hand|table [0|1|2|3|4]]]
    Prints one line per message: ns per encode+decode by hand and by the
    table, and their ratio (table / hand). The machine's load moves both
    alike; compare the ratio, not the times. With hand or table it runs
    that side only, once (only CHUNK, KEEP, STOP, UPDATE or ASSIGN with 0 to 4): for
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

typedef enum { S_CHUNK, S_KEEP, S_STOP, S_UPDATE, S_ASSIGN, S_LAST = S_ASSIGN } s_which_t;

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
            s_assign_round (&w, table);
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
        fprintf (stderr, "usage: squall-bench-codec [ROUNDS [hand|table [0|1|2|3|4]]]\n");
        return 1;
    }
    if (side) {
        for (int which = S_CHUNK; which <= S_LAST; which++)
            if (argc < 4 || atoi (argv [3]) == which)
                s_time ((s_which_t) which, strcmp (side, "table") == 0, rounds);
        return s_sink == 42? 2: 0;
    }
    const char *names [] = { "CHUNK", "KEEP", "STOP x16", "UPDATE x16", "ASSIGN x8" };
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
