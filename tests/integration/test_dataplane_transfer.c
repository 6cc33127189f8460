/*  Data plane: objects copied governor to governor in chunks with credits,
    and fetched by the client straight from a governor in ranges.

    Two governors: g0 offers the resource "src", g1 "dst", so a task asking
    for src runs on g0 and one asking for dst on g1. A `concat` with one
    input shares its input's bytes, so "concat on g1 of an object made on
    g0" is exactly a copy g0 -> g1, and its output is fetched from g1.

    Sizes: 1 byte and 4 KiB + 1 (both just around inline_max), exactly one
    chunk (4 MiB), a chunk + 1, several chunks + 1, and 1 GiB (128 MiB under
    sanitizers, whose memory checks make every byte ~10x slower; the code
    path is the same), plus 0 and 1 byte read with GREAD by hand, and 40
    concurrent copies (more than the 16 a governor runs at once). */
#include "harness.h"
#include <stdlib.h>
#include <string.h>


#define S_CHUNK (4u << 20)
#define S_MIB (1u << 20)

static uint32_t
s_on (sq_session_t *session, uint32_t input, const char *place)
{
    uint32_t task = harness_task (session, "concat", &input, 1, 1, NULL, 0);
    CHECK_RC (sq_task_set_resource (session, task, place, 1), SQ_OK, "resource");
    uint32_t out = sq_output (task, 0);
    CHECK_RC (sq_keep (session, out), SQ_OK, "keep");
    return out;
}

//  An object of `size` pattern bytes made on g0, copied to g1; both fetched.
static void
s_move (sq_session_t *session, size_t size, uint32_t seed)
{
    uint8_t *data = (uint8_t *) malloc (size? size: 1);
    harness_pattern (data, size, seed);
    uint32_t c = harness_blob (session, data, size);
    uint32_t on_g0 = s_on (session, c, "src");
    uint32_t on_g1 = s_on (session, on_g0, "dst");
    CHECK_RC (sq_submit (session), SQ_OK, "submit of %zu bytes", size);
    FETCH_EXPECT (session, on_g1, data, size);
    FETCH_EXPECT (session, on_g0, data, size);
    free (data);
    harness_note ("moved and fetched %zu bytes", size);
}

//  Fetches a huge object and compares it with `unit` repeated.
static void
s_expect_repeated (sq_session_t *session, uint32_t id, const uint8_t *unit, size_t unit_size,
                   size_t count, const char *what)
{
    double start = harness_now ();
    void *got = NULL;
    size_t got_size = 0;
    CHECK_RC (sq_fetch (session, id, 600000, &got, &got_size, NULL), SQ_OK, "fetch %s", what);
    double took = harness_now () - start;
    CHECK (got_size == unit_size * count, "%s: %zu bytes", what, got_size);
    for (size_t i = 0; i < count; i++)
        CHECK (memcmp ((uint8_t *) got + i * unit_size, unit, unit_size) == 0,
               "%s: unit %zu differs", what, i);
    sq_free (got);
    harness_note ("%s: %zu MiB fetched in %.2f s (%.2f GiB/s)", what, got_size >> 20, took,
                  got_size / took / (1u << 30));
}

static void
s_huge (sq_session_t *session)
{
    size_t units = HARNESS_SANITIZED? 128: 1024;
    uint8_t *unit = (uint8_t *) malloc (S_MIB);
    harness_pattern (unit, S_MIB, 77);
    uint32_t c = harness_blob (session, unit, S_MIB);
    uint32_t *inputs = (uint32_t *) malloc (units * sizeof *inputs);
    for (size_t i = 0; i < units; i++)
        inputs [i] = c;
    uint32_t task = harness_task (session, "concat", inputs, units, 1, NULL, 0);
    CHECK_RC (sq_task_set_resource (session, task, "src", 1), SQ_OK, "resource");
    uint32_t on_g0 = sq_output (task, 0);
    uint32_t on_g1 = s_on (session, on_g0, "dst");
    double start = harness_now ();
    CHECK_RC (sq_submit (session), SQ_OK, "submit huge");
    CHECK_RC (sq_wait (session, &on_g1, 1, 600000), SQ_OK, "wait huge");
    harness_note ("%zu MiB made on g0 and copied to g1 in %.2f s", units, harness_now () - start);
    s_expect_repeated (session, on_g1, unit, S_MIB, units, "copy on g1");
    CHECK_RC (sq_unkeep (session, on_g1), SQ_OK, "unkeep");
    free (inputs);
    free (unit);
}

static void
s_concurrent (sq_session_t *session)
{
    enum { N = 40 };
    size_t size = 3 * S_MIB + 17;
    uint8_t *data [N];
    uint32_t out [N];
    for (int i = 0; i < N; i++) {
        data [i] = (uint8_t *) malloc (size);
        harness_pattern (data [i], size, 1000 + (uint32_t) i);
        uint32_t c = harness_blob (session, data [i], size);
        out [i] = s_on (session, s_on (session, c, "src"), "dst");
    }
    CHECK_RC (sq_submit (session), SQ_OK, "submit concurrent");
    CHECK_RC (sq_wait (session, out, N, 120000), SQ_OK, "wait concurrent");
    for (int i = 0; i < N; i++) {
        FETCH_EXPECT (session, out [i], data [i], size);
        free (data [i]);
    }
    harness_note ("%d concurrent copies of %zu bytes", N, size);
}

//  GREAD by hand against g0's serve socket: 0 and 1 byte objects, a range
//  past the end, an unknown object.
static void
s_gread_raw (harness_t *harness, sq_client_t *client, sq_session_t *session)
{
    uint32_t c0 = harness_blob (session, "", 0);
    uint32_t c1 = harness_blob (session, "x", 1);
    uint32_t o0 = s_on (session, c0, "src");
    uint32_t o1 = s_on (session, c1, "src");
    CHECK_RC (sq_submit (session), SQ_OK, "submit small");
    uint32_t both [2] = { o0, o1 };
    CHECK_RC (sq_wait (session, both, 2, 30000), SQ_OK, "wait small");
    char *json = harness_info (client);
    const char *g = strstr (json, "\"g0\"");
    const char *ep = g? strstr (g, "\"serve_endpoint\""): NULL;
    CHECK (ep, "serve endpoint of g0 in INFO");
    ep = strstr (ep + 16, "tcp://");
    CHECK (ep, "serve endpoint");
    char endpoint [256];
    size_t len = strcspn (ep, "\"");
    CHECK (len < sizeof endpoint, "endpoint length");
    memcpy (endpoint, ep, len);
    endpoint [len] = 0;
    free (json);
    (void) harness;

    raw_t *raw = raw_new_serve (endpoint);
    struct { uint32_t id; uint64_t offset; int code; size_t bytes; } cases [] = {
        { o0, 0, 0, 0 }, { o1, 0, 0, 1 }, { o1, 1, 0, 0 }, { o1, 2, SQ_E_INVALID, 0 },
        { 999999, 0, SQ_E_UNKNOWN_ID, 0 }
    };
    //  With keys a GREAD needs the broker's capability, which it gives only
    //  for objects it does not hold itself (these are inline): each is
    //  refused, which test_security checks in depth.
    for (size_t i = 0; harness_secure () && i < sizeof cases / sizeof cases [0]; i++) {
        cases [i].code = SQ_E_DENIED;
        cases [i].bytes = 0;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        sq_wbuf_t w;
        sq_wbuf_init (&w);
        sq_gread_t gread = {
            .req = raw_next_req (raw), .key = sq_key (sq_session_id (session), cases [i].id),
            .offset = cases [i].offset, .length = 1 << 20
        };
        sq_gread_encode (&w, &gread);
        CHECK (raw_send (raw, &w, NULL, 0) == 0, "send GREAD");
        sq_wbuf_release (&w);
        CHECK (raw_wait_reply (raw, gread.req, 10000) == 0, "GREAD reply %zu", i);
        CHECK ((int) raw->reply.code == cases [i].code, "GREAD %zu: code %u", i, raw->reply.code);
        if (cases [i].code == 0) {
            CHECK (raw->msg.n == 2 && sq_msg_size (&raw->msg, 1) == cases [i].bytes,
                   "GREAD %zu: payload", i);
            if (cases [i].bytes)
                CHECK (memcmp (sq_msg_data (&raw->msg, 1), "x", 1) == 0, "GREAD byte");
        }
    }
    //  A range longer than a chunk may be is malformed: dropped, no reply.
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_gread_t bad = {
        .req = raw_next_req (raw), .key = sq_key (sq_session_id (session), o1),
        .offset = 0, .length = (uint64_t) SQ_CHUNK_MAX + 1
    };
    sq_gread_encode (&w, &bad);
    CHECK (raw_send (raw, &w, NULL, 0) == 0, "send bad GREAD");
    sq_wbuf_release (&w);
    CHECK (raw_wait_reply (raw, bad.req, 300) != 0, "a malformed GREAD is not answered");
    raw_destroy (&raw);
}

//  "objects" summed over the governors in INFO.
static long
s_objects_on_governors (sq_client_t *client)
{
    char *json = harness_info (client);
    const char *p = strstr (json, "\"governors\"");
    long sum = 0;
    while (p && (p = strstr (p, "\"objects\""))) {
        p += strlen ("\"objects\"");
        while (*p == ' ' || *p == ':')
            p++;
        sum += strtol (p, NULL, 10);
    }
    free (json);
    return sum;
}

//  A big constant is uploaded straight to a governor: before any task runs
//  a governor holds it, and it is fetched from there. A SUBMIT naming a
//  governor that does not exist is refused.
static void
s_upload (harness_t *harness, sq_client_t *client, sq_session_t *session)
{
    size_t size = 5 * S_MIB + 3;
    uint8_t *data = (uint8_t *) malloc (size);
    harness_pattern (data, size, 4242);
    uint32_t c = harness_blob (session, data, size);
    CHECK_RC (sq_keep (session, c), SQ_OK, "keep");
    CHECK_RC (sq_submit (session), SQ_OK, "submit constant");
    double until = harness_now () + 10;
    while (s_objects_on_governors (client) < 1 && harness_now () < until)
        harness_pause (20);
    CHECK (s_objects_on_governors (client) >= 1, "the constant is on a governor");
    FETCH_EXPECT (session, c, data, size);
    free (data);

    raw_t *raw = raw_new (harness_endpoint (harness));
    CHECK (raw_hello (raw) == 0, "hello");
    uint32_t s = raw_session_open (raw);
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    uint32_t req = raw_next_req (raw);
    sq_pack_submit_begin (&w.pk, req, s);
    msgpack_pack_array (&w.pk, 1);
    sq_pack_object_uploaded (&w.pk, 1, 0, "", 999, 10, "");
    msgpack_pack_array (&w.pk, 0);
    CHECK (raw_send (raw, &w, NULL, 0) == 0, "send");
    CHECK (raw_wait_reply (raw, req, 5000) == 0 && raw->reply.code == SQ_E_INVALID,
           "upload on an unknown governor refused");
    sq_wbuf_release (&w);
    raw_destroy (&raw);
    harness_note ("a %zu-byte constant was uploaded to a governor", size);
}

int
main (void)
{
    const char *g0 [] = { "--resource", "src=1", NULL };
    const char *g1 [] = { "--resource", "dst=1", NULL };
    const char *const *govs [] = { g0, g1 };
    harness_t *harness = harness_new_govs (2, 2, NULL, govs);
    sq_client_t *client = harness_client (harness);
    sq_session_t *session = sq_session_new (client);
    CHECK (session, "session");

    s_upload (harness, client, session);
    size_t sizes [] = { 1, 4097, S_CHUNK, S_CHUNK + 1, 3 * S_CHUNK + 1 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes [0]; i++)
        s_move (session, sizes [i], (uint32_t) i + 1);
    s_gread_raw (harness, client, session);
    s_concurrent (session);
    s_huge (session);

    sq_session_destroy (&session);
    harness_client_destroy (&client);
    CHECK (harness_destroy (&harness) == 0, "clean shutdown");
    printf ("test_dataplane_transfer: OK\n");
    return 0;
}
