/*  Unit test of common/proto: encode -> decode round trips of every message,
    version mismatch, and strict rejection of malformed input.

    Over 800 lines: one case or more per message of the one codec table and
    of those coded by hand, sharing this file's decoder wrappers
    (S_DEC_STRUCT, S_DEC_BATCH); a file per plane would copy them. */
#include "proto.h"
#include "record.h"
#include "capability.h"
#include "json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int s_failures = 0;

#define CHECK(cond) do { \
    if (!(cond)) { \
        fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        s_failures++; \
    } \
} while (0)

static mpr_str_t
s_mstr (const char *s)
{
    mpr_str_t m = { s, (uint32_t) strlen (s) };
    return m;
}

//  A decoder under test, wrapped to one signature: 0 or -1. Iterating
//  decoders are run to their end.
typedef int (s_decoder_fn) (const void *data, size_t size, sq_errbuf_t *err);

//  Every strict prefix of a valid message must be refused, and so must the
//  message with a byte appended; the decoder must name what went wrong.
static void
s_check_truncations (const char *what, s_decoder_fn *decode, const void *data, size_t size)
{
    sq_errbuf_t err;
    CHECK (decode (data, size, &err) == 0);
    for (size_t cut = 0; cut < size; cut++) {
        err.text [0] = 0;
        if (decode (data, cut, &err) != -1) {
            fprintf (stderr, "%s: prefix of %zu / %zu bytes accepted\n", what, cut, size);
            s_failures++;
        }
        else
        if (err.text [0] == 0) {
            fprintf (stderr, "%s: prefix of %zu bytes refused without a message\n", what, cut);
            s_failures++;
        }
    }
    uint8_t *longer = (uint8_t *) malloc (size + 1);
    memcpy (longer, data, size);
    longer [size] = 0xc0;
    err.text [0] = 0;
    CHECK (decode (longer, size + 1, &err) == -1);
    if (size && !strstr (err.text, "trailing"))
        fprintf (stderr, "%s: trailing byte: '%s'\n", what, err.text), s_failures++;
    free (longer);
}

//  --------------------------------------------------------------------------
//  Decoder wrappers

//  A decoder that fills one struct of `type`.
#define S_DEC_STRUCT(name, type, decode) \
static int \
s_dec_##name (const void *d, size_t n, sq_errbuf_t *err) \
{ \
    type value; \
    return decode (&value, d, n, err); \
}

//  A batch of the table's records of message `msg`, read to its end.
#define S_DEC_BATCH(name, msg, type) \
static int \
s_dec_##name (const void *d, size_t n, sq_errbuf_t *err) \
{ \
    sq_iter_t it; \
    type o; \
    int rc = sq_batch_begin (&it, msg, d, n, err); \
    while (rc == 0 && (rc = sq_batch_next (&it, msg, &o)) == 1) \
        rc = 0; \
    sq_iter_release (&it); \
    return rc; \
}

static int
s_dec_hello (const void *d, size_t n, sq_errbuf_t *err)
{
    sq_hello_t h;
    int code;
    return sq_hello_decode (&h, d, n, &code, err);
}

S_DEC_STRUCT (reply, sq_reply_t, sq_reply_decode)

static int
s_dec_request (const void *d, size_t n, sq_errbuf_t *err)
{
    sq_request_t q;
    int rc = sq_request_decode (&q, d, n, err);
    sq_request_release (&q);
    return rc;
}

static int
s_dec_submit (const void *d, size_t n, sq_errbuf_t *err)
{
    sq_submit_t s;
    int rc = sq_submit_decode (&s, d, n, err);
    sq_submit_release (&s);
    return rc;
}

static int
s_dec_update (const void *d, size_t n, sq_errbuf_t *err)
{
    sq_iter_t it;
    sq_event_t ev;
    int rc = sq_update_begin (&it, d, n, err);
    while (rc == 0 && (rc = sq_update_next (&it, &ev)) == 1)
        rc = 0;
    sq_iter_release (&it);
    return rc;
}

static int
s_dec_assign (const void *d, size_t n, sq_errbuf_t *err)
{
    sq_iter_t it;
    sq_assign_t t;
    int rc = sq_assign_begin (&it, d, n, err);
    while (rc == 0 && (rc = sq_assign_next (&it, &t)) == 1)
        rc = 0;
    sq_iter_release (&it);
    return rc;
}

S_DEC_BATCH (send, SQ_MSG_SEND, sq_send_t)

S_DEC_BATCH (stream, SQ_MSG_STREAM, sq_stream_order_t)

S_DEC_STRUCT (putlocal, sq_putlocal_t, sq_putlocal_decode)

S_DEC_STRUCT (lcopy, sq_lcopy_t, sq_lcopy_decode)
S_DEC_STRUCT (schunk, sq_schunk_t, sq_schunk_decode)

S_DEC_STRUCT (scredit, sq_scredit_t, sq_scredit_decode)

S_DEC_STRUCT (slocal, sq_slocal_t, sq_slocal_decode)

static int
s_dec_drop (const void *d, size_t n, sq_errbuf_t *err)
{
    sq_iter_t it;
    uint64_t key;
    int rc = sq_batch_begin (&it, SQ_MSG_DROP, d, n, err);
    while (rc == 0 && (rc = sq_drop_next (&it, &key)) == 1)
        rc = 0;
    sq_iter_release (&it);
    return rc;
}

static int
s_dec_stop (const void *d, size_t n, sq_errbuf_t *err)
{
    sq_iter_t it;
    uint64_t key;
    uint32_t attempt;
    int rc = sq_batch_begin (&it, SQ_MSG_STOP, d, n, err);
    while (rc == 0 && (rc = sq_stop_next (&it, &key, &attempt)) == 1)
        rc = 0;
    sq_iter_release (&it);
    return rc;
}

S_DEC_STRUCT (load, sq_load_t, sq_load_decode)

static int
s_dec_heartbeat (const void *d, size_t n, sq_errbuf_t *err)
{
    return sq_bare_decode (d, n, SQ_MSG_HEARTBEAT, err);
}

static int
s_dec_refresh (const void *d, size_t n, sq_errbuf_t *err)
{
    mpr_str_t tenant;
    return sq_refresh_decode (d, n, &tenant, err);
}

S_DEC_STRUCT (object, sq_object_msg_t, sq_object_decode)

S_DEC_STRUCT (gfetch, sq_gfetch_t, sq_gfetch_decode)

//  --------------------------------------------------------------------------

static void
s_test_hello (void)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_hello_t h;
    int code;
    sq_errbuf_t err;

    sq_hello_encode_client (&w, 7, "host-123");
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == 0);
    CHECK (code == SQ_OK && h.req == 7 && h.version == SQUALL_PROTOCOL_VERSION);
    CHECK (!h.governor && mpr_str_eq (h.name, "host-123"));
    s_check_truncations ("HELLO client", s_dec_hello, w.buf.data, w.buf.size);

    uint32_t type, req;
    CHECK (sq_proto_peek (w.buf.data, w.buf.size, &type, &req) == 0);
    CHECK (type == SQ_MSG_HELLO && req == 7);

    sq_wbuf_reset (&w);
    sq_resource_t res [2] = { { s_mstr ("cpus"), 8 }, { s_mstr ("memory"), 1ull << 34 } };
    sq_hello_encode_governor (&w, 1, "g1", 99, "tcp://a:1", "tcp://a:2", res, 2, NULL, 0);
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == 0);
    CHECK (h.governor && h.incarnation == 99 && mpr_str_eq (h.name, "g1"));
    CHECK (mpr_str_eq (h.data_endpoint, "tcp://a:1") && mpr_str_eq (h.serve_endpoint, "tcp://a:2"));
    CHECK (h.n_resources == 2 && mpr_str_eq (h.resources [1].name, "memory")
           && h.resources [1].amount == 1ull << 34 && h.resources [0].amount == 8);
    s_check_truncations ("HELLO governor", s_dec_hello, w.buf.data, w.buf.size);

    //  Governor without resources (nil)
    sq_wbuf_reset (&w);
    sq_hello_encode_governor (&w, 1, "g2", 1, "a", "b", NULL, 0, NULL, 0);
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == 0 && h.n_resources == 0);

    //  Another protocol version: SQ_E_VERSION naming both versions, even
    //  if the rest of the message is not what this version expects.
    sq_wbuf_reset (&w);
    msgpack_pack_array (&w.pk, 3);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_HELLO);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, 77);
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == -1);
    CHECK (code == SQ_E_VERSION);
    char mine [16];
    snprintf (mine, sizeof mine, "%d", SQUALL_PROTOCOL_VERSION);
    CHECK (strstr (err.text, "77") && strstr (err.text, mine));

    //  Bad role, wrong field count for the role, empty / duplicate resources
    sq_wbuf_reset (&w);
    msgpack_pack_array (&w.pk, 5);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_HELLO);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, SQUALL_PROTOCOL_VERSION);
    sq_pack_cstr (&w.pk, "admin");
    sq_pack_cstr (&w.pk, "x");
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == -1);
    CHECK (code == SQ_E_PROTOCOL && strstr (err.text, "role"));

    sq_wbuf_reset (&w);
    msgpack_pack_array (&w.pk, 6);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_HELLO);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, SQUALL_PROTOCOL_VERSION);
    sq_pack_cstr (&w.pk, "client");
    sq_pack_cstr (&w.pk, "x");
    msgpack_pack_nil (&w.pk);
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == -1);
    CHECK (strstr (err.text, "number of fields"));

    sq_resource_t dup [2] = { { s_mstr ("cpus"), 1 }, { s_mstr ("cpus"), 2 } };
    sq_wbuf_reset (&w);
    sq_hello_encode_governor (&w, 1, "g", 1, "a", "b", dup, 2, NULL, 0);
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == -1);
    CHECK (strstr (err.text, "resources") && strstr (err.text, "twice"));

    sq_resource_t empty [1] = { { s_mstr (""), 1 } };
    sq_wbuf_reset (&w);
    sq_hello_encode_governor (&w, 1, "g", 1, "a", "b", empty, 1, NULL, 0);
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == -1);
    CHECK (strstr (err.text, "empty resource name"));

    sq_resource_t many [SQ_MAX_RESOURCES + 1];
    char names [SQ_MAX_RESOURCES + 1][8];
    for (int i = 0; i <= SQ_MAX_RESOURCES; i++) {
        snprintf (names [i], sizeof names [i], "r%d", i);
        many [i].name = s_mstr (names [i]);
        many [i].amount = 1;
    }
    //  The encoder sends no more than the broker takes; a peer that sends
    //  more is refused.
    sq_wbuf_reset (&w);
    sq_hello_encode_governor (&w, 1, "g", 1, "a", "b", many, SQ_MAX_RESOURCES + 1, NULL, 0);
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == 0);
    CHECK (h.n_resources == SQ_MAX_RESOURCES && h.resources [SQ_MAX_RESOURCES - 1].amount == 1);
    sq_wbuf_reset (&w);
    msgpack_pack_array (&w.pk, 10);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_HELLO);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, SQUALL_PROTOCOL_VERSION);
    sq_pack_cstr (&w.pk, "governor");
    sq_pack_cstr (&w.pk, "g");
    msgpack_pack_uint64 (&w.pk, 1);
    sq_pack_cstr (&w.pk, "a");
    sq_pack_cstr (&w.pk, "b");
    msgpack_pack_map (&w.pk, SQ_MAX_RESOURCES + 1);
    for (int i = 0; i <= SQ_MAX_RESOURCES; i++) {
        sq_pack_cstr (&w.pk, names [i]);
        msgpack_pack_uint64 (&w.pk, 1);
    }
    msgpack_pack_nil (&w.pk);
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == -1);
    CHECK (strstr (err.text, "'resources'") && strstr (err.text, "too many"));

    //  Oversized name
    char *big = (char *) malloc (SQ_MAX_NAME + 2);
    memset (big, 'n', SQ_MAX_NAME + 1);
    big [SQ_MAX_NAME + 1] = 0;
    sq_wbuf_reset (&w);
    sq_hello_encode_client (&w, 1, big);
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == -1);
    CHECK (strstr (err.text, "'name'") && strstr (err.text, "too long"));
    big [SQ_MAX_NAME] = 0;              //  exactly at the limit is fine
    sq_wbuf_reset (&w);
    sq_hello_encode_client (&w, 1, big);
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == 0);
    free (big);

    //  Not a HELLO at all
    sq_wbuf_reset (&w);
    sq_bare_encode (&w, SQ_MSG_PING);
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == -1);
    CHECK (strstr (err.text, "HELLO"));
    sq_wbuf_release (&w);
}

static void
s_test_reply (void)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_reply_t r;
    sq_errbuf_t err;

    sq_reply_begin (&w, 42);
    msgpack_pack_array (&w.pk, 2);
    msgpack_pack_uint32 (&w.pk, 5);
    sq_pack_cstr (&w.pk, "x");
    CHECK (sq_reply_decode (&r, w.buf.data, w.buf.size, &err) == 0);
    CHECK (r.req == 42 && r.code == SQ_OK && r.body_size == 4);
    CHECK (r.body && r.body [0] == 0x92);
    s_check_truncations ("REPLY ok", s_dec_reply, w.buf.data, w.buf.size);

    sq_wbuf_reset (&w);
    sq_reply_encode_error (&w, 3, SQ_E_UPSTREAM_FAILED, "task 9 failed", 9, 7);
    CHECK (sq_reply_decode (&r, w.buf.data, w.buf.size, &err) == 0);
    CHECK (r.req == 3 && r.code == SQ_E_UPSTREAM_FAILED && r.err_id == 9 && r.err_root == 7);
    CHECK (mpr_str_eq (r.message, "task 9 failed"));
    s_check_truncations ("REPLY error", s_dec_reply, w.buf.data, w.buf.size);

    sq_wbuf_reset (&w);
    sq_reply_encode_error (&w, 3, SQ_E_SESSION, "no such session", 0, 0);
    CHECK (sq_reply_decode (&r, w.buf.data, w.buf.size, &err) == 0);
    CHECK (r.err_id == 0 && r.err_root == 0 && r.code == SQ_E_SESSION);

    //  Unknown error code
    sq_wbuf_reset (&w);
    sq_reply_encode_error (&w, 3, SQ_E_COUNT_, "?", 0, 0);
    CHECK (sq_reply_decode (&r, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "unknown error code"));

    //  Wrong field count, wrong type of req
    sq_wbuf_reset (&w);
    msgpack_pack_array (&w.pk, 5);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_REPLY);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, 0);
    msgpack_pack_nil (&w.pk);
    msgpack_pack_nil (&w.pk);
    CHECK (sq_reply_decode (&r, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "number of fields"));

    sq_wbuf_reset (&w);
    msgpack_pack_array (&w.pk, 4);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_REPLY);
    sq_pack_cstr (&w.pk, "1");
    msgpack_pack_uint32 (&w.pk, 0);
    msgpack_pack_nil (&w.pk);
    CHECK (sq_reply_decode (&r, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "'req'"));

    //  Error body with a message over the limit
    char *big = (char *) malloc (SQ_MAX_MESSAGE + 2);
    memset (big, 'm', SQ_MAX_MESSAGE + 1);
    big [SQ_MAX_MESSAGE + 1] = 0;
    sq_wbuf_reset (&w);
    sq_reply_encode_error (&w, 1, SQ_E_INTERNAL, big, 0, 0);
    CHECK (sq_reply_decode (&r, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "'message'"));
    free (big);

    //  Error body with the wrong shape
    sq_wbuf_reset (&w);
    msgpack_pack_array (&w.pk, 4);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_REPLY);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, SQ_E_INVALID);
    sq_pack_cstr (&w.pk, "only a message");
    CHECK (sq_reply_decode (&r, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "'body'"));

    //  Other message type
    sq_wbuf_reset (&w);
    sq_gfetch_encode (&w, 1, 2, NULL, 0);
    CHECK (sq_reply_decode (&r, w.buf.data, w.buf.size, &err) == -1);
    sq_wbuf_release (&w);
}

static void
s_test_requests (void)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_errbuf_t err;
    uint32_t ids [3] = { 1, 70000, UINT32_MAX };
    const uint32_t types [] = {
        SQ_MSG_SESSION_OPEN, SQ_MSG_SESSION_CLOSE, SQ_MSG_KEEP, SQ_MSG_UNKEEP,
        SQ_MSG_WAIT, SQ_MSG_FETCH, SQ_MSG_CANCEL, SQ_MSG_INFO, SQ_MSG_PING, SQ_MSG_RESTART
    };
    for (size_t i = 0; i < sizeof types / sizeof types [0]; i++) {
        for (int variant = 0; variant < 2; variant++) {
            sq_request_t q = {
                .type = types [i], .req = 1000 + (uint32_t) i, .session = 5,
                .mode = variant? SQ_WAIT_SOME: SQ_WAIT_SESSION, .id = 9,
                .timeout_ms = variant? -1: 2500,
                .n_ids = variant? 3: 0, .ids = variant? ids: NULL
            };
            sq_wbuf_reset (&w);
            sq_request_encode (&w, &q);
            sq_request_t d;
            CHECK (sq_request_decode (&d, w.buf.data, w.buf.size, &err) == 0);
            CHECK (d.type == q.type && d.req == q.req);
            uint32_t t = q.type;
            bool has_session = t != SQ_MSG_SESSION_OPEN && t != SQ_MSG_INFO && t != SQ_MSG_PING
                            && t != SQ_MSG_RESTART;
            bool has_ids = t == SQ_MSG_KEEP || t == SQ_MSG_UNKEEP || t == SQ_MSG_CANCEL || t == SQ_MSG_WAIT
                        || t == SQ_MSG_SESSION_OPEN;        //  its jobs to wait for (after)
            CHECK (d.session == (has_session? 5u: 0u));
            if (has_ids) {
                CHECK (d.n_ids == q.n_ids);
                for (uint32_t j = 0; j < d.n_ids; j++)
                    CHECK (d.ids [j] == ids [j]);
            }
            else
                CHECK (d.n_ids == 0 && d.ids == NULL);
            if (t == SQ_MSG_WAIT)
                CHECK (d.mode == q.mode && d.timeout_ms == q.timeout_ms);
            if (t == SQ_MSG_FETCH)
                CHECK (d.id == 9 && d.timeout_ms == q.timeout_ms);
            sq_request_release (&d);
            CHECK (d.ids == NULL);
            s_check_truncations ("request", s_dec_request, w.buf.data, w.buf.size);
        }
    }
    sq_request_t d;
    //  Unknown wait mode
    sq_wbuf_reset (&w);
    msgpack_pack_array (&w.pk, 6);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_WAIT);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, 3);
    msgpack_pack_array (&w.pk, 0);
    msgpack_pack_int (&w.pk, -1);
    CHECK (sq_request_decode (&d, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "'mode'"));
    //  Wrong type inside ids (freed on error: ASan checks)
    sq_wbuf_reset (&w);
    msgpack_pack_array (&w.pk, 4);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_KEEP);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_array (&w.pk, 2);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_int (&w.pk, -4);
    CHECK (sq_request_decode (&d, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "'ids'") && d.ids == NULL);
    //  Id above 32 bits
    sq_wbuf_reset (&w);
    msgpack_pack_array (&w.pk, 5);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_FETCH);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_uint64 (&w.pk, 1ull << 32);
    msgpack_pack_int (&w.pk, 0);
    CHECK (sq_request_decode (&d, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "'id'") && strstr (err.text, "32-bit"));
    //  Wrong field count
    sq_wbuf_reset (&w);
    msgpack_pack_array (&w.pk, 3);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_PING);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, 1);
    CHECK (sq_request_decode (&d, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "number of fields"));
    //  Not a request type
    sq_wbuf_reset (&w);
    sq_bare_encode (&w, SQ_MSG_HEARTBEAT);
    CHECK (sq_request_decode (&d, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "unknown message type"));
    //  Not even an array
    CHECK (sq_request_decode (&d, "\xc0", 1, &err) == -1);
    //  DELETE and PLACE (moving results by hand) round trip
    sq_request_t del = { .type = SQ_MSG_DELETE, .req = 7, .session = 2, .n_ids = 3, .ids = ids };
    sq_wbuf_reset (&w);
    sq_request_encode (&w, &del);
    CHECK (sq_request_decode (&d, w.buf.data, w.buf.size, &err) == 0);
    CHECK (d.type == SQ_MSG_DELETE && d.session == 2 && d.n_ids == 3 && d.ids [2] == UINT32_MAX);
    sq_request_release (&d);
    s_check_truncations ("delete", s_dec_request, w.buf.data, w.buf.size);
    sq_request_t place = { .type = SQ_MSG_PLACE, .req = 8, .session = 2, .id = 41, .n_ids = 2,
                           .ids = ids, .copies = 3, .flags = SQ_PLACE_MOVE, .timeout_ms = -1 };
    sq_wbuf_reset (&w);
    sq_request_encode (&w, &place);
    CHECK (sq_request_decode (&d, w.buf.data, w.buf.size, &err) == 0);
    CHECK (d.type == SQ_MSG_PLACE && d.id == 41 && d.n_ids == 2 && d.ids [1] == 70000
           && d.copies == 3 && d.flags == SQ_PLACE_MOVE && d.timeout_ms == -1);
    sq_request_release (&d);
    s_check_truncations ("place", s_dec_request, w.buf.data, w.buf.size);
    place.flags = 2;                    //  unknown flag
    sq_wbuf_reset (&w);
    sq_request_encode (&w, &place);
    CHECK (sq_request_decode (&d, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "'flags'") && d.ids == NULL);
    static uint32_t many [SQ_PLACE_MAX + 1];
    place.flags = 0;
    place.ids = many;
    place.n_ids = SQ_PLACE_MAX + 1;
    sq_wbuf_reset (&w);
    sq_request_encode (&w, &place);
    CHECK (sq_request_decode (&d, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "'governors'") && d.ids == NULL);
    //  LOG: round trip; attempt -1 (the latest) or one; stream 1 or 2
    sq_request_t log = { .type = SQ_MSG_LOG, .req = 9, .session = 2, .id = 77, .attempt = -1,
                         .stream = SQ_LOG_STDOUT };
    sq_wbuf_reset (&w);
    sq_request_encode (&w, &log);
    CHECK (sq_request_decode (&d, w.buf.data, w.buf.size, &err) == 0);
    CHECK (d.type == SQ_MSG_LOG && d.session == 2 && d.id == 77 && d.attempt == -1
           && d.stream == SQ_LOG_STDOUT);
    s_check_truncations ("log", s_dec_request, w.buf.data, w.buf.size);
    log.attempt = -2;
    sq_wbuf_reset (&w);
    sq_request_encode (&w, &log);
    CHECK (sq_request_decode (&d, w.buf.data, w.buf.size, &err) == -1 && strstr (err.text, "'attempt'"));
    log.attempt = (int64_t) UINT32_MAX + 1;
    sq_wbuf_reset (&w);
    sq_request_encode (&w, &log);
    CHECK (sq_request_decode (&d, w.buf.data, w.buf.size, &err) == -1);
    log.attempt = 3;
    log.stream = 0;
    sq_wbuf_reset (&w);
    sq_request_encode (&w, &log);
    CHECK (sq_request_decode (&d, w.buf.data, w.buf.size, &err) == -1 && strstr (err.text, "'stream'"));
    //  LOG's reply: attempt, state, where or nil
    {
        static const uint8_t key [32] = { 7 };
        sq_logwhere_t lw;
        sq_wbuf_reset (&w);
        sq_pack_logwhere_head (&w.pk, 2, "running");
        sq_pack_where (&w.pk, 5, "tcp://127.0.0.1:5000", key, key, 32);
        CHECK (sq_logwhere_decode (&lw, (const uint8_t *) w.buf.data, w.buf.size, &err) == 0);
        CHECK (lw.attempt == 2 && mpr_str_eq (lw.state, "running") && lw.located
               && lw.where.governor == 5 && lw.where.key.len == 32);
        sq_wbuf_reset (&w);
        sq_pack_logwhere_head (&w.pk, 0, "waiting");
        msgpack_pack_nil (&w.pk);
        CHECK (sq_logwhere_decode (&lw, (const uint8_t *) w.buf.data, w.buf.size, &err) == 0);
        CHECK (!lw.located && mpr_str_eq (lw.state, "waiting"));
        CHECK (sq_logwhere_decode (&lw, (const uint8_t *) w.buf.data, w.buf.size - 1, &err) == -1);
    }
    //  PLACE's reply: the holders, bounded by the caller's room
    uint32_t got [3], n_got = 9;
    sq_wbuf_reset (&w);
    sq_pack_holders (&w.pk, ids, 3);
    CHECK (sq_holders_decode ((const uint8_t *) w.buf.data, w.buf.size, got, 3, &n_got, &err) == 0
           && n_got == 3 && got [1] == 70000);
    CHECK (sq_holders_decode ((const uint8_t *) w.buf.data, w.buf.size, got, 2, &n_got, &err) == -1
           && n_got == 0);
    sq_wbuf_release (&w);
}

static void
s_test_submit (void)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_errbuf_t err;
    msgpack_packer *pk = &w.pk;
    sq_pack_submit_begin (pk, 11, 3);
    msgpack_pack_array (pk, 4);
    sq_pack_object_spec (pk, 1, SQ_OBJ_KEEP, "text/plain", 1, "input");
    sq_pack_object_spec (pk, 3, 0, "", -1, "");
    sq_pack_object_spec (pk, 4, SQ_OBJ_KEEP, "application/json", -1, "out");
    sq_pack_object_spec (pk, 6, 0, "", -1, "");
    msgpack_pack_array (pk, 2);
    uint32_t in1 [1] = { 1 }, out1 [2] = { 3, 4 };
    sq_resource_t res [2] = { { s_mstr ("cpus"), 2 }, { s_mstr ("gpus"), 1 } };
    const uint8_t config [] = { 0x81, 0xa7, 's', 'e', 'c', 'o', 'n', 'd', 's', 0xcb,
                                0x3f, 0xe0, 0, 0, 0, 0, 0, 0 };
    sq_task_spec_t t1 = {
        .id = 2, .kind = s_mstr ("sleep"), .n_inputs = 1, .inputs = in1,
        .n_outputs = 2, .outputs = out1, .config = config, .config_size = sizeof config,
        .n_resources = 2, .resources = res, .priority = -5, .max_retries = 3,
        .timeout_ms = 60000, .name = s_mstr ("nap")
    };
    sq_pack_task_spec (pk, &t1);
    uint32_t in2 [2] = { 3, 4 }, out2 [1] = { 6 }, govs2 [2] = { 7, 9 };
    sq_task_spec_t t2 = {
        .id = 5, .kind = s_mstr ("concat"), .n_inputs = 2, .inputs = in2,
        .n_outputs = 1, .outputs = out2, .priority = INT32_MAX, .name = s_mstr (""),
        .n_governors = 2, .governors = govs2, .loose = true
    };
    sq_pack_task_spec (pk, &t2);

    sq_submit_t s;
    CHECK (sq_submit_decode (&s, w.buf.data, w.buf.size, &err) == 0);
    CHECK (s.req == 11 && s.session == 3 && s.n_objects == 4 && s.n_tasks == 2);
    if (s.n_objects == 4 && s.n_tasks == 2) {
        CHECK (s.objects [0].id == 1 && s.objects [0].flags == SQ_OBJ_KEEP && s.objects [0].frame == 1);
        CHECK (mpr_str_eq (s.objects [0].content_type, "text/plain") && mpr_str_eq (s.objects [0].name, "input"));
        CHECK (s.objects [1].frame == -1 && s.objects [1].content_type.len == 0);
        CHECK (mpr_str_eq (s.objects [2].content_type, "application/json"));
        sq_task_spec_t *a = &s.tasks [0], *b = &s.tasks [1];
        CHECK (a->id == 2 && mpr_str_eq (a->kind, "sleep") && a->n_inputs == 1 && a->inputs [0] == 1);
        CHECK (a->n_outputs == 2 && a->outputs [0] == 3 && a->outputs [1] == 4);
        CHECK (a->config_size == sizeof config && memcmp (a->config, config, sizeof config) == 0);
        CHECK (a->n_resources == 2 && mpr_str_eq (a->resources [1].name, "gpus") && a->resources [0].amount == 2);
        CHECK (a->priority == -5 && a->max_retries == 3 && a->timeout_ms == 60000 && mpr_str_eq (a->name, "nap"));
        CHECK (b->id == 5 && b->n_inputs == 2 && b->inputs [1] == 4 && b->outputs [0] == 6);
        CHECK (b->config_size == 1 && b->config [0] == 0xc0);   //  nil passes as raw nil
        CHECK (b->n_resources == 0 && b->priority == INT32_MAX && b->name.len == 0);
        CHECK (a->n_governors == 0 && !a->loose);
        CHECK (b->n_governors == 2 && b->governors [0] == 7 && b->governors [1] == 9 && b->loose);
    }
    sq_submit_release (&s);
    CHECK (s.objects == NULL && s.tasks == NULL);
    s_check_truncations ("SUBMIT", s_dec_submit, w.buf.data, w.buf.size);

    //  Empty submit
    sq_wbuf_reset (&w);
    sq_pack_submit_begin (pk, 1, 1);
    msgpack_pack_array (pk, 0);
    msgpack_pack_array (pk, 0);
    CHECK (sq_submit_decode (&s, w.buf.data, w.buf.size, &err) == 0 && s.n_objects == 0 && s.n_tasks == 0);
    sq_submit_release (&s);

    //  Frame index out of range
    sq_wbuf_reset (&w);
    sq_pack_submit_begin (pk, 1, 1);
    msgpack_pack_array (pk, 1);
    sq_pack_object_spec (pk, 1, 0, "", -2, "");
    msgpack_pack_array (pk, 0);
    CHECK (sq_submit_decode (&s, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "object.frame"));
    sq_wbuf_reset (&w);
    sq_pack_submit_begin (pk, 1, 1);
    msgpack_pack_array (pk, 1);
    sq_pack_object_spec (pk, 1, 0, "", SQ_MAX_FRAMES, "");
    msgpack_pack_array (pk, 0);
    CHECK (sq_submit_decode (&s, w.buf.data, w.buf.size, &err) == -1);

    //  Object with a wrong field count
    sq_wbuf_reset (&w);
    sq_pack_submit_begin (pk, 1, 1);
    msgpack_pack_array (pk, 1);
    msgpack_pack_array (pk, 4);
    msgpack_pack_uint32 (pk, 1);
    msgpack_pack_uint32 (pk, 0);
    sq_pack_cstr (pk, "");
    msgpack_pack_int (pk, -1);
    msgpack_pack_array (pk, 0);
    CHECK (sq_submit_decode (&s, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "'object'") && strstr (err.text, "number of fields"));

    //  Task priority beyond 32 bits, oversized kind
    sq_wbuf_reset (&w);
    sq_pack_submit_begin (pk, 1, 1);
    msgpack_pack_array (pk, 0);
    msgpack_pack_array (pk, 1);
    msgpack_pack_array (pk, 10);
    msgpack_pack_uint32 (pk, 1);
    sq_pack_cstr (pk, "noop");
    msgpack_pack_array (pk, 0);
    msgpack_pack_array (pk, 0);
    msgpack_pack_nil (pk);
    msgpack_pack_nil (pk);
    msgpack_pack_int64 (pk, (int64_t) INT32_MAX + 1);
    msgpack_pack_uint32 (pk, 0);
    msgpack_pack_uint32 (pk, 0);
    sq_pack_cstr (pk, "");
    CHECK (sq_submit_decode (&s, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "task.priority"));

    //  Task options: governors, strict and loose; malformed ones refused
    //  naming the field.
    for (int c = 0; c < 10; c++) {
        sq_wbuf_reset (&w);
        sq_pack_submit_begin (pk, 1, 1);
        msgpack_pack_array (pk, 0);
        msgpack_pack_array (pk, 1);
        msgpack_pack_array (pk, c == 9? 13: 12);
        msgpack_pack_uint32 (pk, 1);
        sq_pack_cstr (pk, "noop");
        msgpack_pack_array (pk, 0);
        msgpack_pack_array (pk, 0);
        msgpack_pack_nil (pk);
        msgpack_pack_nil (pk);
        msgpack_pack_int32 (pk, 0);
        msgpack_pack_uint32 (pk, 0);
        msgpack_pack_uint32 (pk, 0);
        sq_pack_cstr (pk, "");
        msgpack_pack_nil (pk);                      //  no array
        uint32_t n_keys = c == 0 || c == 3 || c == 4 || c == 5 || c == 8? 1: c == 7? 0: 2;
        msgpack_pack_map (pk, n_keys);
        if (c != 7 && c != 8) {
            sq_pack_cstr (pk, "governors");
            uint32_t n = c == 3? 0: c == 5? SQ_MAX_TASK_GOVERNORS + 1: 2;
            msgpack_pack_array (pk, n);
            for (uint32_t g = 0; g < n; g++)
                msgpack_pack_uint32 (pk, c == 4 && g == 1? 0: 3 + g);
        }
        if (c == 1)  { sq_pack_cstr (pk, "loose"); msgpack_pack_false (pk); }
        if (c == 2)  { sq_pack_cstr (pk, "loose"); msgpack_pack_uint32 (pk, 1); }
        if (c == 6)  { sq_pack_cstr (pk, "where"); msgpack_pack_true (pk); }
        if (c == 8)  { sq_pack_cstr (pk, "loose"); msgpack_pack_true (pk); }
        if (c == 9)  msgpack_pack_nil (pk);
        int rc = sq_submit_decode (&s, w.buf.data, w.buf.size, &err);
        if (c <= 1) {
            CHECK (rc == 0 && s.n_tasks == 1 && s.tasks [0].n_governors == 2);
            CHECK (rc != 0 || (s.tasks [0].governors [0] == 3 && s.tasks [0].governors [1] == 4
                               && !s.tasks [0].loose));
            sq_submit_release (&s);
            if (c == 0)
                s_check_truncations ("SUBMIT options", s_dec_submit, w.buf.data, w.buf.size);
        }
        else {
            CHECK (rc == -1);
            CHECK (c == 9? strstr (err.text, "task") != NULL: strstr (err.text, "task.options") != NULL);
        }
    }

    char *big = (char *) malloc (SQ_MAX_NAME + 2);
    memset (big, 'k', SQ_MAX_NAME + 1);
    big [SQ_MAX_NAME + 1] = 0;
    sq_task_spec_t t3 = { .id = 1, .kind = s_mstr (big), .name = s_mstr ("") };
    sq_wbuf_reset (&w);
    sq_pack_submit_begin (pk, 1, 1);
    msgpack_pack_array (pk, 0);
    msgpack_pack_array (pk, 1);
    sq_pack_task_spec (pk, &t3);
    CHECK (sq_submit_decode (&s, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "task.kind") && strstr (err.text, "too long"));
    free (big);

    //  Hostile counts: a task array declaring more tasks than bytes
    const uint8_t bomb [] = { 0x95, 0x0c, 0x01, 0x01, 0x90, 0xdd, 0xff, 0xff, 0xff, 0xff };
    CHECK (sq_submit_decode (&s, bomb, sizeof bomb, &err) == -1);
    CHECK (strstr (err.text, "tasks"));
    sq_wbuf_release (&w);
}


//  A SUBMIT whose tasks' lists fill several of the decoder's blocks: every
//  list read whole where it was put; an uploaded constant's frame
static void
s_test_submit_many (void)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_errbuf_t err;
    enum { TASKS = 700 };
    sq_pack_submit_begin (&w.pk, 2, 5);
    sq_pack_submit_objects (&w.pk, 2);
    sq_pack_object_uploaded (&w.pk, 1, SQ_OBJ_KEEP, "text/plain", 7, 1u << 20, "up");
    sq_pack_object_spec (&w.pk, 2, 0, "", -1, "");
    sq_pack_submit_tasks (&w.pk, TASKS);
    sq_resource_t res [3] = { { s_mstr ("cpus"), 2 }, { s_mstr ("memory"), 1u << 30 },
                              { s_mstr ("disk"), 5 } };
    for (uint32_t i = 0; i < TASKS; i++) {
        uint32_t ins [3] = { i, i + 1, i + 2 }, outs [2] = { 10000 + i, 20000 + i };
        uint32_t govs [2] = { 1 + i, 2 + i };
        sq_task_spec_t t = { .id = 100000 + i, .kind = s_mstr ("noop"), .n_inputs = i % 4,
                             .inputs = ins, .n_outputs = 2, .outputs = outs,
                             .n_resources = i % 4, .resources = res,
                             .name = s_mstr (""), .n_governors = i % 3, .governors = govs };
        sq_pack_task_spec (&w.pk, &t);
    }
    sq_submit_t s;
    CHECK (sq_submit_decode (&s, w.buf.data, w.buf.size, &err) == 0);
    CHECK (s.n_objects == 2 && s.objects [0].frame == SQ_FRAME_UPLOADED && s.objects [0].uploaded
           && s.objects [0].governor == 7 && s.objects [0].size == 1u << 20
           && s.objects [1].frame == -1 && !s.objects [1].uploaded);
    uint32_t wrong = s.n_tasks == TASKS? 0: 1;
    for (uint32_t i = 0; i < s.n_tasks; i++) {
        sq_task_spec_t *t = &s.tasks [i];
        wrong += t->id != 100000 + i || t->n_inputs != i % 4 || t->n_outputs != 2
              || t->n_resources != (i % 4 == 3? 3: i % 4) || t->n_governors != i % 3;
        for (uint32_t j = 0; j < t->n_inputs; j++)
            wrong += t->inputs [j] != i + j;
        wrong += t->outputs [0] != 10000 + i || t->outputs [1] != 20000 + i;
        for (uint32_t j = 0; j < t->n_resources; j++)
            wrong += !mpr_str_eq (t->resources [j].name, j == 0? "cpus": j == 1? "memory": "disk")
                  || t->resources [j].amount != res [j].amount;
        for (uint32_t j = 0; j < t->n_governors; j++)
            wrong += t->governors [j] != 1 + i + j;
    }
    CHECK (wrong == 0);
    //  Packed again from what was read: the same bytes
    sq_wbuf_t again;
    sq_wbuf_init (&again);
    sq_msg_encode (&again, SQ_MSG_SUBMIT, &s);
    CHECK (again.buf.size == w.buf.size && memcmp (again.buf.data, w.buf.data, w.buf.size) == 0);
    sq_wbuf_release (&again);
    sq_submit_release (&s);
    CHECK (s.blocks == NULL && s.tasks == NULL);
    sq_wbuf_release (&w);
}

//  RUN's reply and answers, as read back
static int s_ran_seen;

static int
s_ran_where (void *arg, uint64_t run, uint32_t gov, uint32_t answers, uint64_t size,
             const sq_where_t *where)
{
    (void) arg;
    CHECK (run == 12);
    if (gov == 3)
        CHECK (answers == 2 && size == 4u << 20 && mpr_str_eq (where->endpoint, "tcp://127.0.0.1:5001")
               && where->key.len == 32 && where->capability.len == SQ_CAP_SIZE);
    else
        CHECK (gov == 4 && answers == 0 && size == 0 && where->endpoint.len == 0
               && where->key.len == 0 && where->capability.len == 0);
    s_ran_seen++;
    return 0;
}

static int
s_ran_item (void *arg, uint64_t pid, bool ok, mpr_str_t bytes)
{
    (void) arg;
    CHECK ((pid == 100 && ok && bytes.len == 2 && memcmp (bytes.ptr, "ok", 2) == 0)
        || (pid == 101 && !ok && bytes.len == 2 && memcmp (bytes.ptr, "no", 2) == 0));
    s_ran_seen++;
    return 0;
}

static void
s_test_update (void)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_errbuf_t err;
    sq_batch_header (&w, SQ_MSG_UPDATE, 9);
    sq_output_ref_t outs [2] = { { sq_key (1, 3), 100, 1 }, { sq_key (1, 4), 1ull << 40, -1 } };
    sq_pack_finished (&w.pk, sq_key (1, 2), 1, outs, 2, 1234);
    sq_pack_failed (&w.pk, sq_key (1, 5), 2, "exit code 1", 99);
    sq_pack_started (&w.pk, sq_key (2, 1), 3);
    sq_pack_located (&w.pk, sq_key (2, 2), 77);
    sq_pack_located_in (&w.pk, sq_key (2, 5), 5ull << 30, 4321);
    sq_pack_lost (&w.pk, sq_key (2, 3));
    sq_pack_uploaded (&w.pk, sq_key (2, 4), 1ull << 33);
    sq_pack_finished (&w.pk, sq_key (1, 9), 1, NULL, 0, 0);
    sq_pack_streamlocal (&w.pk, sq_key (2, 6));

    sq_iter_t it;
    sq_event_t ev;
    CHECK (sq_update_begin (&it, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_update_next (&it, &ev) == 1);
    CHECK (ev.type == SQ_EV_FINISHED && ev.key == sq_key (1, 2) && ev.attempt == 1 && ev.duration_us == 1234);
    CHECK (ev.n_outputs == 2 && ev.outputs [0].key == sq_key (1, 3) && ev.outputs [0].frame == 1);
    CHECK (ev.outputs [1].size == 1ull << 40 && ev.outputs [1].frame == -1);
    CHECK (sq_update_next (&it, &ev) == 1);
    CHECK (ev.type == SQ_EV_FAILED && ev.attempt == 2 && mpr_str_eq (ev.message, "exit code 1") && ev.duration_us == 99);
    CHECK (sq_update_next (&it, &ev) == 1);
    CHECK (ev.type == SQ_EV_STARTED && ev.key == sq_key (2, 1) && ev.attempt == 3);
    CHECK (sq_update_next (&it, &ev) == 1);
    CHECK (ev.type == SQ_EV_LOCATED && ev.size == 77 && ev.duration_us == 0);
    CHECK (sq_update_next (&it, &ev) == 1);
    CHECK (ev.type == SQ_EV_LOCATED && ev.key == sq_key (2, 5) && ev.size == 5ull << 30
           && ev.duration_us == 4321);
    CHECK (sq_update_next (&it, &ev) == 1);
    CHECK (ev.type == SQ_EV_LOST && ev.key == sq_key (2, 3));
    CHECK (sq_update_next (&it, &ev) == 1);
    CHECK (ev.type == SQ_EV_UPLOADED && ev.key == sq_key (2, 4) && ev.size == 1ull << 33);
    CHECK (sq_update_next (&it, &ev) == 1);
    CHECK (ev.type == SQ_EV_FINISHED && ev.n_outputs == 0);
    CHECK (sq_update_next (&it, &ev) == 1);
    CHECK (ev.type == SQ_EV_STREAMLOCAL && ev.key == sq_key (2, 6));
    CHECK (sq_update_next (&it, &ev) == 0);
    sq_iter_release (&it);
    s_check_truncations ("UPDATE", s_dec_update, w.buf.data, w.buf.size);
    //  STREAMLOCAL has its object only
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    msgpack_pack_array (&w.pk, 3);
    msgpack_pack_uint32 (&w.pk, SQ_EV_STREAMLOCAL);
    msgpack_pack_uint64 (&w.pk, sq_key (2, 6));
    msgpack_pack_uint64 (&w.pk, 5);
    CHECK (sq_update_begin (&it, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_update_next (&it, &ev) == -1);
    sq_iter_release (&it);
    //  LOCATED's optional `local` (LCOPY): after duration_us, read back;
    //  false where absent
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 2);
    sq_pack_located_local (&w.pk, sq_key (2, 7), 3ull << 20);
    sq_pack_located_in (&w.pk, sq_key (2, 8), 9, 12);
    CHECK (sq_update_begin (&it, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_update_next (&it, &ev) == 1);
    CHECK (ev.type == SQ_EV_LOCATED && ev.key == sq_key (2, 7) && ev.size == 3ull << 20
           && ev.duration_us == 0 && ev.local);
    CHECK (sq_update_next (&it, &ev) == 1);
    CHECK (ev.type == SQ_EV_LOCATED && ev.duration_us == 12 && !ev.local);
    sq_iter_release (&it);
    s_check_truncations ("UPDATE located local", s_dec_update, w.buf.data, w.buf.size);
    //  UPLOADED's optional `local` (PUTLOCAL): true read back, absent when
    //  false, anything but a bool refused
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 2);
    sq_pack_uploaded_local (&w.pk, sq_key (2, 4), 1ull << 20);
    sq_pack_uploaded (&w.pk, sq_key (2, 5), 7);
    CHECK (sq_update_begin (&it, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_update_next (&it, &ev) == 1);
    CHECK (ev.type == SQ_EV_UPLOADED && ev.key == sq_key (2, 4) && ev.size == 1ull << 20 && ev.local);
    CHECK (sq_update_next (&it, &ev) == 1);
    CHECK (ev.type == SQ_EV_UPLOADED && ev.key == sq_key (2, 5) && !ev.local);
    sq_iter_release (&it);
    s_check_truncations ("UPDATE local", s_dec_update, w.buf.data, w.buf.size);
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    msgpack_pack_array (&w.pk, 4);
    msgpack_pack_uint32 (&w.pk, SQ_EV_UPLOADED);
    msgpack_pack_uint64 (&w.pk, sq_key (2, 4));
    msgpack_pack_uint64 (&w.pk, 5);
    msgpack_pack_uint64 (&w.pk, 1);
    CHECK (sq_update_begin (&it, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_update_next (&it, &ev) == -1);
    sq_iter_release (&it);

    //  A nested task gives its cpus back while it waits, and takes them again
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 3);
    sq_pack_seceded (&w.pk, sq_key (3, 1), 2, true);
    sq_pack_seceded (&w.pk, sq_key (3, 1), 2, false);
    uint8_t pub [32];
    for (int i = 0; i < 32; i++)
        pub [i] = (uint8_t) (i * 7);
    sq_pack_taskkey (&w.pk, sq_key (3, 2), 1, pub);
    CHECK (sq_update_begin (&it, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_update_next (&it, &ev) == 1);
    CHECK (ev.type == SQ_EV_SECEDED && ev.key == sq_key (3, 1) && ev.attempt == 2 && ev.seceded);
    CHECK (sq_update_next (&it, &ev) == 1);
    CHECK (ev.type == SQ_EV_SECEDED && ev.key == sq_key (3, 1) && ev.attempt == 2 && !ev.seceded);
    CHECK (sq_update_next (&it, &ev) == 1);
    CHECK (ev.type == SQ_EV_TASKKEY && ev.key == sq_key (3, 2) && ev.attempt == 1
           && ev.public_key.len == 32 && memcmp (ev.public_key.ptr, pub, 32) == 0);
    CHECK (sq_update_next (&it, &ev) == 0);
    sq_iter_release (&it);
    s_check_truncations ("UPDATE", s_dec_update, w.buf.data, w.buf.size);
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    msgpack_pack_array (&w.pk, 2);
    msgpack_pack_uint32 (&w.pk, SQ_EV_SECEDED);
    msgpack_pack_uint32 (&w.pk, 1);
    CHECK (s_dec_update (w.buf.data, w.buf.size, &err) == -1 && strstr (err.text, "number of fields"));
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    msgpack_pack_array (&w.pk, 4);
    msgpack_pack_uint32 (&w.pk, SQ_EV_TASKKEY);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_bin (&w.pk, 31);
    msgpack_pack_bin_body (&w.pk, pub, 31);
    CHECK (s_dec_update (w.buf.data, w.buf.size, &err) == -1 && strstr (err.text, "32 bytes"));

    //  RESTART: REFRESHED counts the REFRESHes done; and RESTART's timeout
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    sq_pack_refreshed (&w.pk, 7);
    CHECK (sq_update_begin (&it, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_update_next (&it, &ev) == 1);
    CHECK (ev.type == SQ_EV_REFRESHED && ev.key == 7);
    CHECK (sq_update_next (&it, &ev) == 0);
    sq_iter_release (&it);
    s_check_truncations ("UPDATE", s_dec_update, w.buf.data, w.buf.size);
    {
        sq_request_t restart = { .type = SQ_MSG_RESTART, .req = 4, .timeout_ms = 1500 }, back;
        sq_wbuf_reset (&w);
        sq_request_encode (&w, &restart);
        CHECK (sq_request_decode (&back, w.buf.data, w.buf.size, &err) == 0);
        CHECK (back.type == SQ_MSG_RESTART && back.req == 4 && back.timeout_ms == 1500);
        sq_request_release (&back);
        //  [88, req] alone: 0, the default wait (the broker's)
        sq_wbuf_reset (&w);
        msgpack_pack_array (&w.pk, 2);
        msgpack_pack_uint32 (&w.pk, SQ_MSG_RESTART);
        msgpack_pack_uint32 (&w.pk, 5);
        CHECK (sq_request_decode (&back, w.buf.data, w.buf.size, &err) == 0);
        CHECK (back.timeout_ms == 0);
        sq_request_release (&back);
    }

    //  RUN: the request, GRUN to a governor, its RAN results checked and
    //  kept raw (forwarded as they are into RUN's reply)
    {
        sq_request_t run = { .type = SQ_MSG_RUN, .req = 6, .timeout_ms = 900,
                             .fn = { "pickled", 7 } }, back;
        sq_wbuf_reset (&w);
        sq_request_encode (&w, &run);
        CHECK (sq_request_decode (&back, w.buf.data, w.buf.size, &err) == 0);
        CHECK (back.type == SQ_MSG_RUN && back.req == 6 && back.timeout_ms == 900
               && back.fn.len == 7 && memcmp (back.fn.ptr, "pickled", 7) == 0);
        sq_request_release (&back);
        s_check_truncations ("RUN", s_dec_request, w.buf.data, w.buf.size);

        sq_grun_t g = { .run = 12, .tenant = { "acme", 4 }, .fn = { "f", 1 } }, gb;
        sq_wbuf_reset (&w);
        sq_grun_encode (&w, &g);
        CHECK (sq_grun_decode (&gb, w.buf.data, w.buf.size, &err) == 0);
        CHECK (gb.run == 12 && mpr_str_eq (gb.tenant, "acme") && gb.fn.len == 1);

        //  RAN [19, run, answers, size]: the answers stay on the governor
        sq_wbuf_reset (&w);
        sq_batch_header (&w, SQ_MSG_UPDATE, 2);
        sq_pack_ran (&w.pk, 12, 2, 4u << 20);
        sq_pack_ran (&w.pk, 13, 0, 0);          //  no executor of the tenant
        CHECK (sq_update_begin (&it, w.buf.data, w.buf.size, &err) == 0);
        CHECK (sq_update_next (&it, &ev) == 1);
        CHECK (ev.type == SQ_EV_RAN && ev.key == 12 && ev.attempt == 2 && ev.size == 4u << 20);
        CHECK (sq_update_next (&it, &ev) == 1);
        CHECK (ev.type == SQ_EV_RAN && ev.key == 13 && ev.attempt == 0 && ev.size == 0);
        CHECK (sq_update_next (&it, &ev) == 0);
        sq_iter_release (&it);
        s_check_truncations ("UPDATE", s_dec_update, w.buf.data, w.buf.size);
        //  Over the bounds: more than 256 answers, more than a governor keeps
        for (int which = 0; which < 2; which++) {
            sq_wbuf_reset (&w);
            sq_batch_header (&w, SQ_MSG_UPDATE, 1);
            sq_pack_ran (&w.pk, 1, which? 1: SQ_RUN_EXECS_MAX + 1,
                         which? SQ_RUN_RESULTS_MAX + 1ull: 1);
            CHECK (s_dec_update (w.buf.data, w.buf.size, &err) == -1);
            CHECK (strstr (err.text, which? "over the answers' bound": "more than 256 executors"));
        }

        //  RUN's reply: [run, {governor: [answers, size, where]}]
        uint8_t key [32], cap [SQ_CAP_SIZE];
        memset (key, 7, sizeof key);
        memset (cap, 9, sizeof cap);
        sq_wbuf_reset (&w);
        sq_reply_begin_ran (&w, 6, 12, 2);
        sq_pack_ran_where (&w.pk, 3, 2, 4u << 20, "tcp://127.0.0.1:5001", key, cap, sizeof cap);
        sq_pack_ran_where (&w.pk, 4, 0, 0, "", NULL, NULL, 0);     //  gone since
        sq_reply_t reply;
        CHECK (sq_reply_decode (&reply, w.buf.data, w.buf.size, &err) == 0 && reply.req == 6);
        s_ran_seen = 0;
        uint64_t run_id = 0;
        CHECK (sq_ran_reply_each (reply.body, reply.body_size, &run_id, s_ran_where, NULL, &err) == 0);
        CHECK (run_id == 12 && s_ran_seen == 2);
        //  Truncated anywhere: refused
        for (size_t cut = 0; cut < reply.body_size; cut++)
            CHECK (sq_ran_reply_each (reply.body, cut, &run_id, s_ran_where, NULL, &err) == -1);
        //  A governor claiming more than it may keep: refused
        sq_wbuf_reset (&w);
        sq_reply_begin_ran (&w, 6, 12, 1);
        sq_pack_ran_where (&w.pk, 3, 2, SQ_RUN_RESULTS_MAX + 1ull, "tcp://x:1", NULL, NULL, 0);
        CHECK (sq_reply_decode (&reply, w.buf.data, w.buf.size, &err) == 0);
        CHECK (sq_ran_reply_each (reply.body, reply.body_size, &run_id, s_ran_where, NULL, &err) == -1
               && strstr (err.text, "bounds"));

        //  The answers RUNREAD reads: an array of [pid, ok, bytes]
        sq_wbuf_t res;
        sq_wbuf_init (&res);
        msgpack_pack_array (&res.pk, 2);
        sq_pack_ran_result (&res.pk, 100, true, "ok", 2);
        sq_pack_ran_result (&res.pk, 101, false, "no", 2);
        s_ran_seen = 0;
        CHECK (sq_ran_results_each (res.buf.data, res.buf.size, s_ran_item, NULL, &err) == 0
               && s_ran_seen == 2);
        for (size_t cut = 0; cut < res.buf.size; cut++)
            CHECK (sq_ran_results_each (res.buf.data, cut, s_ran_item, NULL, &err) == -1);
        //  An answer that is not [pid, ok, bin]: refused
        sq_wbuf_reset (&res);
        msgpack_pack_array (&res.pk, 1);
        msgpack_pack_array (&res.pk, 3);
        msgpack_pack_uint32 (&res.pk, 1);
        msgpack_pack_uint32 (&res.pk, 1);
        msgpack_pack_bin (&res.pk, 0);
        CHECK (sq_ran_results_each (res.buf.data, res.buf.size, s_ran_item, NULL, &err) == -1
               && strstr (err.text, "field 'ok'"));
        sq_wbuf_release (&res);

        //  RUNREAD: a range of a run's answers, at most SQ_LOGREAD_MAX
        sq_runread_t rr = { 9, 12, 4u << 20, SQ_LOGREAD_MAX, { (const char *) cap, sizeof cap } }, rb;
        sq_wbuf_reset (&w);
        sq_runread_encode (&w, &rr);
        CHECK (sq_runread_decode (&rb, w.buf.data, w.buf.size, &err) == 0);
        CHECK (rb.req == 9 && rb.run == 12 && rb.offset == 4u << 20 && rb.length == SQ_LOGREAD_MAX
               && rb.capability.len == sizeof cap);
        rr.length = SQ_LOGREAD_MAX + 1;
        sq_wbuf_reset (&w);
        sq_runread_encode (&w, &rr);
        CHECK (sq_runread_decode (&rb, w.buf.data, w.buf.size, &err) == -1
               && strstr (err.text, "longer than a read may be"));
    }

    //  Unknown event type, wrong count for a type
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    msgpack_pack_array (&w.pk, 2);
    msgpack_pack_uint32 (&w.pk, 99);
    msgpack_pack_uint32 (&w.pk, 1);
    CHECK (s_dec_update (w.buf.data, w.buf.size, &err) == -1 && strstr (err.text, "unknown event"));
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    msgpack_pack_array (&w.pk, 3);
    msgpack_pack_uint32 (&w.pk, SQ_EV_LOST);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, 1);
    CHECK (s_dec_update (w.buf.data, w.buf.size, &err) == -1 && strstr (err.text, "number of fields"));
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    msgpack_pack_array (&w.pk, 2);
    msgpack_pack_uint32 (&w.pk, SQ_EV_UPLOADED);
    msgpack_pack_uint32 (&w.pk, 1);
    CHECK (s_dec_update (w.buf.data, w.buf.size, &err) == -1 && strstr (err.text, "number of fields"));
    //  LOCATED: 3 to 5 fields, no more; its duration a uint
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    msgpack_pack_array (&w.pk, 6);
    msgpack_pack_uint32 (&w.pk, SQ_EV_LOCATED);
    for (int i = 0; i < 5; i++)
        msgpack_pack_uint32 (&w.pk, 1);
    CHECK (s_dec_update (w.buf.data, w.buf.size, &err) == -1 && strstr (err.text, "number of fields"));
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    msgpack_pack_array (&w.pk, 4);
    msgpack_pack_uint32 (&w.pk, SQ_EV_LOCATED);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_int32 (&w.pk, -1);
    CHECK (s_dec_update (w.buf.data, w.buf.size, &err) == -1 && strstr (err.text, "duration"));
    sq_wbuf_release (&w);
}

static void
s_test_governor_messages (void)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_errbuf_t err;

    //  LOAD
    sq_load_t load = { 1, 2, 3ull << 33, 4, 5, 6, 7, 8 }, l;
    sq_load_encode (&w, &load);
    CHECK (sq_load_decode (&l, w.buf.data, w.buf.size, &err) == 0);
    CHECK (l.running == 1 && l.queued == 2 && l.memory == 3ull << 33 && l.spilled == 4 && l.objects == 5
           && l.tasks == 6 && l.piped == 7 && l.shared == 8);
    s_check_truncations ("LOAD", s_dec_load, w.buf.data, w.buf.size);
    //  shared is optional: absent when 0, read as 0 from a governor without it.
    sq_wbuf_reset (&w);
    load.shared = 0;
    sq_load_encode (&w, &load);
    CHECK (sq_load_decode (&l, w.buf.data, w.buf.size, &err) == 0 && l.shared == 0 && l.piped == 7);
    CHECK (((const uint8_t *) w.buf.data) [0] == 0x98);     //  an array of 8: no shared

    //  HEARTBEAT, BYE
    sq_wbuf_reset (&w);
    sq_bare_encode (&w, SQ_MSG_HEARTBEAT);
    CHECK (sq_bare_decode (w.buf.data, w.buf.size, SQ_MSG_HEARTBEAT, &err) == 0);
    CHECK (sq_bare_decode (w.buf.data, w.buf.size, SQ_MSG_BYE, &err) == -1);
    s_check_truncations ("HEARTBEAT", s_dec_heartbeat, w.buf.data, w.buf.size);

    //  REFRESH [52, tenant]
    sq_wbuf_reset (&w);
    sq_refresh_encode (&w, "acme");
    mpr_str_t tenant;
    CHECK (sq_refresh_decode (w.buf.data, w.buf.size, &tenant, &err) == 0
           && mpr_str_eq (tenant, "acme"));
    CHECK (sq_bare_decode (w.buf.data, w.buf.size, SQ_MSG_LEAVE, &err) == -1);
    s_check_truncations ("REFRESH", s_dec_refresh, w.buf.data, w.buf.size);
    sq_wbuf_reset (&w);
    sq_refresh_encode (&w, NULL);               //  without keys: ""
    CHECK (sq_refresh_decode (w.buf.data, w.buf.size, &tenant, &err) == 0 && tenant.len == 0);
    sq_wbuf_reset (&w);
    msgpack_pack_array (&w.pk, 2);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_REFRESH);
    msgpack_pack_uint32 (&w.pk, 7);
    CHECK (sq_refresh_decode (w.buf.data, w.buf.size, &tenant, &err) == -1
           && strstr (err.text, "tenant"));
    sq_wbuf_reset (&w);
    sq_bare_encode (&w, SQ_MSG_REFRESH);
    CHECK (sq_refresh_decode (w.buf.data, w.buf.size, &tenant, &err) == -1);
    //  A NUL inside the tenant (the governor uses it as a C string): refused
    //  (found by fuzz_proto's round trip).
    sq_wbuf_reset (&w);
    msgpack_pack_array (&w.pk, 2);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_REFRESH);
    msgpack_pack_str (&w.pk, 3);
    msgpack_pack_str_body (&w.pk, "a\0b", 3);
    CHECK (sq_refresh_decode (w.buf.data, w.buf.size, &tenant, &err) == -1
           && strstr (err.text, "NUL"));

    //  ASSIGN
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_ASSIGN, 2);
    sq_input_ref_t ins [3] = {
        { sq_key (1, 1), 10, 1, s_mstr ("text/plain") },
        { sq_key (1, 3), 1ull << 35, -1, s_mstr ("") },
        { sq_key (1, 6), 0, SQ_FRAME_STREAM, s_mstr ("") }
    };
    sq_out_decl_t outs [2] = { { sq_key (1, 5), s_mstr ("application/x"), false, 0 },
                               { sq_key (1, 7), s_mstr (""), true, 3 } };
    const uint8_t config [] = { 0x80 };
    sq_assign_t a = {
        .key = sq_key (1, 4), .attempt = 2, .kind = s_mstr ("concat"),
        .config = config, .config_size = 1, .n_inputs = 3, .inputs = ins,
        .n_outputs = 2, .outputs = outs, .cpus = 4, .timeout_ms = 1000, .name = s_mstr ("cat"),
        .tenant = s_mstr ("team-a")
    };
    sq_pack_assign (&w.pk, &a);
    sq_assign_t b = { .key = sq_key (2, 1), .kind = s_mstr ("noop"), .name = s_mstr ("") };
    sq_pack_assign (&w.pk, &b);
    sq_iter_t it;
    sq_assign_t t;
    CHECK (sq_assign_begin (&it, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_assign_next (&it, &t) == 1);
    CHECK (t.key == sq_key (1, 4) && t.attempt == 2 && mpr_str_eq (t.kind, "concat"));
    CHECK (t.config_size == 1 && t.config [0] == 0x80);
    CHECK (t.n_inputs == 3 && t.inputs [0].frame == 1 && t.inputs [1].size == 1ull << 35 && t.inputs [1].frame == -1);
    CHECK (t.inputs [2].frame == SQ_FRAME_STREAM);
    CHECK (mpr_str_eq (t.inputs [0].content_type, "text/plain"));
    CHECK (t.n_outputs == 2 && t.outputs [0].key == sq_key (1, 5) && mpr_str_eq (t.outputs [0].content_type, "application/x"));
    CHECK (!t.outputs [0].stream && t.outputs [1].stream && t.outputs [1].consumers == 3);
    CHECK (t.cpus == 4 && t.timeout_ms == 1000 && mpr_str_eq (t.name, "cat"));
    CHECK (mpr_str_eq (t.tenant, "team-a"));
    CHECK (sq_assign_next (&it, &t) == 1);
    CHECK (t.key == sq_key (2, 1) && t.n_inputs == 0 && t.n_outputs == 0 && t.config [0] == 0xc0);
    CHECK (t.tenant.len == 0);
    CHECK (sq_assign_next (&it, &t) == 0);
    sq_iter_release (&it);
    s_check_truncations ("ASSIGN", s_dec_assign, w.buf.data, w.buf.size);

    //  SEND
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_SEND, 2);
    sq_pack_send (&w.pk, sq_key (1, 1), 3, 7, "tcp://h:9", NULL);
    sq_pack_send (&w.pk, sq_key (1, 2), 1, 8, "ipc:///x", NULL);
    sq_send_t o;
    CHECK (sq_batch_begin (&it, SQ_MSG_SEND, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_batch_next (&it, SQ_MSG_SEND, &o) == 1);
    CHECK (o.key == sq_key (1, 1) && o.version == 3 && o.to == 7 && mpr_str_eq (o.endpoint, "tcp://h:9"));
    CHECK (sq_batch_next (&it, SQ_MSG_SEND, &o) == 1 && o.to == 8);
    CHECK (sq_batch_next (&it, SQ_MSG_SEND, &o) == 0);
    sq_iter_release (&it);
    s_check_truncations ("SEND", s_dec_send, w.buf.data, w.buf.size);

    //  STREAM, UNSTREAM
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_STREAM, 2);
    uint8_t skey [32] = { 7 };
    sq_pack_stream (&w.pk, sq_key (1, 7), 2, sq_key (1, 8), 4, "tcp://h:1", skey);
    sq_pack_stream (&w.pk, sq_key (1, 7), 2, sq_key (1, 9), 5, "tcp://h:2", NULL);
    sq_stream_order_t so;
    CHECK (sq_batch_begin (&it, SQ_MSG_STREAM, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_batch_next (&it, SQ_MSG_STREAM, &so) == 1);
    CHECK (so.key == sq_key (1, 7) && so.version == 2 && so.consumer == sq_key (1, 8) && so.to == 4);
    CHECK (mpr_str_eq (so.endpoint, "tcp://h:1") && so.to_key.len == 32 && so.to_key.ptr [0] == 7);
    CHECK (sq_batch_next (&it, SQ_MSG_STREAM, &so) == 1 && so.to_key.len == 0 && so.to == 5);
    CHECK (sq_batch_next (&it, SQ_MSG_STREAM, &so) == 0);
    sq_iter_release (&it);
    s_check_truncations ("STREAM", s_dec_stream, w.buf.data, w.buf.size);
    //  An UNSTREAM is not a STREAM
    CHECK (sq_batch_begin (&it, SQ_MSG_UNSTREAM, w.buf.data, w.buf.size, &err) == -1);
    sq_iter_release (&it);
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_UNSTREAM, 1);
    sq_pack_unstream (&w.pk, sq_key (1, 7), 2, sq_key (1, 9));
    CHECK (sq_batch_begin (&it, SQ_MSG_UNSTREAM, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_batch_next (&it, SQ_MSG_UNSTREAM, &so) == 1 && so.consumer == sq_key (1, 9) && so.to == 0);
    CHECK (sq_batch_next (&it, SQ_MSG_UNSTREAM, &so) == 0);
    sq_iter_release (&it);
    //  An UNSTREAM order read as a STREAM's (6 fields) is refused
    CHECK (sq_batch_begin (&it, SQ_MSG_UNSTREAM, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_batch_next (&it, SQ_MSG_STREAM, &so) == -1);
    sq_iter_release (&it);

    //  SCHUNK, SCREDIT
    sq_wbuf_reset (&w);
    sq_schunk_t sc = { sq_key (1, 7), 2, sq_key (1, 8), 1ull << 40, true, 3, s_mstr ("tcp://p:1"),
                       { NULL, 0 } }, sc2;
    sq_schunk_encode (&w, &sc);
    CHECK (sq_schunk_decode (&sc2, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sc2.key == sc.key && sc2.version == 2 && sc2.consumer == sc.consumer
           && sc2.offset == 1ull << 40 && sc2.end && sc2.from == 3 && mpr_str_eq (sc2.reply_to, "tcp://p:1"));
    s_check_truncations ("SCHUNK", s_dec_schunk, w.buf.data, w.buf.size);
    sq_wbuf_reset (&w);
    sq_scredit_t cr = { sq_key (1, 7), 2, sq_key (1, 8), 0 }, cr2;
    sq_scredit_encode (&w, &cr);
    CHECK (sq_scredit_decode (&cr2, w.buf.data, w.buf.size, &err) == 0);
    CHECK (cr2.key == cr.key && cr2.version == 2 && cr2.consumer == cr.consumer && cr2.credits == 0);
    s_check_truncations ("SCREDIT", s_dec_scredit, w.buf.data, w.buf.size);
    CHECK (sq_schunk_decode (&sc2, w.buf.data, w.buf.size, &err) == -1);
    //  SCHUNK's optional token (same-host path): 16 bytes, no other length
    sq_wbuf_reset (&w);
    sc.token = (mpr_str_t) { "0123456789abcdef", 16 };
    sq_schunk_encode (&w, &sc);
    CHECK (sq_schunk_decode (&sc2, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sc2.token.len == 16 && memcmp (sc2.token.ptr, "0123456789abcdef", 16) == 0);
    s_check_truncations ("SCHUNK token", s_dec_schunk, w.buf.data, w.buf.size);
    sq_wbuf_reset (&w);
    sc.token = (mpr_str_t) { "0123456789abcde", 15 };
    sq_schunk_encode (&w, &sc);
    CHECK (sq_schunk_decode (&sc2, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "token") != NULL);
    //  PUTLOCAL: its token is 16 bytes, no other length, and it is not optional
    sq_wbuf_reset (&w);
    sq_putlocal_t pl = { 9, sq_key (3, 4), 1ull << 26, s_mstr ("py/pickle"), { "cap", 3 },
                         { "0123456789abcdef", 16 } }, pl2;
    sq_putlocal_encode (&w, &pl);
    CHECK (sq_putlocal_decode (&pl2, w.buf.data, w.buf.size, &err) == 0);
    CHECK (pl2.req == 9 && pl2.key == pl.key && pl2.size == 1ull << 26
           && mpr_str_eq (pl2.content_type, "py/pickle") && pl2.capability.len == 3
           && pl2.token.len == 16 && memcmp (pl2.token.ptr, "0123456789abcdef", 16) == 0);
    s_check_truncations ("PUTLOCAL", s_dec_putlocal, w.buf.data, w.buf.size);
    sq_wbuf_reset (&w);
    pl.token = (mpr_str_t) { "0123456789abcdef0", 17 };
    sq_putlocal_encode (&w, &pl);
    CHECK (sq_putlocal_decode (&pl2, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "token") != NULL);
    //  LCOPY: as a CHUNK's head, with a token of 16 bytes, no other length
    sq_wbuf_reset (&w);
    sq_lcopy_t lc = { 7, sq_key (3, 5), 2, 9ull << 20, s_mstr ("py/pickle"), 4,
                      s_mstr ("tcp://127.0.0.1:5000"), { "0123456789abcdef", 16 } }, lc2;
    sq_lcopy_encode (&w, &lc);
    CHECK (sq_lcopy_decode (&lc2, w.buf.data, w.buf.size, &err) == 0);
    CHECK (lc2.transfer == 7 && lc2.key == lc.key && lc2.version == 2 && lc2.size == 9ull << 20
           && mpr_str_eq (lc2.content_type, "py/pickle") && lc2.from == 4
           && mpr_str_eq (lc2.reply_to, "tcp://127.0.0.1:5000")
           && lc2.token.len == 16 && memcmp (lc2.token.ptr, "0123456789abcdef", 16) == 0);
    s_check_truncations ("LCOPY", s_dec_lcopy, w.buf.data, w.buf.size);
    sq_wbuf_reset (&w);
    lc.token = (mpr_str_t) { "0123456789abcde", 15 };
    sq_lcopy_encode (&w, &lc);
    CHECK (sq_lcopy_decode (&lc2, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "token") != NULL);
    //  SLOCAL: states 0..2 only
    sq_wbuf_reset (&w);
    sq_slocal_t sl = { sq_key (1, 7), 2, sq_key (1, 8), SQ_SLOCAL_END, 5ull << 30 }, sl2;
    sq_slocal_encode (&w, &sl);
    CHECK (sq_slocal_decode (&sl2, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sl2.key == sl.key && sl2.version == 2 && sl2.consumer == sl.consumer
           && sl2.state == SQ_SLOCAL_END && sl2.bytes == 5ull << 30);
    s_check_truncations ("SLOCAL", s_dec_slocal, w.buf.data, w.buf.size);
    sq_wbuf_reset (&w);
    sl.state = 3;
    sq_slocal_encode (&w, &sl);
    CHECK (sq_slocal_decode (&sl2, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "state") != NULL);

    //  DROP
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_DROP, 3);
    msgpack_pack_uint64 (&w.pk, sq_key (1, 1));
    msgpack_pack_uint64 (&w.pk, sq_key (UINT32_MAX, UINT32_MAX));
    msgpack_pack_uint64 (&w.pk, 0);
    uint64_t key;
    CHECK (sq_batch_begin (&it, SQ_MSG_DROP, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_drop_next (&it, &key) == 1 && key == sq_key (1, 1));
    CHECK (sq_drop_next (&it, &key) == 1 && sq_key_session (key) == UINT32_MAX && sq_key_id (key) == UINT32_MAX);
    CHECK (sq_drop_next (&it, &key) == 1 && key == 0);
    CHECK (sq_drop_next (&it, &key) == 0);
    sq_iter_release (&it);
    s_check_truncations ("DROP", s_dec_drop, w.buf.data, w.buf.size);
    //  A DROP is not a STOP
    CHECK (sq_batch_begin (&it, SQ_MSG_STOP, w.buf.data, w.buf.size, &err) == -1);
    sq_iter_release (&it);

    //  STOP
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_STOP, 1);
    msgpack_pack_array (&w.pk, 2);
    msgpack_pack_uint64 (&w.pk, sq_key (3, 4));
    msgpack_pack_uint32 (&w.pk, 2);
    uint32_t attempt;
    CHECK (sq_batch_begin (&it, SQ_MSG_STOP, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_stop_next (&it, &key, &attempt) == 1 && key == sq_key (3, 4) && attempt == 2);
    CHECK (sq_stop_next (&it, &key, &attempt) == 0);
    sq_iter_release (&it);
    s_check_truncations ("STOP", s_dec_stop, w.buf.data, w.buf.size);

    //  A batch declaring more elements than it has
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_DROP, 3);
    msgpack_pack_uint64 (&w.pk, 1);
    CHECK (s_dec_drop (w.buf.data, w.buf.size, &err) == -1);

    //  OBJECT
    sq_wbuf_reset (&w);
    sq_object_msg_t m = { sq_key (5, 6), 2, 1ull << 36, s_mstr ("image/png"), 3 }, m2;
    sq_object_encode (&w, &m);
    CHECK (sq_object_decode (&m2, w.buf.data, w.buf.size, &err) == 0);
    CHECK (m2.key == m.key && m2.version == 2 && m2.size == m.size && m2.from == 3);
    CHECK (mpr_str_eq (m2.content_type, "image/png"));
    s_check_truncations ("OBJECT", s_dec_object, w.buf.data, w.buf.size);

    //  GFETCH
    sq_wbuf_reset (&w);
    sq_gfetch_encode (&w, 17, sq_key (5, 6), NULL, 0);
    sq_gfetch_t g;
    CHECK (sq_gfetch_decode (&g, w.buf.data, w.buf.size, &err) == 0);
    CHECK (g.req == 17 && g.key == sq_key (5, 6));
    uint32_t type, req;
    CHECK (sq_proto_peek (w.buf.data, w.buf.size, &type, &req) == 0 && type == SQ_MSG_GFETCH && req == 17);
    s_check_truncations ("GFETCH", s_dec_gfetch, w.buf.data, w.buf.size);
    //  Wrong type of the key
    sq_wbuf_reset (&w);
    msgpack_pack_array (&w.pk, 4);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_GFETCH);
    msgpack_pack_uint32 (&w.pk, 1);
    sq_pack_cstr (&w.pk, "key");
    msgpack_pack_nil (&w.pk);
    CHECK (sq_gfetch_decode (&g, w.buf.data, w.buf.size, &err) == -1 && strstr (err.text, "'object'"));
    sq_wbuf_release (&w);
}

static void
s_test_peek (void)
{
    uint32_t type, req;
    const uint8_t bare [] = { 0x91, 0x1f };
    CHECK (sq_proto_peek (bare, sizeof bare, &type, &req) == 0 && type == 31 && req == 0);
    const uint8_t neg [] = { 0x92, 0x02, 0xff };
    CHECK (sq_proto_peek (neg, sizeof neg, &type, &req) == 0 && req == 0);
    CHECK (sq_proto_peek ("\x90", 1, &type, &req) == -1);
    CHECK (sq_proto_peek ("\xc0", 1, &type, &req) == -1);
    CHECK (sq_proto_peek (NULL, 0, &type, &req) == -1);
}

//  --------------------------------------------------------------------------
//  gpus: thousandths in memory, devices on the wire (a float below 1)

static void
s_hello_gpus (sq_wbuf_t *w, int kind, double value)
{
    sq_wbuf_reset (w);
    msgpack_pack_array (&w->pk, 10);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_HELLO);
    msgpack_pack_uint32 (&w->pk, 1);
    msgpack_pack_uint32 (&w->pk, SQUALL_PROTOCOL_VERSION);
    sq_pack_cstr (&w->pk, "governor");
    sq_pack_cstr (&w->pk, "g");
    msgpack_pack_uint64 (&w->pk, 1);
    sq_pack_cstr (&w->pk, "a");
    sq_pack_cstr (&w->pk, "b");
    msgpack_pack_map (&w->pk, 1);
    sq_pack_cstr (&w->pk, kind == 2? "memory": "gpus");
    if (kind == 1)
        sq_pack_cstr (&w->pk, "half");
    else
        msgpack_pack_double (&w->pk, value);
    msgpack_pack_nil (&w->pk);
}

static void
s_test_gpus (void)
{
    CHECK (sq_gpus_milli (0.5) == 500 && sq_gpus_milli (1) == 1000 && sq_gpus_milli (3) == 3000);
    CHECK (sq_gpus_milli (0.001) == 1 && sq_gpus_milli (0.125) == 125);
    CHECK (sq_gpus_milli (1.5) == -1 && sq_gpus_milli (0.0005) == -1 && sq_gpus_milli (-1) == -1);
    CHECK (sq_gpus_milli (0) == -1 && sq_gpus_milli (1.0 / 0.0) == -1 && sq_gpus_milli (0.0 / 0.0) == -1);
    CHECK (sq_gpus_milli (1e7) == -1);

    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_hello_t h;
    int code;
    sq_errbuf_t err;
    //  Whole devices go as an unsigned integer: 4000 thousandths are 4.
    sq_resource_t res [2] = { { s_mstr ("gpus"), 4000 }, { s_mstr ("a"), 7 } };
    sq_hello_encode_governor (&w, 1, "g", 1, "a", "b", res, 2, NULL, 0);
    const uint8_t four [] = { 0xa4, 'g', 'p', 'u', 's', 0x04 };
    CHECK (memmem (w.buf.data, w.buf.size, four, sizeof four) != NULL);
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == 0);
    CHECK (h.n_resources == 2 && h.resources [0].amount == 4000 && h.resources [1].amount == 7);
    //  A fraction goes as a float, and comes back in thousandths.
    res [0].amount = 250;
    sq_wbuf_reset (&w);
    sq_hello_encode_governor (&w, 1, "g", 1, "a", "b", res, 1, NULL, 0);
    const uint8_t quarter [] = { 0xa4, 'g', 'p', 'u', 's', 0xcb };
    CHECK (memmem (w.buf.data, w.buf.size, quarter, sizeof quarter) != NULL);
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == 0);
    CHECK (h.n_resources == 1 && h.resources [0].amount == 250);
    //  gpus as a float that is whole, and zero
    s_hello_gpus (&w, 0, 2.0);
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == 0
           && h.resources [0].amount == 2000);
    s_hello_gpus (&w, 0, 0.0);
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == 0
           && h.resources [0].amount == 0);
    //  Refused: above 1 and not whole, finer than thousandths, negative,
    //  not a number, a string; a float for any other resource.
    const double bad [] = { 1.5, 0.0004, -0.5, 0.0 / 0.0, 1e300 };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        s_hello_gpus (&w, 0, bad [i]);
        CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == -1);
        CHECK (code == SQ_E_PROTOCOL && strstr (err.text, "gpus"));
    }
    s_hello_gpus (&w, 1, 0);
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == -1);
    s_hello_gpus (&w, 2, 0.5);
    CHECK (sq_hello_decode (&h, w.buf.data, w.buf.size, &code, &err) == -1);

    char text [64];
    sq_resource_t half = { s_mstr ("gpus"), 500 }, mem = { s_mstr ("memory"), 1024 };
    sq_resource_format (&half, text, sizeof text);
    CHECK (strcmp (text, "gpus=0.5") == 0);
    sq_resource_format (&mem, text, sizeof text);
    CHECK (strcmp (text, "memory=1024") == 0);
    sq_wbuf_release (&w);
}


//  --------------------------------------------------------------------------
//  Jobs: SESSION_OPEN options, SESSIONS .. JOB_CANCEL, their replies, array
//  tasks in SUBMIT, a governor's FAILED with an exit code, the records.

static int
s_dec_jobs_reply (const void *d, size_t n, sq_errbuf_t *err)
{
    sq_iter_t it;
    uint32_t count;
    if (sq_jobs_reply_begin (&it, d, n, &count, err))
        return -1;
    sq_job_info_t job;
    int rc;
    while ((rc = sq_jobs_reply_next (&it, &job)) == 1)
        ;
    sq_iter_release (&it);
    return rc;
}

static int
s_dec_tasks_reply (const void *d, size_t n, sq_errbuf_t *err)
{
    sq_iter_t it;
    uint64_t total;
    uint32_t count;
    if (sq_tasks_reply_begin (&it, d, n, &total, &count, err))
        return -1;
    sq_task_info_t task;
    int rc;
    while ((rc = sq_tasks_reply_next (&it, &task)) == 1)
        ;
    sq_iter_release (&it);
    return rc;
}

static int
s_dec_attached (const void *d, size_t n, sq_errbuf_t *err)
{
    uint32_t max_id, session;
    uint8_t token [SQ_TOKEN_LEN];
    return sq_attached_decode (d, n, &max_id, &session, token, err);
}

static void
s_test_jobs (void)
{
    sq_wbuf_t w;
    sq_errbuf_t err;
    sq_request_t q, back;
    sq_wbuf_init (&w);

    //  SESSION_OPEN: both forms, the options round trip
    q = (sq_request_t) { .type = SQ_MSG_SESSION_OPEN, .req = 3, .has_name = true,
                         .name = s_mstr ("nightly"), .detached = true };
    sq_request_encode (&w, &q);
    CHECK (sq_request_decode (&back, w.buf.data, w.buf.size, &err) == 0);
    CHECK (back.has_name && back.name.len == 7 && memcmp (back.name.ptr, "nightly", 7) == 0);
    CHECK (back.detached && back.req == 3);
    s_check_truncations ("SESSION_OPEN options", s_dec_request, w.buf.data, w.buf.size);
    sq_request_release (&back);
    sq_wbuf_reset (&w);
    //  ... with the jobs it waits for (--after)
    uint32_t after [] = { 2, 11 };
    q = (sq_request_t) { .type = SQ_MSG_SESSION_OPEN, .req = 3, .detached = true,
                         .ids = after, .n_ids = 2 };
    sq_request_encode (&w, &q);
    CHECK (sq_request_decode (&back, w.buf.data, w.buf.size, &err) == 0);
    CHECK (back.detached && back.n_ids == 2 && back.ids [0] == 2 && back.ids [1] == 11);
    s_check_truncations ("SESSION_OPEN after", s_dec_request, w.buf.data, w.buf.size);
    sq_request_release (&back);
    sq_wbuf_reset (&w);
    q = (sq_request_t) { .type = SQ_MSG_SESSION_OPEN, .req = 4 };
    sq_request_encode (&w, &q);
    CHECK (sq_request_decode (&back, w.buf.data, w.buf.size, &err) == 0 && !back.has_name);
    //  Refused options: unknown or repeated keys, a wrong type, bad names
    const char *bad_options [] = {
        "\x93\x0a\x01\x81\xa3" "foo" "\xc3",                       //  {foo: true}
        "\x93\x0a\x01\x82\xa8" "detached" "\xc3\xa8" "detached" "\xc2",
        "\x93\x0a\x01\x81\xa8" "detached" "\x01",                  //  not a bool
        "\x93\x0a\x01\x81\xa4" "name" "\xa0",                      //  empty name
        "\x93\x0a\x01\x81\xa4" "name" "\xa2" "a\n",                //  control character
        "\x93\x0a\x01\x90",                                        //  not a map
        "\x93\x0a\x01\x81\xa5" "after" "\x90",                    //  no jobs
        "\x93\x0a\x01\x81\xa5" "after" "\x91\x00",                //  job 0
        "\x93\x0a\x01\x82\xa5" "after" "\x91\x01\xa5" "after" "\x91\x02",
    };
    const size_t bad_sizes [] = { 9, 23, 13, 9, 11, 4, 11, 12, 20 };
    for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes [0]; i++) {
        err.text [0] = 0;
        CHECK (sq_request_decode (&back, bad_options [i], bad_sizes [i], &err) == -1);
        CHECK (err.text [0] != 0);
    }
    char long_name [200];
    memset (long_name, 'x', sizeof long_name);
    sq_wbuf_reset (&w);
    q = (sq_request_t) { .type = SQ_MSG_SESSION_OPEN, .req = 5, .has_name = true,
                         .name = { long_name, 129 } };
    sq_request_encode (&w, &q);
    CHECK (sq_request_decode (&back, w.buf.data, w.buf.size, &err) == -1);

    //  The job requests round trip, and every prefix is refused
    uint32_t ids [] = { 7, 9 };
    sq_request_t requests [] = {
        { .type = SQ_MSG_SESSIONS, .req = 1, .states = 5, .session = 0, .has_name = true,
          .name = s_mstr ("a") },
        { .type = SQ_MSG_SESSIONS, .req = 1, .states = 0, .session = 12 },
        { .type = SQ_MSG_ATTACH, .req = 2, .session = 12 },
        { .type = SQ_MSG_ATTACH, .req = 2, .has_name = true, .name = s_mstr ("job") },
        { .type = SQ_MSG_SESSION_WAIT, .req = 3, .session = 12, .timeout_ms = -1 },
        { .type = SQ_MSG_TASKS, .req = 4, .session = 12, .states = 24, .offset = 1u << 20,
          .limit = 10000 },
        { .type = SQ_MSG_RESUBMIT, .req = 5, .session = 12, .ids = ids, .n_ids = 2 },
        { .type = SQ_MSG_FORGET, .req = 6, .session = 12 },
        { .type = SQ_MSG_JOB_CANCEL, .req = 7, .session = 12 },
        { .type = SQ_MSG_ADOPT, .req = 8, .session = 12, .ids = ids, .n_ids = 2 },
    };
    for (size_t i = 0; i < sizeof requests / sizeof requests [0]; i++) {
        sq_wbuf_reset (&w);
        sq_request_encode (&w, &requests [i]);
        CHECK (sq_request_decode (&back, w.buf.data, w.buf.size, &err) == 0);
        CHECK (back.type == requests [i].type && back.req == requests [i].req);
        CHECK (back.session == requests [i].session && back.states == requests [i].states);
        CHECK (back.has_name == requests [i].has_name && back.offset == requests [i].offset);
        CHECK (back.limit == requests [i].limit && back.n_ids == requests [i].n_ids);
        CHECK (back.timeout_ms == requests [i].timeout_ms);
        sq_request_release (&back);
        s_check_truncations (sq_msg_name (requests [i].type), s_dec_request, w.buf.data,
                             w.buf.size);
    }
    //  Out of range: state bits, a page above 10000
    sq_request_t over [] = {
        { .type = SQ_MSG_SESSIONS, .states = 16 },
        { .type = SQ_MSG_TASKS, .states = 32 },
        { .type = SQ_MSG_TASKS, .limit = 10001 },
        { .type = SQ_MSG_ADOPT, .session = 12 },         //  no ids
    };
    for (size_t i = 0; i < sizeof over / sizeof over [0]; i++) {
        sq_wbuf_reset (&w);
        sq_request_encode (&w, &over [i]);
        CHECK (sq_request_decode (&back, w.buf.data, w.buf.size, &err) == -1);
    }

    //  Replies: a job map, SESSIONS, ATTACH, TASKS, RESUBMIT
    sq_job_info_t job = { .id = 12, .name = s_mstr ("nightly"), .state = SQ_JOBSTATE_FAILED,
                          .detached = true, .tasks = { 1, 2, 3, 4, 5 }, .created_ms = 1000,
                          .ended_ms = 2000 }, got;
    sq_wbuf_reset (&w);
    sq_pack_job (&w.pk, &job);
    CHECK (sq_job_decode (&got, (const uint8_t *) w.buf.data, w.buf.size, &err) == 0);
    CHECK (got.id == 12 && got.state == SQ_JOBSTATE_FAILED && got.detached && !got.attached);
    CHECK (got.tasks [4] == 5 && got.created_ms == 1000 && got.ended_ms == 2000);
    CHECK (got.name.len == 7);
    sq_wbuf_reset (&w);
    msgpack_pack_array (&w.pk, 2);
    sq_pack_job (&w.pk, &job);
    job.name.len = 0;
    job.ended_ms = 0;
    job.state = SQ_JOBSTATE_RUNNING;
    sq_pack_job (&w.pk, &job);
    s_check_truncations ("SESSIONS reply", s_dec_jobs_reply, w.buf.data, w.buf.size);
    //  a job map missing a key, or with an unknown state, is refused; an
    //  unknown key is skipped
    sq_wbuf_reset (&w);
    msgpack_pack_map (&w.pk, 1);
    sq_pack_cstr (&w.pk, "id");
    msgpack_pack_uint32 (&w.pk, 1);
    CHECK (sq_job_decode (&got, (const uint8_t *) w.buf.data, w.buf.size, &err) == -1);
    uint8_t token [SQ_TOKEN_LEN] = { 1, 2, 3 };
    sq_wbuf_reset (&w);
    sq_pack_attached (&w.pk, 99, 12, token);
    s_check_truncations ("ATTACH reply", s_dec_attached, w.buf.data, w.buf.size);
    sq_task_info_t rec = { .id = 2, .index = { true, 517 }, .state = 8,
                           .exit_code = { true, -9 }, .governor = 3, .attempts = 2,
                           .started_ms = 5, .ended_ms = 6, .error = s_mstr ("killed"),
                           .name = s_mstr ("sim"), .task = 0xC0000205 };
    sq_wbuf_reset (&w);
    sq_pack_tasks_head (&w.pk, 1000, 2);
    sq_pack_task_info (&w.pk, &rec);
    rec.task = 0;
    rec.index.has = false;
    rec.exit_code.has = false;
    rec.error.len = 0;
    rec.state = 1;
    sq_pack_task_info (&w.pk, &rec);
    s_check_truncations ("TASKS reply", s_dec_tasks_reply, w.buf.data, w.buf.size);
    sq_iter_t it;
    uint64_t total;
    uint32_t n;
    sq_task_info_t t1;
    CHECK (sq_tasks_reply_begin (&it, (const uint8_t *) w.buf.data, w.buf.size, &total, &n,
                                 &err) == 0 && total == 1000 && n == 2);
    CHECK (sq_tasks_reply_next (&it, &t1) == 1 && t1.index.value == 517 && t1.exit_code.value == -9
           && t1.state == 8 && t1.governor == 3 && t1.error.len == 6
           && t1.task == 0xC0000205);
    CHECK (sq_tasks_reply_next (&it, &t1) == 1 && !t1.index.has && !t1.exit_code.has
           && t1.task == 0);
    CHECK (sq_tasks_reply_next (&it, &t1) == 0);
    sq_iter_release (&it);
    //  an element's task id trails its record only: a plain task's 11th
    //  field, a task id of 0 and a 12th field are refused (the 4th, as
    //  written here, is taken)
    const uint32_t bad_tasks [] = { 7, 0, 7, 7 };
    for (int b = 0; b < 4; b++) {
        sq_wbuf_reset (&w);
        sq_pack_tasks_head (&w.pk, 1, 1);
        msgpack_pack_array (&w.pk, b == 2? 12: 11);
        msgpack_pack_uint32 (&w.pk, 2);
        if (b == 0)
            msgpack_pack_nil (&w.pk);
        else
            msgpack_pack_int64 (&w.pk, 5);
        sq_pack_cstr (&w.pk, "running");
        for (int f = 0; f < 6; f++)
            if (f == 2)
                msgpack_pack_uint32 (&w.pk, 0);         //  attempts
            else
                msgpack_pack_nil (&w.pk);
        sq_pack_cstr (&w.pk, "");
        msgpack_pack_uint32 (&w.pk, bad_tasks [b]);
        if (b == 2)
            msgpack_pack_uint32 (&w.pk, 8);
        CHECK (sq_tasks_reply_begin (&it, (const uint8_t *) w.buf.data, w.buf.size, &total,
                                     &n, &err) == 0);
        CHECK (sq_tasks_reply_next (&it, &t1) == (b == 3? 1: -1));
        CHECK (b < 3 || (t1.task == 7 && t1.index.value == 5 && t1.state == 2));
        sq_iter_release (&it);
    }
    //  TASK_INFO's kinds: a state by name, an exit code of an i32, an
    //  empty error packed as nil; a record of 9 fields
    for (int b = 0; b < 4; b++) {
        sq_wbuf_reset (&w);
        sq_pack_tasks_head (&w.pk, 1, 1);
        msgpack_pack_array (&w.pk, b == 3? 9: 10);
        msgpack_pack_uint32 (&w.pk, 2);
        msgpack_pack_nil (&w.pk);
        sq_pack_cstr (&w.pk, b == 0? "sleeping": "failed");
        if (b == 1)
            msgpack_pack_int64 (&w.pk, (int64_t) INT32_MIN - 1);
        else
            msgpack_pack_int32 (&w.pk, INT32_MIN);
        for (int f = 0; f < 5; f++)
            if (f == 1)
                msgpack_pack_uint32 (&w.pk, 0);         //  attempts
            else
                msgpack_pack_nil (&w.pk);
        if (b != 3)
            sq_pack_cstr (&w.pk, "sim");
        CHECK (sq_tasks_reply_begin (&it, (const uint8_t *) w.buf.data, w.buf.size, &total,
                                     &n, &err) == 0);
        int rc = sq_tasks_reply_next (&it, &t1);
        CHECK (b == 2? rc == 1 && t1.state == 8 && t1.exit_code.has
                       && t1.exit_code.value == INT32_MIN && t1.error.len == 0
                       && t1.attempts == 0 && t1.name.len == 3
                     : rc == -1 && strstr (err.text, "TASKS reply: field '")
                       && strstr (err.text, b == 0? "'state': unknown task state":
                                            b == 1? "'exit_code': not an i32":
                                                    "'record': wrong number of fields"));
        sq_iter_release (&it);
    }
    sq_task_info_t blank = { .id = 1, .state = 1, .error = { "", 0 }, .name = { "", 0 } };
    sq_wbuf_reset (&w);
    sq_pack_task_info (&w.pk, &blank);
    static const uint8_t blank_bytes [] = { 0x9a, 0x01, 0xc0, 0xa7, 'w', 'a', 'i', 't', 'i', 'n', 'g',
                                            0xc0, 0xc0, 0x00, 0xc0, 0xc0, 0xc0, 0xa0 };
    CHECK (w.buf.size == sizeof blank_bytes && memcmp (w.buf.data, blank_bytes, w.buf.size) == 0);
    sq_wbuf_reset (&w);
    sq_record_pack (&w.pk, SQ_REC_COUNT, &(sq_count_t) { 3 });
    sq_count_t count;
    CHECK (sq_record_decode (SQ_REC_COUNT, &count, w.buf.data, w.buf.size, "reply", &err) == 0
           && count.n == 3);

    //  Array tasks in SUBMIT: a range and items round trip; bad ones refused
    sq_task_spec_t range = { .id = 2, .kind = s_mstr ("execute"), .name = s_mstr (""),
                             .array = SQ_ARRAY_RANGE, .array_first = 1, .array_last = 10000,
                             .array_step = 3 };
    sq_wbuf_reset (&w);
    sq_pack_submit_begin (&w.pk, 1, 1);
    sq_pack_submit_objects (&w.pk, 0);
    sq_pack_submit_tasks (&w.pk, 2);
    sq_pack_task_spec (&w.pk, &range);
    const uint8_t items [] = { 0x92, 0xa1, 'a', 0xa0 };
    sq_task_spec_t listed = { .id = 3, .kind = s_mstr ("execute"), .name = s_mstr (""),
                              .array = SQ_ARRAY_ITEMS, .array_items = items,
                              .array_items_size = sizeof items };
    sq_pack_task_spec (&w.pk, &listed);
    sq_submit_t sub;
    CHECK (sq_submit_decode (&sub, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sub.n_tasks == 2 && sub.tasks [0].array == SQ_ARRAY_RANGE
           && sub.tasks [0].array_size == 3334 && sub.tasks [0].array_step == 3);
    CHECK (sub.tasks [1].array == SQ_ARRAY_ITEMS && sub.tasks [1].array_size == 2
           && sub.tasks [1].array_items_size == sizeof items);
    sq_submit_release (&sub);
    s_check_truncations ("SUBMIT with arrays", s_dec_submit, w.buf.data, w.buf.size);
    struct { uint32_t first, last, step; } bad_ranges [] = {
        { 5, 4, 1 }, { 0, 10, 0 }, { 0, 1u << 24, 1 }
    };
    for (size_t i = 0; i < 3; i++) {
        range.array_first = bad_ranges [i].first;
        range.array_last = bad_ranges [i].last;
        range.array_step = bad_ranges [i].step;
        sq_wbuf_reset (&w);
        sq_pack_submit_begin (&w.pk, 1, 1);
        sq_pack_submit_objects (&w.pk, 0);
        sq_pack_submit_tasks (&w.pk, 1);
        sq_pack_task_spec (&w.pk, &range);
        CHECK (sq_submit_decode (&sub, w.buf.data, w.buf.size, &err) == -1);
    }
    const uint8_t bad_items [][6] = {
        { 0x90 },                           //  empty
        { 0x92, 0xa1, 'a', 0x01 },          //  not a string
        { 0x91, 0xa2, 'a', 0 },             //  a NUL
        { 0x92, 0x01, 0x02 },               //  two numbers
    };
    const size_t bad_item_sizes [] = { 1, 4, 4, 3 };
    for (size_t i = 0; i < 4; i++) {
        listed.array_items = bad_items [i];
        listed.array_items_size = bad_item_sizes [i];
        sq_wbuf_reset (&w);
        sq_pack_submit_begin (&w.pk, 1, 1);
        sq_pack_submit_objects (&w.pk, 0);
        sq_pack_submit_tasks (&w.pk, 1);
        sq_pack_task_spec (&w.pk, &listed);
        CHECK (sq_submit_decode (&sub, w.buf.data, w.buf.size, &err) == -1);
    }

    //  A governor's FAILED with an exit code (7 fields); 6 stays valid
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 2);
    sq_pack_failed_exit (&w.pk, sq_key (1, 2), 1, "exited with status 3", 10, 3);
    sq_pack_failed (&w.pk, sq_key (1, 4), 1, "no", 10);
    sq_iter_t u;
    sq_event_t ev;
    CHECK (sq_update_begin (&u, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_update_next (&u, &ev) == 1 && ev.has_exit_code && ev.exit_code == 3);
    CHECK (sq_update_next (&u, &ev) == 1 && !ev.has_exit_code);
    CHECK (sq_update_next (&u, &ev) == 0);
    sq_iter_release (&u);

    //  Journal records JOB, ELEMENT, RESUBMIT, ENDED; 18 is not one
    msgpack_sbuffer buf;
    msgpack_packer pk;
    msgpack_sbuffer_init (&buf);
    msgpack_packer_init (&pk, &buf, msgpack_sbuffer_write);
    sq_rec_t r, d;
    char text [200];
    sq_rec_pack_job (&pk, 12, "nightly", true, 1234, NULL, 0);
    CHECK (sq_rec_decode (&d, (const uint8_t *) buf.data, buf.size, text, sizeof text) == 0);
    CHECK (d.type == SQ_REC_JOB && d.session == 12 && d.detached && d.created_ms == 1234
           && d.name.len == 7 && d.n_ids == 0);
    sq_rec_release (&d);
    msgpack_sbuffer_clear (&buf);
    //  A job that waits for others (--after): their ids, a sixth field
    uint32_t waits [] = { 3, 9 };
    sq_rec_pack_job (&pk, 12, NULL, true, 1234, waits, 2);
    CHECK (sq_rec_decode (&d, (const uint8_t *) buf.data, buf.size, text, sizeof text) == 0);
    CHECK (d.type == SQ_REC_JOB && d.n_ids == 2 && d.ids [0] == 3 && d.ids [1] == 9);
    sq_rec_release (&d);
    msgpack_sbuffer_clear (&buf);
    memset (&r, 0, sizeof r);
    r.type = SQ_REC_ELEMENT;
    r.session = 12; r.id = 2; r.k = 517; r.state = 2; r.has_exit_code = true;
    r.exit_code = -9; r.governor = 4; r.attempts = 3; r.started_ms = 5; r.ended_ms = 6;
    sq_rec_pack_element (&pk, &r);
    CHECK (sq_rec_decode (&d, (const uint8_t *) buf.data, buf.size, text, sizeof text) == 0);
    CHECK (d.type == SQ_REC_ELEMENT && d.k == 517 && d.state == 2 && d.exit_code == -9
           && d.attempts == 3 && d.governor == 4 && d.ended_ms == 6);
    sq_rec_release (&d);
    for (size_t cut = 0; cut < buf.size; cut++)
        CHECK (sq_rec_decode (&d, (const uint8_t *) buf.data, cut, text, sizeof text) == -1);
    msgpack_sbuffer_clear (&buf);
    r.state = 0;                            //  not a final state
    sq_rec_pack_element (&pk, &r);
    CHECK (sq_rec_decode (&d, (const uint8_t *) buf.data, buf.size, text, sizeof text) == -1);
    msgpack_sbuffer_clear (&buf);
    r.type = SQ_REC_ENDED;
    r.key = sq_key (12, 2);
    r.has_exit_code = false;
    sq_rec_pack_ended (&pk, &r);
    CHECK (sq_rec_decode (&d, (const uint8_t *) buf.data, buf.size, text, sizeof text) == 0);
    CHECK (d.type == SQ_REC_ENDED && d.key == sq_key (12, 2) && !d.has_exit_code);
    sq_rec_release (&d);
    msgpack_sbuffer_clear (&buf);
    sq_rec_pack_ids (&pk, SQ_REC_RESUBMIT, 12, ids, 2);
    CHECK (sq_rec_decode (&d, (const uint8_t *) buf.data, buf.size, text, sizeof text) == 0);
    CHECK (d.type == SQ_REC_RESUBMIT && d.n_ids == 2 && d.ids [1] == 9);
    sq_rec_release (&d);
    const uint8_t rec18 [] = { 0x92, 18, 1 };
    CHECK (sq_rec_decode (&d, rec18, sizeof rec18, text, sizeof text) == -1);
    msgpack_sbuffer_destroy (&buf);
    sq_wbuf_release (&w);
}

//  The message table (proto_messages.def): every type found by its number
//  and named; a type not in it, or one coded by hand, refused by the table's
//  decoder with a clear error; an optional trailing field of SESSION_OPEN
//  absent when empty and refused when one too many.
static void
s_test_table (void)
{
    size_t n;
    const sq_msg_desc_t *all = sq_msg_descs (&n);
    CHECK (n > 40);
    for (size_t i = 0; i < n; i++) {
        CHECK (sq_msg_desc (all [i].type) == &all [i]);
        CHECK (sq_msg_name (all [i].type) && strcmp (sq_msg_name (all [i].type), all [i].name) == 0);
        for (uint32_t f = 0; f < all [i].n_fields; f++)
            CHECK (all [i].fields [f].name && sq_field_kind_name (all [i].fields [f].kind));
    }
    CHECK (sq_msg_desc (255) == NULL && sq_msg_desc (1u << 20) == NULL && sq_msg_name (3) == NULL);
    CHECK (strcmp (sq_msg_name (SQ_MSG_CHUNK), "CHUNK") == 0);

    sq_wbuf_t w;
    sq_errbuf_t err;
    sq_wbuf_init (&w);
    sq_bare_encode (&w, SQ_MSG_HEARTBEAT);
    sq_credit_t credit;
    CHECK (sq_msg_decode (SQ_MSG_UPDATE, &credit, w.buf.data, w.buf.size, &err) == -1
           && strstr (err.text, "not a message of the table"));
    CHECK (sq_msg_decode (200, &credit, w.buf.data, w.buf.size, &err) == -1);

    sq_wbuf_reset (&w);
    sq_request_t q = { .type = SQ_MSG_SESSION_OPEN, .req = 4 }, d;
    sq_request_encode (&w, &q);
    CHECK (w.buf.size == 3);                    //  [10, 4]: options left out
    CHECK (sq_request_decode (&d, w.buf.data, w.buf.size, &err) == 0 && d.req == 4 && !d.detached);
    sq_wbuf_reset (&w);
    msgpack_pack_array (&w.pk, 4);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_SESSION_OPEN);
    msgpack_pack_uint32 (&w.pk, 4);
    msgpack_pack_map (&w.pk, 0);
    msgpack_pack_nil (&w.pk);
    CHECK (sq_request_decode (&d, w.buf.data, w.buf.size, &err) == -1
           && strstr (err.text, "SESSION_OPEN") && strstr (err.text, "number of fields"));
    sq_wbuf_release (&w);
}

//  The table's records and batches: every record described, a batch
//  naming its record; a record packed and read back to the same bytes, one
//  with a field too many or a key of the wrong length refused naming the
//  batch and the field; a body of one record with bytes after it refused.
static void
s_test_table_records (void)
{
    size_t n;
    const sq_msg_desc_t *all = sq_record_descs (&n);
    CHECK (n == SQ_REC_COUNT_ && sq_record_desc (SQ_REC_COUNT_) == NULL);
    for (size_t i = 0; i < n; i++)
        CHECK (sq_record_desc ((uint32_t) i) == &all [i] && all [i].n_fields && all [i].size);
    CHECK (sq_msg_desc (SQ_MSG_STOP)->element == SQ_REC_STOP_TASK
           && sq_msg_desc (SQ_MSG_RETRACT)->element == SQ_REC_STOP_TASK
           && sq_msg_desc (SQ_MSG_CHUNK)->element == -1);

    sq_wbuf_t w;
    sq_errbuf_t err;
    sq_iter_t it;
    sq_wbuf_init (&w);
    uint8_t key [32];
    memset (key, 7, sizeof key);
    sq_send_t order = { 0x100000002ull, 3, 4, { "tcp://127.0.0.1:5", 17 }, { (char *) key, 32 } }, got;
    sq_batch_header (&w, SQ_MSG_SEND, 1);
    sq_record_pack (&w.pk, SQ_REC_SEND_ORDER, &order);
    CHECK (sq_batch_begin (&it, SQ_MSG_SEND, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_batch_next (&it, SQ_MSG_SEND, &got) == 1 && got.key == order.key
           && got.to == 4 && got.to_key.len == 32 && got.endpoint.len == 17);
    CHECK (sq_batch_next (&it, SQ_MSG_SEND, &got) == 0);
    sq_iter_release (&it);
    //  The same bytes as sq_pack_send writes
    sq_wbuf_t v;
    sq_wbuf_init (&v);
    sq_batch_header (&v, SQ_MSG_SEND, 1);
    sq_pack_send (&v.pk, order.key, 3, 4, "tcp://127.0.0.1:5", key);
    CHECK (v.buf.size == w.buf.size && memcmp (v.buf.data, w.buf.data, w.buf.size) == 0);
    sq_wbuf_release (&v);

    //  A key of 31 bytes
    sq_wbuf_reset (&w);
    order.to_key.len = 31;
    sq_batch_header (&w, SQ_MSG_SEND, 1);
    sq_record_pack (&w.pk, SQ_REC_SEND_ORDER, &order);
    CHECK (sq_batch_begin (&it, SQ_MSG_SEND, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_batch_next (&it, SQ_MSG_SEND, &got) == -1
           && strstr (err.text, "SEND: field 'to_key'") && strstr (err.text, "bytes"));
    sq_iter_release (&it);

    //  A STOP element of three fields
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_STOP, 1);
    msgpack_pack_array (&w.pk, 3);
    msgpack_pack_uint64 (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, 2);
    msgpack_pack_uint32 (&w.pk, 3);
    CHECK (sq_batch_begin (&it, SQ_MSG_STOP, w.buf.data, w.buf.size, &err) == 0);
    sq_stop_task_t stop;
    CHECK (sq_batch_next (&it, SQ_MSG_STOP, &stop) == -1
           && strstr (err.text, "STOP: field 'element': wrong number of fields"));
    sq_iter_release (&it);
    //  Not a batch
    CHECK (sq_batch_next (&it, SQ_MSG_CHUNK, &stop) == -1);

    //  A body, then a byte more
    sq_wbuf_reset (&w);
    sq_pack_logpart (&w.pk, 10, 20, true);
    uint64_t next, total;
    bool done;
    CHECK (sq_logpart_decode ((const uint8_t *) w.buf.data, w.buf.size, &next, &total, &done,
                              &err) == 0 && next == 10 && total == 20 && done);
    msgpack_pack_nil (&w.pk);
    CHECK (sq_logpart_decode ((const uint8_t *) w.buf.data, w.buf.size, &next, &total, &done,
                              &err) == -1 && strstr (err.text, "LOGREAD reply"));

    //  DROP: a batch of a bare record, each element the key alone, the
    //  bytes of a bare uint; an element in an array is refused
    CHECK (sq_msg_desc (SQ_MSG_DROP)->element == SQ_REC_DROP_KEY
           && sq_record_desc (SQ_REC_DROP_KEY)->bare && !sq_record_desc (SQ_REC_STOP_TASK)->bare);
    sq_wbuf_reset (&w);
    sq_drop_key_t drop = { sq_key (7, 8) }, dropped;
    sq_record_pack (&w.pk, SQ_REC_DROP_KEY, &drop);
    sq_wbuf_init (&v);
    msgpack_pack_uint64 (&v.pk, sq_key (7, 8));
    CHECK (v.buf.size == w.buf.size && memcmp (v.buf.data, w.buf.data, w.buf.size) == 0);
    sq_wbuf_reset (&v);
    sq_pack_drop (&v.pk, sq_key (7, 8));
    CHECK (v.buf.size == w.buf.size && memcmp (v.buf.data, w.buf.data, w.buf.size) == 0);
    CHECK (sq_record_decode (SQ_REC_DROP_KEY, &dropped, w.buf.data, w.buf.size, "DROP", &err) == 0
           && dropped.key == drop.key);
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_DROP, 2);
    sq_pack_drop (&w.pk, 5);
    msgpack_pack_array (&w.pk, 1);
    msgpack_pack_uint64 (&w.pk, 6);
    uint64_t drop_key;
    CHECK (sq_batch_begin (&it, SQ_MSG_DROP, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_drop_next (&it, &drop_key) == 1 && drop_key == 5);
    CHECK (sq_drop_next (&it, &drop_key) == -1 && strstr (err.text, "DROP: field 'object'"));
    sq_iter_release (&it);

    //  WAIT's reply entries (the table's DONE): an id that finished has
    //  root and message nil; a failure both; the bytes as written by hand
    sq_wbuf_reset (&w);
    sq_pack_wait_head (&w.pk, 1, 1, 2);
    sq_pack_done (&w.pk, 2, SQ_STATE_FINISHED, 9, NULL);
    sq_pack_done (&w.pk, 4, SQ_STATE_FAILED, 3, "exit status 1");
    sq_wbuf_reset (&v);
    msgpack_pack_array (&v.pk, 3);
    msgpack_pack_uint32 (&v.pk, 1);
    msgpack_pack_uint32 (&v.pk, 1);
    msgpack_pack_array (&v.pk, 2);
    msgpack_pack_array (&v.pk, 4);
    msgpack_pack_uint32 (&v.pk, 2);
    msgpack_pack_uint32 (&v.pk, SQ_STATE_FINISHED);
    msgpack_pack_nil (&v.pk);
    msgpack_pack_nil (&v.pk);
    msgpack_pack_array (&v.pk, 4);
    msgpack_pack_uint32 (&v.pk, 4);
    msgpack_pack_uint32 (&v.pk, SQ_STATE_FAILED);
    msgpack_pack_uint32 (&v.pk, 3);
    sq_pack_cstr (&v.pk, "exit status 1");
    CHECK (v.buf.size == w.buf.size && memcmp (v.buf.data, w.buf.data, w.buf.size) == 0);
    uint64_t finished, failed;
    sq_done_t entry;
    CHECK (sq_wait_reply_begin (&it, (const uint8_t *) w.buf.data, w.buf.size, 2,
                                &finished, &failed, &err) == 0 && finished == 1 && failed == 1);
    CHECK (sq_wait_reply_next (&it, &entry) == 1 && entry.id == 2
           && entry.state == SQ_STATE_FINISHED && entry.root == 0 && entry.message.ptr == NULL);
    CHECK (sq_wait_reply_next (&it, &entry) == 1 && entry.id == 4 && entry.root == 3
           && entry.message.len == 13 && memcmp (entry.message.ptr, "exit status 1", 13) == 0);
    CHECK (sq_wait_reply_next (&it, &entry) == 0);
    sq_iter_release (&it);
    //  An unknown state; an entry of three fields
    sq_wbuf_reset (&w);
    sq_pack_wait_head (&w.pk, 0, 0, 1);
    sq_pack_done (&w.pk, 2, SQ_STATE_CANCELLED + 1, 0, NULL);
    CHECK (sq_wait_reply_begin (&it, (const uint8_t *) w.buf.data, w.buf.size, 1,
                                &finished, &failed, &err) == 0);
    CHECK (sq_wait_reply_next (&it, &entry) == -1
           && strstr (err.text, "WAIT reply: field 'state': unknown state"));
    sq_iter_release (&it);
    sq_wbuf_reset (&w);
    sq_pack_wait_head (&w.pk, 0, 0, 1);
    msgpack_pack_array (&w.pk, 3);
    msgpack_pack_uint32 (&w.pk, 2);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_nil (&w.pk);
    CHECK (sq_wait_reply_begin (&it, (const uint8_t *) w.buf.data, w.buf.size, 1,
                                &finished, &failed, &err) == 0);
    CHECK (sq_wait_reply_next (&it, &entry) == -1
           && strstr (err.text, "WAIT reply: field 'state entry': wrong number of fields"));
    sq_iter_release (&it);
    sq_wbuf_release (&v);
    sq_wbuf_release (&w);
}

//  UPDATE's events from the table: each type described, packed as its
//  packer does and read back; one not in the table refused.
static void
s_test_table_events (void)
{
    const uint32_t types [] = { SQ_EV_FINISHED, SQ_EV_FAILED, SQ_EV_STARTED, SQ_EV_LOCATED,
                                SQ_EV_LOST, SQ_EV_RETRACTED, SQ_EV_UPLOADED, SQ_EV_HELD,
                                SQ_EV_RUNNING, SQ_EV_INVENTORY, SQ_EV_STREAMED, SQ_EV_LOGTAIL,
                                SQ_EV_SECEDED, SQ_EV_TASKKEY, SQ_EV_REFRESHED, SQ_EV_RAN };
    for (size_t i = 0; i < sizeof types / sizeof types [0]; i++)
        CHECK (sq_event_desc (types [i]) && sq_event_desc (types [i])->type == types [i]);
    CHECK (sq_event_desc (15) == NULL && sq_event_desc (1000) == NULL);

    sq_wbuf_t w, v;
    sq_errbuf_t err;
    sq_iter_t it;
    sq_event_t ev;
    sq_wbuf_init (&w);
    sq_wbuf_init (&v);
    //  FAILED with an exit code: sq_event_pack leaves out none of it
    sq_event_t failed = { .type = SQ_EV_FAILED, .key = 0x100000002ull, .attempt = 2,
                          .message = { "boom", 4 }, .duration_us = 9, .reason = SQ_FAIL_TASK,
                          .has_exit_code = true, .exit_code = -9 };
    sq_batch_header (&w, SQ_MSG_UPDATE, 2);
    sq_event_pack (&w.pk, &failed, -1);
    failed.has_exit_code = false;
    sq_event_pack (&w.pk, &failed, -1);
    sq_batch_header (&v, SQ_MSG_UPDATE, 2);
    sq_pack_failed_exit (&v.pk, 0x100000002ull, 2, "boom", 9, -9);
    sq_pack_failed (&v.pk, 0x100000002ull, 2, "boom", 9);
    CHECK (w.buf.size == v.buf.size && memcmp (w.buf.data, v.buf.data, w.buf.size) == 0);
    CHECK (sq_update_begin (&it, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_update_next (&it, &ev) == 1 && ev.has_exit_code && ev.exit_code == -9
           && ev.message.len == 4);
    CHECK (sq_update_next (&it, &ev) == 1 && !ev.has_exit_code && ev.duration_us == 9);
    CHECK (sq_update_next (&it, &ev) == 0);
    sq_iter_release (&it);
    //  An event type 15 (none)
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    msgpack_pack_array (&w.pk, 2);
    msgpack_pack_uint32 (&w.pk, 15);
    msgpack_pack_uint32 (&w.pk, 1);
    CHECK (sq_update_begin (&it, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_update_next (&it, &ev) == -1 && strstr (err.text, "unknown event type"));
    sq_iter_release (&it);
    sq_wbuf_release (&w);
    sq_wbuf_release (&v);
}

//  KEYS from the table: two lists read back; a key of 31 bytes refused
//  after one good key (the array read so far freed: ASan's leak check);
//  the struct's arrays freed by sq_msg_free_fields as by sq_keyset_release.
static void
s_test_table_keys (void)
{
    uint8_t a [32], b [32];
    memset (a, 1, sizeof a);
    memset (b, 2, sizeof b);
    const uint8_t *govs [] = { a, b }, *clients [] = { b };
    sq_wbuf_t w;
    sq_errbuf_t err;
    sq_keyset_t keys;
    sq_wbuf_init (&w);
    sq_keyset_encode (&w, govs, 2, clients, 1);
    CHECK (sq_keyset_decode (&keys, w.buf.data, w.buf.size, &err) == 0);
    CHECK (keys.governors.n == 2 && keys.clients.n == 1
           && memcmp (keys.governors.keys [1], b, 32) == 0 && memcmp (keys.clients.keys [0], b, 32) == 0);
    sq_msg_free_fields (SQ_MSG_KEYS, &keys);
    CHECK (keys.governors.keys == NULL && keys.clients.n == 0);

    sq_wbuf_reset (&w);
    msgpack_pack_array (&w.pk, 3);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_KEYS);
    msgpack_pack_array (&w.pk, 0);
    msgpack_pack_array (&w.pk, 2);
    msgpack_pack_bin (&w.pk, 32);
    msgpack_pack_bin_body (&w.pk, a, 32);
    msgpack_pack_bin (&w.pk, 31);
    msgpack_pack_bin_body (&w.pk, a, 31);
    CHECK (sq_keyset_decode (&keys, w.buf.data, w.buf.size, &err) == -1
           && strstr (err.text, "KEYS: field 'clients': a key is not 32 bytes"));
    sq_wbuf_release (&w);
}

//  INFO's body and the dashboard's sessions, made from the table's maps
//  (SQ_MAP rows): every key, in order, with its value, as JSON
static void
s_test_info_map (void)
{
    sq_resource_t res [1] = { { { "gpus", 4 }, 1500 } };
    sq_info_gov_t govs [1] = { { 1, true, "g1", 4, res, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                 1700000000, "tcp://a", NULL, 10 } };
    const char *names [] = { "waiting", "running" };
    uint64_t counts [] = { 3, 4 };
    sq_info_wait_t waits [1] = { { 3, 4, "cpus=1", 999 } };
    sq_info_stream_t streams [1] = { { 1, 2, 3, 4 } };
    sq_info_tenant_t tenant = { "t", 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    sq_info_t info = { "c", 1, 0, 1, 0, 12345, 2, "0.1", govs, 1, names, counts, 2, 7, 8,
                       waits, 1, streams, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, &tenant };
    const char *want =
        "{\"cluster\":\"c\",\"epoch\":1,\"recovering\":0,\"secure\":1,\"insecure\":0,"
        "\"journal_bytes\":12345,\"journal_errors\":2,\"version\":\"0.1\",\"governors\":"
        "[{\"id\":1,\"draining\":1,\"name\":\"g1\",\"cpus\":4,\"resources\":{\"gpus\":1.5},"
        "\"assigned\":1,\"running\":2,\"queued\":3,\"piped\":4,\"memory\":5,\"spilled\":6,\"shared\":10,"
        "\"objects\":7,\"tasks_done\":8,\"tasks_run\":9,\"joined\":1700000000,"
        "\"data_endpoint\":\"tcp://a\",\"serve_endpoint\":\"\"}],\"tasks\":{\"waiting\":3,"
        "\"running\":4},\"ready_queue\":7,\"blocked\":8,\"resource_waits\":[{\"session\":3,"
        "\"task\":4,\"needs\":\"cpus=1\",\"left_ms\":999}],\"streams\":[{\"session\":1,"
        "\"object\":2,\"governor\":3,\"bytes\":4}],\"sessions\":1,\"clients\":2,\"objects\":3,"
        "\"watches\":4,\"recomputed\":5,\"uploads\":6,\"copy_rate\":7,\"streams_local\":8,"
        "\"uploads_local\":9,\"copies_local\":10,"
        "\"tenant\":{\"name\":\"t\",\"weight\":1,\"cpus\":2,\"stored\":3,\"constants\":4,"
        "\"sessions\":5,\"limits\":{\"cpus\":6,\"stored\":7,\"constants\":8,\"sessions\":9}}}";
    sq_wbuf_t w;
    sq_errbuf_t err;
    char *json = NULL;
    sq_wbuf_init (&w);
    sq_pack_info (&w.pk, &info);
    CHECK (sq_json_from_msgpack (w.buf.data, w.buf.size, true, &json, &err) == 0);
    CHECK (json && strcmp (json, want) == 0);
    free (json);
    //  No tenant, no governors: nil and an empty array
    info.tenant = NULL;
    info.n_govs = 0;
    sq_wbuf_reset (&w);
    sq_pack_info (&w.pk, &info);
    CHECK (sq_json_from_msgpack (w.buf.data, w.buf.size, true, &json, &err) == 0);
    CHECK (json && strstr (json, "\"governors\":[],\"tasks\"")
                && strstr (json, "\"copies_local\":10,\"tenant\":null}"));
    free (json);
    sq_info_session_t rows [1] = { { 1, 2, NULL, 3, 4, 5, 6 } };
    sq_wbuf_reset (&w);
    sq_pack_sessions (&w.pk, rows, 1);
    CHECK (sq_json_from_msgpack (w.buf.data, w.buf.size, false, &json, &err) == 0);
    CHECK (json && strcmp (json, "[{\"id\":1,\"client\":2,\"client_name\":\"\",\"tasks\":3,"
                                 "\"unfinished\":4,\"finished\":5,\"failed\":6}]") == 0);
    free (json);
    sq_wbuf_release (&w);
}

int
main (void)
{
    s_test_jobs ();
    s_test_hello ();
    s_test_reply ();
    s_test_requests ();
    s_test_submit ();
    s_test_submit_many ();
    s_test_update ();
    s_test_governor_messages ();
    s_test_peek ();
    s_test_gpus ();
    s_test_table ();
    s_test_table_records ();
    s_test_table_events ();
    s_test_table_keys ();
    s_test_info_map ();
    if (s_failures) {
        fprintf (stderr, "test_common_proto: %d check(s) failed\n", s_failures);
        return 1;
    }
    printf ("test_common_proto: OK\n");
    return 0;
}
