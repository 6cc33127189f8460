/*  test_broker_placement: the placement the broker asks of the scheduler
    outside its ready queue (scheduler.h), in process.

    - a stream reader (scheduler_place_now) goes to the least loaded
      governor whatever its slots; never to one draining or leaving; not to the one its last attempt failed on while another
      fits; only to a governor it names, or first to one it prefers
      (loose); nowhere when no governor has its cpus;
    - a new copy (scheduler_place_copy) goes to the usable governor with
      the least memory in use among those the caller wants. */
#include "graph.h"
#include "gov.h"
#include "scheduler.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...) do { if (!(cond)) { \
    fprintf (stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
    fprintf (stderr, __VA_ARGS__); fprintf (stderr, "\n"); exit (1); } } while (0)

static void s_nothing (void *arg, task_t *task) { (void) arg; (void) task; }
static void s_drop (void *arg, object_t *object) { (void) arg; (void) object; }
static void s_copy (void *arg, object_t *o, gov_t *a, gov_t *b) { (void) arg; (void) o; (void) a; (void) b; }

static gov_t *
s_gov (uint32_t id, uint32_t cpus)
{
    sq_hello_t hello;
    memset (&hello, 0, sizeof hello);
    hello.name = (mpr_str_t) { "g", 1 };
    hello.data_endpoint = hello.serve_endpoint = (mpr_str_t) { "x", 1 };
    hello.resources [hello.n_resources++] = (sq_resource_t) { { "cpus", 4 }, cpus };
    gov_t *gov = gov_new (id, &hello, "id", 2, 0);
    CHECK (gov, "governor %u", id);
    return gov;
}

//  A one-task SUBMIT: a noop needing `cpus`, naming `govs` (or preferring
//  them, loose). Returns the task.
static task_t *
s_task (graph_t *graph, session_t *session, uint32_t cpus, uint32_t *govs, uint32_t n_govs,
        bool loose)
{
    uint32_t id = session->max_id + 1, output = id + 1;
    sq_resource_t need = { { "cpus", 4 }, cpus };
    sq_task_spec_t task = { .id = id, .kind = { "noop", 4 }, .outputs = &output,
                            .n_outputs = 1, .resources = &need, .n_resources = 1,
                            .n_governors = n_govs, .governors = govs, .loose = loose };
    sq_object_spec_t object = { .id = output, .frame = -1 };
    sq_submit_t sub;
    memset (&sub, 0, sizeof sub);
    sub.session = session->id;
    sub.tasks = &task;
    sub.n_tasks = 1;
    sub.objects = &object;
    sub.n_objects = 1;
    char message [256];
    uint32_t bad;
    int rc = graph_submit (graph, session, &sub, NULL, 0, NULL, NULL, message, sizeof message, &bad);
    CHECK (rc == SQ_OK, "submit: %s", message);
    task_t *made = graph_task (graph, sq_key (session->id, id));
    CHECK (made, "task %u", id);
    return made;
}

//  Makes the governor hold `n` tasks (its load).
static void
s_load (gov_t *gov, size_t n, uint64_t base)
{
    for (size_t i = 0; i < n; i++)
        sq_idmap_insert (gov->tasks, base + i, gov);
}

static bool
s_not_g1 (void *arg, const gov_t *gov)
{
    (void) arg;
    return gov->id != 1;
}

static bool
s_any (void *arg, const gov_t *gov)
{
    (void) arg;
    (void) gov;
    return true;
}

int
main (void)
{
    graph_hooks_t hooks = { NULL, s_nothing, s_nothing, s_nothing, s_drop, s_copy, NULL };
    graph_t *graph = graph_new (&hooks);
    scheduler_t *scheduler = scheduler_new (graph);
    session_t *session = graph_session_open (graph, NULL);
    CHECK (graph && scheduler && session, "setup");

    gov_t *g1 = s_gov (1, 4), *g2 = s_gov (2, 4), *g3 = s_gov (3, 4), *g4 = s_gov (4, 8);
    scheduler_governor_add (scheduler, g1);
    scheduler_governor_add (scheduler, g2);
    scheduler_governor_add (scheduler, g3);
    scheduler_governor_add (scheduler, g4);
    //  Loads in tasks per cpu: g1 0.25, g2 0.5, g3 0, g4 0.125.
    s_load (g1, 1, 1000);
    s_load (g2, 2, 2000);
    s_load (g4, 1, 4000);

    task_t *task = s_task (graph, session, 1, NULL, 0, false);
    CHECK (scheduler_place_now (scheduler, task) == g3, "the least loaded: g3");
    g3->draining = true;
    CHECK (!scheduler_usable (g3), "a draining governor takes no work");
    CHECK (scheduler_place_now (scheduler, task) == g4, "g3 drains: g4 next");
    g3->draining = false;
    g3->leaving = true;
    CHECK (scheduler_place_now (scheduler, task) == g4, "g3 leaves: g4");
    g3->leaving = false;

    //  The governor its last attempt failed on only when no other fits.
    graph_task_extra (task)->last_gov = 3;
    CHECK (scheduler_place_now (scheduler, task) == g4, "a retry avoids g3");

    //  Named: only there, however loaded; preferred: there first.
    uint32_t on_g2 [] = { 2 };
    task_t *named = s_task (graph, session, 1, on_g2, 1, false);
    CHECK (scheduler_place_now (scheduler, named) == g2, "named g2");
    CHECK (!scheduler_fits (g3, named), "g3 is not named");
    task_t *loose = s_task (graph, session, 1, on_g2, 1, true);
    CHECK (scheduler_fits (g3, loose), "loose: any fits");
    CHECK (scheduler_place_now (scheduler, loose) == g2, "loose prefers g2");
    g2->draining = true;
    CHECK (scheduler_place_now (scheduler, named) == NULL, "named g2 drains: nowhere");
    CHECK (scheduler_place_now (scheduler, loose) == g3, "loose, g2 drains: the least loaded");
    g2->draining = false;

    //  Cpus: only g4 has 8; nobody 16.
    task_t *wide = s_task (graph, session, 8, NULL, 0, false);
    CHECK (scheduler_place_now (scheduler, wide) == g4, "8 cpus: g4");
    task_t *huge = s_task (graph, session, 16, NULL, 0, false);
    CHECK (scheduler_place_now (scheduler, huge) == NULL, "16 cpus: none");
    scheduler_governor_remove (scheduler, g4);
    CHECK (scheduler_place_now (scheduler, wide) == NULL, "g4 gone: none for 8 cpus");

    //  Copies: the least memory in use among the usable ones wanted.
    g1->load.memory = 100;
    g2->load.memory = 300;
    g3->load.memory = 200;
    CHECK (scheduler_place_copy (scheduler, s_any, NULL) == g1, "least memory: g1");
    CHECK (scheduler_place_copy (scheduler, s_not_g1, NULL) == g3, "g1 not wanted: g3");
    g3->draining = true;
    CHECK (scheduler_place_copy (scheduler, s_not_g1, NULL) == g2, "g3 drains: g2");
    g2->draining = true;
    CHECK (scheduler_place_copy (scheduler, s_not_g1, NULL) == NULL, "none left");

    scheduler_destroy (&scheduler);
    graph_destroy (&graph);
    gov_destroy (&g1);
    gov_destroy (&g2);
    gov_destroy (&g3);
    gov_destroy (&g4);
    printf ("test_broker_placement: all checks passed\n");
    return 0;
}
