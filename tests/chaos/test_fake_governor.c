/*  test_fake_governor: a raw peer says HELLO as a governor, really runs the
    tasks the broker gives it (only tasks needing its private resource
    "fakeres" go there: it offers 1 cpu, the good client's tasks ask for 2,
    which only the real governor has), and around every genuine
    report sends bogus ones: FINISHED for tasks never assigned to it,
    duplicate FINISHED with other data, stale and future attempts, FAILED
    and STARTED after FINISHED, FINISHED with missing, foreign or dangling
    outputs, LOCATED for unknown objects, malformed UPDATEs, and after BYE
    more of everything. Meanwhile a well-behaved client runs graphs on a
    real governor.

    Passes when every result is byte-exact, the broker is alive and serving,
    and INFO's counters show that no bogus report changed anything: at the
    end tasks.finished is exactly the number of tasks submitted (all kept,
    so none is released), nothing failed, was cancelled or is still active,
    and no governor's task counts went wrong.

    Test plan, per phase, in the notes it prints (harness_note). */
#include "../integration/harness.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static harness_t *h;
static sq_client_t *g;
static sq_session_t *gs;
static int s_rounds;
static long s_tasks;                //  tasks of the good client that must finish
static long s_failed;               //  tasks the broker may fail (phases 3b, 4)
static long s_cancelled;

//  --------------------------------------------------------------------------
//  The fake governor

typedef struct {
    uint64_t key;
    uint32_t attempt;
    char kind [16];
    uint8_t *data;                  //  concatenation of its inline inputs
    size_t size;
    uint32_t n_outputs;
    uint64_t outputs [4];
} s_job_t;

typedef struct {
    raw_t *raw;
    sq_msg_t msg;
    double last_heartbeat;
    s_job_t jobs [16];
    int n_jobs;
} s_fake_t;

static void
s_fake_bare (s_fake_t *self, uint32_t type)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_bare_encode (&w, type);
    raw_send (self->raw, &w, NULL, 0);
    sq_wbuf_release (&w);
}

static void
s_fake_heartbeat (s_fake_t *self)
{
    if (harness_now () - self->last_heartbeat > 0.3) {
        s_fake_bare (self, SQ_MSG_HEARTBEAT);
        self->last_heartbeat = harness_now ();
    }
}

//  Reads what the broker sends for up to timeout_ms; returns when an ASSIGN
//  brought at least one task (true) or at the deadline (false).
static bool
s_fake_pump (s_fake_t *self, int timeout_ms)
{
    double deadline = harness_now () + timeout_ms / 1000.0;
    while (harness_now () < deadline) {
        s_fake_heartbeat (self);
        zmq_pollitem_t item = { self->raw->handle, 0, ZMQ_POLLIN, 0 };
        if (zmq_poll (&item, 1, 100) <= 0)
            continue;
        if (sq_msg_recv (&self->msg, self->raw->handle, ZMQ_DONTWAIT, 1024))
            continue;
        uint32_t type, req;
        if (sq_proto_peek (sq_msg_data (&self->msg, 0), sq_msg_size (&self->msg, 0), &type, &req)
        ||  type != SQ_MSG_ASSIGN) {
            sq_msg_close (&self->msg);
            continue;
        }
        sq_iter_t it;
        sq_errbuf_t err;
        sq_assign_t t;
        int got = 0;
        CHECK (sq_assign_begin (&it, sq_msg_data (&self->msg, 0),
                                sq_msg_size (&self->msg, 0), &err) == 0, "ASSIGN: %s", err.text);
        while (sq_assign_next (&it, &t) == 1) {
            CHECK (self->n_jobs < 16, "too many tasks for the fake governor");
            s_job_t *job = &self->jobs [self->n_jobs++];
            memset (job, 0, sizeof *job);
            job->key = t.key;
            job->attempt = t.attempt;
            snprintf (job->kind, sizeof job->kind, "%.*s", (int) t.kind.len, t.kind.ptr);
            //  Inputs the broker believes are here already (frame -1): the
            //  task was assigned here before, take its data from then.
            s_job_t *before = NULL;
            for (int j = 0; j < self->n_jobs - 1; j++)
                if (self->jobs [j].key == t.key)
                    before = &self->jobs [j];
            if (before && t.n_inputs && t.inputs [0].frame == -1) {
                job->data = (uint8_t *) malloc (before->size + 1);
                memcpy (job->data, before->data, before->size);
                job->size = before->size;
                t.n_inputs = 0;
            }
            for (uint32_t i = 0; i < t.n_inputs; i++) {
                int32_t f = t.inputs [i].frame;
                CHECK (f >= 1 && (size_t) f < self->msg.n,
                       "fake governor: input %u of its task is inline (frame %d)", i, f);
                size_t n = sq_msg_size (&self->msg, (size_t) f);
                job->data = (uint8_t *) realloc (job->data, job->size + n + 1);
                memcpy (job->data + job->size, sq_msg_data (&self->msg, (size_t) f), n);
                job->size += n;
            }
            job->n_outputs = t.n_outputs;
            for (uint32_t i = 0; i < t.n_outputs && i < 4; i++)
                job->outputs [i] = t.outputs [i].key;
            got++;
        }
        sq_iter_release (&it);
        sq_msg_close (&self->msg);
        if (got)
            return true;
    }
    return false;
}

//  One UPDATE: events packed by the caller into w after sq_batch_header,
//  payload frames as strings (NULL-terminated list).
static void
s_fake_send (s_fake_t *self, sq_wbuf_t *w, const char *const *payloads)
{
    zmq_msg_t frames [8];
    size_t n = 0;
    for (; payloads && payloads [n]; n++) {
        zmq_msg_init_size (&frames [n], strlen (payloads [n]));
        memcpy (zmq_msg_data (&frames [n]), payloads [n], strlen (payloads [n]));
    }
    raw_send (self->raw, w, frames, n);
    sq_wbuf_reset (w);
}

//  FINISHED for a job with one inline output carrying `data` (frame 1)
static void
s_fake_finished (s_fake_t *self, uint64_t task, uint32_t attempt, uint64_t output,
                 const char *data)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    sq_output_ref_t out = { output, strlen (data), 1 };
    sq_pack_finished (&w.pk, task, attempt, &out, 1, 10);
    const char *payloads [] = { data, NULL };
    s_fake_send (self, &w, payloads);
    sq_wbuf_release (&w);
}

//  --------------------------------------------------------------------------
//  The good client

static uint64_t s_rng = 0x6f7e4a1b2c3d4e5full;

static uint32_t
s_rand (void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return (uint32_t) (s_rng >> 16);
}

//  concat + slice on the real governor, crossing the inline limit now and
//  then; everything stays kept so that INFO's finished count is exact.
static void
s_round (const char *after)
{
    size_t size = 1 + s_rand () % 9000;
    uint8_t *data = (uint8_t *) malloc (size + 16);
    harness_pattern (data, size, (uint32_t) s_rounds + 1000);
    uint32_t a = harness_blob (gs, data, size);
    uint32_t b = harness_blob (gs, "-tail", 5);
    uint32_t ab [] = { a, b };
    uint32_t cat_task = harness_task (gs, "concat", ab, 2, 1, NULL, 0);
    uint32_t cat = sq_output (cat_task, 0);
    size_t cfg_size;
    void *config = sq_config_slice (1, -1, &cfg_size);
    uint32_t slice_task = harness_task (gs, "slice", &cat, 1, 1, config, cfg_size);
    uint32_t out = sq_output (slice_task, 0);
    //  2 cpus: only the real governor fits (the fake offers 1)
    CHECK_RC (sq_task_set_resource (gs, cat_task, "cpus", 2), SQ_OK, "cpus 2");
    CHECK_RC (sq_task_set_resource (gs, slice_task, "cpus", 2), SQ_OK, "cpus 2");
    CHECK_RC (sq_keep (gs, out), SQ_OK, "keep");
    CHECK_RC (sq_submit (gs), SQ_OK, "good round %d (after %s): submit", s_rounds, after);
    s_tasks += 2;
    memcpy (data + size, "-tail", 5);
    void *got = NULL;
    size_t got_size = 0;
    CHECK_RC (sq_fetch (gs, out, 15000, &got, &got_size, NULL), SQ_OK,
              "good round %d (after %s): fetch", s_rounds, after);
    CHECK (got_size == size + 4 && memcmp (got, data + 1, size + 4) == 0,
           "good round %d (after %s): result differs", s_rounds, after);
    sq_free (got);
    free (data);
    s_rounds++;
}

static void
s_alive (const char *after)
{
    CHECK (harness_broker_alive (h), "broker alive after %s", after);
    s_round (after);
    s_round (after);
    harness_note ("broker alive and serving after %s (%d good rounds)", after, s_rounds);
}

//  A task only the fake governor can run: concat of two constants, with
//  resources cpus 1 and fakeres 1. Returns the output id.
static uint32_t
s_fake_task (const char *left, const char *right, uint32_t *task_id)
{
    uint32_t a = harness_blob_str (gs, left);
    uint32_t b = harness_blob_str (gs, right);
    uint32_t ab [] = { a, b };
    uint32_t task = harness_task (gs, "concat", ab, 2, 1, NULL, 0);
    CHECK_RC (sq_task_set_resource (gs, task, "fakeres", 1), SQ_OK, "fakeres");
    uint32_t out = sq_output (task, 0);
    CHECK_RC (sq_keep (gs, out), SQ_OK, "keep");
    CHECK_RC (sq_submit (gs), SQ_OK, "submit a task for the fake governor");
    s_tasks++;
    *task_id = task;
    return out;
}

//  A check that does not stop the test: every finding is printed, and the
//  test fails at the end if there was any.
static int s_findings;

static void
s_finding (const char *format, ...) __attribute__ ((format (printf, 1, 2)));

static void
s_finding (const char *format, ...)
{
    va_list args;
    va_start (args, format);
    printf ("FINDING: ");
    vprintf (format, args);
    printf ("\n");
    fflush (stdout);
    va_end (args);
    s_findings++;
}

//  The state of a task as WAIT sees it within timeout_ms: 0 pending
static int
s_state (uint32_t task, int timeout_ms)
{
    int rc = sq_wait (gs, &task, 1, timeout_ms);
    if (rc == SQ_E_TIMEOUT)
        return 0;
    return rc == SQ_OK? 1: -rc;
}

//  Every "assigned"/"running"/"queued" figure in INFO is small: a bogus
//  report must not drive a governor's counters below zero.
static void
s_check_counters_sane (const char *when)
{
    char *json = harness_info (g);
    static const char *keys [] = { "\"assigned\":", "\"running\":", "\"queued\":" };
    for (size_t k = 0; k < 3; k++)
        for (const char *p = strstr (json, keys [k]); p; p = strstr (p + 1, keys [k])) {
            long long v = atoll (p + strlen (keys [k]));
            CHECK (v >= 0 && v < 100000, "%s: INFO %s %lld", when, keys [k], v);
        }
    free (json);
}

int
main (void)
{
    //  long liveness: the fake heartbeats only while it pumps
    const char *broker_args [] = { "--liveness", "60", NULL };
    h = harness_new_args (1, 2, broker_args);
    g = harness_client (h);
    gs = sq_session_new (g);
    CHECK (gs, "session");
    s_round ("start");

    //  The fake governor: no cpus, 4 "fakeres"
    s_fake_t fake;
    memset (&fake, 0, sizeof fake);
    sq_msg_init (&fake.msg);
    fake.raw = raw_new (harness_endpoint (h));
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    uint32_t req = raw_next_req (fake.raw);
    sq_resource_t res [] = { { { "cpus", 4 }, 1 }, { { "fakeres", 7 }, 4 } };
    sq_hello_encode_governor (&w, req, "fake-governor", 42, "tcp://127.0.0.1:9",
                              "tcp://127.0.0.1:9", res, 2, NULL, 0);
    raw_send (fake.raw, &w, NULL, 0);
    CHECK (raw_wait_reply (fake.raw, req, 5000) == 0 && fake.raw->reply.code == 0,
           "fake governor HELLO accepted");
    fake.last_heartbeat = harness_now ();
    long governors = harness_info_wait (g, "governors", 2, 10000);
    CHECK (governors == 2, "INFO shows the fake governor (governors = %ld)", governors);
    harness_note ("fake governor joined (cpus 1, fakeres 4)");

    //  Phase 1: the fake runs a task; bogus reports before and after the
    //  genuine FINISHED.
    uint32_t t1;
    uint32_t o1 = s_fake_task ("left-", "right", &t1);
    CHECK (s_fake_pump (&fake, 10000), "the fake governor got task %u", t1);
    CHECK (fake.n_jobs == 1, "one task assigned (%d)", fake.n_jobs);
    s_job_t *job = &fake.jobs [0];
    CHECK (job->size == 10 && memcmp (job->data, "left-right", 10) == 0 && job->n_outputs == 1,
           "the ASSIGN carries the inputs and one output");
    uint32_t att = job->attempt;
    uint64_t session = sq_session_id (gs);
    harness_note ("task %u assigned to the fake governor, attempt %u", t1, att);

    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    sq_pack_started (&w.pk, job->key, att);
    s_fake_send (&fake, &w, NULL);
    //  stale and future attempts with other data
    s_fake_finished (&fake, job->key, att + 1, job->outputs [0], "EVIL2");
    s_fake_finished (&fake, job->key, att + 7, job->outputs [0], "EVIL3");
    s_fake_finished (&fake, job->key, att? att - 1: 0xffffffffu, job->outputs [0], "EVIL4");
    int state = s_state (t1, 500);
    CHECK (state == 0, "a FINISHED of another attempt changed the task (state %d)", state);
    harness_note ("FINISHED of attempts %u, %u, %u with other data: ignored (task still pending)",
                  att + 1, att + 7, att? att - 1: 0xffffffffu);

    //  The genuine FINISHED, then a duplicate with other data, FAILED and
    //  STARTED for the same attempt, LOCATED of absurd sizes and unknown
    //  objects, LOST of unknown objects.
    s_fake_finished (&fake, job->key, att, job->outputs [0], "left-right");
    s_fake_finished (&fake, job->key, att, job->outputs [0], "EVIL5-duplicate");
    sq_batch_header (&w, SQ_MSG_UPDATE, 7);
    sq_pack_failed (&w.pk, job->key, att, "forged failure after finish", 5);
    sq_pack_started (&w.pk, job->key, att);
    sq_pack_located (&w.pk, job->outputs [0], 1ull << 40);
    sq_pack_located (&w.pk, sq_key ((uint32_t) session, 888888), 1 << 20);
    sq_pack_located (&w.pk, sq_key (0xfffffff0u, 1), 1 << 20);
    sq_pack_lost (&w.pk, sq_key (0xfffffff0u, 2));
    sq_pack_lost (&w.pk, sq_key ((uint32_t) session, 777777));
    s_fake_send (&fake, &w, NULL);
    FETCH_EXPECT (gs, o1, "left-right", 10);
    CHECK (s_state (t1, 1000) == 1, "task %u finished", t1);
    harness_note ("genuine FINISHED counted; duplicate FINISHED (other data), FAILED and STARTED "
                  "after it, LOCATED/LOST of unknown objects: ignored, result genuine");
    s_alive ("bogus reports around a genuine FINISHED");

    //  Phase 2: FINISHED for tasks never assigned to the fake: a sleep on
    //  the real governor, every attempt 0..5, with forged data.
    uint32_t k = harness_blob_str (gs, "genuine");
    size_t size;
    void *config = sq_config_sleep (1.0, &size);
    uint32_t sleeper = harness_task (gs, "sleep", &k, 1, 1, config, size);
    CHECK_RC (sq_task_set_resource (gs, sleeper, "cpus", 2), SQ_OK, "cpus 2");
    uint32_t sleeper_out = sq_output (sleeper, 0);
    CHECK_RC (sq_keep (gs, sleeper_out), SQ_OK, "keep");
    CHECK_RC (sq_submit (gs), SQ_OK, "submit sleep");
    s_tasks++;
    CHECK (harness_info_wait_min (g, "tasks.busy", 1, 10000) >= 1, "sleep on the real governor");
    for (uint32_t a = 0; a < 6; a++) {
        s_fake_finished (&fake, sq_key ((uint32_t) session, sleeper), a,
                         sq_key ((uint32_t) session, sleeper_out), "forged");
        sq_batch_header (&w, SQ_MSG_UPDATE, 2);
        sq_pack_failed (&w.pk, sq_key ((uint32_t) session, sleeper), a, "forged", 1);
        sq_pack_started (&w.pk, sq_key ((uint32_t) session, sleeper), a);
        s_fake_send (&fake, &w, NULL);
    }
    //  and for a task of a session that does not exist
    s_fake_finished (&fake, sq_key ((uint32_t) session + 1000, 5), 0,
                     sq_key ((uint32_t) session + 1000, 6), "forged");
    FETCH_EXPECT (gs, sleeper_out, "genuine", 7);
    harness_note ("FINISHED/FAILED/STARTED of attempts 0-5 for a task on the real governor: ignored");

    //  Phase 3: malformed UPDATEs while the fake holds a task, then its
    //  genuine FINISHED must still count.
    uint32_t t2;
    uint32_t o2 = s_fake_task ("second-", "task", &t2);
    CHECK (s_fake_pump (&fake, 10000), "the fake governor got task %u", t2);
    job = &fake.jobs [1];
    static const uint8_t huge [] = { 0x92, 0x1e, 0xdd, 0xff, 0xff, 0xff, 0xff };
    static const uint8_t short_update [] = { 0x91, 0x1e };
    static const uint8_t not_array [] = { 0x1e };
    raw_send_bytes (fake.raw, huge, sizeof huge, false);
    raw_send_bytes (fake.raw, short_update, sizeof short_update, false);
    raw_send_bytes (fake.raw, not_array, sizeof not_array, false);
    raw_send_bytes (fake.raw, "", 0, false);
    //  a batch declaring 3 events holding 1 (the valid-looking FINISHED
    //  with forged data is in a message that is malformed as a whole)
    sq_batch_header (&w, SQ_MSG_UPDATE, 3);
    sq_output_ref_t forged = { job->outputs [0], 6, 1 };
    sq_pack_finished (&w.pk, job->key, job->attempt, &forged, 1, 1);
    const char *forged_payload [] = { "forged", NULL };
    s_fake_send (&fake, &w, forged_payload);
    //  events of the wrong shape
    sq_batch_header (&w, SQ_MSG_UPDATE, 3);
    msgpack_pack_array (&w.pk, 2);
    msgpack_pack_uint32 (&w.pk, 77);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_array (&w.pk, 5);
    msgpack_pack_uint32 (&w.pk, SQ_EV_FINISHED);
    sq_pack_cstr (&w.pk, "task");
    msgpack_pack_nil (&w.pk);
    msgpack_pack_array (&w.pk, 0);
    msgpack_pack_double (&w.pk, -1.0);
    msgpack_pack_array (&w.pk, 3);
    msgpack_pack_uint32 (&w.pk, SQ_EV_FAILED);
    msgpack_pack_uint64 (&w.pk, job->key);
    msgpack_pack_uint32 (&w.pk, job->attempt);
    s_fake_send (&fake, &w, NULL);
    //  a LOAD and a heartbeat of the wrong shape, a message type nobody uses
    msgpack_pack_array (&w.pk, 3);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_LOAD);
    sq_pack_cstr (&w.pk, "x");
    msgpack_pack_nil (&w.pk);
    s_fake_send (&fake, &w, NULL);
    msgpack_pack_array (&w.pk, 2);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_HEARTBEAT);
    msgpack_pack_uint32 (&w.pk, 1);
    s_fake_send (&fake, &w, NULL);
    msgpack_pack_array (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, 99);
    s_fake_send (&fake, &w, NULL);
    //  client requests from a governor
    sq_request_t info = { .type = SQ_MSG_INFO, .req = raw_next_req (fake.raw) };
    sq_request_encode (&w, &info);
    s_fake_send (&fake, &w, NULL);
    state = s_state (t2, 500);
    if (state == 0) {
        s_fake_heartbeat (&fake);
        s_fake_finished (&fake, job->key, job->attempt, job->outputs [0], "second-task");
        FETCH_EXPECT (gs, o2, "second-task", 11);
        harness_note ("malformed UPDATE/LOAD/HEARTBEAT and unknown types ignored; the genuine "
                      "FINISHED after them counted");
    }
    else {
        void *got = NULL;
        size_t got_size = 0;
        int rc = sq_fetch (gs, o2, 5000, &got, &got_size, NULL);
        s_finding ("malformed UPDATEs changed task %u (state %d): fetch -> %s, %zu bytes \"%.*s\" "
                   "(an UPDATE declaring 3 events but holding 1 FINISHED was applied in part)",
                   t2, state, sq_strerror (rc), got_size, (int) (got_size < 40? got_size: 40),
                   got? (char *) got: "");
        sq_free (got);
    }
    s_alive ("malformed governor messages");

    //  Phase 3b: FINISHED of the current attempt but of the wrong shape, each
    //  on its own task: no outputs, a foreign output key, an output frame
    //  that does not exist. The broker may ignore it (then the genuine
    //  FINISHED counts) or fail the task naming the governor's mistake; it
    //  must never finish the task with data that is not the task's.
    for (int variant = 0; variant < 3; variant++) {
        static const char *what [] = { "no outputs", "a foreign output key", "a dangling output frame" };
        uint32_t tv;
        uint32_t ov = s_fake_task ("shape-", what [variant], &tv);
        CHECK (s_fake_pump (&fake, 10000), "the fake governor got task %u", tv);
        job = &fake.jobs [fake.n_jobs - 1];
        sq_batch_header (&w, SQ_MSG_UPDATE, 1);
        if (variant == 0)
            sq_pack_finished (&w.pk, job->key, job->attempt, NULL, 0, 5);
        else
        if (variant == 1) {
            sq_output_ref_t foreign = { sq_key ((uint32_t) session, 999999), 5, 1 };
            sq_pack_finished (&w.pk, job->key, job->attempt, &foreign, 1, 5);
        }
        else {
            sq_output_ref_t dangling = { job->outputs [0], 5, 3 };
            sq_pack_finished (&w.pk, job->key, job->attempt, &dangling, 1, 5);
        }
        const char *evil [] = { "EVIL0", NULL };
        s_fake_send (&fake, &w, variant == 1? evil: NULL);
        state = s_state (tv, 1000);
        char expect [64];
        snprintf (expect, sizeof expect, "shape-%s", what [variant]);
        if (state == 0) {
            //  The broker may have taken the attempt back and assigned the
            //  task again (a new attempt): then that one is finished.
            uint32_t attempt = job->attempt;
            uint64_t key = job->key;
            const char *how = "ignored";
            if (s_fake_pump (&fake, 500)) {
                s_job_t *again = &fake.jobs [fake.n_jobs - 1];
                CHECK (again->key == key, "the fake governor got an unexpected task");
                attempt = again->attempt;
                how = "the attempt was taken back and the task assigned again";
            }
            s_fake_finished (&fake, key, attempt, job->outputs [0], expect);
            FETCH_EXPECT (gs, ov, expect, strlen (expect));
            harness_note ("FINISHED with %s: %s (attempt %u); the genuine FINISHED counted",
                          what [variant], how, attempt);
        }
        else {
            void *got = NULL;
            size_t got_size;
            int rc = sq_fetch (gs, ov, 5000, &got, &got_size, NULL);
            CHECK (rc == SQ_E_TASK_FAILED || rc == SQ_E_INTERNAL, "FINISHED with %s: task %u must not finish with "
                   "foreign data (fetch -> %d %s, %zu bytes)", what [variant], tv, rc,
                   sq_strerror (rc), rc == SQ_OK? got_size: 0);
            harness_note ("FINISHED with %s: the broker failed task %u (%s: \"%s\")",
                          what [variant], tv, sq_strerror (rc), sq_client_errmsg (g));
            s_tasks--;
            s_failed++;
            //  a late genuine FINISHED changes nothing now
            s_fake_finished (&fake, job->key, job->attempt, job->outputs [0], expect);
        }
    }
    s_alive ("FINISHED of the wrong shape");

    //  Phase 4: BYE, then more messages from the same socket
    s_fake_bare (&fake, SQ_MSG_BYE);
    governors = harness_info_wait (g, "governors", 1, 10000);
    CHECK (governors == 1, "the fake governor is gone after BYE (governors = %ld)", governors);
    char *before = harness_info (g);
    long finished_before = harness_json_long (before, "tasks.finished");
    free (before);
    s_fake_finished (&fake, fake.jobs [0].key, fake.jobs [0].attempt, fake.jobs [0].outputs [0], "AFTER-BYE");
    s_fake_finished (&fake, sq_key ((uint32_t) session, sleeper), 0,
                     sq_key ((uint32_t) session, sleeper_out), "AFTER-BYE");
    s_fake_bare (&fake, SQ_MSG_HEARTBEAT);
    s_fake_bare (&fake, SQ_MSG_BYE);
    sq_load_t load = { 1, 2, 3, 4, 5, 6, 0, 0 };
    sq_load_encode (&w, &load);
    s_fake_send (&fake, &w, NULL);
    //  A task for fakeres now has nowhere to run: it must not be sent to
    //  the departed fake. The broker may keep it waiting or fail it at
    //  once ("no live governor can run this task").
    uint32_t t3;
    uint32_t o3 = s_fake_task ("third-", "task", &t3);
    CHECK (!s_fake_pump (&fake, 1500), "nothing assigned to a governor after its BYE");
    state = s_state (t3, 200);
    bool t3_pending = state == 0;
    if (!t3_pending) {
        CHECK (state < 0, "task %u finished with no governor to run it", t3);
        harness_note ("after BYE: task %u needing fakeres failed at once (%s)", t3,
                      sq_client_errmsg (g));
        s_tasks--;
        s_failed++;
    }
    else
        harness_note ("after BYE: task %u needing fakeres waits", t3);
    governors = harness_info_long (g, "governors");
    CHECK (governors == 1, "messages after BYE did not bring the fake back (governors = %ld)", governors);
    FETCH_EXPECT (gs, o1, "left-right", 10);
    FETCH_EXPECT (gs, sleeper_out, "genuine", 7);
    s_alive ("messages after BYE");

    //  A second HELLO on the same connection: a governor again. It runs a
    //  new task (and the waiting one); genuine FINISHED counts once, the
    //  duplicate with other data is ignored.
    req = raw_next_req (fake.raw);
    sq_hello_encode_governor (&w, req, "fake-governor-2", 43, "tcp://127.0.0.1:9",
                              "tcp://127.0.0.1:9", res, 2, NULL, 0);
    raw_send (fake.raw, &w, NULL, 0);
    int hello = raw_wait_reply (fake.raw, req, 5000);
    CHECK (hello == 0, "no reply to a new HELLO after BYE");
    harness_note ("a new HELLO after BYE: %s", sq_strerror ((int) fake.raw->reply.code));
    if (fake.raw->reply.code == 0) {
        uint32_t t4;
        uint32_t o4 = s_fake_task ("fourth-", "task", &t4);
        int want = t3_pending? 2: 1, got = 0;
        int first = fake.n_jobs;
        double deadline = harness_now () + 10;
        while (fake.n_jobs - first < want && harness_now () < deadline)
            s_fake_pump (&fake, 500);
        for (int j = first; j < fake.n_jobs; j++, got++) {
            s_job_t *done = &fake.jobs [j];
            char text [64];
            snprintf (text, sizeof text, "%.*s", (int) done->size, (char *) done->data);
            s_fake_finished (&fake, done->key, done->attempt, done->outputs [0], text);
            s_fake_finished (&fake, done->key, done->attempt, done->outputs [0], "EVIL6");
        }
        CHECK (got == want, "the fake governor got %d of %d tasks after its new HELLO", got, want);
        FETCH_EXPECT (gs, o4, "fourth-task", 11);
        if (t3_pending)
            FETCH_EXPECT (gs, o3, "third-task", 10);
    }
    else
    if (t3_pending) {
        CHECK_RC (sq_cancel (gs, &t3, 1), SQ_OK, "cancel");
        s_tasks--;
        s_cancelled++;
    }
    s_fake_bare (&fake, SQ_MSG_BYE);
    CHECK (harness_info_wait (g, "governors", 1, 10000) == 1, "fake gone again");

    //  The counters: every submitted task finished exactly once, nothing
    //  failed, nothing active, no governor count out of range.
    s_round ("the end");
    char *json = harness_info (g);
    long finished = harness_json_long (json, "tasks.finished");
    long failed = harness_json_long (json, "tasks.failed");
    long cancelled = harness_json_long (json, "tasks.cancelled");
    long active = harness_json_active (json);
    harness_note ("INFO: finished %ld (expected %ld), failed %ld (expected %ld), cancelled %ld, "
                  "active %ld; finished before the post-BYE reports %ld",
                  finished, s_tasks, failed, s_failed, cancelled, active, finished_before);
    free (json);
    if (finished != s_tasks)
        s_finding ("tasks.finished %ld, expected %ld", finished, s_tasks);
    if (failed != s_failed)
        s_finding ("tasks.failed %ld, expected %ld", failed, s_failed);
    CHECK (cancelled == s_cancelled, "cancelled %ld, expected %ld", cancelled, s_cancelled);
    CHECK (active == 0, "no task active (%ld)", active);
    s_check_counters_sane ("the end");

    sq_wbuf_release (&w);
    for (int i = 0; i < fake.n_jobs; i++)
        free (fake.jobs [i].data);
    sq_msg_release (&fake.msg);
    raw_destroy (&fake.raw);
    sq_session_destroy (&gs);
    harness_client_destroy (&g);
    CHECK (harness_destroy (&h) == 0, "broker and governor exited cleanly");
    CHECK (s_findings == 0, "%d findings (see FINDING lines above)", s_findings);
    printf ("test_fake_governor: OK (%d good rounds, %ld tasks)\n", s_rounds, s_tasks);
    return 0;
}
