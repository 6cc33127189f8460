/*  test_hostile: a broker under attack by raw peers keeps serving a
    well-behaved client, correctly, and survives. Hostile traffic is
    interleaved (single-threaded) with rounds of the good client; every
    round's result is checked byte-exact. The random generator is seeded
    with a fixed value so a failure can be replayed. */
#include "harness.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static harness_t *h;
static sq_client_t *g;             //  the good client
static sq_session_t *gs;
static int s_rounds;
static uint64_t s_rng = 0x5eed5eed12345678ull;

static uint32_t
s_rand (void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return (uint32_t) (s_rng >> 16);
}

//  One round of the good client: a small graph crossing the inline limit
//  now and then, result checked byte-exact, with a 10 s deadline so that a
//  blocked broker fails the test rather than hanging it.
static void
s_round (const char *after)
{
    size_t size = 1 + s_rand () % 6000;
    uint8_t *data = (uint8_t *) malloc (size + 16);
    harness_pattern (data, size, (uint32_t) s_rounds);
    uint32_t a = harness_blob (gs, data, size);
    uint32_t b = harness_blob (gs, "-tail", 5);
    uint32_t ab [] = { a, b };
    uint32_t cat = harness_task1 (gs, "concat", ab, 2, NULL, 0);
    size_t cfg_size;
    void *config = sq_config_slice (1, -1, &cfg_size);
    uint32_t out = harness_task1 (gs, "slice", &cat, 1, config, cfg_size);
    CHECK_RC (sq_keep (gs, out), SQ_OK, "keep");
    double t0 = harness_now ();
    CHECK_RC (sq_submit (gs), SQ_OK, "good round %d (after %s): submit", s_rounds, after);
    memcpy (data + size, "-tail", 5);
    void *got = NULL;
    size_t got_size = 0;
    CHECK_RC (sq_fetch (gs, out, 10000, &got, &got_size, NULL), SQ_OK,
              "good round %d (after %s): fetch", s_rounds, after);
    CHECK (got_size == size + 4 && memcmp (got, data + 1, size + 4) == 0,
           "good round %d (after %s): result differs (%zu bytes, expected %zu)",
           s_rounds, after, got_size, size + 4);
    CHECK_RC (sq_unkeep (gs, out), SQ_OK, "unkeep");
    CHECK (harness_now () - t0 < 10, "good round took %.1f s", harness_now () - t0);
    sq_free (got);
    free (data);
    s_rounds++;
}

static void
s_alive (const char *after)
{
    CHECK (harness_broker_alive (h), "broker alive after %s", after);
    s_round (after);
    harness_note ("broker alive and serving after %s (%d good rounds so far)", after, s_rounds);
}

static void
s_send_random_frames (raw_t *raw, int messages)
{
    uint8_t buf [512];
    for (int i = 0; i < messages; i++) {
        int frames = 1 + (int) (s_rand () % 4);
        for (int f = 0; f < frames; f++) {
            size_t size = s_rand () % sizeof buf;
            for (size_t j = 0; j < size; j++)
                buf [j] = (uint8_t) s_rand ();
            //  now and then make it look like msgpack to get deeper
            if (size > 2 && (s_rand () & 1)) {
                buf [0] = 0x90 | (uint8_t) (s_rand () % 8);
                buf [1] = (uint8_t) (s_rand () % 80);
            }
            raw_send_bytes (raw, buf, size, f + 1 < frames);
        }
        if (i % 50 == 49) {
            raw_drain (raw);
            s_round ("random frames");
        }
    }
    raw_drain (raw);
}

static void
s_send_hostile_headers (raw_t *raw)
{
    //  Declared counts far larger than the frame: array32, map32, str32,
    //  bin32, nested arrays; and one value of every type at the top.
    static const uint8_t huge_array [] = { 0xdd, 0xff, 0xff, 0xff, 0xff, 0x0c, 0x01 };
    static const uint8_t huge_map [] = { 0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'x' };
    static const uint8_t huge_str [] = { 0x93, 0x0c, 0x01, 0xdb, 0xff, 0xff, 0xff, 0xf0, 'a' };
    static const uint8_t huge_bin [] = { 0x93, 0x0c, 0x01, 0xc6, 0x7f, 0xff, 0xff, 0xff };
    static const uint8_t submit_huge [] = { 0x95, 0x0c, 0x01, 0x01, 0xdd, 0x7f, 0xff, 0xff, 0xff };
    static const uint8_t submit_huge_tasks [] = { 0x95, 0x0c, 0x01, 0x01, 0x90, 0xdd, 0x7f, 0xff, 0xff, 0xff };
    static const uint8_t deep [] = {
        0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91,
        0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91,
        0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91 };
    static const uint8_t scalars [][2] = {
        { 0xc0, 0 }, { 0xc3, 0 }, { 0x05, 0 }, { 0xff, 0 }, { 0xa0, 0 }, { 0x80, 0 }, { 0x90, 0 },
        { 0xc1, 0 } /* never-used byte */ };
    raw_send_bytes (raw, huge_array, sizeof huge_array, false);
    raw_send_bytes (raw, huge_map, sizeof huge_map, false);
    raw_send_bytes (raw, huge_str, sizeof huge_str, false);
    raw_send_bytes (raw, huge_bin, sizeof huge_bin, false);
    raw_send_bytes (raw, submit_huge, sizeof submit_huge, false);
    raw_send_bytes (raw, submit_huge_tasks, sizeof submit_huge_tasks, false);
    raw_send_bytes (raw, deep, sizeof deep, false);
    for (size_t i = 0; i < sizeof scalars / sizeof scalars [0]; i++)
        raw_send_bytes (raw, scalars [i], 1, false);
    //  Empty frames: alone, and several in one message.
    raw_send_bytes (raw, "", 0, false);
    raw_send_bytes (raw, "", 0, true);
    raw_send_bytes (raw, "", 0, true);
    raw_send_bytes (raw, "", 0, false);
}

//  --------------------------------------------------------------------------
//  Messages with one field of the wrong type. Fields are written through
//  s_fw_*; the field numbered `poison` gets a value of `kind` instead.

typedef struct {
    msgpack_packer *pk;
    int index;
    int poison;
    int kind;                   //  0 wrong type, 1 nil, 2 float, 3 2^40, 4 bool
} s_fw_t;

#define S_POISON_KINDS 5

static bool
s_poison (s_fw_t *w, bool string_field)
{
    if (w->index++ != w->poison)
        return false;
    switch (w->kind) {
        case 0:
            if (string_field)
                msgpack_pack_uint32 (w->pk, 12345);
            else
                sq_pack_cstr (w->pk, "poison");
            break;
        case 1: msgpack_pack_nil (w->pk); break;
        case 2: msgpack_pack_double (w->pk, 1.5); break;
        case 3: msgpack_pack_uint64 (w->pk, 1ull << 40); break;
        default: msgpack_pack_true (w->pk); break;
    }
    return true;
}

static void s_fw_uint (s_fw_t *w, uint64_t v) { if (!s_poison (w, false)) msgpack_pack_uint64 (w->pk, v); }
static void s_fw_int (s_fw_t *w, int64_t v) { if (!s_poison (w, false)) msgpack_pack_int64 (w->pk, v); }
static void s_fw_str (s_fw_t *w, const char *s) { if (!s_poison (w, true)) sq_pack_cstr (w->pk, s); }
static void s_fw_nil (s_fw_t *w) { if (!s_poison (w, true)) msgpack_pack_nil (w->pk); }
static void s_fw_array (s_fw_t *w, uint32_t n) { if (!s_poison (w, false)) msgpack_pack_array (w->pk, n); }
static void s_fw_map (s_fw_t *w, uint32_t n) { if (!s_poison (w, false)) msgpack_pack_map (w->pk, n); }

//  Writes message `which` with fields through w; returns the number of
//  fields written (so callers know how many poison positions there are).
//  *n_payloads: payload frames the message needs.
static int
s_write_message (s_fw_t *w, int which, uint32_t req, uint32_t session, int *n_payloads)
{
    *n_payloads = 0;
    switch (which) {
        case 0:     //  SUBMIT
            s_fw_array (w, 5); s_fw_uint (w, SQ_MSG_SUBMIT); s_fw_uint (w, req); s_fw_uint (w, session);
            s_fw_array (w, 2);
                s_fw_array (w, 5); s_fw_uint (w, 501); s_fw_uint (w, 0); s_fw_str (w, "text/plain");
                s_fw_int (w, 1); s_fw_str (w, "obj");
                s_fw_array (w, 5); s_fw_uint (w, 503); s_fw_uint (w, 0); s_fw_str (w, "");
                s_fw_int (w, -1); s_fw_str (w, "out");
            s_fw_array (w, 1);
                s_fw_array (w, 10); s_fw_uint (w, 502); s_fw_str (w, "noop");
                s_fw_array (w, 1); s_fw_uint (w, 501);
                s_fw_array (w, 1); s_fw_uint (w, 503);
                s_fw_nil (w);
                s_fw_map (w, 1); s_fw_str (w, "cpus"); s_fw_uint (w, 1);
                s_fw_int (w, 0); s_fw_uint (w, 0); s_fw_uint (w, 0); s_fw_str (w, "task");
            *n_payloads = 1;
            break;
        case 1:     //  WAIT
            s_fw_array (w, 6); s_fw_uint (w, SQ_MSG_WAIT); s_fw_uint (w, req); s_fw_uint (w, session);
            s_fw_uint (w, SQ_WAIT_ALL); s_fw_array (w, 2); s_fw_uint (w, 601); s_fw_uint (w, 602);
            s_fw_int (w, 100);
            break;
        case 2:     //  FETCH
            s_fw_array (w, 5); s_fw_uint (w, SQ_MSG_FETCH); s_fw_uint (w, req); s_fw_uint (w, session);
            s_fw_uint (w, 601); s_fw_int (w, 100);
            break;
        case 3:     //  KEEP
        case 4:     //  UNKEEP
        case 5:     //  CANCEL
            s_fw_array (w, 4);
            s_fw_uint (w, which == 3? SQ_MSG_KEEP: which == 4? SQ_MSG_UNKEEP: SQ_MSG_CANCEL);
            s_fw_uint (w, req); s_fw_uint (w, session);
            s_fw_array (w, 2); s_fw_uint (w, 601); s_fw_uint (w, 602);
            break;
        case 6:     //  SESSION_CLOSE of a session that does not exist
            s_fw_array (w, 3); s_fw_uint (w, SQ_MSG_SESSION_CLOSE); s_fw_uint (w, req);
            s_fw_uint (w, 999999);
            break;
        case 7:     //  INFO
            s_fw_array (w, 2); s_fw_uint (w, SQ_MSG_INFO); s_fw_uint (w, req);
            break;
        default:    //  HELLO (twice: refused anyway)
            s_fw_array (w, 5); s_fw_uint (w, SQ_MSG_HELLO); s_fw_uint (w, req);
            s_fw_uint (w, SQUALL_PROTOCOL_VERSION); s_fw_str (w, "client"); s_fw_str (w, "again");
            break;
    }
    return w->index;
}

#define S_MESSAGE_KINDS 9

static void
s_poisoned_fields (raw_t *raw)
{
    int sent = 0, replied = 0, ok_replies = 0;
    for (int which = 0; which < S_MESSAGE_KINDS; which++) {
        //  Count the fields with no poison.
        sq_wbuf_t probe;
        sq_wbuf_init (&probe);
        s_fw_t pw = { &probe.pk, 0, -1, 0 };
        int n_payloads;
        int fields = s_write_message (&pw, which, 1, raw->session, &n_payloads);
        sq_wbuf_release (&probe);
        //  Send them all, then collect what comes back: one reply per
        //  request id at most, and never OK for a field of the wrong type.
        uint32_t first = raw->req + 1;
        int n = fields * S_POISON_KINDS;
        for (int poison = 0; poison < fields; poison++)
            for (int kind = 0; kind < S_POISON_KINDS; kind++) {
                sq_wbuf_t w;
                sq_wbuf_init (&w);
                uint32_t req = raw_next_req (raw);
                s_fw_t fw = { &w.pk, 0, poison, kind };
                s_write_message (&fw, which, req, raw->session, &n_payloads);
                zmq_msg_t payload;
                zmq_msg_init_size (&payload, 4);
                memcpy (zmq_msg_data (&payload), "data", 4);
                if (n_payloads == 0)
                    zmq_msg_close (&payload);
                CHECK (raw_send (raw, &w, &payload, (size_t) n_payloads) == 0, "send poisoned");
                sq_wbuf_release (&w);
                sent++;
            }
        //  Sentinel: a PING whose reply ends the collection.
        uint32_t ping = raw_next_req (raw);
        sq_request_t q = { .type = SQ_MSG_PING, .req = ping };
        sq_wbuf_t w;
        sq_wbuf_init (&w);
        sq_request_encode (&w, &q);
        raw_send (raw, &w, NULL, 0);
        sq_wbuf_release (&w);
        double deadline = harness_now () + 10;
        bool got_ping = false;
        while (!got_ping && harness_now () < deadline) {
            //  raw_wait_reply skips non-matching replies, so look at each.
            zmq_pollitem_t item = { raw->handle, 0, ZMQ_POLLIN, 0 };
            if (zmq_poll (&item, 1, 200) <= 0)
                continue;
            if (sq_msg_recv (&raw->msg, raw->handle, ZMQ_DONTWAIT, SQ_MAX_FRAMES) || raw->msg.n == 0)
                continue;
            sq_errbuf_t err;
            CHECK (sq_reply_decode (&raw->reply, sq_msg_data (&raw->msg, 0),
                                    sq_msg_size (&raw->msg, 0), &err) == 0,
                   "broker's reply decodes: %s", err.text);
            uint32_t req = raw->reply.req;
            if (req == ping) {
                got_ping = true;
                continue;
            }
            if (req < first || req >= first + (uint32_t) n)
                continue;           //  e.g. req 0 for an unreadable request
            replied++;
            int poison = (int) (req - first) / S_POISON_KINDS;
            int kind = (int) (req - first) % S_POISON_KINDS;
            if (raw->reply.code == SQ_OK) {
                ok_replies++;
                printf ("  note: message %d with field %d poisoned (kind %d) got an OK reply\n",
                        which, poison, kind);
                CHECK (kind != 0, "a field of the wrong type (message %d, field %d) was accepted",
                       which, poison);
            }
        }
        CHECK (got_ping, "PING after poisoned messages of kind %d answered within 10 s", which);
        s_round ("poisoned fields");
    }
    harness_note ("%d messages with one poisoned field sent; %d got a matching reply, "
                  "%d of them OK (only value-range poisons may be)", sent, replied, ok_replies);
}

static void
s_truncated_submits (raw_t *raw)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    s_fw_t fw = { &w.pk, 0, -1, 0 };
    int n_payloads;
    s_write_message (&fw, 0, 77, raw->session, &n_payloads);
    size_t size = w.buf.size;
    uint8_t *full = (uint8_t *) malloc (size);
    memcpy (full, w.buf.data, size);
    sq_wbuf_release (&w);
    for (size_t len = 0; len < size; len++) {
        raw_send_bytes (raw, full, len, true);
        raw_send_bytes (raw, "data", 4, false);
        if (len % 16 == 15)
            raw_drain (raw);
    }
    free (full);
    raw_drain (raw);
    harness_note ("%zu truncated SUBMITs sent", size);
}

static void
s_unknown_types (raw_t *raw)
{
    uint32_t types [] = { 0, 3, 9, 20, 29, SQ_MSG_REPLY, SQ_MSG_UPDATE, SQ_MSG_HEARTBEAT, SQ_MSG_LOAD,
                          SQ_MSG_ASSIGN, SQ_MSG_SEND, SQ_MSG_DROP, SQ_MSG_STOP, SQ_MSG_OBJECT,
                          SQ_MSG_GFETCH, 99, 255, 65535, 0xffffffffu };
    for (size_t i = 0; i < sizeof types / sizeof types [0]; i++) {
        sq_wbuf_t w;
        sq_wbuf_init (&w);
        msgpack_pack_array (&w.pk, 2);
        msgpack_pack_uint32 (&w.pk, types [i]);
        msgpack_pack_uint32 (&w.pk, raw_next_req (raw));
        raw_send (raw, &w, NULL, 0);
        sq_wbuf_release (&w);
        //  and a bare type
        sq_wbuf_init (&w);
        msgpack_pack_array (&w.pk, 1);
        msgpack_pack_uint32 (&w.pk, types [i]);
        raw_send (raw, &w, NULL, 0);
        sq_wbuf_release (&w);
    }
    raw_drain (raw);
}

static void
s_many_frames (raw_t *raw)
{
    //  A valid PING followed by 99 999 empty frames.
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    uint32_t req = raw_next_req (raw);
    msgpack_pack_array (&w.pk, 2);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_PING);
    msgpack_pack_uint32 (&w.pk, req);
    raw_send_bytes (raw, w.buf.data, w.buf.size, true);
    sq_wbuf_release (&w);
    for (int i = 1; i < 100000; i++)
        CHECK (raw_send_bytes (raw, "", 0, i + 1 < 100000) == 0, "send frame %d", i);
    int got = raw_wait_reply (raw, req, 10000);
    harness_note ("message of 100 000 frames sent (%s)", got == 0
                  ? sq_strerror ((int) raw->reply.code): "no reply");
}

static void
s_huge_frame (raw_t *raw)
{
    size_t size = 50u << 20;
    uint8_t *junk = (uint8_t *) malloc (size);
    CHECK (junk, "malloc 50 MiB");
    harness_pattern (junk, size, 99);
    junk [0] = 0x95;            //  looks like the start of a 5-element array
    junk [1] = 0x0c;
    double t0 = harness_now ();
    int rc = raw_send_bytes (raw, junk, size, false);
    free (junk);
    harness_note ("50 MiB garbage frame %s in %.2f s", rc == 0? "sent": "refused by zmq",
                  harness_now () - t0);
}

//  --------------------------------------------------------------------------
//  A fake governor: HELLO, then events about tasks it was never given.

static void
s_update (raw_t *raw, void (*fill) (msgpack_packer *pk, void *arg), uint32_t count, void *arg,
          const char *payload)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, count);
    fill (&w.pk, arg);
    zmq_msg_t frame;
    if (payload) {
        zmq_msg_init_size (&frame, strlen (payload));
        memcpy (zmq_msg_data (&frame), payload, strlen (payload));
    }
    raw_send (raw, &w, payload? &frame: NULL, payload? 1: 0);
    sq_wbuf_release (&w);
}

typedef struct {
    uint64_t task;
    uint64_t output;
} s_target_t;

static void
s_fill_forged (msgpack_packer *pk, void *arg)
{
    s_target_t *t = (s_target_t *) arg;
    //  6 attempts x (STARTED, FINISHED with forged inline data, FAILED) + LOCATED + LOST
    for (uint32_t attempt = 0; attempt < 6; attempt++) {
        sq_output_ref_t out = { t->output, 6, 1 };
        sq_pack_started (pk, t->task, attempt);
        sq_pack_finished (pk, t->task, attempt, &out, 1, 10);
        sq_pack_failed (pk, t->task, attempt, "forged failure", 10);
    }
    sq_pack_located (pk, t->output, 6);
    sq_pack_lost (pk, t->output);
}

static void
s_fill_unknown (msgpack_packer *pk, void *arg)
{
    (void) arg;
    uint64_t unknown = sq_key (0xfffff, 7);
    sq_output_ref_t outs [] = { { sq_key (0xfffff, 8), 6, 1 }, { sq_key (0xfffff, 9), 3, 5 } };
    sq_pack_started (pk, unknown, 1);
    sq_pack_finished (pk, unknown, 1, outs, 2, 1);
    sq_pack_failed (pk, unknown, 1, "nope", 1);
    sq_pack_located (pk, sq_key (0xfffff, 8), 1ull << 50);
    sq_pack_lost (pk, sq_key (0, 0));
    sq_pack_finished (pk, 0, 0xffffffffu, outs, 2, 0);
}

static void
s_fill_garbage (msgpack_packer *pk, void *arg)
{
    (void) arg;
    //  events of the wrong shape
    msgpack_pack_array (pk, 2);
    msgpack_pack_uint32 (pk, 77);
    msgpack_pack_uint32 (pk, 1);
    sq_pack_cstr (pk, "not an event");
    msgpack_pack_array (pk, 5);
    msgpack_pack_uint32 (pk, SQ_EV_FINISHED);
    sq_pack_cstr (pk, "task");
    msgpack_pack_nil (pk);
    msgpack_pack_array (pk, 1);
    msgpack_pack_uint32 (pk, 3);
    msgpack_pack_double (pk, -1.0);
}

//  A finished attempt of a task the broker does not count (here: one it
//  never knew) whose output was stored on the governor.
static void
s_fill_stale (msgpack_packer *pk, void *arg)
{
    (void) arg;
    sq_output_ref_t out = { sq_key (0xfffff, 21), 30000, -1 };
    sq_pack_finished (pk, sq_key (0xfffff, 20), 0, &out, 1, 1);
}

//  Does the message just read match? (s_wait_for)
typedef bool (s_match_fn) (raw_t *raw, const void *arg);

//  Reads until a message matches: 0, or -1 at the deadline.
static int
s_wait_for (raw_t *raw, s_match_fn *match, const void *arg, int timeout_ms)
{
    double deadline = harness_now () + timeout_ms / 1000.0;
    while (harness_now () < deadline) {
        zmq_pollitem_t item = { raw->handle, 0, ZMQ_POLLIN, 0 };
        if (zmq_poll (&item, 1, 100) <= 0)
            continue;
        while (sq_msg_recv (&raw->msg, raw->handle, ZMQ_DONTWAIT, SQ_MAX_FRAMES) == 0)
            if (raw->msg.n && match (raw, arg))
                return 0;
    }
    return -1;
}

//  A message of type *arg
static bool
s_is_type (raw_t *raw, const void *arg)
{
    uint32_t got, req;
    return sq_proto_peek (sq_msg_data (&raw->msg, 0), sq_msg_size (&raw->msg, 0), &got, &req) == 0
        && got == *(const uint32_t *) arg;
}

//  A DROP naming the key *arg
static bool
s_drops_key (raw_t *raw, const void *arg)
{
    sq_errbuf_t err;
    sq_iter_t it;
    uint64_t dropped;
    bool found = false;
    int rc = sq_batch_begin (&it, SQ_MSG_DROP, sq_msg_data (&raw->msg, 0),
                             sq_msg_size (&raw->msg, 0), &err);
    while (rc == 0 && (rc = sq_drop_next (&it, &dropped)) == 1) {
        rc = 0;
        found |= dropped == *(const uint64_t *) arg;
    }
    sq_iter_release (&it);
    return found;
}

static int
s_wait_type (raw_t *raw, uint32_t type, int timeout_ms)
{
    return s_wait_for (raw, s_is_type, &type, timeout_ms);
}

static int
s_wait_drop (raw_t *raw, uint64_t key, int timeout_ms)
{
    return s_wait_for (raw, s_drops_key, &key, timeout_ms);
}

static void
s_fake_governor (void)
{
    //  A real task of the good client, running on a real governor first.
    uint32_t k = harness_blob_str (gs, "genuine");
    size_t size;
    void *config = sq_config_sleep (1.5, &size);
    uint32_t task = harness_task (gs, "sleep", &k, 1, 1, config, size);
    uint32_t out = sq_output (task, 0);
    CHECK_RC (sq_keep (gs, out), SQ_OK, "keep");
    CHECK_RC (sq_submit (gs), SQ_OK, "submit genuine sleep");
    long running = harness_info_wait_min (g, "tasks.busy", 1, 10000);
    CHECK (running >= 1, "genuine sleep running on a real governor (running = %ld)", running);

    raw_t *fake = raw_new_governor (harness_endpoint (h));
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    uint32_t req = raw_next_req (fake);
    sq_resource_t cpus = { { "cpus", 4 }, 1 };
    sq_hello_encode_governor (&w, req, "fake-governor", 1, "tcp://127.0.0.1:9",
                              "tcp://127.0.0.1:9", &cpus, 1, NULL, 0);
    raw_send (fake, &w, NULL, 0);
    sq_wbuf_release (&w);
    int got = raw_wait_reply (fake, req, 5000);
    harness_note ("fake governor HELLO -> %s", got? "no reply": sq_strerror ((int) fake->reply.code));

    s_target_t target = { sq_key (sq_session_id (gs), task), sq_key (sq_session_id (gs), out) };
    s_update (fake, s_fill_forged, 6 * 3 + 2, &target, "forged");
    s_update (fake, s_fill_unknown, 6, NULL, "abcdef");
    s_update (fake, s_fill_garbage, 4, NULL, NULL);
    s_update (fake, s_fill_unknown, 6, NULL, NULL);        //  frame indexes with no frames
    raw_send_bytes (fake, "\x92\x1e\xdd\xff\xff\xff\xff", 7, false);    //  UPDATE, huge count
    sq_wbuf_init (&w);
    msgpack_pack_array (&w.pk, 3);                          //  LOAD with wrong fields
    msgpack_pack_uint32 (&w.pk, SQ_MSG_LOAD);
    sq_pack_cstr (&w.pk, "x");
    msgpack_pack_nil (&w.pk);
    raw_send (fake, &w, NULL, 0);
    sq_wbuf_release (&w);
    sq_wbuf_init (&w);
    sq_bare_encode (&w, SQ_MSG_HEARTBEAT);
    raw_send (fake, &w, NULL, 0);
    sq_wbuf_release (&w);
    //  The genuine result must be the genuine one.
    FETCH_EXPECT (gs, out, "genuine", 7);
    s_update (fake, s_fill_stale, 1, NULL, NULL);
    CHECK (s_wait_drop (fake, sq_key (0xfffff, 21), 10000) == 0,
           "the output a stale attempt stored on its governor is dropped there");
    harness_note ("forged FINISHED/FAILED/LOST events for a real task (attempts 0-5) from a "
                  "governor that never ran it were ignored: the result is genuine");

    sq_wbuf_init (&w);
    sq_bare_encode (&w, SQ_MSG_BYE);
    raw_send (fake, &w, NULL, 0);
    sq_wbuf_release (&w);
    CHECK (s_wait_type (fake, SQ_MSG_BYE, 10000) == 0,
           "the broker answers a governor's BYE with BYE (so it can close with nothing "
           "half-received)");
    raw_destroy (&fake);
    long governors = harness_info_wait (g, "governors", 2, 20000);
    CHECK (governors == 2, "the fake governor is gone after BYE (INFO governors = %ld)", governors);
    CHECK_RC (sq_unkeep (gs, out), SQ_OK, "unkeep");
}

//  A client that asks a lot and never reads the answers must not block
//  the broker for others.
static void
s_deaf_client (void)
{
    raw_t *deaf = raw_new_hwm (harness_endpoint (h), 1);
    CHECK (raw_hello (deaf) == SQ_OK, "deaf client HELLO");
    raw_session_open (deaf);
    //  A 4000-byte kept constant (rides inline in every FETCH reply) and a
    //  2 s sleep to wait on.
    char big [4000];
    harness_pattern (big, sizeof big, 5);
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    uint32_t req = raw_next_req (deaf);
    sq_pack_submit_begin (&w.pk, req, deaf->session);
    msgpack_pack_array (&w.pk, 2);
    sq_pack_object_spec (&w.pk, 1, SQ_OBJ_KEEP, "", 1, "");
    sq_pack_object_spec (&w.pk, 3, 0, "", -1, "");
    msgpack_pack_array (&w.pk, 1);
    size_t size;
    void *config = sq_config_sleep (2.0, &size);
    uint32_t in [] = { 1 }, outs [] = { 3 };
    sq_task_spec_t t = { .id = 2, .kind = { "sleep", 5 }, .n_inputs = 1, .inputs = in,
                         .n_outputs = 1, .outputs = outs, .config = config,
                         .config_size = size, .name = { "", 0 } };
    sq_pack_task_spec (&w.pk, &t);
    sq_free (config);
    zmq_msg_t frame;
    zmq_msg_init_size (&frame, sizeof big);
    memcpy (zmq_msg_data (&frame), big, sizeof big);
    raw_send (deaf, &w, &frame, 1);
    sq_wbuf_release (&w);
    CHECK (raw_wait_reply (deaf, req, 10000) == 0, "deaf client's submit answered");
    char *message = raw_reply_message (deaf);
    CHECK (deaf->reply.code == SQ_OK, "deaf client's submit accepted: code %u \"%s\"",
           deaf->reply.code, message);
    free (message);

    //  Stop reading: 10 000 WAITs on the sleep (all answered at once when
    //  it ends) and 10 000 FETCHes of 4000 bytes each.
    for (int i = 0; i < 10000; i++) {
        sq_request_t q = { .type = SQ_MSG_WAIT, .req = raw_next_req (deaf), .session = deaf->session,
                           .mode = SQ_WAIT_ALL, .n_ids = 1, .ids = (uint32_t []) { 2 },
                           .timeout_ms = -1 };
        sq_wbuf_init (&w);
        sq_request_encode (&w, &q);
        raw_send (deaf, &w, NULL, 0);
        sq_wbuf_release (&w);
        sq_request_t f = { .type = SQ_MSG_FETCH, .req = raw_next_req (deaf), .session = deaf->session,
                           .id = 1, .timeout_ms = 1000 };
        sq_wbuf_init (&w);
        sq_request_encode (&w, &f);
        raw_send (deaf, &w, NULL, 0);
        sq_wbuf_release (&w);
        if (i % 2000 == 1999)
            s_round ("deaf client's requests");
    }
    //  Keep serving the good client while the replies pile up.
    double until = harness_now () + 4;
    while (harness_now () < until)
        s_round ("deaf client's flood");
    harness_note ("a client with 20 000 unread replies did not block the broker");
    raw_destroy (&deaf);
}

int
main (void)
{
    h = harness_new (2, 2);
    g = harness_client (h);
    gs = sq_session_new (g);
    CHECK (gs, "good session");
    s_alive ("start");

    //  Before HELLO.
    raw_t *raw = raw_new (harness_endpoint (h));
    sq_request_t q = { .type = SQ_MSG_SESSION_OPEN, .req = 4242 };
    int code = raw_request (raw, &q, 5000);
    CHECK (code == SQ_E_HELLO, "SESSION_OPEN before HELLO -> %d, expected SQ_E_HELLO (%d)",
           code, SQ_E_HELLO);
    harness_note ("request before HELLO -> %s", sq_strerror (code));
    s_send_hostile_headers (raw);
    s_alive ("huge declared counts / empty frames before HELLO");
    s_send_random_frames (raw, 300);
    s_alive ("random frames before HELLO");
    s_unknown_types (raw);
    s_alive ("unknown message types before HELLO");

    //  HELLO with protocol version 99.
    raw_t *v99 = raw_new (harness_endpoint (h));
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    msgpack_pack_array (&w.pk, 5);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_HELLO);
    msgpack_pack_uint32 (&w.pk, 99);
    msgpack_pack_uint32 (&w.pk, 99);
    sq_pack_cstr (&w.pk, "client");
    sq_pack_cstr (&w.pk, "from the future");
    raw_send (v99, &w, NULL, 0);
    sq_wbuf_release (&w);
    CHECK (raw_wait_reply (v99, 99, 5000) == 0, "REPLY to HELLO version 99");
    char *message = raw_reply_message (v99);
    CHECK (v99->reply.code == SQ_E_VERSION, "HELLO v99 -> code %u, expected SQ_E_VERSION", v99->reply.code);
    char ours [32];
    snprintf (ours, sizeof ours, "version %d", SQUALL_PROTOCOL_VERSION);
    CHECK (strstr (message, "99") && strstr (message, ours),
           "version message names both versions (99 and \"%s\"): \"%s\"", ours, message);
    harness_note ("HELLO version 99 -> %s: \"%s\"", sq_strerror (SQ_E_VERSION), message);
    free (message);
    raw_destroy (&v99);

    //  A raw client that said HELLO.
    raw_t *client = raw_new (harness_endpoint (h));
    CHECK (raw_hello (client) == SQ_OK, "raw HELLO");
    raw_session_open (client);
    code = raw_hello (client);
    CHECK (code == SQ_E_HELLO, "second HELLO -> %d, expected SQ_E_HELLO", code);
    harness_note ("second HELLO -> %s", sq_strerror (code));
    s_send_hostile_headers (client);
    s_alive ("huge declared counts after HELLO");
    s_send_random_frames (client, 300);
    s_alive ("random frames after HELLO");
    s_truncated_submits (client);
    s_alive ("truncated SUBMITs");
    s_poisoned_fields (client);
    s_alive ("wrong types in every field");
    s_unknown_types (client);
    s_alive ("unknown message types after HELLO");
    s_many_frames (client);
    s_alive ("a message of 100 000 frames");
    s_huge_frame (client);
    s_alive ("a 50 MiB garbage frame");
    s_huge_frame (raw);
    s_alive ("a 50 MiB garbage frame before HELLO");
    raw_destroy (&client);
    raw_destroy (&raw);

    s_fake_governor ();
    s_alive ("a fake governor's forged and garbage events");
    s_deaf_client ();
    s_alive ("a client that never reads");

    //  The final correct graph, then a clean exit.
    for (int i = 0; i < 10; i++)
        s_round ("everything");
    CHECK (kill (harness_broker_pid (h), 0) == 0, "broker process exists");
    harness_note ("%d good rounds, all results correct", s_rounds);
    sq_session_destroy (&gs);
    harness_client_destroy (&g);
    CHECK (harness_destroy (&h) == 0, "broker and governors exited cleanly");
    printf ("test_hostile: PASS\n");
    return 0;
}
