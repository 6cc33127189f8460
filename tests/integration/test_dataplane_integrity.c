/*  Integrity of uploads and copies (docs/protocol.md section 10).

    An uploaded constant counts as a copy only once its governor confirms
    it (UPLOADED) with the size the SUBMIT claims; each waits for the other
    at most --upload-timeout-ms (here 3 s):
      - confirmation first, SUBMIT later: INFO shows the upload waiting,
        then the task using it runs;
      - SUBMIT first, FETCH, upload later: the FETCH waits for the
        confirmation instead of saying the object is nowhere;
      - a lying client (a SUBMIT naming an upload that never happened): the
        task using it fails with SQ_E_LOST, in time, saying why;
      - a SUBMIT claiming another size than was uploaded: the same;
      - a refused SUBMIT: the governor drops the upload at once;
      - an upload no SUBMIT claims: dropped after the timeout;
      - the C library's own uploads still work.
    A copy reported LOST is ordered again at most 3 times: a fake governor
    that reports every copy it gets as lost sees exactly 4, and the task
    waiting there fails (SQ_E_LOST) saying so. */
#include "harness.h"
#include "keys.h"
#include <stdlib.h>
#include <string.h>

//  Long enough for a loaded machine to see what waits before it expires.
#define S_TIMEOUT_MS 3000
//  How long a governor's INFO figures may take to show a change on a
//  machine busy with other tests (LOAD reports come every 250 ms).
#define S_SETTLE_MS 20000

static harness_t *s_h;
static sq_client_t *s_client;

//  A governor's field from INFO (by name).
static long
s_gov_field (const char *name, const char *field)
{
    char *json = harness_info (s_client);
    long value = harness_governor_field (json, name, field);
    sq_free (json);
    return value;
}

//  Waits until the governor's field (or INFO's "uploads" when name is
//  NULL) has `value`, at most timeout_ms; the value seen last.
static long
s_wait_field (const char *name, const char *field, long value, int timeout_ms)
{
    double deadline = harness_now () + timeout_ms / 1000.0;
    while (1) {
        long seen = name? s_gov_field (name, field): harness_info_long (s_client, field);
        if (seen == value || harness_now () > deadline)
            return seen;
        harness_pause (20);
    }
}

//  The serve endpoint of governor `name` (caller frees).
static char *
s_serve_endpoint (const char *name)
{
    char *json = harness_info (s_client);
    char pattern [64];
    snprintf (pattern, sizeof pattern, "\"%s\"", name);
    const char *g = strstr (json, pattern);
    const char *ep = g? strstr (g, "\"serve_endpoint\""): NULL;
    ep = ep? strstr (ep + 16, "tcp://"): NULL;
    CHECK (ep, "serve endpoint of %s in INFO", name);
    char *endpoint = strndup (ep, strcspn (ep, "\""));
    sq_free (json);
    return endpoint;
}

//  Uploads `size` bytes as object `id` of the client's session to governor
//  `gov` at its serve endpoint with PUTs of 1 MiB, with the capability the
//  broker gives for it (keys on).
static void
s_put (raw_t *client, uint32_t gov, const char *endpoint, uint32_t id, size_t size)
{
    uint8_t cap [SQ_CAP_MAX];
    size_t cap_len;
    CHECK (raw_upload_where (client, id, size, gov, cap, &cap_len) == 0, "UPLOAD");
    uint32_t session = client->session;
    raw_t *raw = raw_new_serve (endpoint);
    uint8_t *data = (uint8_t *) malloc (size);
    harness_pattern (data, size, id);
    for (size_t offset = 0; offset < size || offset == 0; offset += 1u << 20) {
        size_t len = size - offset < (1u << 20)? size - offset: 1u << 20;
        sq_wbuf_t w;
        sq_wbuf_init (&w);
        sq_put_t put = { .req = raw_next_req (raw), .key = sq_key (session, id),
                         .offset = offset, .size = size, .content_type = { "", 0 },
                         .capability = { (const char *) cap, (uint32_t) cap_len } };
        sq_put_encode (&w, &put);
        zmq_msg_t payload;
        zmq_msg_init_size (&payload, len);
        memcpy (zmq_msg_data (&payload), data + offset, len);
        CHECK (raw_send (raw, &w, &payload, 1) == 0, "send PUT");
        sq_wbuf_release (&w);
        CHECK (raw_wait_reply (raw, put.req, 10000) == 0 && raw->reply.code == 0, "PUT answered");
        if (size == 0)
            break;
    }
    free (data);
    raw_destroy (&raw);
}

//  SUBMIT on `raw`'s session: object `id` uploaded to governor `gov` with
//  `size` bytes (as the client claims), and a concat of it (task id + 1,
//  output id + 2, kept), plus a task of an unknown kind when `refuse`.
//  Returns the reply code.
static int
s_submit (raw_t *raw, uint32_t id, uint32_t gov, uint64_t size, bool refuse)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    uint32_t req = raw_next_req (raw);
    sq_pack_submit_begin (&w.pk, req, raw->session);
    msgpack_pack_array (&w.pk, 2);
    sq_pack_object_uploaded (&w.pk, id, 0, "", gov, size, "");
    sq_pack_object_spec (&w.pk, id + 2, 1, "", -1, "");
    msgpack_pack_array (&w.pk, 1);
    uint32_t inputs [1] = { id }, outputs [1] = { id + 2 };
    sq_task_spec_t task = {
        .id = id + 1, .kind = { refuse? "nonsense": "concat", refuse? 8: 6 },
        .n_inputs = 1, .inputs = inputs, .n_outputs = 1, .outputs = outputs
    };
    sq_pack_task_spec (&w.pk, &task);
    CHECK (raw_send (raw, &w, NULL, 0) == 0, "send SUBMIT");
    sq_wbuf_release (&w);
    CHECK (raw_wait_reply (raw, req, 5000) == 0, "SUBMIT answered");
    return (int) raw->reply.code;
}

//  WAITs for task `id` of `raw`'s session; its state (1 finished, 2
//  failed) and, if failed, its message (caller frees).
static uint32_t
s_wait_task (raw_t *raw, uint32_t id, int timeout_ms, char **message)
{
    uint32_t ids [1] = { id };
    sq_request_t wait = { .type = SQ_MSG_WAIT, .req = raw_next_req (raw), .session = raw->session,
                          .mode = SQ_WAIT_ALL, .timeout_ms = timeout_ms, .n_ids = 1, .ids = ids };
    CHECK (raw_request (raw, &wait, timeout_ms + 5000) == 0, "WAIT for task %u", id);
    mpr_t r;
    uint32_t n, state = 0;
    uint64_t n_finished, n_failed;
    mpr_str_t text = { NULL, 0 };
    mpr_init (&r, raw->reply.body, raw->reply.body_size);
    mpr_array_exact (&r, 3);
    mpr_uint (&r, &n_finished);
    mpr_uint (&r, &n_failed);
    mpr_array (&r, &n);
    mpr_array_exact (&r, 4);
    mpr_u32 (&r, &id);
    mpr_u32 (&r, &state);
    mpr_skip (&r, NULL, NULL);
    if (mpr_peek (&r) == MPR_STR)
        mpr_str (&r, &text, SQ_MAX_MESSAGE);
    CHECK (mpr_ok (&r) && n == 1, "WAIT reply for task %u", id);
    *message = text.ptr? strndup (text.ptr, text.len): strdup ("");
    return state;
}

static raw_t *
s_raw_client (void)
{
    raw_t *raw = raw_new (harness_endpoint (s_h));
    CHECK (raw_hello (raw) == 0, "raw hello");
    raw_session_open (raw);
    return raw;
}

static void
s_uploads (void)
{
    uint32_t g0 = harness_governor_id (s_h, 0);
    char *serve = s_serve_endpoint ("g0");
    raw_t *raw = s_raw_client ();
    char *message;

    //  Confirmed first, claimed later: it waits for its SUBMIT, then runs.
    s_put (raw, g0, serve, 1, 100000);
    CHECK (s_wait_field (NULL, "uploads", 1, 5000) == 1, "the confirmation waits for its SUBMIT");
    CHECK (s_submit (raw, 1, g0, 100000, false) == 0, "SUBMIT of a confirmed upload");
    CHECK (s_wait_task (raw, 2, 10000, &message) == 1, "its consumer finished: %s", message);
    free (message);
    CHECK (s_wait_field (NULL, "uploads", 0, S_SETTLE_MS) == 0, "nothing waits any more");
    harness_note ("an upload confirmed before its SUBMIT was used");

    //  Claimed first, fetched, uploaded later: the FETCH waits for the
    //  confirmation rather than say the object is nowhere.
    CHECK (s_submit (raw, 5, g0, 70000, false) == 0, "SUBMIT before the upload");
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_request_t fetch = { .type = SQ_MSG_FETCH, .req = raw_next_req (raw), .session = raw->session,
                           .id = 5 + 2, .timeout_ms = 10000 };
    sq_request_encode (&w, &fetch);
    CHECK (raw_send (raw, &w, NULL, 0) == 0, "send FETCH");
    sq_wbuf_release (&w);
    CHECK (raw_wait_reply (raw, fetch.req, 200) != 0, "no answer before the upload");
    s_put (raw, g0, serve, 5, 70000);
    CHECK (raw_wait_reply (raw, fetch.req, 5000) == 0 && raw->reply.code == 0,
           "the FETCH is answered once the upload is confirmed");
    CHECK (s_wait_task (raw, 6, 10000, &message) == 1, "its consumer finished: %s", message);
    free (message);
    harness_note ("a FETCH that overtook the confirmation waited for it");

    //  A lie: nothing was uploaded.
    double start = harness_now ();
    CHECK (s_submit (raw, 10, g0, 50000, false) == 0, "SUBMIT of an upload that never was");
    CHECK (s_wait_task (raw, 11, 20000, &message) == 2, "the consumer of a lie fails");
    double took = harness_now () - start;
    CHECK (strstr (message, "was not confirmed by that governor"), "message: %s", message);
    CHECK (took >= S_TIMEOUT_MS / 1000.0 * 0.9 && took < S_TIMEOUT_MS / 1000.0 + 5,
           "failed after the timeout (%.2f s)", took);
    harness_note ("a SUBMIT naming no upload failed its consumer in %.2f s: %s", took, message);
    free (message);

    //  A lie about the size.
    s_put (raw, g0, serve, 20, 30000);
    CHECK (s_submit (raw, 20, g0, 60000, false) == 0, "SUBMIT claiming another size");
    CHECK (s_wait_task (raw, 21, 10000, &message) == 2, "the consumer of a wrong size fails");
    CHECK (strstr (message, "has 30000 bytes there, not the 60000"), "message: %s", message);
    harness_note ("a wrong size failed its consumer: %s", message);
    free (message);
    //  Left on g0: uploads 1 and 5 and their copies 3 and 7 (the wrong-sized
    //  one was dropped).
    CHECK (s_wait_field ("g0", "objects", 4, S_SETTLE_MS) == 4, "only uploads 1, 5 and their copies are on g0");

    //  A refused SUBMIT: its upload is dropped at once (well before the
    //  timeout would).
    s_put (raw, g0, serve, 30, 40000);
    CHECK (s_wait_field ("g0", "objects", 5, S_SETTLE_MS) == 5, "the upload is on g0");
    start = harness_now ();
    CHECK (s_submit (raw, 30, g0, 40000, true) == SQ_E_UNKNOWN_KIND, "refused SUBMIT");
    CHECK (s_wait_field ("g0", "objects", 4, S_SETTLE_MS) == 4, "the refused upload is dropped");
    CHECK (harness_now () - start < S_TIMEOUT_MS / 1000.0, "dropped before the timeout");

    //  An upload no SUBMIT claims goes after the timeout.
    s_put (raw, g0, serve, 40, 40000);
    CHECK (s_wait_field ("g0", "objects", 5, S_SETTLE_MS) == 5, "the unclaimed upload is on g0");
    CHECK (s_wait_field ("g0", "objects", 4, S_TIMEOUT_MS + S_SETTLE_MS) == 4, "the unclaimed upload is dropped");
    CHECK (s_wait_field (NULL, "uploads", 0, S_SETTLE_MS) == 0, "nothing waits");
    harness_note ("refused and unclaimed uploads were dropped from g0");
    raw_destroy (&raw);
    free (serve);

    //  The library's uploads (SUBMIT right after the last PUT) are confirmed in time.
    sq_session_t *session = sq_session_new (s_client);
    size_t size = 3u << 20;
    uint8_t *data = (uint8_t *) malloc (size);
    harness_pattern (data, size, 77);
    uint32_t c = harness_blob (session, data, size);
    uint32_t copy = harness_task1 (session, "concat", &c, 1, NULL, 0);
    CHECK_RC (sq_keep (session, copy), SQ_OK, "keep");
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    FETCH_EXPECT (session, copy, data, size);
    free (data);
    sq_session_destroy (&session);
}

//  A fake governor offering "fake": says HELLO, then reports every copy it
//  receives as LOST, until the task it was given fails.
static void
s_lost_copies (void)
{
    raw_t *fake = raw_new_governor (harness_endpoint (s_h));
    zsock_t *data = zsock_new (ZMQ_PULL);
    CHECK (data, "fake data socket");
    if (harness_secure ()) {
        //  A governor's data socket is a CURVE server with the governor key
        //  (no ZAP handler here: every client is let in).
        sq_cert_t cert;
        char err [600];
        CHECK (sq_cert_load (&cert, harness_key ("fake.key"), err, sizeof err) == 0, "%s", err);
        int one = 1;
        zmq_setsockopt (zsock_resolve (data), ZMQ_CURVE_SERVER, &one, sizeof one);
        zmq_setsockopt (zsock_resolve (data), ZMQ_CURVE_SECRETKEY, cert.secret_key, 32);
    }
    CHECK (zsock_bind (data, "tcp://127.0.0.1:*") > 0, "fake data socket bound");
    char *data_ep = zsock_last_endpoint (data);
    sq_resource_t res [2] = { { { "cpus", 4 }, 1 }, { { "fake", 4 }, 1 } };
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_hello_encode_governor (&w, 1, "fake", 1, data_ep, "tcp://127.0.0.1:1", res, 2, NULL, 0);
    CHECK (raw_send (fake, &w, NULL, 0) == 0 && raw_wait_reply (fake, 1, 5000) == 0
           && fake->reply.code == 0, "fake governor accepted");

    //  An object made on g0 (too big to be inline), consumed on the fake.
    sq_session_t *session = sq_session_new (s_client);
    uint8_t bytes [20000];
    harness_pattern (bytes, sizeof bytes, 3);
    uint32_t c = harness_blob (session, bytes, sizeof bytes);
    uint32_t made = harness_task1 (session, "concat", &c, 1, NULL, 0);
    CHECK_RC (sq_task_set_resource (session, made - 1, "src", 1), SQ_OK, "src");
    uint32_t used = harness_task1 (session, "concat", &made, 1, NULL, 0);
    CHECK_RC (sq_task_set_resource (session, used - 1, "fake", 1), SQ_OK, "fake");
    CHECK_RC (sq_submit (session), SQ_OK, "submit");

    //  Every copy that arrives (a chunk at offset 0 of a new transfer) is
    //  reported lost, until the task there fails.
    int copies = 0;
    uint32_t last_transfer = 0;
    double deadline = harness_now () + 20;
    uint32_t ids [1] = { used - 1 };
    int rc = SQ_E_TIMEOUT;
    while (harness_now () < deadline) {
        zmq_pollitem_t items [] = { { zsock_resolve (data), 0, ZMQ_POLLIN, 0 },
                                    { fake->handle, 0, ZMQ_POLLIN, 0 } };
        zmq_poll (items, 2, 100);
        if (items [1].revents & ZMQ_POLLIN)
            raw_drain (fake);       //  ASSIGN, SEND..., nothing to answer
        sq_bare_encode (&w, SQ_MSG_HEARTBEAT);
        raw_send (fake, &w, NULL, 0);
        if (items [0].revents & ZMQ_POLLIN) {
            sq_msg_t msg;
            sq_msg_init (&msg);
            CHECK (sq_msg_recv (&msg, zsock_resolve (data), 0, 10) == 0, "chunk");
            sq_chunk_t chunk;
            sq_errbuf_t err;
            CHECK (sq_chunk_decode (&chunk, sq_msg_data (&msg, 0), sq_msg_size (&msg, 0), &err) == 0,
                   "CHUNK decodes");
            if (chunk.offset == 0 && chunk.transfer != last_transfer) {
                last_transfer = chunk.transfer;
                copies++;
                sq_batch_header (&w, SQ_MSG_UPDATE, 1);
                sq_pack_lost (&w.pk, chunk.key);
                CHECK (raw_send (fake, &w, NULL, 0) == 0, "LOST");
            }
            sq_msg_release (&msg);
        }
        rc = sq_wait (session, ids, 1, 0);
        if (rc != SQ_E_TIMEOUT)
            break;
    }
    CHECK (rc == SQ_E_TASK_FAILED, "the task on the fake governor failed, not %d", rc);
    const char *message = sq_client_errmsg (s_client);
    CHECK (strstr (message, "could not be copied to governor"), "message: %s", message);
    CHECK (copies == 4, "the copy was sent %d times, not 1 + 3", copies);
    harness_note ("a copy lost %d times: %s", copies, message);
    sq_session_destroy (&session);
    sq_wbuf_release (&w);
    zstr_free (&data_ep);
    zsock_destroy (&data);
    raw_destroy (&fake);
}

int
main (void)
{
    const char *broker [] = { "--upload-timeout-ms", "3000", NULL };
    const char *g0 [] = { "--resource", "src=8", NULL };
    const char *const *govs [] = { g0 };
    s_h = harness_new_govs (1, 2, broker, govs);
    s_client = harness_client (s_h);
    s_uploads ();
    s_lost_copies ();
    harness_client_destroy (&s_client);
    CHECK (harness_destroy (&s_h) == 0, "clean shutdown");
    printf ("test_dataplane_integrity: OK\n");
    return 0;
}
