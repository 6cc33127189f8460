/*  test_broker_fairshare: the scheduler's queues per tenant (scheduler.c)
    and the tenants' quotas (tenancy.c), in process.

    - two tenants of equal weight alternate on the free slots, whatever the
      priorities of their tasks (priorities order tasks within a tenant);
    - weights 3 and 1 give 3 slots to 1;
    - a tenant at its cpu cap has its tasks wait (still ready, none
      failed) while another tenant's run;
    - the usage the graph keeps (cpus, sessions) goes back to 0 when the
      sessions close;
    - tasks queued before their session had a share (journal replay) move
      to their tenant's queue and its cap;
    - tasks of 0 cpus pass a tenant's capped tasks without passing its cap,
      and count as a cpu each in the fair share;
    - --tenant-quota specs are parsed strictly, and a tenant not named
      takes the `*` quota. */
#include "graph.h"
#include "gov.h"
#include "scheduler.h"
#include "tenancy.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...) do { if (!(cond)) { \
    fprintf (stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
    fprintf (stderr, __VA_ARGS__); fprintf (stderr, "\n"); exit (1); } } while (0)

static scheduler_t *s_scheduler;
static graph_t *s_graph;
static void s_ready (void *arg, task_t *task) { (void) arg; scheduler_task_ready (s_scheduler, task); }
static void s_nothing (void *arg, task_t *task) { (void) arg; (void) task; }
static void s_drop (void *arg, object_t *object) { (void) arg; (void) object; }
static void s_copy (void *arg, object_t *o, gov_t *a, gov_t *b) { (void) arg; (void) o; (void) a; (void) b; }

//  Sessions' ids of the tasks placed, in order; the governor of each task
//  id placed (ids below 256).
static uint32_t s_order [256];
static size_t s_n_order;
static uint32_t s_placed_on [256];

static void
s_place (void *arg, task_t *task, gov_t *gov)
{
    (void) arg;
    graph_task_assigned (s_graph, task, gov);
    sq_idmap_insert (gov->tasks, task->key, task);
    if (s_n_order < 256)
        s_order [s_n_order++] = task->session->id;
    if (sq_key_id (task->key) < 256)
        s_placed_on [sq_key_id (task->key)] = gov->id;
}

static gov_t *
s_gov (uint32_t id, uint32_t cpus)
{
    sq_hello_t hello;
    memset (&hello, 0, sizeof hello);
    hello.name = (mpr_str_t) { "g", 1 };
    hello.data_endpoint = hello.serve_endpoint = (mpr_str_t) { "x", 1 };
    hello.resources [hello.n_resources++] = (sq_resource_t) { { "cpus", 4 }, cpus };
    gov_t *gov = gov_new (id, &hello, "id", 2, 0);
    CHECK (gov && gov->slots == cpus, "a governor of %u slots", cpus);
    return gov;
}

//  n independent one-cpu noops at `priority` in the session, naming the
//  governors they may run on (n_govs 0: any), or prefer (loose).
//  cpus each task of the next s_submit_on asks for (1 unless a test says).
static uint32_t s_task_cpus = 1;

static void
s_submit_on (session_t *session, uint32_t n, int32_t priority, uint32_t *govs,
             uint32_t n_govs, bool loose)
{
    sq_resource_t cpus = { { "cpus", 4 }, s_task_cpus };
    sq_submit_t sub;
    memset (&sub, 0, sizeof sub);
    sq_task_spec_t *tasks = (sq_task_spec_t *) calloc (n, sizeof *tasks);
    sq_object_spec_t *objects = (sq_object_spec_t *) calloc (n, sizeof *objects);
    uint32_t *outputs = (uint32_t *) calloc (n, sizeof *outputs);
    uint32_t base = session->max_id + 1;
    for (uint32_t i = 0; i < n; i++) {
        outputs [i] = base + 2 * i + 1;
        tasks [i] = (sq_task_spec_t) { .id = base + 2 * i, .kind = { "noop", 4 },
                                       .outputs = &outputs [i], .n_outputs = 1,
                                       .priority = priority, .n_governors = n_govs,
                                       .governors = govs, .loose = loose,
                                       .n_resources = s_task_cpus != 1, .resources = &cpus };
        objects [i] = (sq_object_spec_t) { .id = outputs [i], .frame = -1 };
    }
    sub.session = session->id;
    sub.tasks = tasks;
    sub.n_tasks = n;
    sub.objects = objects;
    sub.n_objects = n;
    char message [256];
    uint32_t bad;
    int rc = graph_submit (s_graph, session, &sub, NULL, 0, NULL, NULL, message, sizeof message, &bad);
    CHECK (rc == SQ_OK, "submit: %s", message);
    free (tasks);
    free (objects);
    free (outputs);
}

static void
s_submit (session_t *session, uint32_t n, int32_t priority)
{
    s_submit_on (session, n, priority, NULL, 0, false);
}

static size_t
s_count (uint32_t session)
{
    size_t n = 0;
    for (size_t i = 0; i < s_n_order; i++)
        n += s_order [i] == session;
    return n;
}

static void
s_setup (void)
{
    graph_hooks_t hooks = { NULL, s_ready, s_nothing, s_nothing, s_drop, s_copy, NULL };
    s_graph = graph_new (&hooks);
    s_scheduler = scheduler_new (s_graph);
    s_n_order = 0;
}

static void
s_teardown (gov_t **gov)
{
    scheduler_destroy (&s_scheduler);
    graph_destroy (&s_graph);
    gov_destroy (gov);
}

//  Equal weights: the high-priority flood of A does not keep B out.
static void
s_test_alternate (void)
{
    s_setup ();
    tenancy_t *tenancy = tenancy_new (NULL, 0);
    share_t *a = tenancy_share (tenancy, "a"), *b = tenancy_share (tenancy, "b");
    session_t *sa = graph_session_open (s_graph, NULL), *sb = graph_session_open (s_graph, NULL);
    graph_session_set_share (s_graph, sa, a);
    graph_session_set_share (s_graph, sb, b);
    s_submit (sa, 100, 100);
    s_submit (sb, 100, 0);
    CHECK (sa->live_objects == 100, "INFO counts a session's live objects: %u", sa->live_objects);
    gov_t *gov = s_gov (1, 4);
    scheduler_governor_add (s_scheduler, gov);
    CHECK (scheduler_run (s_scheduler, s_place, NULL) == 4, "4 slots filled");
    CHECK (s_count (sa->id) == 2 && s_count (sb->id) == 2, "2 and 2: %zu and %zu",
           s_count (sa->id), s_count (sb->id));
    CHECK (a->cpus == 2 && b->cpus == 2, "the shares hold %llu and %llu cpus",
           (unsigned long long) a->cpus, (unsigned long long) b->cpus);
    CHECK (scheduler_ready_count (s_scheduler) == 196, "196 wait");
    //  The flood is cancelled: what it held comes back.
    graph_session_close (s_graph, &sa);
    CHECK (a->cpus == 0 && a->sessions == 0, "a's session closed: %llu cpus, %llu sessions",
           (unsigned long long) a->cpus, (unsigned long long) a->sessions);
    graph_session_close (s_graph, &sb);
    CHECK (b->cpus == 0 && b->sessions == 0, "b's too");
    s_teardown (&gov);
    tenancy_destroy (&tenancy);
}

//  Weights 3 and 1 on 8 slots: 6 and 2.
static void
s_test_weights (void)
{
    s_setup ();
    tenancy_quota_t quota;
    char err [200];
    CHECK (tenancy_quota_parse ("heavy:weight=3", &quota, err, sizeof err) == 0, "%s", err);
    tenancy_t *tenancy = tenancy_new (&quota, 1);
    share_t *heavy = tenancy_share (tenancy, "heavy"), *light = tenancy_share (tenancy, "light");
    CHECK (heavy->weight == 3 && light->weight == 1, "weights");
    session_t *sh = graph_session_open (s_graph, NULL), *sl = graph_session_open (s_graph, NULL);
    graph_session_set_share (s_graph, sh, heavy);
    graph_session_set_share (s_graph, sl, light);
    s_submit (sl, 50, 1000);
    s_submit (sh, 50, 0);
    gov_t *gov = s_gov (1, 8);
    scheduler_governor_add (s_scheduler, gov);
    CHECK (scheduler_run (s_scheduler, s_place, NULL) == 8, "8 slots filled");
    CHECK (s_count (sh->id) == 6 && s_count (sl->id) == 2, "6 and 2: %zu and %zu",
           s_count (sh->id), s_count (sl->id));
    graph_session_close (s_graph, &sh);
    graph_session_close (s_graph, &sl);
    s_teardown (&gov);
    tenancy_destroy (&tenancy);
}

//  A cap of 2 cpus on 8 free slots: 2 run, the rest wait ready; another
//  tenant's tasks still go.
static void
s_test_cap (void)
{
    s_setup ();
    tenancy_quota_t quota;
    char err [200];
    CHECK (tenancy_quota_parse ("*:cpus=2", &quota, err, sizeof err) == 0, "%s", err);
    tenancy_t *tenancy = tenancy_new (&quota, 1);
    share_t *a = tenancy_share (tenancy, "a"), *b = tenancy_share (tenancy, "b");
    CHECK (a->max_cpus == 2 && b->max_cpus == 2, "the * quota applies to every tenant");
    session_t *sa = graph_session_open (s_graph, NULL), *sb = graph_session_open (s_graph, NULL);
    graph_session_set_share (s_graph, sa, a);
    graph_session_set_share (s_graph, sb, b);
    s_submit (sa, 20, 0);
    gov_t *gov = s_gov (1, 8);
    scheduler_governor_add (s_scheduler, gov);
    CHECK (scheduler_run (s_scheduler, s_place, NULL) == 2, "2 of a's run (its cap)");
    CHECK (scheduler_run (s_scheduler, s_place, NULL) == 0, "and no more on the next run");
    CHECK (sa->counts [TASK_READY] == 18 && sa->counts [TASK_FAILED] == 0,
           "the others wait: %u ready, %u failed", sa->counts [TASK_READY], sa->counts [TASK_FAILED]);
    s_submit (sb, 3, 0);
    CHECK (scheduler_run (s_scheduler, s_place, NULL) == 2, "b's go up to its own cap");
    CHECK (s_count (sb->id) == 2 && a->cpus == 2 && b->cpus == 2, "b holds 2 cpus");
    graph_session_close (s_graph, &sa);
    graph_session_close (s_graph, &sb);
    s_teardown (&gov);
    tenancy_destroy (&tenancy);
}

//  Tasks made ready before their session had a share (a journal's replay)
//  are counted against their tenant once it has one: cap 1, one runs.
static void
s_test_late_share (void)
{
    s_setup ();
    tenancy_quota_t quota;
    char err [200];
    CHECK (tenancy_quota_parse ("late:cpus=1", &quota, err, sizeof err) == 0, "%s", err);
    tenancy_t *tenancy = tenancy_new (&quota, 1);
    session_t *session = graph_session_open (s_graph, NULL);
    s_submit (session, 5, 0);
    share_t *late = tenancy_share (tenancy, "late");
    graph_session_set_share (s_graph, session, late);
    CHECK (late->sessions == 1 && late->cpus == 0, "counted from now on");
    gov_t *gov = s_gov (1, 4);
    scheduler_governor_add (s_scheduler, gov);
    CHECK (scheduler_run (s_scheduler, s_place, NULL) == 1 && late->cpus == 1,
           "one runs under the cap of its tenant");
    CHECK (scheduler_ready_count (s_scheduler) == 4, "4 wait in its tenant's queue");
    graph_session_close (s_graph, &session);
    CHECK (late->sessions == 0 && late->cpus == 0, "and go with the session");
    s_teardown (&gov);
    tenancy_destroy (&tenancy);
}

static void
s_test_parse (void)
{
    tenancy_quota_t q;
    char err [300];
    CHECK (tenancy_quota_parse ("alice:cpus=4,stored=1G,constants=64M,sessions=8,weight=2",
                                &q, err, sizeof err) == 0, "%s", err);
    CHECK (strcmp (q.tenant, "alice") == 0 && q.cpus == 4 && q.stored == (1ull << 30)
           && q.constants == (64ull << 20) && q.sessions == 8 && q.weight == 2, "fields");
    CHECK (tenancy_quota_parse ("*:", &q, err, sizeof err) == 0 && q.weight == 1 && q.cpus == 0,
           "no fields: no limits, weight 1");
    const char *bad [] = {
        "alice", ":cpus=1", "al ice:cpus=1", "alice:cpus=0", "alice:weight=0", "alice:cpus=1,cpus=2",
        "alice:stored=0", "alice:color=red", "alice:cpus", "alice:cpus=1,,weight=2",
        "alice:stored=12Q", "alice:cpus=-1"
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        err [0] = 0;
        CHECK (tenancy_quota_parse (bad [i], &q, err, sizeof err) == -1 && err [0],
               "'%s' is refused", bad [i]);
    }
    tenancy_quota_t quotas [2];
    CHECK (tenancy_quota_parse ("*:sessions=3", &quotas [0], err, sizeof err) == 0, "%s", err);
    CHECK (tenancy_quota_parse ("root:weight=5", &quotas [1], err, sizeof err) == 0, "%s", err);
    tenancy_t *tenancy = tenancy_new (quotas, 2);
    share_t *root = tenancy_share (tenancy, "root"), *other = tenancy_share (tenancy, "other");
    share_t *keyless = tenancy_share (tenancy, NULL);
    CHECK (root->weight == 5 && root->max_sessions == 0, "a named tenant takes its own quota only");
    CHECK (other->max_sessions == 3 && other->weight == 1, "others take *'s");
    CHECK (keyless == tenancy_share (tenancy, "") && keyless->max_sessions == 3, "the keyless tenant is ''");
    CHECK (tenancy_share (tenancy, "root") == root, "one share per tenant");
    char message [300];
    tenancy_refusal (other, "constants", 5000, 3000, 3000, true, message, sizeof message);
    CHECK (strcmp (message, "tenant other: constants quota exceeded (limit 4.9 KiB, in use 2.9 KiB, "
                   "this request 2.9 KiB; see --tenant-quota)") == 0, "%s", message);
    tenancy_destroy (&tenancy);
}

//  Tasks naming governors (Dask's workers=): placed only there, the others
//  not held back behind them when those are full; loose ones prefer
//  theirs and run elsewhere when theirs is not there; with their only
//  governor gone they fail, naming it.
static void
s_test_governors (void)
{
    s_setup ();
    memset (s_placed_on, 0, sizeof s_placed_on);
    session_t *s = graph_session_open (s_graph, NULL);
    uint32_t two [1] = { 2 }, three [1] = { 3 }, gone [1] = { 99 };
    s_submit_on (s, 5, 10, two, 1, false);          //  tasks 1, 3, 5, 7, 9
    s_submit_on (s, 1, 5, three, 1, true);          //  11
    s_submit_on (s, 1, 4, gone, 1, true);           //  13
    s_submit (s, 4, 0);                             //  15, 17, 19, 21
    gov_t *g1 = s_gov (1, 2), *g2 = s_gov (2, 2), *g3 = s_gov (3, 2);
    scheduler_governor_add (s_scheduler, g1);
    scheduler_governor_add (s_scheduler, g2);
    scheduler_governor_add (s_scheduler, g3);
    CHECK (scheduler_run (s_scheduler, s_place, NULL) == 6, "every slot filled");
    size_t on_two = 0;
    for (uint32_t t = 1; t <= 9; t += 2) {
        CHECK (s_placed_on [t] == 0 || s_placed_on [t] == 2, "task %u on governor %u", t,
               s_placed_on [t]);
        on_two += s_placed_on [t] == 2;
    }
    CHECK (on_two == 2, "2 of the tasks restricted to governor 2 there: %zu", on_two);
    CHECK (s_placed_on [11] == 3, "the loose task on the governor it prefers: %u", s_placed_on [11]);
    CHECK (s_placed_on [13] == 1 || s_placed_on [13] == 3, "a loose task whose governor is "
           "not there runs elsewhere: %u", s_placed_on [13]);
    size_t plain = 0;
    for (uint32_t t = 15; t <= 21; t += 2)
        plain += s_placed_on [t] != 0;
    CHECK (plain == 2, "tasks naming no governor take the slots left: %zu", plain);
    //  Governor 2 leaves: its 3 waiting tasks can run nowhere else (found
    //  when a slot is free: a newcomer's).
    scheduler_governor_remove (s_scheduler, g2);
    gov_t *g4 = s_gov (4, 8);
    scheduler_governor_add (s_scheduler, g4);
    scheduler_run (s_scheduler, s_place, NULL);
    for (uint32_t t = 1; t <= 9; t += 2)
        CHECK (s_placed_on [t] != 4, "task %u restricted to governor 2 is not on 4", t);
    size_t failed = 0;
    for (uint32_t t = 1; t <= 9; t += 2) {
        task_t *task = graph_task (s_graph, sq_key (s->id, t));
        if (task && task->state == TASK_FAILED) {
            failed++;
            CHECK (task->failure && strstr (task->failure->message, "on governor 2"),
                   "the failure names the governor: %s",
                   task->failure? task->failure->message: "none");
        }
    }
    CHECK (failed == 3, "the 3 waiting for governor 2 failed: %zu", failed);
    graph_session_close (s_graph, &s);
    scheduler_destroy (&s_scheduler);
    graph_destroy (&s_graph);
    gov_destroy (&g1);
    gov_destroy (&g2);
    gov_destroy (&g3);
    gov_destroy (&g4);
}

//  Tasks of 0 cpus (gather's joins: 0 cpus at the top priority) never take
//  a tenant past its cpu cap, yet pass its tasks the cap holds; and each
//  counts as a cpu in the fair share (share_t.cpuless), else a tenant of
//  such tasks, always furthest below its share, took every free slot.
static void
s_test_cpuless (void)
{
    s_setup ();
    tenancy_quota_t quota;
    char err [200];
    CHECK (tenancy_quota_parse ("a:cpus=2", &quota, err, sizeof err) == 0, "%s", err);
    tenancy_t *tenancy = tenancy_new (&quota, 1);
    share_t *a = tenancy_share (tenancy, "a"), *b = tenancy_share (tenancy, "b");
    session_t *sa = graph_session_open (s_graph, NULL), *sb = graph_session_open (s_graph, NULL);
    graph_session_set_share (s_graph, sa, a);
    graph_session_set_share (s_graph, sb, b);
    gov_t *gov = s_gov (1, 16);
    scheduler_governor_add (s_scheduler, gov);
    s_submit (sa, 2, 0);
    CHECK (scheduler_run (s_scheduler, s_place, NULL) == 2 && a->cpus == 2, "a at its cap");
    s_submit (sa, 4, 0);                //  held by the cap
    s_task_cpus = 0;
    s_submit (sa, 3, INT32_MAX);        //  the joins
    s_task_cpus = 1;
    CHECK (scheduler_run (s_scheduler, s_place, NULL) == 3, "the joins pass the held tasks");
    CHECK (a->cpus == 2 && a->cpuless == 3, "still at the cap: %llu cpus, %llu cpuless",
           (unsigned long long) a->cpus, (unsigned long long) a->cpuless);
    CHECK (scheduler_ready_count (s_scheduler) == 4, "the capped tasks wait");
    graph_session_close (s_graph, &sa);
    CHECK (a->cpus == 0 && a->cpuless == 0, "given back with the session");
    graph_session_close (s_graph, &sb);
    s_teardown (&gov);

    //  b's 20 tasks of no cpu against c's 20 of one, on 8 free slots: 4 and 4.
    s_setup ();
    share_t *c = tenancy_share (tenancy, "c");
    sb = graph_session_open (s_graph, NULL);
    session_t *sc = graph_session_open (s_graph, NULL);
    graph_session_set_share (s_graph, sb, b);
    graph_session_set_share (s_graph, sc, c);
    s_task_cpus = 0;
    s_submit (sb, 20, INT32_MAX);
    s_task_cpus = 1;
    s_submit (sc, 20, 0);
    gov = s_gov (2, 8);
    scheduler_governor_add (s_scheduler, gov);
    CHECK (scheduler_run (s_scheduler, s_place, NULL) == 8, "8 slots filled");
    CHECK (s_count (sb->id) == 4 && s_count (sc->id) == 4, "4 and 4: %zu and %zu",
           s_count (sb->id), s_count (sc->id));
    graph_session_close (s_graph, &sb);
    graph_session_close (s_graph, &sc);
    CHECK (b->cpuless == 0 && c->cpus == 0, "given back");
    s_teardown (&gov);
    tenancy_destroy (&tenancy);
}

int
main (void)
{
    s_test_alternate ();
    s_test_weights ();
    s_test_cap ();
    s_test_late_share ();
    s_test_parse ();
    s_test_governors ();
    s_test_cpuless ();
    printf ("test_broker_fairshare: all checks passed\n");
    return 0;
}
