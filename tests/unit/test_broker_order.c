/*  test_broker_order: the static order keeps few intermediate results
    alive on known graph shapes, and the scheduler takes ready tasks by
    user priority, then that order.

    The graph is built through graph_submit exactly as the broker does;
    execution is simulated one task at a time in scheduler order (one
    governor, one slot), counting finished objects still needed (the
    "live" intermediates) at the worst moment. */
#include "graph.h"
#include "gov.h"
#include "scheduler.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...) do { if (!(cond)) { \
    fprintf (stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
    fprintf (stderr, __VA_ARGS__); fprintf (stderr, "\n"); exit (1); } } while (0)

typedef struct {
    graph_t *graph;
    scheduler_t *scheduler;
    task_t *assigned [1 << 16];
    size_t n_assigned;
} s_sim_t;

static void s_ready (void *arg, task_t *task) { scheduler_task_ready (((s_sim_t *) arg)->scheduler, task); }
static void s_nothing (void *arg, task_t *task) { (void) arg; (void) task; }
static void s_drop (void *arg, object_t *object) { (void) arg; (void) object; }
static void s_copy (void *arg, object_t *o, gov_t *a, gov_t *b) { (void) arg; (void) o; (void) a; (void) b; }

static void
s_assign (void *arg, task_t *task, gov_t *gov)
{
    s_sim_t *sim = (s_sim_t *) arg;
    graph_task_assigned (sim->graph, task, gov);
    sq_idmap_insert (gov->tasks, task->key, task);
    sim->assigned [sim->n_assigned++] = task;
}

//  A tiny graph builder over sq_submit_t.
typedef struct {
    sq_submit_t sub;
    uint32_t ids [1 << 18];
    size_t n_ids;
    uint32_t next_id;
} s_builder_t;

static uint32_t
s_add (s_builder_t *b, const uint32_t *inputs, uint32_t n_inputs, int32_t priority)
{
    uint32_t task = ++b->next_id, out = ++b->next_id;
    sq_task_spec_t *t = &b->sub.tasks [b->sub.n_tasks++];
    memset (t, 0, sizeof *t);
    t->id = task;
    t->kind = (mpr_str_t) { n_inputs? "concat": "noop", n_inputs? 6: 4 };
    t->inputs = b->ids + b->n_ids;
    if (n_inputs)
        memcpy (t->inputs, inputs, n_inputs * sizeof (uint32_t));
    t->n_inputs = n_inputs;
    b->n_ids += n_inputs;
    t->outputs = b->ids + b->n_ids;
    t->outputs [0] = out;
    t->n_outputs = 1;
    b->n_ids++;
    t->priority = priority;
    sq_object_spec_t *o = &b->sub.objects [b->sub.n_objects++];
    memset (o, 0, sizeof *o);
    o->id = out;
    o->frame = -1;
    return out;
}

//  Runs everything in scheduler order; returns the peak number of finished
//  objects that some unfinished task still needs.
static size_t
s_run (s_builder_t *b, uint32_t **order_out)
{
    s_sim_t *sim = (s_sim_t *) calloc (1, sizeof *sim);
    graph_hooks_t hooks = { sim, s_ready, s_nothing, s_nothing, s_drop, s_copy, NULL };
    sim->graph = graph_new (&hooks);
    sim->scheduler = scheduler_new (sim->graph);
    sq_hello_t hello;
    memset (&hello, 0, sizeof hello);
    hello.name = (mpr_str_t) { "g", 1 };
    hello.data_endpoint = hello.serve_endpoint = (mpr_str_t) { "x", 1 };
    hello.n_resources = 1;
    hello.resources [0] = (sq_resource_t) { { "cpus", 4 }, 1 };
    gov_t *gov = gov_new (1, &hello, "id", 2, 0);     //  one slot: one task at a time
    scheduler_governor_add (sim->scheduler, gov);
    session_t *session = graph_session_open (sim->graph, NULL);
    b->sub.session = session->id;
    char message [256];
    uint32_t bad;
    CHECK (graph_submit (sim->graph, session, &b->sub, NULL, 0, NULL, NULL,
                         message, sizeof message, &bad) == SQ_OK, "%s", message);
    size_t peak = 0, done = 0;
    uint32_t *order = (uint32_t *) malloc (b->sub.n_tasks * sizeof (uint32_t));
    while (done < b->sub.n_tasks) {
        sim->n_assigned = 0;
        scheduler_run (sim->scheduler, s_assign, sim);
        CHECK (sim->n_assigned == 1, "one slot: one task at a time (got %zu)", sim->n_assigned);
        task_t *task = sim->assigned [0];
        order [done++] = sq_key_id (task->key);
        sq_idmap_remove (gov->tasks, task->key);
        sq_output_ref_t out = { task->io [task->n_inputs]->key, 1, -1 };
        graph_task_finished (sim->graph, task, gov, &out, 1, NULL, 0, 0);
        //  Live intermediates: finished, not released objects.
        size_t live = 0;
        for (uint32_t i = 0; i < b->sub.n_objects; i++) {
            object_t *o = graph_object (sim->graph, sq_key (session->id, b->sub.objects [i].id));
            live += o->state == OBJ_FINISHED && !o->released;
        }
        if (live > peak)
            peak = live;
    }
    if (order_out)
        *order_out = order;
    else
        free (order);
    graph_session_close (sim->graph, &session);
    scheduler_destroy (&sim->scheduler);
    graph_destroy (&sim->graph);
    gov_destroy (&gov);
    free (sim);
    return peak;
}

static s_builder_t *
s_builder_new (void)
{
    s_builder_t *b = (s_builder_t *) calloc (1, sizeof *b);
    b->sub.tasks = (sq_task_spec_t *) calloc (1 << 16, sizeof (sq_task_spec_t));
    b->sub.objects = (sq_object_spec_t *) calloc (1 << 16, sizeof (sq_object_spec_t));
    return b;
}

static void
s_builder_destroy (s_builder_t **b)
{
    free ((*b)->sub.tasks);
    free ((*b)->sub.objects);
    free (*b);
    *b = NULL;
}

int
main (void)
{
    //  1. A binary reduction over 1024 leaves: depth-first keeps about
    //  log2(1024) = 10 partial results alive; breadth-first would keep 512.
    s_builder_t *b = s_builder_new ();
    uint32_t level [1024];
    for (int i = 0; i < 1024; i++)
        level [i] = s_add (b, NULL, 0, 0);
    for (int width = 1024; width > 1; width /= 2)
        for (int i = 0; i < width / 2; i++) {
            uint32_t pair [2] = { level [2 * i], level [2 * i + 1] };
            level [i] = s_add (b, pair, 2, 0);
        }
    size_t peak = s_run (b, NULL);
    printf ("wide reduction, 1024 leaves: peak %zu live intermediates\n", peak);
    CHECK (peak <= 12, "peak %zu, expected about log2(1024)", peak);
    s_builder_destroy (&b);

    //  2. 64 independent trees of 8 leaves: each tree finishes before the
    //  next starts, so at most one tree's partials are alive.
    b = s_builder_new ();
    for (int tree = 0; tree < 64; tree++) {
        uint32_t leaves [8];
        for (int i = 0; i < 8; i++)
            leaves [i] = s_add (b, NULL, 0, 0);
        s_add (b, leaves, 8, 0);
    }
    peak = s_run (b, NULL);
    printf ("64 independent trees of 8 leaves: peak %zu live intermediates\n", peak);
    CHECK (peak <= 8, "peak %zu: trees were interleaved", peak);
    s_builder_destroy (&b);

    //  3. A chain of 500 next to 500 short (2-task) chains: the long chain
    //  and the short ones never pile up results.
    b = s_builder_new ();
    uint32_t prev = s_add (b, NULL, 0, 0);
    for (int i = 1; i < 500; i++)
        prev = s_add (b, &prev, 1, 0);
    for (int i = 0; i < 500; i++) {
        uint32_t head = s_add (b, NULL, 0, 0);
        s_add (b, &head, 1, 0);
    }
    peak = s_run (b, NULL);
    printf ("a chain of 500 beside 500 short chains: peak %zu live intermediates\n", peak);
    CHECK (peak <= 2, "peak %zu", peak);
    s_builder_destroy (&b);

    //  4. User priority beats the static order: of 10 independent tasks,
    //  the one with priority 5 runs first, then priority 1, then the rest
    //  in submit order.
    b = s_builder_new ();
    uint32_t outs [10];
    for (int i = 0; i < 10; i++)
        outs [i] = s_add (b, NULL, 0, i == 7? 5: i == 3? 1: 0);
    uint32_t *order;
    s_run (b, &order);
    CHECK (order [0] == outs [7] - 1 && order [1] == outs [3] - 1,
           "ran %u then %u first, expected %u then %u", order [0], order [1], outs [7] - 1, outs [3] - 1);
    CHECK (order [2] == outs [0] - 1, "then the first submitted");
    printf ("user priorities first, then the static order\n");
    free (order);
    s_builder_destroy (&b);
    printf ("test_broker_order: all checks passed\n");
    return 0;
}
