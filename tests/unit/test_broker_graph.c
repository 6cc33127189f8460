/*  test_broker_graph: the graph's compact records. Ids a client numbers
    its own way (far apart, up to UINT32_MAX) work like dense ones without
    the id table growing with their values; the first consumer and copy of
    an object live in place and more move to the heap and back out of use
    correctly; rare task fields stay out of line until set; a task's config
    and outputs live in its block. Run under ASan this also checks that
    closing a session frees every record.

    Placement on many governors: the scheduler looks at a sample of the
    governors with free slots, so it must still fill every slot, and find
    the one governor offering a resource a task needs; it weighs copying a
    task's inputs against waiting where they are (a long task, an actor).

    Over 800 lines: the records and the placement over many governors are
    checked on the same graph and governors, built by this file's helpers. */
#include "graph.h"
#include "gov.h"
#include "scheduler.h"
#include "taskconf.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(cond, ...) do { if (!(cond)) { \
    fprintf (stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
    fprintf (stderr, __VA_ARGS__); fprintf (stderr, "\n"); exit (1); } } while (0)

static size_t s_ready_count;
static size_t s_stop_count;
static void s_stop (void *arg, task_t *task) { (void) arg; (void) task; s_stop_count++; }
static void s_ready (void *arg, task_t *task) { (void) arg; (void) task; s_ready_count++; }
static void s_nothing (void *arg, task_t *task) { (void) arg; (void) task; }
static void s_drop (void *arg, object_t *object) { (void) arg; (void) object; }
static void s_copy (void *arg, object_t *o, gov_t *a, gov_t *b) { (void) arg; (void) o; (void) a; (void) b; }

//  A submit under construction.
typedef struct {
    sq_submit_t sub;
    sq_task_spec_t tasks [64];
    sq_object_spec_t objects [64];
    uint32_t ids [256];
    size_t n_ids;
} s_submit_t;

static void
s_reset (s_submit_t *s, uint32_t session)
{
    memset (s, 0, sizeof *s);
    s->sub.session = session;
    s->sub.tasks = s->tasks;
    s->sub.objects = s->objects;
}

static sq_task_spec_t *
s_task (s_submit_t *s, uint32_t id, const uint32_t *inputs, uint32_t n_inputs, uint32_t output)
{
    sq_task_spec_t *t = &s->tasks [s->sub.n_tasks++];
    t->id = id;
    t->kind = n_inputs? (mpr_str_t) { "concat", 6 }: (mpr_str_t) { "noop", 4 };
    t->inputs = s->ids + s->n_ids;
    if (n_inputs)
        memcpy (t->inputs, inputs, n_inputs * sizeof (uint32_t));
    t->n_inputs = n_inputs;
    s->n_ids += n_inputs;
    t->outputs = s->ids + s->n_ids++;
    t->outputs [0] = output;
    t->n_outputs = 1;
    sq_object_spec_t *o = &s->objects [s->sub.n_objects++];
    o->id = output;
    o->frame = -1;
    return t;
}

static int
s_commit (graph_t *graph, session_t *session, s_submit_t *s, char *message, uint32_t *bad)
{
    return graph_submit (graph, session, &s->sub, NULL, 0, NULL, NULL, message, 256, bad);
}

static gov_t *
s_gov_with (uint32_t id, const char *resource, uint32_t prefetch)
{
    sq_hello_t hello;
    memset (&hello, 0, sizeof hello);
    hello.name = (mpr_str_t) { "g", 1 };
    hello.data_endpoint = hello.serve_endpoint = (mpr_str_t) { "x", 1 };
    hello.resources [hello.n_resources++] = (sq_resource_t) { { "cpus", 4 }, 1 };
    if (resource)
        hello.resources [hello.n_resources++] = (sq_resource_t) { { resource, (uint32_t) strlen (resource) }, 1 };
    return gov_new (id, &hello, "id", 2, prefetch);
}

static gov_t *
s_gov (uint32_t id)
{
    return s_gov_with (id, NULL, 0);
}

static scheduler_t *s_scheduler;
static gov_t *s_placed_on;
static void s_sched_ready (void *arg, task_t *task) { (void) arg; scheduler_task_ready (s_scheduler, task); }
static void
s_place (void *arg, task_t *task, gov_t *gov)
{
    graph_task_assigned ((graph_t *) arg, task, gov);
    sq_idmap_insert (gov->tasks, task->key, task);
    s_placed_on = gov;
}

//  The queue beyond a governor's cpus: one task per cpu while durations
//  are unknown, then --queue-ms of its recent mean duration per cpu,
//  never more than --prefetch.
static void
s_test_queue_depth (void)
{
    gov_t *gov = s_gov_with (1, NULL, 1024);
    CHECK (gov->cpus == 1 && gov->slots == 2, "unknown durations: %u slots", gov->slots);
    gov_note_duration (gov, 1000);
    CHECK (gov->slots == 1 + 2, "2 ms of 1 ms tasks: %u slots", gov->slots);
    gov->queue_us = 50000;
    gov_note_duration (gov, 1000);
    CHECK (gov->slots == 1 + 50, "50 ms of 1 ms tasks: %u slots", gov->slots);
    gov->queue_us = 2e6;
    gov_note_duration (gov, 1000);
    CHECK (gov->slots == 1 + 1024, "capped at --prefetch: %u slots", gov->slots);
    gov_destroy (&gov);
}

//  200 governors of one cpu and one queued task (2 slots each) and 400
//  independent tasks: one run fills every slot. Then a task needing the
//  "tpu" only governor 137 offers lands there.
static void
s_test_placement (void)
{
    graph_hooks_t hooks = { NULL, s_sched_ready, s_nothing, s_nothing, s_drop, s_copy, NULL };
    graph_t *graph = graph_new (&hooks);
    s_scheduler = scheduler_new (graph);
    gov_t *govs [200];
    for (uint32_t g = 0; g < 200; g++) {
        govs [g] = s_gov_with (g + 1, g == 137? "tpu": NULL, 1);
        scheduler_governor_add (s_scheduler, govs [g]);
    }
    session_t *session = graph_session_open (graph, NULL);
    s_submit_t *s = (s_submit_t *) malloc (sizeof *s);
    char message [256];
    uint32_t bad, id = 1;
    for (int batch = 0; batch < 400 / 32; batch++) {
        s_reset (s, session->id);
        for (int i = 0; i < 32; i++, id += 2)
            s_task (s, id, NULL, 0, id + 1);
        CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    }
    s_reset (s, session->id);
    for (int i = 0; i < 400 - 32 * (400 / 32); i++, id += 2)
        s_task (s, id, NULL, 0, id + 1);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    size_t placed = scheduler_run (s_scheduler, s_place, graph);
    CHECK (placed == 400, "placed %zu of 400 on 200 x 2 slots", placed);
    for (uint32_t g = 0; g < 200; g++)
        CHECK (sq_idmap_size (govs [g]->tasks) == 2, "governor %u holds %zu", g + 1,
               sq_idmap_size (govs [g]->tasks));
    //  Free a slot on governor 137 and on 20 others; the tpu task must find
    //  137 even when the sample of open governors misses it.
    for (uint32_t g = 0; g < 200; g++)
        if (g < 20 || g == 137) {
            size_t cursor = 0;
            task_t *any = (task_t *) sq_idmap_next (govs [g]->tasks, &cursor, NULL);
            sq_idmap_remove (govs [g]->tasks, any->key);
        }
    s_reset (s, session->id);
    sq_task_spec_t *t = s_task (s, id, NULL, 0, id + 1);
    sq_resource_t tpu = { { "tpu", 3 }, 1 };
    t->resources = &tpu;
    t->n_resources = 1;
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    s_placed_on = NULL;
    CHECK (scheduler_run (s_scheduler, s_place, graph) == 1 && s_placed_on == govs [137],
           "the tpu task went to governor %u", s_placed_on? s_placed_on->id: 0);
    graph_session_close (graph, &session);
    scheduler_destroy (&s_scheduler);
    for (uint32_t g = 0; g < 200; g++)
        gov_destroy (&govs [g]);
    graph_destroy (&graph);
    free (s);
}

//  A newcomer gets queued work at once: governor A (1 cpu, a deep queue)
//  holds 12 unstarted tasks; B joins with 4 idle cpus. One rebalance
//  takes back 4 of A's (B's cpus), not half of that.
static size_t s_retracted;
static void s_count_retract (void *arg, task_t *task) { (void) arg; (void) task; s_retracted++; }

static void
s_test_newcomer (void)
{
    graph_hooks_t hooks = { NULL, s_sched_ready, s_nothing, s_nothing, s_drop, s_copy, NULL };
    graph_t *graph = graph_new (&hooks);
    s_scheduler = scheduler_new (graph);
    gov_t *a = s_gov_with (1, NULL, 64), *b = s_gov_with (2, NULL, 64);
    a->slots = 12;
    scheduler_governor_add (s_scheduler, a);
    session_t *session = graph_session_open (graph, NULL);
    s_submit_t *s = (s_submit_t *) malloc (sizeof *s);
    char message [256];
    uint32_t bad;
    s_reset (s, session->id);
    for (uint32_t i = 0; i < 12; i++)
        s_task (s, 1 + 2 * i, NULL, 0, 2 + 2 * i);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    CHECK (scheduler_run (s_scheduler, s_place, graph) == 12, "12 tasks on A");
    b->cpus = 4;
    b->slots = 8;
    scheduler_governor_add (s_scheduler, b);
    s_retracted = 0;
    scheduler_rebalance (s_scheduler, s_count_retract, NULL);
    CHECK (s_retracted == 4, "the newcomer's 4 cpus filled at once: %zu taken back", s_retracted);
    graph_session_close (graph, &session);
    scheduler_destroy (&s_scheduler);
    gov_destroy (&a);
    gov_destroy (&b);
    graph_destroy (&graph);
    free (s);
}

//  Objects deleted by hand (DELETE): what needs one fails, running tasks
//  are stopped, copies are dropped; only finished objects can be deleted;
//  a producer re-run for a sibling output leaves a deleted one deleted.
static size_t s_drop_count;
static void s_count_drop (void *arg, object_t *object) { (void) arg; (void) object; s_drop_count++; }

static void
s_finish_on (graph_t *graph, task_t *task, gov_t *gov)
{
    sq_output_ref_t outs [4];
    for (uint32_t i = 0; i < task->n_outputs; i++)
        outs [i] = (sq_output_ref_t) { task->io [task->n_inputs + i]->key, 100, -1 };
    graph_task_assigned (graph, task, gov);
    CHECK (graph_task_finished (graph, task, gov, outs, task->n_outputs, NULL, 0, 4096) == 0,
           "finished");
}

static void
s_test_delete (void)
{
    graph_hooks_t hooks = { NULL, s_ready, s_stop, s_nothing, s_count_drop, s_copy, NULL };
    graph_t *graph = graph_new (&hooks);
    gov_t *a = s_gov (1);
    session_t *session = graph_session_open (graph, NULL);
    uint32_t sid = session->id;
    s_submit_t *s = (s_submit_t *) malloc (sizeof *s);
    char message [256];
    uint32_t bad;
    s_reset (s, sid);
    uint32_t two = 2, four = 4;
    s_task (s, 1, NULL, 0, 2);
    s_task (s, 3, &two, 1, 4);
    s_task (s, 5, &two, 1, 6);
    s_task (s, 7, &four, 1, 8);
    sq_task_spec_t *pair = s_task (s, 11, NULL, 0, 12);
    s->ids [s->n_ids++] = 13;           //  a second output, right after the first
    pair->n_outputs = 2;
    s->objects [s->sub.n_objects++] = (sq_object_spec_t) { .id = 13, .frame = -1 };
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    object_t *o2 = graph_object (graph, sq_key (sid, 2));
    object_t *o12 = graph_object (graph, sq_key (sid, 12));
    object_t *o13 = graph_object (graph, sq_key (sid, 13));
    CHECK (graph_object_delete (graph, o12, "x") == -1, "an unfinished object is not deleted");
    s_finish_on (graph, graph_task (graph, sq_key (sid, 1)), a);
    task_t *t3 = graph_task (graph, sq_key (sid, 3)), *t5 = graph_task (graph, sq_key (sid, 5));
    task_t *t7 = graph_task (graph, sq_key (sid, 7));
    graph_task_assigned (graph, t3, a);
    graph_task_started (graph, t3);
    CHECK (t3->state == TASK_RUNNING && t5->state == TASK_READY, "one running, one ready");
    s_stop_count = s_drop_count = 0;
    CHECK (graph_object_delete (graph, o2, "object 2 was deleted") == 0, "deleted");
    CHECK (o2->state == OBJ_FAILED && o2->failure->code == SQ_E_DELETED && o2->released
           && o2->failure->root == 2 && s_drop_count == 1, "deleted, its copy dropped");
    CHECK (t3->state == TASK_FAILED && t5->state == TASK_FAILED && t7->state == TASK_FAILED
           && s_stop_count == 1 && t7->failure->code == SQ_E_DELETED
           && strcmp (t7->failure->message, "object 2 was deleted") == 0,
           "the running consumer stopped; every consumer and what is below failed naming it");
    CHECK (graph_object_delete (graph, o2, "x") == -1, "deleted once");

    task_t *t11 = graph_task (graph, sq_key (sid, 11));
    graph_keep (graph, o12, true);
    graph_keep (graph, o13, true);
    s_finish_on (graph, t11, a);
    CHECK (graph_object_delete (graph, o13, "object 13 was deleted") == 0, "sibling deleted");
    graph_object_lost (graph, o12, a);
    CHECK (t11->state == TASK_READY && o12->state == OBJ_UNFINISHED, "re-run for its lost sibling");
    s_drop_count = 0;
    s_finish_on (graph, t11, a);
    CHECK (o12->state == OBJ_FINISHED && o13->state == OBJ_FAILED && o13->released
           && o13->n_locations == 0 && s_drop_count == 1,
           "the re-run's copy of the deleted output is dropped; it stays deleted");
    graph_session_close (graph, &session);
    gov_destroy (&a);
    graph_destroy (&graph);
    free (s);
}

//  A tenant's stored bytes (tenancy's `stored` quota): a running count,
//  which must equal at every step what walking the share's sessions finds
//  (task results held on governors, each object once, not inline at the
//  broker, not released), through copies, inline results, losses,
//  recomputation, a governor gone, releases, a share set late and closes.
static uint64_t
s_walk_stored (graph_t *graph, share_t *share)
{
    uint64_t bytes = 0;
    size_t cursor = 0;
    session_t *session;
    while ((session = graph_session_next (graph, &cursor))) {
        if (session->share != share)
            continue;
        size_t o_cursor = 0;
        object_t *object;
        while ((object = graph_session_next_object (session, &o_cursor)))
            if (object->producer && !object->released && object->n_locations && !object->data)
                bytes += object->size;
    }
    return bytes;
}

#define S_STORED(want, what) do { \
    uint64_t walked_ = s_walk_stored (graph, &share); \
    CHECK (share.stored == walked_ && walked_ == (want), \
           "%s: counted %llu, walked %llu, want %llu", what, (unsigned long long) share.stored, \
           (unsigned long long) walked_, (unsigned long long) (want)); \
} while (0)

static void
s_test_stored (void)
{
    graph_hooks_t hooks = { NULL, s_ready, s_stop, s_nothing, s_drop, s_copy, NULL };
    graph_t *graph = graph_new (&hooks);
    gov_t *a = s_gov (1), *b = s_gov (2);
    share_t share;
    memset (&share, 0, sizeof share);
    share.name = "t";
    session_t *session = graph_session_open (graph, NULL);
    graph_session_set_share (graph, session, &share);
    uint32_t sid = session->id;
    s_submit_t *s = (s_submit_t *) malloc (sizeof *s);
    char message [256];
    uint32_t bad;
    s_reset (s, sid);
    uint32_t two = 2;
    s_task (s, 1, NULL, 0, 2);
    s_task (s, 3, &two, 1, 4);
    s_task (s, 5, NULL, 0, 6);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    object_t *o2 = graph_object (graph, sq_key (sid, 2));
    object_t *o4 = graph_object (graph, sq_key (sid, 4)), *o6 = graph_object (graph, sq_key (sid, 6));
    task_t *t1 = graph_task (graph, sq_key (sid, 1)), *t3 = graph_task (graph, sq_key (sid, 3));
    task_t *t5 = graph_task (graph, sq_key (sid, 5));
    graph_keep (graph, o4, true);
    graph_keep (graph, o6, true);
    S_STORED (0, "submitted");
    s_finish_on (graph, t1, a);
    S_STORED (100, "a result on a governor");
    graph_object_add_location (graph, o2, b, true);
    S_STORED (100, "a second copy counts once");
    uint64_t size = 10;
    sq_blob_t *inline_bytes = sq_blob_copy ("0123456789", 10);
    graph_task_restore_finished (graph, t5, a, 0, &size, &inline_bytes, 1);
    CHECK (o6->data && o6->n_locations == 1, "an inline result, also on a");
    S_STORED (100, "inline results are the broker's, not counted");
    s_finish_on (graph, t3, b);
    CHECK (o2->released, "2 unneeded once 3 finished");
    S_STORED (100, "2 released, kept 4 stored");
    graph_object_lost (graph, o4, b);
    CHECK (t3->state == TASK_WAITING && t1->state == TASK_READY, "4 recomputed from 1");
    S_STORED (0, "the lost result");
    s_finish_on (graph, t1, a);
    s_finish_on (graph, t3, a);
    S_STORED (100, "recomputed on a");
    graph_object_add_location (graph, o4, b, true);
    graph_forget_governor (graph, a);
    S_STORED (100, "a gone, b still has 4");
    graph_forget_governor (graph, b);
    S_STORED (0, "b gone too");
    s_finish_on (graph, t1, a);
    s_finish_on (graph, t3, a);
    S_STORED (100, "recomputed again");
    graph_keep (graph, o4, false);
    S_STORED (0, "unkept, released");

    //  A session given its share late (restored from the journal) brings
    //  what it holds; closing it takes it away.
    session_t *late = graph_session_open (graph, NULL);
    s_reset (s, late->id);
    s_task (s, 1, NULL, 0, 2);
    CHECK (s_commit (graph, late, s, message, &bad) == SQ_OK, "%s", message);
    graph_keep (graph, graph_object (graph, sq_key (late->id, 2)), true);
    s_finish_on (graph, graph_task (graph, sq_key (late->id, 1)), b);
    CHECK (late->stored == 100, "the session counts before its share is known");
    S_STORED (0, "not the share's yet");
    graph_session_set_share (graph, late, &share);
    S_STORED (100, "share set late");
    graph_session_close (graph, &late);
    S_STORED (0, "late session closed");
    graph_session_close (graph, &session);
    CHECK (share.stored == 0 && share.sessions == 0, "nothing left");
    gov_destroy (&a);
    gov_destroy (&b);
    graph_destroy (&graph);
    free (s);
}

//  Actors (graph_actor.c): a host and its calls. Calls go in order, several
//  at once, to the host's governor once it runs; one with inputs elsewhere
//  goes alone;
//  a call's own failure fails only it; those in flight when the host goes
//  fail with SQ_E_ACTOR_LOST and later ones wait for the restart; calls of
//  a host that ended fail; a lost result of a call is never recomputed.
static const uint8_t s_host_conf [] = {
    0x82, 0xa2, 'f', 'n', 0xc4, 1, 'x', 0xa5, 'a', 'c', 't', 'o', 'r', 0xc3 };
static uint8_t s_call_conf [] = {
    0x82, 0xa4, 'c', 'a', 'l', 'l', 0x01, 0xa6, 'm', 'e', 't', 'h', 'o', 'd', 0xa1, 'm' };

static sq_task_spec_t *
s_py (s_submit_t *s, uint32_t id, const uint8_t *conf, size_t size, uint32_t output)
{
    sq_task_spec_t *t = &s->tasks [s->sub.n_tasks++];
    t->id = id;
    t->kind = (mpr_str_t) { "py", 2 };
    t->config = conf;
    t->config_size = size;
    t->inputs = s->ids + s->n_ids;
    if (output) {
        t->outputs = s->ids + s->n_ids++;
        t->outputs [0] = output;
        t->n_outputs = 1;
        s->objects [s->sub.n_objects++] = (sq_object_spec_t) { .id = output, .frame = -1,
                                                               .flags = SQ_OBJ_KEEP };
    }
    return t;
}

//  A call taking one input.
static sq_task_spec_t *
s_call_in (s_submit_t *s, uint32_t id, uint32_t input, uint32_t output)
{
    s->ids [s->n_ids] = input;
    uint32_t *in = s->ids + s->n_ids++;
    sq_task_spec_t *t = s_py (s, id, s_call_conf, sizeof s_call_conf, output);
    t->inputs = in;
    t->n_inputs = 1;
    return t;
}

static size_t s_sent;
static task_t *s_sent_tasks [64];
static void
s_send_call (void *arg, task_t *task, gov_t *gov)
{
    s_place (arg, task, gov);
    if (s_sent < 64)
        s_sent_tasks [s_sent] = task;
    s_sent++;
}

static size_t
s_settle (graph_t *graph)
{
    s_sent = 0;
    s_placed_on = NULL;
    graph_actors_settle (graph, s_send_call, graph);
    return s_sent;
}

static void
s_test_actor (void)
{
    graph_hooks_t hooks = { NULL, s_ready, s_stop, s_nothing, s_drop, s_copy, NULL };
    graph_t *graph = graph_new (&hooks);
    gov_t *a = s_gov (1), *b = s_gov (2);
    session_t *session = graph_session_open (graph, NULL);
    uint32_t sid = session->id;
    s_submit_t *s = (s_submit_t *) malloc (sizeof *s);
    char message [256];
    uint32_t bad;

    //  Refused: a call of a task that is not an actor, a call before its
    //  host in the submit, a call with a timeout, an actor with outputs.
    s_reset (s, sid);
    s_task (s, 1, NULL, 0, 2);
    s_py (s, 3, s_call_conf, sizeof s_call_conf, 4);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_E_BAD_CONFIG && bad == 3
           && strstr (message, "not an actor"), "%s", message);
    s_reset (s, sid);
    s_py (s, 3, s_call_conf, sizeof s_call_conf, 4);
    s_py (s, 1, s_host_conf, sizeof s_host_conf, 0);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_E_BAD_CONFIG && bad == 3,
           "a call before its host: %s", message);
    s_reset (s, sid);
    s_py (s, 1, s_host_conf, sizeof s_host_conf, 0);
    s_py (s, 3, s_call_conf, sizeof s_call_conf, 4)->timeout_ms = 10;
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_E_BAD_CONFIG && bad == 3
           && strstr (message, "timeout"), "%s", message);
    s_reset (s, sid);
    s_py (s, 1, s_host_conf, sizeof s_host_conf, 2);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_E_BAD_CONFIG && bad == 1,
           "an actor with an output: %s", message);

    //  The host (1) and calls 3, 5, 7 in one submit.
    s_reset (s, sid);
    s_py (s, 1, s_host_conf, sizeof s_host_conf, 0);
    s_py (s, 3, s_call_conf, sizeof s_call_conf, 4);
    s_py (s, 5, s_call_conf, sizeof s_call_conf, 6);
    s_py (s, 7, s_call_conf, sizeof s_call_conf, 8);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    task_t *host = graph_task (graph, sq_key (sid, 1));
    task_t *c [4];
    for (int i = 0; i < 3; i++)
        c [i] = graph_task (graph, sq_key (sid, 3 + 2 * (uint32_t) i));
    CHECK (host->actor_host && c [0]->actor_call && task_extra (c [0])->cpus == 0,
           "marked; a call needs no cpus of its own");
    CHECK (s_settle (graph) == 0, "nothing goes before the host runs");
    graph_task_assigned (graph, host, a);
    CHECK (s_settle (graph) == 0, "nor while it is only assigned");
    graph_task_started (graph, host);
    CHECK (s_settle (graph) == 3 && s_sent_tasks [0] == c [0] && s_sent_tasks [1] == c [1]
           && s_sent_tasks [2] == c [2] && c [2]->state == TASK_ASSIGNED && s_placed_on == a,
           "the calls go to the host's governor at once, in order");
    CHECK (s_settle (graph) == 0, "each once");
    sq_output_ref_t out = { c [0]->io [0]->key, 10, -1 };
    CHECK (graph_task_finished (graph, c [0], a, &out, 1, NULL, 0, 4096) == 0, "finished");
    CHECK (s_settle (graph) == 0, "nothing more to send");
    CHECK (graph_task_attempt_failed (graph, c [1], a->id, SQ_FAIL_TASK, "ValueError", 1)
           == GRAPH_FAILED && c [1]->failure->code == SQ_E_TASK_FAILED
           && c [2]->state == TASK_ASSIGNED, "a call's own failure: never retried, "
           "the next call runs anyway");

    //  The host's governor is lost: the call in flight fails, one made
    //  meanwhile waits for the restarted host, on another governor.
    graph_task_requeue (graph, host);
    graph_task_requeue (graph, c [2]);
    s_reset (s, sid);
    s_py (s, 9, s_call_conf, sizeof s_call_conf, 10);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    c [3] = graph_task (graph, sq_key (sid, 9));
    CHECK (s_settle (graph) == 0 && c [2]->state == TASK_FAILED
           && c [2]->failure->code == SQ_E_ACTOR_LOST && c [3]->state == TASK_READY,
           "in flight: lost; later: waiting (%s)", c [2]->failure? c [2]->failure->message: "");
    graph_task_assigned (graph, host, b);
    graph_task_started (graph, host);

    //  A call with an input its governor lacks (4, on a) waits for the
    //  calls before it, the calls behind it for it, and it goes alone: the
    //  governor has to fetch its input, and one behind it must not
    //  overtake it there.
    s_reset (s, sid);
    s_call_in (s, 15, 4, 16);
    s_py (s, 17, s_call_conf, sizeof s_call_conf, 18);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    task_t *with_in = graph_task (graph, sq_key (sid, 15));
    task_t *behind = graph_task (graph, sq_key (sid, 17));
    CHECK (s_settle (graph) == 1 && s_sent_tasks [0] == c [3] && c [3]->gov == b
           && behind->state == TASK_READY, "after the restart, to the new instance; "
           "the call behind one waiting for its input waits");
    sq_output_ref_t out10 = { c [3]->io [0]->key, 10, -1 };
    CHECK (graph_task_finished (graph, c [3], b, &out10, 1, NULL, 0, 4096) == 0, "finished");
    CHECK (s_settle (graph) == 1 && s_sent_tasks [0] == with_in && behind->state == TASK_READY,
           "the call with an input goes alone");
    sq_output_ref_t out16 = { with_in->io [1]->key, 10, -1 };
    CHECK (graph_task_finished (graph, with_in, b, &out16, 1, NULL, 0, 4096) == 0, "finished");
    CHECK (s_settle (graph) == 1 && s_sent_tasks [0] == behind, "then the one behind it");

    //  Calls whose inputs the host's governor has already (16, made there;
    //  the large arguments a client puts there) go in the window like the
    //  others, in order; one whose input is elsewhere (4, on a) still goes
    //  alone, once those before it are done.
    s_reset (s, sid);
    s_call_in (s, 23, 16, 24);
    s_call_in (s, 25, 16, 26);
    s_call_in (s, 27, 4, 28);
    s_py (s, 29, s_call_conf, sizeof s_call_conf, 30);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    task_t *here [4];
    for (int i = 0; i < 4; i++)
        here [i] = graph_task (graph, sq_key (sid, 23 + 2 * (uint32_t) i));
    CHECK (s_settle (graph) == 2 && s_sent_tasks [0] == here [0] && s_sent_tasks [1] == here [1]
           && here [2]->state == TASK_READY && here [3]->state == TASK_READY,
           "inputs already there: in the window behind a live call; an input elsewhere waits");
    task_t *live [3] = { behind, here [0], here [1] };
    for (int i = 0; i < 3; i++) {
        sq_output_ref_t done = { live [i]->io [live [i]->n_inputs]->key, 10, -1 };
        CHECK (graph_task_finished (graph, live [i], b, &done, 1, NULL, 0, 4096) == 0,
               "finished");
    }
    CHECK (s_settle (graph) == 1 && s_sent_tasks [0] == here [2] && here [3]->state == TASK_READY,
           "the call whose input is elsewhere goes alone");
    sq_output_ref_t out28 = { here [2]->io [1]->key, 10, -1 };
    CHECK (graph_task_finished (graph, here [2], b, &out28, 1, NULL, 0, 4096) == 0, "finished");
    CHECK (s_settle (graph) == 1 && s_sent_tasks [0] == here [3], "then the one behind it");
    behind = here [3];

    //  Calls with big arguments (a config of 300 KiB) go one at a time.
    size_t big_size = sizeof s_call_conf + 5 + 5 + (300u << 10);
    uint8_t *big = (uint8_t *) calloc (1, big_size);
    memcpy (big, s_call_conf, sizeof s_call_conf);
    big [0] = 0x83;
    memcpy (big + sizeof s_call_conf, "\xa4" "args" "\xc6\x00\x04\xb0\x00", 10);
    s_reset (s, sid);
    s_py (s, 19, big, big_size, 20);
    s_py (s, 21, big, big_size, 22);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    task_t *big1 = graph_task (graph, sq_key (sid, 19));
    sq_output_ref_t out18 = { behind->io [0]->key, 10, -1 };
    CHECK (graph_task_finished (graph, behind, b, &out18, 1, NULL, 0, 4096) == 0, "finished");
    CHECK (s_settle (graph) == 1 && s_sent_tasks [0] == big1, "a big call goes alone");
    sq_output_ref_t out20 = { big1->io [0]->key, 10, -1 };
    CHECK (graph_task_finished (graph, big1, b, &out20, 1, NULL, 0, 4096) == 0, "finished");
    CHECK (s_settle (graph) == 1, "then the next");
    behind = graph_task (graph, sq_key (sid, 21));

    //  A call that its governor reports failed after the host's own
    //  failure came in: lost with the actor.
    graph_task_requeue (graph, host);
    CHECK (graph_task_attempt_failed (graph, behind, b->id, SQ_FAIL_TASK, "executor died", 1)
           == GRAPH_FAILED && behind->failure->code == SQ_E_ACTOR_LOST,
           "a call failing where its host no longer runs is lost");

    //  The result of call 3 is lost with governor a: never recomputed.
    object_t *o4 = graph_object (graph, sq_key (sid, 4));
    graph_forget_governor (graph, a);
    CHECK (o4->state == OBJ_FAILED && o4->failure->code == SQ_E_ACTOR_LOST
           && c [0]->state == TASK_FINISHED, "a call's lost result fails: %s",
           o4->failure? o4->failure->message: "");

    //  The host is stopped: a waiting call fails, and so does a new one.
    s_reset (s, sid);
    s_py (s, 11, s_call_conf, sizeof s_call_conf, 12);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    task_t *waiting = graph_task (graph, sq_key (sid, 11));
    CHECK (s_settle (graph) == 0 && waiting->state == TASK_READY, "waits for the host");
    graph_cancel (graph, host);
    s_settle (graph);
    CHECK (waiting->state == TASK_FAILED && waiting->failure->code == SQ_E_ACTOR_LOST
           && strstr (waiting->failure->message, "stopped"), "calls of a stopped actor fail");
    s_reset (s, sid);
    s_py (s, 13, s_call_conf, sizeof s_call_conf, 14);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    s_settle (graph);
    task_t *late = graph_task (graph, sq_key (sid, 13));
    CHECK (late->state == TASK_FAILED && late->failure->code == SQ_E_ACTOR_LOST,
           "a call made after the actor ended fails");
    graph_session_close (graph, &session);
    CHECK (s_settle (graph) == 0, "a closed session's actors are gone");
    free (big);
    gov_destroy (&a);
    gov_destroy (&b);
    graph_destroy (&graph);
    free (s);
}

//  Locality weighed against waiting (issue 26). Governor a (1 cpu) holds
//  the 10 MiB input of a task and runs something else; b (1 cpu) is idle.
//  The task stays with its input while a's task has just started, goes to
//  b when a's has run for 5 s or an actor holds a's cpu; stealing takes it
//  back from a once a's task has run that long, not before.
static size_t s_stolen;
static void s_steal (void *arg, task_t *task) { (void) arg; (void) task; s_stolen++; }

static void
s_place_counted (void *arg, task_t *task, gov_t *gov)
{
    graph_task_assigned ((graph_t *) arg, task, gov);
    gov_task_add (gov, task);
    s_placed_on = gov;
}

static int64_t
s_mono_us (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

//  What runs on a: a plain task started `ran_us` ago, or an actor; with
//  copy_us, a governor reported a copy of 10 MiB that took that long.
static uint32_t
s_weigh_case (int64_t ran_us, bool actor, bool steal_later, uint64_t copy_us)
{
    graph_hooks_t hooks = { NULL, s_sched_ready, s_nothing, s_nothing, s_drop, s_copy, NULL };
    graph_t *graph = graph_new (&hooks);
    s_scheduler = scheduler_new (graph);
    gov_t *a = s_gov_with (1, NULL, 1), *b = s_gov_with (2, NULL, 1);
    scheduler_governor_add (s_scheduler, a);
    CHECK (scheduler_copy_rate (s_scheduler) == 1073741824.0, "1 GiB/s until told");
    scheduler_note_copy (s_scheduler, 10u << 20, copy_us);
    session_t *session = graph_session_open (graph, NULL);
    s_submit_t *s = (s_submit_t *) malloc (sizeof *s);
    char message [256];
    uint32_t bad;
    //  The input, made on a (b joins after: nothing else goes there).
    s_reset (s, session->id);
    s_task (s, 1, NULL, 0, 2);
    s->objects [0].flags = SQ_OBJ_KEEP;
    if (actor)
        s_py (s, 5, s_host_conf, sizeof s_host_conf, 0);
    else
        s_task (s, 5, NULL, 0, 6);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    task_t *producer = graph_task (graph, sq_key (session->id, 1));
    task_t *busy = graph_task (graph, sq_key (session->id, 5));
    CHECK (scheduler_run (s_scheduler, s_place_counted, graph) == 2, "both on a");
    gov_task_remove (a, producer->key);
    sq_output_ref_t out = { producer->io [0]->key, 10u << 20, -1 };
    CHECK (graph_task_finished (graph, producer, a, &out, 1, NULL, 0, 0) == 0, "made");
    graph_task_started (graph, busy);
    busy->stamp_us = s_mono_us () - ran_us;
    CHECK (a->held_cpus == (actor? 1u: 0u), "an actor holds a's cpu: %u", a->held_cpus);
    scheduler_governor_add (s_scheduler, b);
    //  Its reader.
    s_reset (s, session->id);
    uint32_t input = 2;
    s_task (s, 3, &input, 1, 4);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    s_placed_on = NULL;
    CHECK (scheduler_run (s_scheduler, s_place_counted, graph) == 1, "the reader is placed");
    uint32_t placed = s_placed_on? s_placed_on->id: 0;
    if (steal_later) {
        CHECK (placed == a->id, "the reader is with its input");
        s_stolen = 0;
        scheduler_rebalance (s_scheduler, s_steal, NULL);
        CHECK (s_stolen == 0, "not moved while a's task has just started");
        busy->stamp_us -= 5000000;
        scheduler_rebalance (s_scheduler, s_steal, NULL);
        CHECK (s_stolen == 1, "moved once a's task has run 5 s: %zu", s_stolen);
    }
    graph_session_close (graph, &session);
    scheduler_destroy (&s_scheduler);
    gov_destroy (&a);
    gov_destroy (&b);
    graph_destroy (&graph);
    free (s);
    return placed;
}

//  A ready task only an actor-held governor fits waits in the broker; it
//  does not stop stealing for the others: c's queued tasks fill idle b.
static void
s_test_stuck_steal (void)
{
    graph_hooks_t hooks = { NULL, s_sched_ready, s_nothing, s_nothing, s_drop, s_copy, NULL };
    graph_t *graph = graph_new (&hooks);
    s_scheduler = scheduler_new (graph);
    gov_t *a = s_gov_with (1, "tpu", 1), *b = s_gov_with (2, NULL, 1), *c = s_gov_with (3, NULL, 1);
    c->slots = 4;
    scheduler_governor_add (s_scheduler, a);
    session_t *session = graph_session_open (graph, NULL);
    s_submit_t *s = (s_submit_t *) malloc (sizeof *s);
    char message [256];
    uint32_t bad;
    s_reset (s, session->id);
    s_py (s, 1, s_host_conf, sizeof s_host_conf, 0);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    CHECK (scheduler_run (s_scheduler, s_place_counted, graph) == 1, "the actor on a");
    graph_task_started (graph, graph_task (graph, sq_key (session->id, 1)));
    scheduler_governor_add (s_scheduler, c);
    s_reset (s, session->id);
    for (uint32_t i = 0; i < 3; i++)
        s_task (s, 3 + 2 * i, NULL, 0, 4 + 2 * i);
    sq_task_spec_t *t = s_task (s, 11, NULL, 0, 12);
    sq_resource_t tpu = { { "tpu", 3 }, 1 };
    t->resources = &tpu;
    t->n_resources = 1;
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    CHECK (scheduler_run (s_scheduler, s_place_counted, graph) == 3
           && sq_idmap_size (c->tasks) == 3 && sq_idmap_size (a->tasks) == 1,
           "3 on c, none behind the actor");
    CHECK (scheduler_ready_count (s_scheduler) == 1, "the tpu task waits in the broker");
    scheduler_governor_add (s_scheduler, b);
    CHECK (scheduler_run (s_scheduler, s_place_counted, graph) == 0, "b fits no ready task");
    s_stolen = 0;
    scheduler_rebalance (s_scheduler, s_steal, NULL);
    CHECK (s_stolen == 1, "c gives b one of its queued tasks: %zu", s_stolen);
    graph_session_close (graph, &session);
    scheduler_destroy (&s_scheduler);
    gov_destroy (&a);
    gov_destroy (&b);
    gov_destroy (&c);
    graph_destroy (&graph);
    free (s);
}

static void
s_test_weigh (void)
{
    CHECK (s_weigh_case (0, false, false, 0) == 1,
           "a's task just started: the reader waits with its input");
    CHECK (s_weigh_case (5000000, false, false, 0) == 2,
           "a's task ran 5 s: the reader goes to idle b");
    CHECK (s_weigh_case (5000000, false, false, 10000000) == 1,
           "copies are slow here (10 MiB took 10 s): the reader waits 5 s with its input");
    CHECK (s_weigh_case (0, true, false, 0) == 2,
           "an actor holds a's cpu: the reader goes to idle b");
    s_weigh_case (0, false, true, 0);
}

//  Streams (graph_stream.c): readers ready when their writer starts; a
//  member lost or retried runs its whole group again (through lineage once
//  a writer finished); readers that fail are unread; refusals at submit.
static size_t s_unread;
static object_t *s_unread_stream;
static void
s_count_unread (void *arg, object_t *stream, task_t *consumer)
{
    (void) arg;
    (void) consumer;
    s_unread++;
    s_unread_stream = stream;
}

static sq_wbuf_t s_exec_conf [4];

static sq_task_spec_t *
s_exec (s_submit_t *s, uint32_t id, int32_t input, uint32_t output, bool stream, int conf)
{
    sq_task_spec_t *t = &s->tasks [s->sub.n_tasks++];
    t->id = id;
    t->kind = (mpr_str_t) { "execute", 7 };
    t->config = (const uint8_t *) s_exec_conf [conf].buf.data;
    t->config_size = s_exec_conf [conf].buf.size;
    t->inputs = s->ids + s->n_ids;
    if (input > 0) {
        t->inputs [0] = (uint32_t) input;
        t->n_inputs = 1;
        s->n_ids++;
    }
    t->outputs = s->ids + s->n_ids++;
    t->outputs [0] = output;
    t->n_outputs = 1;
    s->objects [s->sub.n_objects++] = (sq_object_spec_t) {
        .id = output, .frame = -1, .flags = stream? SQ_OBJ_STREAM: SQ_OBJ_KEEP };
    return t;
}

static void
s_test_stream (void)
{
    //  Configs: 0 writes its stdout, 1 reads stdin and writes stdout,
    //  2 reads stdin into a file output, 3 takes an input file (no stdin).
    const char *argv [] = { "cat" };
    const char *in_path [] = { "" }, *out_path [] = { "" }, *file [] = { "f" };
    for (int i = 0; i < 4; i++)
        sq_wbuf_init (&s_exec_conf [i]);
    sq_taskconf_pack_execute (&s_exec_conf [0].pk, argv, 1, NULL, 0, NULL, 0, -1, out_path, 1, 0);
    sq_taskconf_pack_execute (&s_exec_conf [1].pk, argv, 1, NULL, 0, in_path, 1, 0, out_path, 1, 0);
    sq_taskconf_pack_execute (&s_exec_conf [2].pk, argv, 1, NULL, 0, in_path, 1, 0, file, 1, -1);
    sq_taskconf_pack_execute (&s_exec_conf [3].pk, argv, 1, NULL, 0, file, 1, -1, out_path, 1, 0);

    graph_hooks_t hooks = { NULL, s_ready, s_stop, s_nothing, s_drop, s_copy, s_count_unread };
    graph_t *graph = graph_new (&hooks);
    gov_t *a = s_gov (1), *b = s_gov (2);
    session_t *session = graph_session_open (graph, NULL);
    uint32_t sid = session->id;
    s_submit_t *s = (s_submit_t *) malloc (sizeof *s);
    char message [256];
    uint32_t bad;

    //  Refused: no reader; kept; a reader that cannot read one there; a
    //  reader waiting on its writer's end; a reader in a later submit.
    s_reset (s, sid);
    s_exec (s, 1, 0, 2, true, 0);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_E_INVALID && bad == 2
           && strstr (message, "no reader"), "%s", message);
    s_reset (s, sid);
    s_exec (s, 1, 0, 2, true, 0);
    s_exec (s, 3, 2, 4, false, 2);
    s->objects [0].flags |= SQ_OBJ_KEEP;
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_E_INVALID && bad == 2
           && strstr (message, "kept"), "%s", message);
    s_reset (s, sid);
    s_exec (s, 1, 0, 2, true, 0);
    s_exec (s, 3, 2, 4, false, 3);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_E_BAD_CONFIG && bad == 3
           && strstr (message, "cannot read"), "%s", message);
    s_reset (s, sid);
    s_exec (s, 1, 0, 2, false, 0);
    s_exec (s, 3, 2, 4, true, 2);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_E_BAD_CONFIG && bad == 3
           && strstr (message, "cannot write"), "%s", message);

    //  P (1) -stream 2-> M (3) -stream 4-> R (5) -> 6
    s_reset (s, sid);
    s_exec (s, 1, 0, 2, true, 0);
    s_exec (s, 3, 2, 4, true, 1);
    s_exec (s, 5, 4, 6, false, 2)->max_retries = 1;
    s_ready_count = 0;
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    task_t *p = graph_task (graph, sq_key (sid, 1)), *m = graph_task (graph, sq_key (sid, 3));
    task_t *r = graph_task (graph, sq_key (sid, 5));
    object_t *s2 = graph_object (graph, sq_key (sid, 2)), *s4 = graph_object (graph, sq_key (sid, 4));
    CHECK (p->state == TASK_READY && m->state == TASK_WAITING && s_ready_count == 1
           && p->stream_out && m->stream_in && m->stream_out && r->stream_in && !r->stream_out,
           "only the writer is ready");
    s_reset (s, sid);
    s_exec (s, 7, 2, 8, false, 2);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_E_INVALID && bad == 7
           && strstr (message, "earlier submit"), "%s", message);

    graph_task_assigned (graph, p, a);
    CHECK (m->state == TASK_WAITING && !graph_stream_placeable (m), "assigned is not started");
    graph_task_started (graph, p);
    CHECK (m->state == TASK_READY && s2->stream_open && graph_stream_placeable (m)
           && graph_stream_consumers (s2) == 1, "its reader is ready when the writer starts");
    graph_task_assigned (graph, m, b);
    graph_task_started (graph, m);
    CHECK (r->state == TASK_READY, "and so on down the chain");
    graph_task_assigned (graph, r, a);
    graph_task_started (graph, r);

    //  The middle's governor is lost: the group runs again, writer first.
    uint32_t pa = p->attempt, ra = r->attempt;
    s_stop_count = 0;
    graph_task_requeue (graph, m);
    CHECK (p->state == TASK_READY && m->state == TASK_WAITING && r->state == TASK_WAITING
           && p->attempt == pa + 1 && r->attempt == ra + 1 && s_stop_count >= 2
           && !s2->stream_open && !s4->stream_open, "the whole group waits again (%u stops)",
           (unsigned) s_stop_count);

    //  A writer reporting a stream finished that never opened is not trusted.
    graph_task_assigned (graph, p, a);
    sq_output_ref_t out2 = { s2->key, 100, -1 };
    CHECK (graph_task_finished (graph, p, a, &out2, 1, NULL, 0, 4096) == -1
           && p->state == TASK_READY, "finished without starting: run again");
    graph_task_assigned (graph, p, a);
    graph_task_started (graph, p);
    graph_task_assigned (graph, m, b);
    graph_task_started (graph, m);
    graph_task_assigned (graph, r, a);
    graph_task_started (graph, r);
    CHECK (graph_task_finished (graph, p, a, &out2, 1, NULL, 0, 4096) == 0
           && s2->state == OBJ_FINISHED && s2->n_locations == 0 && s2->size == 100,
           "a finished stream has its size and no copy");
    sq_output_ref_t out4 = { s4->key, 50, -1 };
    CHECK (graph_task_finished (graph, m, b, &out4, 1, NULL, 0, 4096) == 0, "middle finished");

    //  The reader fails with a retry left: nothing is left to read, so both
    //  writers run again through lineage.
    uint64_t recomputed = graph_recomputed (graph);
    CHECK (graph_task_attempt_failed (graph, r, a->id, SQ_FAIL_TASK, "exit 1", 3) == GRAPH_RETRY
           && p->state == TASK_READY && m->state == TASK_WAITING && r->state == TASK_WAITING
           && graph_recomputed (graph) == recomputed + 2, "the group again, through lineage");

    //  A reader that fails for good while its stream is written is unread.
    graph_task_assigned (graph, p, a);
    graph_task_started (graph, p);
    graph_task_assigned (graph, m, b);
    graph_task_started (graph, m);
    s_unread = 0;
    graph_cancel (graph, r);
    CHECK (s_unread == 1 && s_unread_stream == s4 && r->state == TASK_CANCELLED,
           "the writer is told its reader will not read");
    graph_session_close (graph, &session);
    gov_destroy (&a);
    gov_destroy (&b);
    graph_destroy (&graph);
    for (int i = 0; i < 4; i++)
        sq_wbuf_release (&s_exec_conf [i]);
    free (s);
}

int
main (void)
{
    graph_hooks_t hooks = { NULL, s_ready, s_stop, s_nothing, s_drop, s_copy, NULL };
    graph_t *graph = graph_new (&hooks);
    session_t *session = graph_session_open (graph, NULL);
    uint32_t sid = session->id;
    char message [256];
    uint32_t bad;
    s_submit_t *s = (s_submit_t *) malloc (sizeof *s);

    //  1. Ids far apart: dense ones, ones near UINT32_MAX, and a consumer
    //  across the two.
    s_reset (s, sid);
    s_task (s, 1, NULL, 0, 2);
    s_task (s, 3000000000u, NULL, 0, UINT32_MAX);
    uint32_t both [2] = { 2, UINT32_MAX };
    s_task (s, 7, both, 2, 4000000000u);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    CHECK (session->cap_items <= 8192, "id table grew to %u slots for 6 ids", session->cap_items);
    task_t *far = graph_task (graph, sq_key (sid, 3000000000u));
    CHECK (far && sq_key_id (far->key) == 3000000000u, "task by a far id");
    object_t *top = graph_object (graph, sq_key (sid, UINT32_MAX));
    CHECK (top && top->producer == far, "object UINT32_MAX made by task 3000000000");
    CHECK (!graph_task (graph, sq_key (sid, UINT32_MAX)), "an object id is not a task");
    CHECK (!graph_object (graph, sq_key (sid, 3000000001u)), "an id never used");
    CHECK (!graph_object (graph, sq_key (sid + 1, 2)), "no such session");
    task_t *join = graph_task (graph, sq_key (sid, 7));
    CHECK (join->io [0] == graph_object (graph, sq_key (sid, 2)) && join->io [1] == top,
           "inputs linked by id");
    CHECK (join->unfinished == 2 && join->state == TASK_WAITING, "waits for both");

    //  Ids already used, dense and far, are refused and change nothing.
    s_reset (s, sid);
    s_task (s, 8, NULL, 0, UINT32_MAX);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_E_DUPLICATE_ID && bad == UINT32_MAX,
           "far duplicate: %s", message);
    s_reset (s, sid);
    s_task (s, 9, NULL, 0, 2);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_E_DUPLICATE_ID && bad == 2,
           "dense duplicate: %s", message);
    CHECK (!graph_task (graph, sq_key (sid, 8)) && !graph_task (graph, sq_key (sid, 9)),
           "refused submits left nothing");

    //  A later submit reaching a far object, itself with far and dense ids.
    s_reset (s, sid);
    uint32_t far_input = 4000000000u;
    s_task (s, 4000000001u, &far_input, 1, 10);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    CHECK (graph_task (graph, sq_key (sid, 4000000001u))->io [0]
           == graph_object (graph, sq_key (sid, 4000000000u)), "far input of a later submit");

    //  Every task once through the session iterator.
    size_t cursor = 0, n = 0;
    task_t *task;
    while ((task = graph_session_next_task (session, &cursor)))
        n++;
    CHECK (n == 4 && n == session->n_tasks, "iterated %zu tasks of %u", n, session->n_tasks);

    //  2. One object, ten consumers and six copies: the lists leave their
    //  in-place slot and grow; copies removed from the middle keep the rest.
    s_reset (s, sid);
    s_task (s, 100, NULL, 0, 101);
    for (uint32_t i = 0; i < 10; i++) {
        uint32_t input = 101;
        s_task (s, 200 + 2 * i, &input, 1, 201 + 2 * i);
    }
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    object_t *shared = graph_object (graph, sq_key (sid, 101));
    CHECK (shared->n_consumers == 10 && shared->consumers_on_heap, "ten consumers");
    for (uint32_t i = 0; i < 10; i++)
        CHECK (object_consumers (shared) [i] == graph_task (graph, sq_key (sid, 200 + 2 * i)),
               "consumer %u in order", i);
    gov_t *govs [6];
    for (uint32_t g = 0; g < 6; g++)
        govs [g] = s_gov (g + 1);
    graph_object_add_location (graph, shared, govs [0], false);
    CHECK (!shared->locations_on_heap && graph_object_location (shared, govs [0]), "first copy in place");
    for (uint32_t g = 1; g < 6; g++)
        graph_object_add_location (graph, shared, govs [g], g % 2 == 0);
    graph_object_add_location (graph, shared, govs [3], true);
    CHECK (shared->n_locations == 6 && shared->locations_on_heap, "six copies");
    for (uint32_t g = 0; g < 6; g++) {
        location_t *loc = graph_object_location (shared, govs [g]);
        CHECK (loc && loc->gov == govs [g] && loc->arrived == (g == 3 || (g > 0 && g % 2 == 0)),
               "copy on governor %u", g + 1);
    }
    //  Producer finishes: the ten consumers become ready.
    task_t *producer = graph_task (graph, sq_key (sid, 100));
    graph_task_assigned (graph, producer, govs [0]);
    s_ready_count = 0;
    sq_output_ref_t out = { shared->key, 5, -1 };
    CHECK (graph_task_finished (graph, producer, govs [0], &out, 1, NULL, 0, 0) == 0, "finished");
    CHECK (s_ready_count == 10, "%zu of 10 consumers ready", s_ready_count);
    graph_object_lost (graph, shared, govs [2]);
    graph_object_lost (graph, shared, govs [4]);
    CHECK (shared->n_locations == 4 && !graph_object_location (shared, govs [2])
           && !graph_object_location (shared, govs [4]) && graph_object_location (shared, govs [5]),
           "two copies gone, four left");
    for (uint32_t g = 0; g < 6; g++)
        graph_forget_governor (graph, govs [g]);
    CHECK (shared->n_locations == 0, "no copies after every governor left");
    graph_object_add_location (graph, shared, govs [1], true);
    CHECK (graph_object_location (shared, govs [1]), "a copy again, list on the heap reused");

    //  3. Rare fields stay out of line; config lives in the task's block.
    s_reset (s, sid);
    s_task (s, 300, NULL, 0, 301);
    sq_task_spec_t *named = s_task (s, 302, NULL, 0, 303);
    named->name = (mpr_str_t) { "named", 5 };
    named->priority = 5;
    sq_resource_t res [2] = { { { "cpus", 4 }, 2 }, { { "gpus", 4 }, 1 } };
    named->resources = res;
    named->n_resources = 2;
    sq_task_spec_t *configured = s_task (s, 304, NULL, 0, 305);
    configured->kind = (mpr_str_t) { "sleep", 5 };
    static const uint8_t sleep_config [] =                      //  {"seconds": 0}
        { 0x81, 0xa7, 's', 'e', 'c', 'o', 'n', 'd', 's', 0x00 };
    configured->config = sleep_config;
    configured->config_size = sizeof sleep_config;
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    task_t *plain = graph_task (graph, sq_key (sid, 300));
    CHECK (!plain->extra && task_extra (plain)->cpus == 1 && !task_extra (plain)->name,
           "defaults need no extra record");
    CHECK (!task_config (plain), "no config");
    task_t *rich = graph_task (graph, sq_key (sid, 302));
    CHECK (rich->extra && rich->extra->cpus == 2 && rich->extra->priority == 5
           && strcmp (rich->extra->name, "named") == 0 && rich->extra->n_resources == 1
           && rich->extra->resources [0].amount == 1, "rare fields kept");
    task_extra_t *extra = graph_task_extra (plain);
    CHECK (extra && extra->cpus == 1 && plain->extra == extra, "extra made on demand");
    extra->retries = 1;
    task_t *slow = graph_task (graph, sq_key (sid, 304));
    CHECK (slow->config_size == sizeof sleep_config
           && memcmp (task_config (slow), sleep_config, sizeof sleep_config) == 0, "config in the block");
    CHECK (slow->io [0] == graph_object (graph, sq_key (sid, 305))
           && slow->io [0]->embedded && slow->io [0]->producer == slow, "output embedded");

    //  4. A refused submit (a cycle) leaves nothing behind.
    s_reset (s, sid);
    uint32_t a_in = 401, b_in = 403;
    s_task (s, 400, &b_in, 1, 401);
    s_task (s, 402, &a_in, 1, 403);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_E_CYCLE, "cycle: %s", message);
    CHECK (!graph_task (graph, sq_key (sid, 400)) && !graph_object (graph, sq_key (sid, 401)),
           "nothing of the refused submit");

    //  5. A lost input sends back its assigned consumer, and the task
    //  overbooked behind that consumer on the same governor with it: both
    //  are stopped and wait (the second would wait for ever for an output
    //  its governor will not make).
    s_reset (s, sid);
    s_task (s, 500, NULL, 0, 501);
    uint32_t x = 501, y = 503;
    s_task (s, 502, &x, 1, 503);
    s_task (s, 504, &y, 1, 505);
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    object_t *kept = graph_object (graph, sq_key (sid, 505));
    graph_keep (graph, kept, true);
    task_t *p = graph_task (graph, sq_key (sid, 500));
    task_t *c = graph_task (graph, sq_key (sid, 502));
    task_t *d = graph_task (graph, sq_key (sid, 504));
    graph_task_assigned (graph, p, govs [1]);
    sq_output_ref_t px = { sq_key (sid, 501), 3, -1 };
    CHECK (graph_task_finished (graph, p, govs [1], &px, 1, NULL, 0, 0) == 0, "p finished");
    graph_task_assigned (graph, c, govs [1]);
    graph_task_assigned (graph, d, govs [1]);          //  overbooked behind c
    s_stop_count = 0;
    graph_object_lost (graph, graph_object (graph, sq_key (sid, 501)), govs [1]);
    CHECK (c->state == TASK_WAITING && !c->gov && c->attempt == 1, "c sent back");
    CHECK (d->state == TASK_WAITING && !d->gov && d->attempt == 1, "d sent back with c");
    CHECK (s_stop_count == 2, "%zu stops, expected c and d", s_stop_count);
    CHECK (p->state == TASK_READY, "p runs again to remake the lost input");

    //  6. The retry policy: a task killed for memory asks for twice as
    //  much and goes back (while allowed_failures lasts), one whose own
    //  code failed goes back while it has retries, then it fails; each
    //  retry avoids the governor it failed on.
    s_reset (s, sid);
    sq_task_spec_t *hungry = s_task (s, 600, NULL, 0, 601);
    sq_resource_t mem [2] = { { { "cpus", 4 }, 1 }, { { "memory", 6 }, 1000 } };
    hungry->resources = mem;
    hungry->n_resources = 2;
    hungry->max_retries = 1;
    CHECK (s_commit (graph, session, s, message, &bad) == SQ_OK, "%s", message);
    task_t *h = graph_task (graph, sq_key (sid, 600));
    graph_task_assigned (graph, h, govs [2]);
    CHECK (graph_task_attempt_failed (graph, h, govs [2]->id, SQ_FAIL_MEMORY, "too big", 1)
           == GRAPH_RETRY_MEMORY, "killed for memory: retried");
    CHECK (h->state == TASK_READY && h->attempt == 1 && task_extra (h)->resources [0].amount == 2000
           && task_extra (h)->last_gov == govs [2]->id, "with twice the memory, away from it");
    graph_task_assigned (graph, h, govs [3]);
    CHECK (graph_task_attempt_failed (graph, h, govs [3]->id, SQ_FAIL_MEMORY, "too big", 1)
           == GRAPH_RETRY, "memory kills spent: its retry counts");
    CHECK (h->state == TASK_READY && h->attempt == 2 && task_extra (h)->retries == 1,
           "one retry used");
    graph_task_assigned (graph, h, govs [3]);
    CHECK (graph_task_attempt_failed (graph, h, govs [3]->id, SQ_FAIL_TASK, "broken", 1)
           == GRAPH_FAILED, "no retry left: failed");
    CHECK (h->state == TASK_FAILED && h->failure && h->failure->code == SQ_E_TASK_FAILED
           && strcmp (h->failure->message, "broken") == 0, "failed with its message");

    graph_session_close (graph, &session);
    CHECK (!session && !graph_task (graph, sq_key (sid, 7)), "session gone");
    for (uint32_t g = 0; g < 6; g++)
        gov_destroy (&govs [g]);
    graph_destroy (&graph);
    free (s);
    s_test_queue_depth ();
    s_test_placement ();
    s_test_newcomer ();
    s_test_delete ();
    s_test_stored ();
    s_test_actor ();
    s_test_weigh ();
    s_test_stuck_steal ();
    s_test_stream ();
    printf ("graph records: far ids, in-place lists, out-of-line fields, embedded outputs; "
            "placement over 200 governors; actors; locality against waiting; streams; "
            "stored bytes counted: ok\n");
    return 0;
}
