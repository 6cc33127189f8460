/*  test_sessions: sessions of two clients side by side, session close
    (cancels and frees), timeouts of wait and fetch, and requests on closed
    or unknown sessions. */
#include "harness.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static harness_t *h;

static uint32_t
s_sleep (sq_session_t *s, double seconds, const uint32_t *inputs, size_t n)
{
    size_t size;
    void *config = sq_config_sleep (seconds, &size);
    return harness_task (s, "sleep", inputs, n, n? (uint32_t) n: 1, config, size);
}

//  A small graph whose result depends on `tag`; returns the kept output.
static uint32_t
s_work (sq_session_t *s, const char *tag)
{
    uint32_t a = harness_blob_str (s, tag);
    uint32_t b = harness_blob_str (s, "|");
    uint32_t slept = sq_output (s_sleep (s, 0.3, &a, 1), 0);
    uint32_t in [] = { slept, b, a };
    uint32_t out = harness_task1 (s, "concat", in, 3, NULL, 0);
    CHECK_RC (sq_keep (s, out), SQ_OK, "keep");
    return out;
}

static void
s_two_clients (sq_client_t *c1, sq_client_t *c2)
{
    sq_session_t *s1 = sq_session_new (c1);
    sq_session_t *s2 = sq_session_new (c2);
    sq_session_t *s1b = sq_session_new (c1);   //  a second session of the same client
    CHECK (s1 && s2 && s1b, "three sessions");
    CHECK (sq_session_id (s1) != sq_session_id (s2) && sq_session_id (s1) != sq_session_id (s1b),
           "session ids differ (%u, %u, %u)", sq_session_id (s1), sq_session_id (s2), sq_session_id (s1b));
    CHECK (harness_info_long (c1, "sessions") == 3, "INFO sessions = 3");

    //  Overlapping work: the same local ids in every session, different data.
    uint32_t o1 [3], o2 [3], o3 [3];
    for (int round = 0; round < 3; round++) {
        char tag [32];
        snprintf (tag, sizeof tag, "one-%d", round);
        o1 [round] = s_work (s1, tag);
        snprintf (tag, sizeof tag, "two-%d", round);
        o2 [round] = s_work (s2, tag);
        snprintf (tag, sizeof tag, "three-%d", round);
        o3 [round] = s_work (s1b, tag);
        CHECK_RC (sq_submit (s1), SQ_OK, "submit s1");
        CHECK_RC (sq_submit (s2), SQ_OK, "submit s2");
        CHECK_RC (sq_submit (s1b), SQ_OK, "submit s1b");
    }
    CHECK (o1 [0] == o2 [0], "the sessions use the same ids (%u, %u): the test means something",
           o1 [0], o2 [0]);
    for (int round = 0; round < 3; round++) {
        char expect [64];
        snprintf (expect, sizeof expect, "one-%d|one-%d", round, round);
        FETCH_EXPECT (s1, o1 [round], expect, strlen (expect));
        snprintf (expect, sizeof expect, "two-%d|two-%d", round, round);
        FETCH_EXPECT (s2, o2 [round], expect, strlen (expect));
        snprintf (expect, sizeof expect, "three-%d|three-%d", round, round);
        FETCH_EXPECT (s1b, o3 [round], expect, strlen (expect));
    }
    harness_note ("two clients, three sessions, same ids: every result is its own session's");
    sq_session_destroy (&s1);
    sq_session_destroy (&s2);
    sq_session_destroy (&s1b);
    long n = harness_info_wait (c1, "sessions", 0, 10000);
    CHECK (n == 0, "INFO sessions = %ld after closing all, expected 0", n);
}

static void
s_close_frees (sq_client_t *c)
{
    long base_objects = harness_info_wait (c, "objects", 0, 10000);
    CHECK (base_objects == 0, "no objects before (INFO objects = %ld)", base_objects);
    sq_session_t *s = sq_session_new (c);
    CHECK (s, "session");
    uint32_t kept [8];
    for (int i = 0; i < 8; i++) {
        char text [5000];
        harness_pattern (text, sizeof text, (uint32_t) i);
        //  half inline, half over the limit (held by a governor)
        kept [i] = harness_blob (s, text, i % 2? sizeof text: 100);
        CHECK_RC (sq_keep (s, kept [i]), SQ_OK, "keep");
    }
    uint32_t sleepers [3];
    for (int i = 0; i < 3; i++) {
        sleepers [i] = s_sleep (s, 60, &kept [i], 1);
        CHECK_RC (sq_keep (s, sq_output (sleepers [i], 0)), SQ_OK, "keep");
    }
    uint32_t copy = harness_task1 (s, "concat", kept, 8, NULL, 0);
    CHECK_RC (sq_keep (s, copy), SQ_OK, "keep");
    CHECK_RC (sq_submit (s), SQ_OK, "submit");
    CHECK_RC (sq_wait (s, &copy, 1, 20000), SQ_OK, "concat done");
    long running = harness_info_wait (c, "tasks.busy", 3, 10000);
    CHECK (running == 3, "three sleeps running (INFO tasks.busy = %ld)", running);
    long objects = harness_info_long (c, "objects");
    CHECK (objects >= 9, "INFO objects = %ld with the session's objects, expected >= 9", objects);

    double t0 = harness_now ();
    sq_session_destroy (&s);
    long n = harness_info_wait (c, "objects", base_objects, 10000);
    CHECK (n == base_objects, "INFO objects = %ld after session close, expected %ld", n, base_objects);
    n = harness_info_wait (c, "tasks.busy", 0, 10000);
    CHECK (n == 0, "INFO tasks.busy = %ld after session close, expected 0", n);
    char *json = harness_info (c);
    CHECK (harness_json_active (json) == 0, "no unfinished task left: %.400s", json);
    sq_free (json);
    harness_note ("session close cancelled 3 running sleeps and freed %ld objects in %.2f s",
                  objects - base_objects, harness_now () - t0);

    //  The cpus are free again.
    s = sq_session_new (c);
    uint32_t quick [4];
    for (int i = 0; i < 4; i++)
        quick [i] = s_sleep (s, 0.2, NULL, 0);
    CHECK_RC (sq_submit (s), SQ_OK, "submit");
    CHECK_RC (sq_wait (s, quick, 4, 10000), SQ_OK, "4 x sleep 0.2 after close");
    sq_session_destroy (&s);
}

static void
s_timeouts (sq_client_t *c)
{
    sq_session_t *s = sq_session_new (c);
    CHECK (s, "session");
    uint32_t forever = s_sleep (s, 1e6, NULL, 0);
    uint32_t out = sq_output (forever, 0);
    CHECK_RC (sq_keep (s, out), SQ_OK, "keep");
    uint32_t quick = s_sleep (s, 0.05, NULL, 0);
    CHECK_RC (sq_submit (s), SQ_OK, "submit");
    CHECK_RC (sq_wait (s, &quick, 1, 10000), SQ_OK, "quick task");

    double t0 = harness_now ();
    CHECK_RC (sq_wait (s, &forever, 1, 300), SQ_E_TIMEOUT, "wait 300 ms on a never-ending task");
    double took = harness_now () - t0;
    CHECK (took >= 0.25 && took < 5, "wait timeout took %.2f s for 300 ms", took);
    harness_note ("wait with 300 ms timeout -> %s after %.2f s", sq_strerror (SQ_E_TIMEOUT), took);

    t0 = harness_now ();
    CHECK_RC (sq_wait_all (s, 300), SQ_E_TIMEOUT, "wait_all 300 ms");
    uint32_t ids [] = { forever, out };
    uint32_t done [2];
    size_t n_done = 99;
    CHECK_RC (sq_wait_some (s, ids, 2, 300, done, &n_done), SQ_E_TIMEOUT, "wait_some 300 ms");
    took = harness_now () - t0;
    CHECK (took < 8, "two 300 ms waits took %.2f s", took);
    harness_note ("wait_all and wait_some with 300 ms timeouts -> %s", sq_strerror (SQ_E_TIMEOUT));

    t0 = harness_now ();
    void *data = NULL;
    size_t size = 0;
    CHECK_RC (sq_fetch (s, out, 300, &data, &size, NULL), SQ_E_TIMEOUT,
              "fetch 300 ms of a never-ending task's output");
    took = harness_now () - t0;
    CHECK (took >= 0.25 && took < 5, "fetch timeout took %.2f s", took);
    harness_note ("fetch with 300 ms timeout -> %s after %.2f s", sq_strerror (SQ_E_TIMEOUT), took);

    //  A timed-out wait leaves the task alone: it still runs, and the
    //  session still works.
    CHECK (harness_info_long (c, "tasks.busy") == 1, "the task still runs after the timeouts");
    uint32_t b = harness_blob_str (s, "after timeouts");
    uint32_t echo = harness_task1 (s, "noop", &b, 1, NULL, 0);
    CHECK_RC (sq_keep (s, echo), SQ_OK, "keep");
    CHECK_RC (sq_submit (s), SQ_OK, "submit");
    FETCH_EXPECT (s, echo, "after timeouts", 14);
    CHECK_RC (sq_cancel (s, NULL, 0), SQ_OK, "cancel every task of the session");
    CHECK_RC (sq_wait (s, &forever, 1, 10000), SQ_E_CANCELLED, "cancelled by cancel-all");
    harness_note ("cancel with n == 0 cancels the session's never-ending task");
    sq_session_destroy (&s);
}

static void
s_expect_session_error (raw_t *raw, sq_request_t *q, const char *what)
{
    q->req = raw_next_req (raw);
    int code = raw_request (raw, q, 10000);
    char *message = code > 0? raw_reply_message (raw): NULL;
    CHECK (code == SQ_E_SESSION, "%s: code %d (%s), expected SQ_E_SESSION; \"%s\"",
           what, code, code >= 0? sq_strerror (code): "no reply", message? message: "");
    harness_note ("%s -> %s: \"%s\"", what, sq_strerror (code), message? message: "");
    free (message);
}

static void
s_closed_sessions (sq_client_t *c)
{
    raw_t *raw = raw_new (harness_endpoint (h));
    CHECK (raw_hello (raw) == SQ_OK, "raw HELLO");
    uint32_t closed = raw_session_open (raw);
    sq_request_t q = { .type = SQ_MSG_SESSION_CLOSE, .req = raw_next_req (raw), .session = closed };
    CHECK (raw_request (raw, &q, 10000) == SQ_OK, "SESSION_CLOSE");

    uint32_t ids [] = { 1 };
    uint32_t sessions [] = { closed, 999999 };
    for (int i = 0; i < 2; i++) {
        uint32_t sid = sessions [i];
        const char *which = i == 0? "closed": "unknown";
        char what [96];
        sq_request_t r;

        //  SUBMIT
        sq_wbuf_t w;
        sq_wbuf_init (&w);
        uint32_t req = raw_next_req (raw);
        sq_pack_submit_begin (&w.pk, req, sid);
        msgpack_pack_array (&w.pk, 1);
        sq_pack_object_spec (&w.pk, 1, SQ_OBJ_KEEP, "", 1, "");
        msgpack_pack_array (&w.pk, 0);
        zmq_msg_t frame;
        zmq_msg_init_size (&frame, 3);
        memcpy (zmq_msg_data (&frame), "abc", 3);
        raw_send (raw, &w, &frame, 1);
        sq_wbuf_release (&w);
        CHECK (raw_wait_reply (raw, req, 10000) == 0, "reply to SUBMIT");
        CHECK (raw->reply.code == SQ_E_SESSION, "SUBMIT to %s session: code %u (%s)",
               which, raw->reply.code, sq_strerror ((int) raw->reply.code));
        harness_note ("SUBMIT to %s session -> %s", which, sq_strerror (SQ_E_SESSION));

        r = (sq_request_t) { .type = SQ_MSG_WAIT, .session = sid, .mode = SQ_WAIT_SESSION, .timeout_ms = 100 };
        snprintf (what, sizeof what, "WAIT on %s session", which);
        s_expect_session_error (raw, &r, what);
        r = (sq_request_t) { .type = SQ_MSG_FETCH, .session = sid, .id = 1, .timeout_ms = 100 };
        snprintf (what, sizeof what, "FETCH on %s session", which);
        s_expect_session_error (raw, &r, what);
        r = (sq_request_t) { .type = SQ_MSG_KEEP, .session = sid, .n_ids = 1, .ids = ids };
        snprintf (what, sizeof what, "KEEP on %s session", which);
        s_expect_session_error (raw, &r, what);
        r = (sq_request_t) { .type = SQ_MSG_UNKEEP, .session = sid, .n_ids = 1, .ids = ids };
        snprintf (what, sizeof what, "UNKEEP on %s session", which);
        s_expect_session_error (raw, &r, what);
        r = (sq_request_t) { .type = SQ_MSG_CANCEL, .session = sid, .n_ids = 0 };
        snprintf (what, sizeof what, "CANCEL on %s session", which);
        s_expect_session_error (raw, &r, what);
        r = (sq_request_t) { .type = SQ_MSG_SESSION_CLOSE, .session = sid };
        snprintf (what, sizeof what, "SESSION_CLOSE of %s session", which);
        s_expect_session_error (raw, &r, what);
    }

    //  Another client's session: reported, not required (the protocol does
    //  not say whether sessions are private to their client).
    sq_session_t *other = sq_session_new (c);
    CHECK (other, "session of the library client");
    q = (sq_request_t) { .type = SQ_MSG_WAIT, .req = raw_next_req (raw),
                         .session = sq_session_id (other), .mode = SQ_WAIT_SESSION, .timeout_ms = 100 };
    int code = raw_request (raw, &q, 10000);
    harness_note ("WAIT on another client's session -> %s%s", code >= 0? sq_strerror (code): "no reply",
                  code == SQ_E_SESSION? "": " (sessions are not private to their client)");
    sq_session_destroy (&other);

    //  The raw client can still open and use a new session.
    uint32_t fresh = raw_session_open (raw);
    CHECK (fresh != closed, "a new session gets a new id (%u)", fresh);
    raw_destroy (&raw);
}

//  A connection's open sessions are bounded: the 4097th is refused with
//  SQ_E_BUSY, and closing one makes room again.
static void
s_session_cap (void)
{
    sq_client_t *client = harness_client (h);
    enum { CAP = 4096 };
    sq_session_t **sessions = (sq_session_t **) calloc (CAP, sizeof *sessions);
    for (int i = 0; i < CAP; i++) {
        sessions [i] = sq_session_new (client);
        CHECK (sessions [i], "session %d of %d opens", i + 1, CAP);
    }
    sq_session_t *extra = sq_session_new (client);
    CHECK (!extra && sq_client_errcode (client) == SQ_E_BUSY,
           "session %d is refused with SQ_E_BUSY (%s)", CAP + 1, sq_client_errmsg (client));
    sq_session_destroy (&sessions [0]);
    extra = sq_session_new (client);
    CHECK (extra, "after one closes, another opens");
    sq_session_destroy (&extra);
    for (int i = 1; i < CAP; i++)
        sq_session_destroy (&sessions [i]);
    free (sessions);
    harness_client_destroy (&client);
    harness_note ("at most %d sessions per connection; the next gets SQ_E_BUSY", CAP);
}

int
main (void)
{
    h = harness_new (2, 2);
    sq_client_t *c1 = harness_client (h);
    sq_client_t *c2 = harness_client (h);
    harness_set_client (c1);

    s_two_clients (c1, c2);
    s_close_frees (c1);
    harness_set_client (c2);
    s_timeouts (c2);
    harness_set_client (c1);
    s_closed_sessions (c1);
    s_session_cap ();
    harness_set_client (c1);

    CHECK (harness_broker_alive (h), "broker alive");
    harness_client_destroy (&c2);
    harness_client_destroy (&c1);
    CHECK (harness_destroy (&h) == 0, "broker and governors exited cleanly");
    printf ("test_sessions: PASS\n");
    return 0;
}
