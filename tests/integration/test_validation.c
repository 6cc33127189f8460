/*  test_validation: refused submits. Each one must give the right code and
    name the offending id, none of it may enter the graph (INFO counts do
    not move, and its ids can be used again), and the session must still
    accept a correct submit. Mistakes the client library cannot make are
    sent by hand on a raw DEALER. */
#include "harness.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sq_client_t *s_client;      //  the library client, for INFO
static raw_t *s_raw;

typedef struct {
    uint32_t id;
    int32_t frame;              //  payload index or -1
    uint32_t flags;
} s_obj_t;

typedef struct {
    uint32_t id;
    const char *kind;
    uint32_t n_in;
    uint32_t in [4];
    uint32_t n_out;
    uint32_t out [4];
    const void *config;
    size_t config_size;
} s_task_t;

//  Sends SUBMIT on the raw session; returns the reply code (-1: no reply).
static int
s_raw_submit (const s_obj_t *objs, size_t n_objs, const s_task_t *tasks, size_t n_tasks,
              const char *const *payloads, size_t n_payloads)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    uint32_t req = raw_next_req (s_raw);
    sq_pack_submit_begin (&w.pk, req, s_raw->session);
    //  Task outputs are declared as objects (frame -1) in the same submit,
    //  as the protocol requires, unless the case declares them itself.
    uint32_t extra [32];
    size_t n_extra = 0;
    for (size_t i = 0; i < n_tasks; i++)
        for (uint32_t j = 0; j < tasks [i].n_out; j++) {
            bool declared = false;
            for (size_t k = 0; k < n_objs; k++)
                declared |= objs [k].id == tasks [i].out [j];
            for (size_t k = 0; k < n_extra; k++)
                declared |= extra [k] == tasks [i].out [j];
            if (!declared && n_extra < 32)
                extra [n_extra++] = tasks [i].out [j];
        }
    msgpack_pack_array (&w.pk, (uint32_t) (n_objs + n_extra));
    for (size_t i = 0; i < n_objs; i++)
        sq_pack_object_spec (&w.pk, objs [i].id, objs [i].flags, "", objs [i].frame, "");
    for (size_t i = 0; i < n_extra; i++)
        sq_pack_object_spec (&w.pk, extra [i], 0, "", -1, "");
    msgpack_pack_array (&w.pk, (uint32_t) n_tasks);
    for (size_t i = 0; i < n_tasks; i++) {
        sq_task_spec_t t;
        memset (&t, 0, sizeof t);
        t.id = tasks [i].id;
        t.kind.ptr = tasks [i].kind;
        t.kind.len = (uint32_t) strlen (tasks [i].kind);
        t.n_inputs = tasks [i].n_in;
        t.inputs = (uint32_t *) tasks [i].in;
        t.n_outputs = tasks [i].n_out;
        t.outputs = (uint32_t *) tasks [i].out;
        t.config = (const uint8_t *) tasks [i].config;
        t.config_size = tasks [i].config_size;
        t.name.ptr = "";
        sq_pack_task_spec (&w.pk, &t);
    }
    zmq_msg_t frames [8];
    for (size_t i = 0; i < n_payloads; i++) {
        zmq_msg_init_size (&frames [i], strlen (payloads [i]));
        memcpy (zmq_msg_data (&frames [i]), payloads [i], strlen (payloads [i]));
    }
    int rc = raw_send (s_raw, &w, frames, n_payloads);
    sq_wbuf_release (&w);
    CHECK (rc == 0, "raw SUBMIT sent");
    if (raw_wait_reply (s_raw, req, 10000))
        return -1;
    return (int) s_raw->reply.code;
}

//  Snapshot of what a refused submit must not change.
typedef struct {
    long tasks;
    long objects;
} s_counts_t;

static s_counts_t
s_counts (void)
{
    char *json = harness_info (s_client);
    s_counts_t c = { 0, harness_json_long (json, "objects") };
    const char *states [] = { "waiting", "ready", "assigned", "running", "finished", "failed", "cancelled" };
    for (size_t i = 0; i < 7; i++) {
        char path [32];
        snprintf (path, sizeof path, "tasks.%s", states [i]);
        long n = harness_json_long (json, path);
        CHECK (n >= 0, "INFO has %s (json: %.300s)", path, json);
        c.tasks += n;
    }
    CHECK (c.objects >= 0, "INFO has objects (json: %.300s)", json);
    sq_free (json);
    return c;
}

static void
s_expect_unchanged (s_counts_t before, const char *what)
{
    s_counts_t now = s_counts ();
    CHECK (now.tasks == before.tasks && now.objects == before.objects,
           "%s: INFO went from %ld tasks / %ld objects to %ld / %ld",
           what, before.tasks, before.objects, now.tasks, now.objects);
}

//  A raw refusal: code and offending id (one of ids[]).
static void
s_expect_raw (int code, int want, const uint32_t *ids, size_t n_ids, const char *what)
{
    char *message = code > 0? raw_reply_message (s_raw): NULL;
    CHECK (code == want, "%s: reply code %d (%s), expected %d (%s); message \"%s\"",
           what, code, code >= 0? sq_strerror (code): "no reply", want, sq_strerror (want),
           message? message: "");
    bool named = n_ids == 0;
    for (size_t i = 0; i < n_ids; i++)
        if (s_raw->reply.err_id == ids [i])
            named = true;
    CHECK (named, "%s: error names id %u, expected %u%s; message \"%s\"", what, s_raw->reply.err_id,
           ids [0], n_ids > 1? " (or one of the others listed)": "", message? message: "");
    harness_note ("%s -> %s, id %u: \"%s\"", what, sq_strerror (code), s_raw->reply.err_id,
                  message? message: "");
    free (message);
}

static void
s_pack_bad_slice (msgpack_packer *pk, void *arg)
{
    (void) arg;
    msgpack_pack_map (pk, 2);
    sq_pack_cstr (pk, "start");
    msgpack_pack_uint64 (pk, 5);
    sq_pack_cstr (pk, "end");
    msgpack_pack_int64 (pk, 2);
}

static void
s_pack_bad_execute (msgpack_packer *pk, void *arg)
{
    (void) arg;
    msgpack_pack_map (pk, 4);
    sq_pack_cstr (pk, "args");
    msgpack_pack_array (pk, 1);
    sq_pack_cstr (pk, "cat");
    sq_pack_cstr (pk, "in_paths");
    msgpack_pack_array (pk, 1);
    sq_pack_cstr (pk, "../x");
    sq_pack_cstr (pk, "out_paths");
    msgpack_pack_array (pk, 1);
    sq_pack_cstr (pk, "");
    sq_pack_cstr (pk, "stdout");
    msgpack_pack_int64 (pk, 0);
}

static void
s_raw_cases (void)
{
    const char *one [] = { "payload" };
    s_counts_t base = s_counts ();

    //  Duplicate task id inside one submit.
    {
        s_obj_t objs [] = { { 1, 1, 0 } };
        s_task_t tasks [] = {
            { 2, "noop", 1, { 1 }, 1, { 3 }, NULL, 0 },
            { 2, "noop", 1, { 1 }, 1, { 4 }, NULL, 0 },
        };
        uint32_t ids [] = { 2 };
        s_expect_raw (s_raw_submit (objs, 1, tasks, 2, one, 1), SQ_E_DUPLICATE_ID, ids, 1,
                      "duplicate task id 2");
        s_expect_unchanged (base, "duplicate task id");
    }
    //  Object id that is also a task output.
    {
        s_obj_t objs [] = { { 5, 1, 0 } };
        s_task_t tasks [] = { { 6, "noop", 0, { 0 }, 1, { 5 }, NULL, 0 } };
        uint32_t ids [] = { 5 };
        //  Either code is defensible: the id is used twice, and the object
        //  is both data and output. The id must be named either way.
        int code = s_raw_submit (objs, 1, tasks, 1, one, 1);
        s_expect_raw (code, code == SQ_E_INVALID? SQ_E_INVALID: SQ_E_DUPLICATE_ID, ids, 1,
                      "object 5 declared as constant and as task output");
        s_expect_unchanged (base, "duplicate object id");
    }
    //  Unknown input id.
    {
        s_obj_t objs [] = { { 1, 1, 0 } };
        s_task_t tasks [] = {
            { 2, "noop", 1, { 1 }, 1, { 3 }, NULL, 0 },
            { 4, "noop", 2, { 3, 999 }, 1, { 5 }, NULL, 0 },
        };
        //  The reply names the task whose input is unknown.
        uint32_t ids [] = { 4 };
        s_expect_raw (s_raw_submit (objs, 1, tasks, 2, one, 1), SQ_E_UNKNOWN_ID, ids, 1,
                      "input 999 (of task 4) unknown");
        s_expect_unchanged (base, "unknown input");
    }
    //  A cycle: 10 -> 11 -> 12 -> 13 -> 10 (each consumes the other's output).
    {
        s_obj_t objs [] = { { 1, 1, 0 } };
        s_task_t tasks [] = {
            { 2, "noop", 1, { 1 }, 1, { 3 }, NULL, 0 },     //  a valid task first
            { 10, "noop", 1, { 13 }, 1, { 11 }, NULL, 0 },
            { 12, "noop", 1, { 11 }, 1, { 13 }, NULL, 0 },
        };
        uint32_t ids [] = { 10, 11, 12, 13 };
        s_expect_raw (s_raw_submit (objs, 1, tasks, 3, one, 1), SQ_E_CYCLE, ids, 4,
                      "cycle between tasks 10 and 12");
        s_expect_unchanged (base, "cycle");
    }
    //  A self-loop.
    {
        s_task_t tasks [] = { { 20, "noop", 1, { 21 }, 1, { 21 }, NULL, 0 } };
        uint32_t ids [] = { 20, 21 };
        s_expect_raw (s_raw_submit (NULL, 0, tasks, 1, NULL, 0), SQ_E_CYCLE, ids, 2,
                      "task 20 consuming its own output");
        s_expect_unchanged (base, "self-loop");
    }
    //  Object with neither data nor producer.
    {
        s_obj_t objs [] = { { 30, -1, 0 } };
        s_task_t tasks [] = { { 31, "noop", 1, { 30 }, 1, { 32 }, NULL, 0 } };
        uint32_t ids [] = { 30 };
        s_expect_raw (s_raw_submit (objs, 1, tasks, 1, NULL, 0), SQ_E_NO_PRODUCER, ids, 1,
                      "object 30 without producer");
        s_expect_unchanged (base, "no producer");
    }
    //  Unknown kind, bad configs.
    {
        s_obj_t objs [] = { { 1, 1, 0 } };
        s_task_t tasks [] = { { 2, "nosuchkind", 1, { 1 }, 1, { 3 }, NULL, 0 } };
        uint32_t ids [] = { 2 };
        s_expect_raw (s_raw_submit (objs, 1, tasks, 1, one, 1), SQ_E_UNKNOWN_KIND, ids, 1,
                      "raw unknown kind");
        s_expect_unchanged (base, "unknown kind");
    }
    {
        size_t size;
        void *config = harness_pack (s_pack_bad_slice, NULL, &size);
        s_obj_t objs [] = { { 1, 1, 0 } };
        s_task_t tasks [] = {
            { 2, "noop", 1, { 1 }, 1, { 3 }, NULL, 0 },
            { 4, "slice", 1, { 3 }, 1, { 5 }, config, size },
        };
        uint32_t ids [] = { 4 };
        s_expect_raw (s_raw_submit (objs, 1, tasks, 2, one, 1), SQ_E_BAD_CONFIG, ids, 1,
                      "raw slice start 5 > end 2");
        s_expect_unchanged (base, "bad slice");
        free (config);
    }
    {
        size_t size;
        void *config = harness_pack (s_pack_bad_execute, NULL, &size);
        s_obj_t objs [] = { { 1, 1, 0 } };
        s_task_t tasks [] = { { 2, "execute", 1, { 1 }, 1, { 3 }, config, size } };
        uint32_t ids [] = { 2 };
        s_expect_raw (s_raw_submit (objs, 1, tasks, 1, one, 1), SQ_E_BAD_CONFIG, ids, 1,
                      "raw execute with in_path ../x");
        s_expect_unchanged (base, "bad execute");
        free (config);
    }
    //  Slice with the wrong number of inputs.
    {
        s_obj_t objs [] = { { 1, 1, 0 }, { 2, 1, 0 } };
        size_t size;
        void *config = sq_config_slice (0, -1, &size);
        s_task_t tasks [] = { { 3, "slice", 2, { 1, 2 }, 1, { 4 }, config, size } };
        uint32_t ids [] = { 3 };
        s_expect_raw (s_raw_submit (objs, 2, tasks, 1, one, 1), SQ_E_BAD_CONFIG, ids, 1,
                      "raw slice with 2 inputs");
        s_expect_unchanged (base, "slice arity");
        sq_free (config);
    }
    //  A constant pointing at a payload frame that is not there.
    {
        s_obj_t objs [] = { { 1, 3, 0 } };
        int code = s_raw_submit (objs, 1, NULL, 0, one, 1);
        CHECK (code == SQ_E_PROTOCOL || code == SQ_E_INVALID,
               "constant referencing missing frame 3: code %d (%s)", code,
               code >= 0? sq_strerror (code): "no reply");
        harness_note ("constant referencing a missing payload frame -> %s", sq_strerror (code));
        s_expect_unchanged (base, "missing frame");
    }

    //  Nothing of the refused submits entered: every id used above is free,
    //  and the same session runs a correct graph.
    {
        s_obj_t objs [] = { { 1, 1, SQ_OBJ_KEEP } };
        s_task_t tasks [] = {
            { 2, "noop", 1, { 1 }, 1, { 3 }, NULL, 0 },
            { 10, "noop", 1, { 3 }, 1, { 11 }, NULL, 0 },
            { 12, "noop", 1, { 11 }, 1, { 13 }, NULL, 0 },
            { 20, "noop", 1, { 13 }, 1, { 21 }, NULL, 0 },
            { 31, "concat", 2, { 21, 3 }, 1, { 32 }, NULL, 0 },
        };
        int code = s_raw_submit (objs, 1, tasks, 5, one, 1);
        CHECK (code == SQ_OK, "correct raw submit reusing the refused ids: code %d", code);
        sq_request_t q = { .type = SQ_MSG_WAIT, .req = raw_next_req (s_raw),
                           .session = s_raw->session, .mode = SQ_WAIT_SESSION,
                           .timeout_ms = 20000 };
        code = raw_request (s_raw, &q, 30000);
        CHECK (code == SQ_OK, "raw WAIT of the correct graph: code %d", code);
        //  Task 31's output is not kept; the constant 1 is.
        sq_request_t f = { .type = SQ_MSG_FETCH, .req = raw_next_req (s_raw),
                           .session = s_raw->session, .id = 1, .timeout_ms = 10000 };
        code = raw_request (s_raw, &f, 20000);
        CHECK (code == SQ_OK, "raw FETCH of kept constant: code %d", code);
        CHECK (s_raw->msg.n == 2 && sq_msg_size (&s_raw->msg, 1) == 7
               && memcmp (sq_msg_data (&s_raw->msg, 1), "payload", 7) == 0,
               "FETCH reply carries the 7 bytes inline (%zu frames)", s_raw->msg.n);
        harness_note ("raw session accepts and runs a correct graph reusing every refused id");
    }
}

static void
s_library_cases (void)
{
    sq_session_t *s = sq_session_new (s_client);
    CHECK (s, "library session");
    s_counts_t base = s_counts ();

    //  Unknown kind through the library.
    uint32_t good = harness_blob_str (s, "abc");
    uint32_t bad = sq_task (s, "nosuchkind", &good, 1, 1, NULL, 0);
    CHECK (bad, "sq_task records an unknown kind (only governors know kinds)");
    CHECK_RC (sq_submit (s), SQ_E_UNKNOWN_KIND, "submit with kind nosuchkind");
    CHECK (sq_client_errid (s_client) == bad, "UNKNOWN_KIND names task %u (got %u)",
           bad, sq_client_errid (s_client));
    harness_note ("library: unknown kind -> %s, id %u: \"%s\"", sq_strerror (SQ_E_UNKNOWN_KIND),
                  bad, sq_client_errmsg (s_client));
    s_expect_unchanged (base, "library unknown kind");

    //  Input id the library never made.
    good = harness_blob_str (s, "abc");
    uint32_t ghost = 777777;
    uint32_t in2 [] = { good, ghost };
    uint32_t t = sq_task (s, "concat", in2, 2, 1, NULL, 0);
    if (t == 0)
        harness_note ("library: sq_task refused unknown input %u locally: \"%s\"",
                      ghost, sq_client_errmsg (s_client));
    else {
        CHECK_RC (sq_submit (s), SQ_E_UNKNOWN_ID, "submit with unknown input %u", ghost);
        CHECK (sq_client_errid (s_client) == t, "UNKNOWN_ID names task %u, whose input %u is "
               "unknown (got %u)", t, ghost, sq_client_errid (s_client));
        harness_note ("library: unknown input %u -> %s, id %u", ghost,
                      sq_strerror (SQ_E_UNKNOWN_ID), t);
    }
    s_expect_unchanged (base, "library unknown input");

    //  Bad configs, built by hand so the sq_config_* helpers cannot object.
    size_t size;
    void *config = harness_pack (s_pack_bad_slice, NULL, &size);
    good = harness_blob_str (s, "abcdefgh");
    uint32_t noop = harness_task (s, "noop", &good, 1, 1, NULL, 0);
    uint32_t mid = sq_output (noop, 0);
    t = sq_task (s, "slice", &mid, 1, 1, config, size);
    free (config);
    CHECK (t, "sq_task records slice config");
    CHECK_RC (sq_submit (s), SQ_E_BAD_CONFIG, "submit of slice start 5 > end 2");
    CHECK (sq_client_errid (s_client) == t, "BAD_CONFIG names task %u (got %u)",
           t, sq_client_errid (s_client));
    harness_note ("library: slice start > end -> %s, id %u: \"%s\"", sq_strerror (SQ_E_BAD_CONFIG),
                  t, sq_client_errmsg (s_client));
    s_expect_unchanged (base, "library bad slice");

    const char *args [] = { "cat" };
    const char *in_paths [] = { "../x" };
    const char *out_paths [] = { "" };
    config = sq_config_execute (args, 1, in_paths, 1, -1, out_paths, 1, 0, NULL, &size);
    if (!config) {
        harness_note ("library: sq_config_execute refuses in_path ../x itself; packing by hand");
        config = harness_pack (s_pack_bad_execute, NULL, &size);
    }
    good = harness_blob_str (s, "abc");
    t = sq_task (s, "execute", &good, 1, 1, config, size);
    sq_free (config);
    CHECK (t, "sq_task records execute config");
    CHECK_RC (sq_submit (s), SQ_E_BAD_CONFIG, "submit of execute with ../x");
    CHECK (sq_client_errid (s_client) == t, "BAD_CONFIG names task %u (got %u)",
           t, sq_client_errid (s_client));
    harness_note ("library: execute in_path ../x -> %s, id %u", sq_strerror (SQ_E_BAD_CONFIG), t);
    s_expect_unchanged (base, "library bad execute");

    //  The session still works.
    uint32_t x = harness_blob_str (s, "still ");
    uint32_t y = harness_blob_str (s, "works");
    uint32_t xy [] = { x, y };
    uint32_t out = harness_task1 (s, "concat", xy, 2, NULL, 0);
    CHECK_RC (sq_keep (s, out), SQ_OK, "keep");
    CHECK_RC (sq_submit (s), SQ_OK, "correct submit after refusals");
    FETCH_EXPECT (s, out, "still works", 11);
    harness_note ("library session accepts a correct submit after the refusals");
    sq_session_destroy (&s);
}

int
main (void)
{
    harness_t *h = harness_new (2, 2);
    s_client = harness_client (h);
    s_raw = raw_new (harness_endpoint (h));
    CHECK (raw_hello (s_raw) == SQ_OK, "raw HELLO");
    raw_session_open (s_raw);
    harness_note ("raw peer said HELLO and opened session %u", s_raw->session);

    s_raw_cases ();
    s_library_cases ();

    CHECK (harness_broker_alive (h), "broker still alive");
    raw_destroy (&s_raw);
    harness_client_destroy (&s_client);
    CHECK (harness_destroy (&h) == 0, "broker and governors exited cleanly");
    printf ("test_validation: PASS\n");
    return 0;
}
