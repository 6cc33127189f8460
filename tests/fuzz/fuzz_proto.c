/*  fuzz_proto: one libFuzzer target over every decoder in common/.
    Over 800 lines: one target must reach every decoder, a case each (its
    decode, the reading of what it returned, its round trip).

    The first input byte selects the decoder (tests/fuzz/fuzz_targets.h);
    the rest is the frame handed to it, in a heap buffer of exactly its size
    so that AddressSanitizer sees any read past the end. After a successful
    decode every string and array the decoder returned is read byte by byte
    (a pointer outside the frame is caught there), configs found in SUBMIT
    and ASSIGN are decoded as the broker and governor would, and for the
    fixed-layout messages the decoded value is encoded again and decoded
    once more, which must give the same value (round trip).

    Build: cmake -DSQUALL_FUZZ=ON with CC=clang. Run:
        fuzz_proto -max_total_time=60 tests/fuzz/corpus
*/
#include "proto.h"
#include "taskconf.h"
#include "zap.h"
#include "keys.h"
#include "record.h"
#include "fuzz_targets.h"
#include "json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile uint32_t s_sink;

#define FZ_ASSERT(cond) do { \
    if (!(cond)) { \
        fprintf (stderr, "fuzz_proto: %s:%d: oracle failed: %s\n", __FILE__, __LINE__, #cond); \
        abort (); \
    } \
} while (0)

static void
s_touch (const void *ptr, size_t len)
{
    const uint8_t *p = (const uint8_t *) ptr;
    uint32_t sum = 0;
    for (size_t i = 0; i < len; i++)
        sum += p [i];
    s_sink += sum;
}

static void
s_touch_str (mpr_str_t s)
{
    if (s.len)
        FZ_ASSERT (s.ptr != NULL);
    s_touch (s.ptr, s.len);
}

static bool
s_has_nul (mpr_str_t s)
{
    return s.len && memchr (s.ptr, 0, s.len) != NULL;
}

static bool
s_str_same (mpr_str_t a, mpr_str_t b)
{
    return a.len == b.len && (a.len == 0 || memcmp (a.ptr, b.ptr, a.len) == 0);
}

//  A config as the broker and governor see it: kind looked up, then decoded
static void
s_config (mpr_str_t kind_name, const uint8_t *config, size_t size,
          uint32_t n_inputs, uint32_t n_outputs)
{
    s_touch (config, size);
    int kind = sq_kind_lookup (kind_name);
    if (kind < 0)
        return;
    sq_taskconf_t conf;
    sq_errbuf_t err;
    if (sq_taskconf_decode (&conf, (sq_kind_t) kind, config, size, n_inputs, n_outputs, &err) == 0) {
        s_touch_str (conf.path);
        s_touch_str (conf.fn);
        s_touch_str (conf.py_args);
        for (uint32_t i = 0; i < conf.n_args; i++)
            s_touch_str (conf.args [i]);
        for (uint32_t i = 0; i < conf.n_env; i++)
            s_touch_str (conf.env [i]);
        for (uint32_t i = 0; i < conf.n_in_paths; i++)
            s_touch_str (conf.in_paths [i]);
        for (uint32_t i = 0; i < conf.n_out_paths; i++)
            s_touch_str (conf.out_paths [i]);
        sq_taskconf_release (&conf);
    }
    else
        s_touch (err.text, strnlen (err.text, sizeof err.text));
}

//  --------------------------------------------------------------------------
//  The msgpack cursor on its own: walk one value with the typed readers and
//  compare with mpr_skip over the same bytes.

static int
s_walk (mpr_t *r, int depth, int *max_depth)
{
    if (depth > *max_depth)
        *max_depth = depth;
    if (depth > 64)
        return mpr_fail (r, "walker too deep");
    uint32_t count;
    mpr_str_t s;
    switch (mpr_peek (r)) {
        case MPR_NIL: return mpr_nil (r);
        case MPR_BOOL: { bool b; return mpr_bool (r, &b); }
        case MPR_UINT: { uint64_t v; return mpr_uint (r, &v); }
        case MPR_INT: { int64_t v; return mpr_int (r, &v); }
        case MPR_FLOAT: { double v; return mpr_double (r, &v); }
        case MPR_STR:
            if (mpr_str (r, &s, UINT32_MAX)) return -1;
            s_touch_str (s);
            return 0;
        case MPR_BIN:
            if (mpr_bin (r, &s, UINT32_MAX)) return -1;
            s_touch_str (s);
            return 0;
        case MPR_ARRAY:
            if (mpr_array (r, &count)) return -1;
            for (uint32_t i = 0; i < count; i++)
                if (s_walk (r, depth + 1, max_depth)) return -1;
            return 0;
        case MPR_MAP:
            if (mpr_map (r, &count)) return -1;
            for (uint32_t i = 0; i < count; i++)
                if (s_walk (r, depth + 1, max_depth) || s_walk (r, depth + 1, max_depth))
                    return -1;
            return 0;
        case MPR_EXT: {
            const uint8_t *raw;
            size_t raw_size;
            if (mpr_skip (r, &raw, &raw_size)) return -1;
            s_touch (raw, raw_size);
            return 0;
        }
        default:
            return mpr_fail (r, "invalid");
    }
}

static void
s_fuzz_mpr (const uint8_t *data, size_t size)
{
    //  Values one after another until the buffer ends or a reader fails.
    mpr_t walk, skip;
    mpr_init (&walk, data, size);
    mpr_init (&skip, data, size);
    while (walk.pos < size) {
        size_t start = walk.pos;
        int max_depth = 0;
        int wrc = s_walk (&walk, 0, &max_depth);
        const uint8_t *raw = NULL;
        size_t raw_size = 0;
        int src = mpr_skip (&skip, &raw, &raw_size);
        if (src == 0) {
            //  What skip accepts, the typed readers read to the same end
            FZ_ASSERT (raw == data + start);
            s_touch (raw, raw_size);
            FZ_ASSERT (wrc == 0);
            FZ_ASSERT (walk.pos == skip.pos);
        }
        else
        if (wrc == 0)
            //  The walker may only get further than skip by nesting deeper
            //  than skip allows
            FZ_ASSERT (max_depth > 32);
        if (wrc || src)
            break;
        FZ_ASSERT (walk.pos > start);
    }
    mpr_end (&walk);
    bool ok = mpr_ok (&walk);
    FZ_ASSERT (!ok || walk.error == NULL);
    //  a failed reader stays failed
    if (!ok) {
        uint64_t v;
        FZ_ASSERT (mpr_uint (&walk, &v) == -1);
        FZ_ASSERT (mpr_peek (&walk) == MPR_INVALID);
    }
}

//  --------------------------------------------------------------------------
//  Message decoders

static void
s_fuzz_hello (const uint8_t *data, size_t size)
{
    sq_hello_t hello;
    sq_errbuf_t err;
    int code;
    if (sq_hello_decode (&hello, data, size, &code, &err)) {
        FZ_ASSERT (code != SQ_OK);
        return;
    }
    FZ_ASSERT (code == SQ_OK);
    FZ_ASSERT (hello.n_resources <= SQ_MAX_RESOURCES);
    s_touch_str (hello.name);
    s_touch_str (hello.data_endpoint);
    s_touch_str (hello.serve_endpoint);
    for (uint32_t i = 0; i < hello.n_resources; i++)
        s_touch_str (hello.resources [i].name);

    //  Round trip (names must be C strings for the encoders)
    if (s_has_nul (hello.name) || s_has_nul (hello.data_endpoint)
    ||  s_has_nul (hello.serve_endpoint))
        return;
    char *name = mpr_strdup (hello.name);
    char *data_ep = mpr_strdup (hello.data_endpoint);
    char *serve_ep = mpr_strdup (hello.serve_endpoint);
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    char *cluster = hello.previous_cluster.len? mpr_strdup (hello.previous_cluster): NULL;
    if (hello.governor && s_has_nul (hello.previous_cluster)) {
        free (cluster);
        cluster = NULL;
        hello.previous_cluster.len = 0;
    }
    if (hello.governor)
        sq_hello_encode_governor (&w, hello.req, name, hello.incarnation, data_ep,
                                  serve_ep, hello.resources, hello.n_resources, cluster,
                                  hello.previous_id);
    else
        sq_hello_encode_client (&w, hello.req, name);
    sq_hello_t again;
    FZ_ASSERT (sq_hello_decode (&again, w.buf.data, w.buf.size, &code, &err) == 0);
    FZ_ASSERT (again.req == hello.req && again.governor == hello.governor);
    FZ_ASSERT (s_str_same (again.name, hello.name));
    if (hello.governor) {
        FZ_ASSERT (again.incarnation == hello.incarnation);
        FZ_ASSERT (s_str_same (again.data_endpoint, hello.data_endpoint));
        FZ_ASSERT (s_str_same (again.serve_endpoint, hello.serve_endpoint));
        FZ_ASSERT (again.n_resources == hello.n_resources);
        FZ_ASSERT (s_str_same (again.previous_cluster, hello.previous_cluster));
        FZ_ASSERT (!hello.previous_cluster.len || again.previous_id == hello.previous_id);
    }
    sq_wbuf_release (&w);
    free (cluster);
    free (name);
    free (data_ep);
    free (serve_ep);
}

static void
s_fuzz_reply (const uint8_t *data, size_t size)
{
    sq_reply_t reply;
    sq_errbuf_t err;
    if (sq_reply_decode (&reply, data, size, &err))
        return;
    if (reply.code == 0) {
        FZ_ASSERT (reply.body >= data && reply.body + reply.body_size <= data + size);
        s_touch (reply.body, reply.body_size);
        //  clients read the body with the cursor
        s_fuzz_mpr (reply.body, reply.body_size);
    }
    else
        s_touch_str (reply.message);
}

static void
s_fuzz_request (const uint8_t *data, size_t size)
{
    sq_request_t q;
    sq_errbuf_t err;
    if (sq_request_decode (&q, data, size, &err))
        return;
    s_touch (q.ids, q.n_ids * sizeof (uint32_t));
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_request_encode (&w, &q);
    sq_request_t again;
    FZ_ASSERT (sq_request_decode (&again, w.buf.data, w.buf.size, &err) == 0);
    FZ_ASSERT (again.type == q.type && again.req == q.req && again.session == q.session
            && again.mode == q.mode && again.id == q.id && again.timeout_ms == q.timeout_ms
            && again.n_ids == q.n_ids && again.size == q.size && again.governor == q.governor
            && again.copies == q.copies && again.flags == q.flags
            && again.attempt == q.attempt && again.stream == q.stream
            && s_str_same (again.token, q.token));
    FZ_ASSERT (q.type != SQ_MSG_LOG || ((q.stream == SQ_LOG_STDOUT || q.stream == SQ_LOG_STDERR)
                                        && q.attempt >= -1 && q.attempt <= UINT32_MAX));
    FZ_ASSERT (q.type != SQ_MSG_PLACE || (q.n_ids <= SQ_PLACE_MAX && q.flags <= SQ_PLACE_MOVE));
    FZ_ASSERT (q.n_ids == 0 || memcmp (again.ids, q.ids, q.n_ids * sizeof (uint32_t)) == 0);
    sq_request_release (&again);
    sq_wbuf_release (&w);
    sq_request_release (&q);
}

static void
s_fuzz_submit (const uint8_t *data, size_t size)
{
    sq_submit_t s;
    sq_errbuf_t err;
    if (sq_submit_decode (&s, data, size, &err))
        return;
    for (uint32_t i = 0; i < s.n_objects; i++) {
        s_touch_str (s.objects [i].content_type);
        s_touch_str (s.objects [i].name);
        FZ_ASSERT (s.objects [i].frame >= -1);
    }
    for (uint32_t i = 0; i < s.n_tasks; i++) {
        sq_task_spec_t *t = &s.tasks [i];
        s_touch_str (t->kind);
        s_touch_str (t->name);
        s_touch (t->inputs, t->n_inputs * sizeof (uint32_t));
        s_touch (t->outputs, t->n_outputs * sizeof (uint32_t));
        FZ_ASSERT (t->n_resources <= SQ_MAX_RESOURCES);
        for (uint32_t j = 0; j < t->n_resources; j++)
            s_touch_str (t->resources [j].name);
        if (t->config)
            FZ_ASSERT (t->config >= data && t->config + t->config_size <= data + size);
        s_config (t->kind, t->config, t->config_size, t->n_inputs, t->n_outputs);
    }
    sq_submit_release (&s);
}

//  Whether the table has an event of this type: the oracle follows the
//  table (a list written here went stale when RAN came, and the fuzzer
//  found a RAN event "unknown").
static bool
s_event_known (uint32_t type)
{
    switch (type) {
#define SQ_EVENT(NAME, number) case number: return true;
#include "proto_messages.def"
        default: return false;
    }
}

static void
s_fuzz_update (const uint8_t *data, size_t size)
{
    sq_iter_t it;
    sq_errbuf_t err;
    memset (&it, 0, sizeof it);
    if (sq_update_begin (&it, data, size, &err) == 0) {
        sq_event_t ev;
        int rc;
        while ((rc = sq_update_next (&it, &ev)) == 1) {
            FZ_ASSERT (s_event_known (ev.type));
            if (ev.type == SQ_EV_TASKKEY) {
                FZ_ASSERT (ev.public_key.len == 32);
                s_touch_str (ev.public_key);
            }
            //  Only events that carry a size have one (LOGTAIL: its request;
            //  RAN: the answers kept).
            if (ev.type != SQ_EV_LOCATED && ev.type != SQ_EV_UPLOADED && ev.type != SQ_EV_HELD
            &&  ev.type != SQ_EV_STREAMED && ev.type != SQ_EV_LOGTAIL && ev.type != SQ_EV_RAN)
                FZ_ASSERT (ev.size == 0);
            if (ev.type == SQ_EV_RAN)
                FZ_ASSERT (ev.attempt <= SQ_RUN_EXECS_MAX && ev.size <= SQ_RUN_RESULTS_MAX);
            if (ev.type == SQ_EV_LOGTAIL) {
                s_touch_str (ev.message);
                FZ_ASSERT (ev.message.len <= SQ_LOGTAIL_MAX && ev.size <= UINT32_MAX);
            }
            if (ev.type == SQ_EV_INVENTORY)
                FZ_ASSERT (ev.key == 0);
            if (ev.type == SQ_EV_FAILED) {
                s_touch_str (ev.message);
                FZ_ASSERT (ev.reason <= SQ_FAIL_MEMORY);
            }
            if (ev.type == SQ_EV_FINISHED)
                for (uint32_t i = 0; i < ev.n_outputs; i++)
                    s_sink += (uint32_t) ev.outputs [i].key + (uint32_t) ev.outputs [i].frame;
        }
        FZ_ASSERT (rc == 0 || rc == -1);
    }
    sq_iter_release (&it);
}

static void
s_fuzz_bare (const uint8_t *data, size_t size)
{
    sq_errbuf_t err;
    int heartbeat = sq_bare_decode (data, size, SQ_MSG_HEARTBEAT, &err);
    int bye = sq_bare_decode (data, size, SQ_MSG_BYE, &err);
    int drain = sq_bare_decode (data, size, SQ_MSG_DRAIN, &err);
    int leave = sq_bare_decode (data, size, SQ_MSG_LEAVE, &err);
    FZ_ASSERT ((heartbeat == 0) + (bye == 0) + (drain == 0) + (leave == 0) <= 1);
    uint32_t type, req;
    if (heartbeat == 0)
        FZ_ASSERT (sq_proto_peek (data, size, &type, &req) == 0 && type == SQ_MSG_HEARTBEAT);
    //  REFRESH [52, tenant]: one string, encoded again the same.
    mpr_str_t tenant;
    if (sq_refresh_decode (data, size, &tenant, &err) == 0) {
        FZ_ASSERT (heartbeat && bye && drain && leave && tenant.len <= SQ_MAX_NAME);
        char copy [SQ_MAX_NAME + 1];
        memcpy (copy, tenant.ptr, tenant.len);
        copy [tenant.len] = 0;
        sq_wbuf_t w;
        sq_wbuf_init (&w);
        sq_refresh_encode (&w, copy);
        mpr_str_t again;
        FZ_ASSERT (sq_refresh_decode (w.buf.data, w.buf.size, &again, &err) == 0
                   && again.len == tenant.len && memcmp (again.ptr, copy, tenant.len) == 0);
        sq_wbuf_release (&w);
    }
}

static void
s_fuzz_assign (const uint8_t *data, size_t size)
{
    sq_iter_t it;
    sq_errbuf_t err;
    memset (&it, 0, sizeof it);
    if (sq_assign_begin (&it, data, size, &err) == 0) {
        sq_assign_t t;
        int rc;
        while ((rc = sq_assign_next (&it, &t)) == 1) {
            s_touch_str (t.kind);
            s_touch_str (t.name);
            for (uint32_t i = 0; i < t.n_inputs; i++)
                s_touch_str (t.inputs [i].content_type);
            for (uint32_t i = 0; i < t.n_outputs; i++)
                s_touch_str (t.outputs [i].content_type);
            FZ_ASSERT (t.n_resources <= SQ_MAX_RESOURCES);
            for (uint32_t i = 0; i < t.n_resources; i++)
                s_touch_str (t.resources [i].name);
            if (t.config)
                FZ_ASSERT (t.config >= data && t.config + t.config_size <= data + size);
            s_config (t.kind, t.config, t.config_size, t.n_inputs, t.n_outputs);
        }
        FZ_ASSERT (rc == 0 || rc == -1);
    }
    sq_iter_release (&it);
}

static void
s_fuzz_send (const uint8_t *data, size_t size)
{
    sq_iter_t it;
    sq_errbuf_t err;
    memset (&it, 0, sizeof it);
    if (sq_batch_begin (&it, SQ_MSG_SEND, data, size, &err) == 0) {
        sq_send_t o;
        while (sq_batch_next (&it, SQ_MSG_SEND, &o) == 1)
            s_touch_str (o.endpoint);
    }
    sq_iter_release (&it);
}

static void
s_fuzz_keys (const uint8_t *data, size_t size, uint32_t type)
{
    sq_iter_t it;
    sq_errbuf_t err;
    memset (&it, 0, sizeof it);
    if (sq_batch_begin (&it, type, data, size, &err) == 0) {
        uint64_t key;
        uint32_t attempt;
        if (type == SQ_MSG_DROP)
            while (sq_drop_next (&it, &key) == 1)
                s_sink += (uint32_t) key;
        else
            while (sq_stop_next (&it, &key, &attempt) == 1)
                s_sink += (uint32_t) key + attempt;
    }
    sq_iter_release (&it);
}

static void
s_fuzz_stream (const uint8_t *data, size_t size)
{
    uint32_t types [2] = { SQ_MSG_STREAM, SQ_MSG_UNSTREAM };
    for (int t = 0; t < 2; t++) {
        sq_iter_t it;
        sq_errbuf_t err;
        memset (&it, 0, sizeof it);
        if (sq_batch_begin (&it, types [t], data, size, &err) == 0) {
            sq_stream_order_t o;
            while (sq_batch_next (&it, types [t], &o) == 1) {
                s_touch_str (o.endpoint);
                FZ_ASSERT (o.to_key.len == 0 || o.to_key.len == 32);
            }
        }
        sq_iter_release (&it);
    }
}

//  ZAP requests: the frames are [u8 length][bytes] one after another.
static void
s_fuzz_zap (const uint8_t *data, size_t size)
{
    const void *frames [9] = { NULL };
    size_t sizes [9] = { 0 }, n = 0, pos = 0;
    while (pos < size && n < 9) {
        size_t len = data [pos++];
        if (len > size - pos)
            len = size - pos;
        frames [n] = data + pos;
        sizes [n++] = len;
        pos += len;
    }
    sq_zap_request_t request;
    char err [200];
    if (sq_zap_decode (&request, frames, sizes, n, err, sizeof err))
        return;
    FZ_ASSERT (n >= 6 && request.request_id_size <= sizeof request.request_id);
    FZ_ASSERT (strlen (request.domain) < sizeof request.domain);
    FZ_ASSERT (!request.curve || strlen (request.z85) == SQ_Z85_LEN);
    s_touch (request.request_id, request.request_id_size);
}

//  Key files: what a directory of keys (or --secret-key) may hold.
static void
s_fuzz_cert (const uint8_t *data, size_t size)
{
    sq_cert_t cert;
    char err [300];
    if (sq_cert_parse (&cert, (const char *) data, size, err, sizeof err)) {
        FZ_ASSERT (strlen (err) > 0);
        return;
    }
    FZ_ASSERT (strlen (cert.public_z85) == SQ_Z85_LEN);
    FZ_ASSERT (cert.tenant [0] == 0 || sq_key_name_ok (cert.tenant));
    uint8_t back [SQ_KEY_LEN];
    FZ_ASSERT (sq_key_from_z85 (cert.public_z85, SQ_Z85_LEN, back) == 0
            && memcmp (back, cert.public_key, SQ_KEY_LEN) == 0);
}

//  A journal after its magic: every record framed and decoded as the
//  broker's loader does, up to the first torn or corrupt one.
static void
s_fuzz_record (const uint8_t *data, size_t size)
{
    size_t pos = 0;
    const uint8_t *body;
    size_t body_size;
    const char *why = NULL;
    int rc;
    while ((rc = sq_rec_next (data, size, &pos, &body, &body_size, &why)) == 1) {
        FZ_ASSERT (body >= data && body + body_size <= data + size && pos <= size);
        sq_rec_t rec;
        char err [300];
        if (sq_rec_decode (&rec, body, body_size, err, sizeof err))
            continue;
        FZ_ASSERT (rec.type > 0 && rec.type < SQ_REC_TYPES_);
        s_touch_str (rec.cluster);
        s_touch_str (rec.token);
        s_touch_str (rec.tenant);
        s_touch_str (rec.owner);
        s_touch_str (rec.frame0);
        s_touch_str (rec.message);
        s_touch_str (rec.name);
        s_touch_str (rec.key_z85);
        for (uint32_t i = 0; i < rec.n_payloads; i++)
            s_touch_str (rec.payloads [i]);
        s_touch (rec.ids, rec.n_ids * sizeof (uint32_t));
        for (uint32_t i = 0; i < rec.n_outputs; i++) {
            FZ_ASSERT (!rec.outputs [i].data.ptr || rec.outputs [i].data.len == rec.outputs [i].size);
            s_touch_str (rec.outputs [i].data);
        }
        //  A SUBMIT record's frame is read by the SUBMIT decoder at replay.
        if (rec.type == SQ_REC_SUBMIT)
            s_fuzz_submit ((const uint8_t *) rec.frame0.ptr, rec.frame0.len);
        sq_rec_release (&rec);
    }
    FZ_ASSERT (rc == 0 || ((rc == -1 || rc == -2) && why != NULL));
}

static void
s_fuzz_keyset (const uint8_t *data, size_t size)
{
    sq_keyset_t keys;
    sq_errbuf_t err;
    if (sq_keyset_decode (&keys, data, size, &err))
        return;
    FZ_ASSERT (keys.governors.n <= SQ_MAX_KEYS && keys.clients.n <= SQ_MAX_KEYS);
    for (uint32_t i = 0; i < keys.governors.n; i++)
        s_touch (keys.governors.keys [i], 32);
    for (uint32_t i = 0; i < keys.clients.n; i++)
        s_touch (keys.clients.keys [i], 32);
    sq_keyset_release (&keys);
}

static void
s_fuzz_welcome (const uint8_t *data, size_t size)
{
    sq_welcome_t welcome;
    sq_errbuf_t err;
    for (int governor = 0; governor < 2; governor++)
        if (sq_welcome_decode (&welcome, governor, data, size, &err) == 0) {
            s_touch_str (welcome.cluster);
            s_touch_str (welcome.tenant);
            FZ_ASSERT (welcome.secret.len == 0 || welcome.secret.len == SQ_SECRET_LEN);
            s_touch_str (welcome.secret);
        }
    uint32_t session;
    uint8_t token [SQ_TOKEN_LEN];
    if (sq_session_opened_decode (data, size, &session, token, &err) == 0)
        s_touch (token, sizeof token);
}

static void
s_fuzz_where (const uint8_t *data, size_t size)
{
    sq_fetched_t fetched;
    sq_where_t where;
    sq_errbuf_t err;
    if (sq_fetched_decode (&fetched, data, size, &err) == 0) {
        s_touch_str (fetched.content_type);
        if (fetched.located) {
            s_touch_str (fetched.where.endpoint);
            FZ_ASSERT (fetched.where.key.len == 0 || fetched.where.key.len == 32);
            FZ_ASSERT (fetched.where.capability.len <= SQ_CAP_MAX);
        }
    }
    if (sq_where_decode (&where, data, size, &err) == 0) {
        s_touch_str (where.endpoint);
        s_touch_str (where.key);
        s_touch_str (where.capability);
    }
    sq_logwhere_t logwhere;
    if (sq_logwhere_decode (&logwhere, data, size, &err) == 0) {
        s_touch_str (logwhere.state);
        if (logwhere.located) {
            s_touch_str (logwhere.where.endpoint);
            FZ_ASSERT (logwhere.where.key.len == 0 || logwhere.where.key.len == 32);
            FZ_ASSERT (logwhere.where.capability.len <= SQ_CAP_MAX);
        }
    }
}

static int
s_ran_where_touch (void *arg, uint64_t run, uint32_t gov, uint32_t answers, uint64_t size,
                   const sq_where_t *where)
{
    (void) arg; (void) run; (void) gov;
    FZ_ASSERT (answers <= SQ_RUN_EXECS_MAX && size <= SQ_RUN_RESULTS_MAX);
    s_touch_str (where->endpoint);
    s_touch_str (where->capability);
    return 0;
}

static int
s_ran_item_touch (void *arg, uint64_t pid, bool ok, mpr_str_t bytes)
{
    (void) arg; (void) pid; (void) ok;
    s_touch_str (bytes);
    return 0;
}

static void
s_fuzz_replies (const uint8_t *data, size_t size)
{
    sq_errbuf_t err;
    uint64_t next, total;
    bool done;
    if (sq_logpart_decode (data, size, &next, &total, &done, &err) == 0) {
        sq_wbuf_t w;
        sq_wbuf_init (&w);
        sq_pack_logpart (&w.pk, next, total, done);
        uint64_t next2, total2;
        bool done2;
        FZ_ASSERT (sq_logpart_decode ((const uint8_t *) w.buf.data, w.buf.size, &next2, &total2,
                                      &done2, &err) == 0
                   && next2 == next && total2 == total && done2 == done);
        sq_wbuf_release (&w);
    }
    uint64_t run;
    sq_ran_reply_each (data, size, &run, s_ran_where_touch, NULL, &err);
    sq_ran_results_each (data, size, s_ran_item_touch, NULL, &err);
    sq_iter_t it;
    uint64_t finished, failed;
    if (sq_wait_reply_begin (&it, data, size, 64, &finished, &failed, &err) == 0) {
        sq_done_t done;
        int rc, n = 0;
        while ((rc = sq_wait_reply_next (&it, &done)) == 1) {
            FZ_ASSERT (done.state <= SQ_STATE_CANCELLED);
            s_touch_str (done.message);
            n++;
        }
        FZ_ASSERT (rc == 0 || rc == -1);
        FZ_ASSERT (n <= 64);
    }
    sq_iter_release (&it);
    sq_resumed_t resumed;
    if (sq_record_decode (SQ_REC_RESUMED, &resumed, data, size, "RESUME reply", &err) == 0) {
        //  Round trip: what decodes re-encodes to the same value.
        sq_wbuf_t w;
        sq_wbuf_init (&w);
        sq_record_pack (&w.pk, SQ_REC_RESUMED, &resumed);
        sq_resumed_t again = { 0 };
        FZ_ASSERT (sq_record_decode (SQ_REC_RESUMED, &again, w.buf.data, w.buf.size,
                                     "RESUME reply", &err) == 0);
        FZ_ASSERT (again.max_id == resumed.max_id);
        sq_wbuf_release (&w);
    }
    static uint32_t holders [SQ_PLACE_MAX], holders2 [SQ_PLACE_MAX];
    uint32_t n_holders;
    if (sq_holders_decode (data, size, holders, SQ_PLACE_MAX, &n_holders, &err) == 0) {
        sq_wbuf_t w;
        sq_wbuf_init (&w);
        sq_pack_holders (&w.pk, holders, n_holders);
        uint32_t n2 = 0;
        FZ_ASSERT (sq_holders_decode ((const uint8_t *) w.buf.data, w.buf.size, holders2,
                                      SQ_PLACE_MAX, &n2, &err) == 0);
        FZ_ASSERT (n2 == n_holders && memcmp (holders, holders2, n2 * sizeof (uint32_t)) == 0);
        sq_wbuf_release (&w);
    }
    //  Jobs: SESSIONS, TASKS, ATTACH, a job map, a count.
    uint32_t n_jobs;
    if (sq_jobs_reply_begin (&it, data, size, &n_jobs, &err) == 0) {
        sq_job_info_t job;
        int rc;
        while ((rc = sq_jobs_reply_next (&it, &job)) == 1) {
            FZ_ASSERT (sq_job_state_name (job.state) != NULL);
            s_touch_str (job.name);
        }
        FZ_ASSERT (rc == 0 || rc == -1);
    }
    sq_iter_release (&it);
    uint64_t tasks_total;
    uint32_t n_tasks;
    if (sq_tasks_reply_begin (&it, data, size, &tasks_total, &n_tasks, &err) == 0) {
        sq_task_info_t task;
        int rc;
        while ((rc = sq_tasks_reply_next (&it, &task)) == 1) {
            FZ_ASSERT (sq_task_state_bit_name (task.state) != NULL);
            s_touch_str (task.error);
            s_touch_str (task.name);
        }
        FZ_ASSERT (rc == 0 || rc == -1);
    }
    sq_iter_release (&it);
    uint32_t a_max, a_session;
    uint8_t token [SQ_TOKEN_LEN];
    s_sink += (uint32_t) sq_attached_decode (data, size, &a_max, &a_session, token, &err);
    sq_count_t count;
    s_sink += (uint32_t) sq_record_decode (SQ_REC_COUNT, &count, data, size, "reply", &err);
    s_sink += (uint32_t) sq_nil_decode (data, size, &err);
    sq_served_t served;
    if (sq_record_decode (SQ_REC_SERVED, &served, data, size, "GREAD reply", &err) == 0)
        s_touch_str (served.content_type);
    char *json = NULL;
    int rc = sq_json_from_msgpack (data, size, false, &json, &err);
    FZ_ASSERT ((rc == 0) == (json != NULL));
    if (json) {
        FZ_ASSERT (strlen (json) > 0);
        free (json);
    }
}

static void
s_fuzz_peek (const uint8_t *data, size_t size)
{
    uint32_t type, req;
    if (sq_proto_peek (data, size, &type, &req) == 0)
        s_sink += type + req;
}

//  Every flat message and client request of the table (proto_messages.def),
//  whichever its type: decoded, its strings read, its bounds held, encoded,
//  decoded and encoded again to the same bytes.
static void
s_fuzz_table (const uint8_t *data, size_t size)
{
    uint32_t type, req;
    if (sq_proto_peek (data, size, &type, &req))
        return;
    const sq_msg_desc_t *d = sq_msg_desc (type);
    if (!d || !d->fields)
        return;
    union { sq_request_t request; uint64_t words [64]; } msg, again;
    FZ_ASSERT (d->size <= sizeof msg);
    sq_errbuf_t err;
    if (d->request? sq_request_decode (&msg.request, data, size, &err)
                  : sq_msg_decode (type, &msg, data, size, &err))
        return;
    for (uint32_t i = 0; i < d->n_fields; i++) {
        const sq_field_desc_t *f = &d->fields [i];
        const char *at = (const char *) &msg + f->offset;
        if (f->kind == SQK_STR || f->kind == SQK_NAME || f->kind == SQK_BIN || f->kind == SQK_OBIN)
            s_touch_str (*(const mpr_str_t *) at);
        if (f->kind == SQK_U32 && f->max)
            FZ_ASSERT (*(const uint32_t *) at >= f->min && *(const uint32_t *) at <= f->max);
        if (f->kind == SQK_U64 && f->max)
            FZ_ASSERT (*(const uint64_t *) at <= f->max);
        if (f->kind == SQK_I64 && f->max)
            FZ_ASSERT (*(const int64_t *) at >= f->min && *(const int64_t *) at <= (int64_t) f->max);
    }
    for (uint32_t i = 0; i < msg.request.n_ids && d->request; i++)
        s_sink += msg.request.ids [i];
    sq_wbuf_t w, w2;
    sq_wbuf_init (&w);
    sq_wbuf_init (&w2);
    sq_msg_encode (&w, type, &msg);
    FZ_ASSERT ((d->request? sq_request_decode (&again.request, w.buf.data, w.buf.size, &err)
                          : sq_msg_decode (type, &again, w.buf.data, w.buf.size, &err)) == 0);
    sq_msg_encode (&w2, type, &again);
    FZ_ASSERT (w.buf.size == w2.buf.size && memcmp (w.buf.data, w2.buf.data, w.buf.size) == 0);
    if (d->request) {
        sq_request_release (&msg.request);
        sq_request_release (&again.request);
    }
    else {
        sq_msg_free_fields (type, &msg);
        sq_msg_free_fields (type, &again);
    }
    sq_wbuf_release (&w);
    sq_wbuf_release (&w2);
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t target = data [0] % FZ_COUNT;
    //  The frame in its own exactly-sized allocation (NULL-safe when empty)
    size_t frame_size = size - 1;
    uint8_t *frame = (uint8_t *) malloc (frame_size? frame_size: 1);
    if (!frame)
        return 0;
    memcpy (frame, data + 1, frame_size);
    switch (target) {
        case FZ_PEEK: s_fuzz_peek (frame, frame_size); break;
        case FZ_HELLO: s_fuzz_hello (frame, frame_size); break;
        case FZ_REPLY: s_fuzz_reply (frame, frame_size); break;
        case FZ_REQUEST: s_fuzz_request (frame, frame_size); break;
        case FZ_SUBMIT: s_fuzz_submit (frame, frame_size); break;
        case FZ_UPDATE: s_fuzz_update (frame, frame_size); break;
        case FZ_BARE: s_fuzz_bare (frame, frame_size); break;
        case FZ_ASSIGN: s_fuzz_assign (frame, frame_size); break;
        case FZ_SEND: s_fuzz_send (frame, frame_size); break;
        case FZ_DROP: s_fuzz_keys (frame, frame_size, SQ_MSG_DROP); break;
        case FZ_STOP:       //  STOP and RETRACT share a layout and a reader
            s_fuzz_keys (frame, frame_size, SQ_MSG_STOP);
            s_fuzz_keys (frame, frame_size, SQ_MSG_RETRACT);
            break;
        case FZ_TASKCONF:
            if (frame_size >= 3) {
                mpr_str_t kind = { sq_kind_name ((sq_kind_t) (frame [0] % SQ_KIND_COUNT_)), 0 };
                kind.len = (uint32_t) strlen (kind.ptr);
                //  config in its own exact allocation too
                size_t cfg_size = frame_size - 3;
                uint8_t *cfg = (uint8_t *) malloc (cfg_size? cfg_size: 1);
                if (cfg) {
                    memcpy (cfg, frame + 3, cfg_size);
                    s_config (kind, cfg, cfg_size, frame [1] % 8, frame [2] % 8);
                    free (cfg);
                }
            }
            break;
        case FZ_MPR: s_fuzz_mpr (frame, frame_size); break;
        case FZ_ZAP: s_fuzz_zap (frame, frame_size); break;
        case FZ_CERT: s_fuzz_cert (frame, frame_size); break;
        case FZ_RECORD: s_fuzz_record (frame, frame_size); break;
        case FZ_KEYS: s_fuzz_keyset (frame, frame_size); break;
        case FZ_WELCOME: s_fuzz_welcome (frame, frame_size); break;
        case FZ_WHERE: s_fuzz_where (frame, frame_size); break;
        case FZ_REPLIES: s_fuzz_replies (frame, frame_size); break;
        case FZ_STREAM: s_fuzz_stream (frame, frame_size); break;
        case FZ_LOAD: case FZ_OBJECT: case FZ_GFETCH: case FZ_CHUNK: case FZ_CREDIT:
        case FZ_GREAD: case FZ_PUT: case FZ_SCHUNK: case FZ_SCREDIT:
        case FZ_TABLE: s_fuzz_table (frame, frame_size); break;
        default: break;
    }
    free (frame);
    return 0;
}
