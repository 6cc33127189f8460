/*  scheduler: ready tasks by priority, locality-first placement.

    Over 800 lines: the ready queues (fair share, priorities), placement and
    work stealing share the open governors and one cost model (waiting plus
    copying). */
#include "scheduler.h"
#include "reswait.h"
#include "grow.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

//  Governors with a free slot a task looks at besides those holding its
//  inputs: placing a task costs the same with 2 governors or 2000.
#define S_SAMPLE 8
//  Placement weighs locality against waiting: the time to copy the inputs
//  a governor lacks against how long a task would wait there for a cpu.
//  The broker sees no bytes move (governors copy directly): a copy is
//  estimated at the rate governors report for their copies (LOCATED with
//  a duration, scheduler_note_copy), a conservative 1 GiB/s until one
//  does, plus a millisecond per object for the order, the connection and
//  the first chunk's round trips.
#define S_COPY_RATE (1073741824.0 / 1e6)    //  bytes per us
#define S_COPY_SETUP_US 1000.0
//  A governor's running tasks are looked at again after this long, at most
//  this many of them (a sample on a big governor).
#define S_STALL_REFRESH_US 100000
#define S_STALL_SAMPLE 64

//  A ready task in its tenant's heap: user priority first (higher first),
//  then the static order (lower first). The task is found by key when
//  popped.
typedef struct {
    uint32_t rank;              //  INT32_MAX - priority
    uint32_t queue;             //  its tenant's queue (share index, 0 none)
    uint64_t order;
    uint64_t key;
} s_entry_t;

//  Fair share: each tenant's ready tasks wait in a heap of their own
//  (queue i for the share with index i; 0 for sessions without one).
//  Which tenant's head goes next is chosen among the tenants with ready
//  tasks (s_next_queue), so the per-task cost grows with the number of
//  tenants waiting at once, not with the number of tasks.
typedef struct {
    s_entry_t *heap;            //  binary min-heap
    size_t n;
    size_t cap;
    const share_t *share;       //  NULL for queue 0
    int32_t active_at;          //  where in `active`, -1 while empty
    bool held;                  //  this run: at its cpu cap, skipped
    uint64_t served;            //  when it was last picked (scheduler's count)
} s_queue_t;

//  Ready tasks set aside during one run because every governor that could
//  run them is full, with the needs that made them wait: a task with the
//  same needs is set aside without looking at governors again. Bounded, so
//  a run costs at most S_DEFER_MAX heap moves more than it assigns; past
//  that it stops at the first task that must wait, as a plain heap would.
#define S_DEFER_MAX 1024
#define S_DEFER_SHAPES 8
typedef struct {
    s_entry_t entries [S_DEFER_MAX];
    size_t n;
    const task_t *shapes [S_DEFER_SHAPES];
    size_t n_shapes;
} s_deferred_t;

struct _scheduler_t {
    graph_t *graph;
    s_queue_t *queues;          //  by share index
    size_t n_queues;
    uint32_t *active;           //  queues with ready tasks
    size_t n_active;
    size_t n_ready;             //  in all queues
    uint64_t picks;             //  tasks taken from a queue so far
    uint64_t *blocked;          //  ready tasks the heap had no memory for
    size_t n_blocked;
    size_t cap_blocked;
    gov_t **govs;
    size_t n_govs;
    gov_t **open;               //  governors with a free slot, built per run
    size_t n_open;
    size_t cursor;              //  where the next sample of `open` starts
    s_deferred_t deferred;      //  scratch of scheduler_run
    reswait_t *waiting;         //  tasks waiting for a governor that fits (or NULL)
    int64_t wait_ms;
    int64_t last_tick;          //  ms of the last scheduler_tick that did work
    size_t n_stuck;             //  ready tasks the last run set aside, every one
    double copy_rate;           //  bytes per us a copy between governors moves
    bool copy_learned;          //  from governors' reports, not the default
    int64_t now_us;             //  monotonic, read once per run or rebalance
};

static int
s_push (uint64_t **array, size_t *n, size_t *cap, uint64_t key)
{
    if (*n == *cap && sq_grow ((void **) array, cap, *n + 1, sizeof **array, 1024, SIZE_MAX))
        return -1;
    (*array) [(*n)++] = key;
    return 0;
}

scheduler_t *
scheduler_new (graph_t *graph)
{
    scheduler_t *self = (scheduler_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->graph = graph;
    self->copy_rate = S_COPY_RATE;
    self->govs = (gov_t **) calloc (GOV_MAX, sizeof (gov_t *));
    self->open = (gov_t **) calloc (GOV_MAX, sizeof (gov_t *));
    if (!self->govs || !self->open) {
        free (self->govs);
        free (self->open);
        free (self);
        return NULL;
    }
    return self;
}

void
scheduler_destroy (scheduler_t **self_p)
{
    scheduler_t *self = *self_p;
    if (!self)
        return;
    for (size_t q = 0; q < self->n_queues; q++)
        free (self->queues [q].heap);
    free (self->queues);
    free (self->active);
    reswait_destroy (&self->waiting);
    free (self->blocked);
    free (self->govs);
    free (self->open);
    free (self);
    *self_p = NULL;
}

static inline bool
s_before (const s_entry_t *a, const s_entry_t *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->order < b->order);
}

//  The queue of the task's tenant, made on first use. NULL out of memory.
static s_queue_t *
s_queue_of (scheduler_t *self, const task_t *task)
{
    const share_t *share = task->session->share;
    size_t index = share? share->index: 0;
    if (index >= self->n_queues) {
        size_t n = index + 8;
        s_queue_t *queues = (s_queue_t *) realloc (self->queues, n * sizeof *queues);
        if (!queues)
            return NULL;
        self->queues = queues;
        uint32_t *active = (uint32_t *) realloc (self->active, n * sizeof *active);
        if (!active)
            return NULL;
        self->active = active;
        memset (queues + self->n_queues, 0, (n - self->n_queues) * sizeof *queues);
        for (size_t q = self->n_queues; q < n; q++)
            queues [q].active_at = -1;
        self->n_queues = n;
    }
    s_queue_t *queue = &self->queues [index];
    queue->share = share;
    return queue;
}

//  Puts an entry in its queue. 0, or -1 out of memory.
static inline int
s_queue_insert (scheduler_t *self, s_queue_t *queue, const s_entry_t *item)
{
    s_entry_t entry = *item;
    if (queue->n == queue->cap
    &&  sq_grow ((void **) &queue->heap, &queue->cap, queue->n + 1, sizeof *queue->heap, 1024, SIZE_MAX))
        return -1;
    size_t i = queue->n++;
    while (i > 0 && s_before (&entry, &queue->heap [(i - 1) / 2])) {
        queue->heap [i] = queue->heap [(i - 1) / 2];
        i = (i - 1) / 2;
    }
    queue->heap [i] = entry;
    self->n_ready++;
    if (queue->active_at < 0) {
        queue->active_at = (int32_t) self->n_active;
        self->active [self->n_active++] = entry.queue;
    }
    return 0;
}

static int
s_heap_push (scheduler_t *self, task_t *task)
{
    s_queue_t *queue = s_queue_of (self, task);
    if (!queue)
        return -1;
    s_entry_t entry = {
        (uint32_t) ((int64_t) INT32_MAX - task_extra (task)->priority),
        (uint32_t) (queue - self->queues), task->order, task->key
    };
    return s_queue_insert (self, queue, &entry);
}

static void
s_heap_pop (scheduler_t *self, s_queue_t *queue)
{
    s_entry_t last = queue->heap [--queue->n];
    size_t i = 0, n = queue->n;
    while (2 * i + 1 < n) {
        size_t child = 2 * i + 1;
        if (child + 1 < n && s_before (&queue->heap [child + 1], &queue->heap [child]))
            child++;
        if (!s_before (&queue->heap [child], &last))
            break;
        queue->heap [i] = queue->heap [child];
        i = child;
    }
    if (n)
        queue->heap [i] = last;
    self->n_ready--;
    if (n == 0) {
        //  Empty: out of the active list.
        uint32_t moved = self->active [--self->n_active];
        self->active [queue->active_at] = moved;
        self->queues [moved].active_at = queue->active_at;
        queue->active_at = -1;
    }
}

//  Whether tenant a is further below its share than b: fewer cpus held
//  per unit of weight (a.cpus / a.weight < b.cpus / b.weight), a task of
//  0 cpus counted as one (share_t.cpuless: it holds a slot); at equal
//  shares the one served least recently goes first (so two tenants
//  alternate on a cluster that frees one slot at a time), then by heads.
static bool
s_behind (const s_queue_t *a, const s_queue_t *b)
{
    uint64_t a_cpus = a->share? a->share->cpus + a->share->cpuless: 0;
    uint64_t b_cpus = b->share? b->share->cpus + b->share->cpuless: 0;
    uint64_t a_weight = a->share? a->share->weight: 1, b_weight = b->share? b->share->weight: 1;
    uint64_t x = a_cpus * b_weight, y = b_cpus * a_weight;
    if (x != y)
        return x < y;
    if (a->served != b->served)
        return a->served < b->served;
    return s_before (&a->heap [0], &b->heap [0]);
}

//  The queue whose head goes next: the tenant furthest below its share
//  among those with ready tasks and not held this run; NULL if none.
static s_queue_t *
s_next_queue (scheduler_t *self)
{
    if (self->n_active == 1) {
        //  One tenant waiting (always without keys): nothing to choose.
        s_queue_t *queue = &self->queues [self->active [0]];
        return queue->held? NULL: queue;
    }
    s_queue_t *best = NULL;
    for (size_t i = 0; i < self->n_active; i++) {
        s_queue_t *queue = &self->queues [self->active [i]];
        if (!queue->held && (!best || s_behind (queue, best)))
            best = queue;
    }
    return best;
}

//  A tenant at its cpu cap (--tenant-quota cpus=N) runs nothing more until
//  some of its tasks end: its tasks wait, they do not fail.
static bool
s_over_cap (const task_t *task)
{
    const share_t *share = task->session->share;
    return share && share->max_cpus && share->cpus + task_extra (task)->cpus > share->max_cpus;
}

void
scheduler_task_ready (scheduler_t *self, task_t *task)
{
    if (s_heap_push (self, task))
        //  Out of memory: the task stays READY and is found again when a
        //  governor joins (the blocked list is rescanned then).
        s_push (&self->blocked, &self->n_blocked, &self->cap_blocked, task->key);
}

void
scheduler_governor_add (scheduler_t *self, gov_t *gov)
{
    if (self->n_govs < GOV_MAX)
        self->govs [self->n_govs++] = gov;
    //  Tasks waiting for resources are tried again; they stay in the wait
    //  set (their budget goes on) until placed or gone.
    size_t n_waiting = self->waiting? reswait_count (self->waiting): 0;
    for (size_t i = 0; i < n_waiting; i++) {
        uint64_t key;
        int64_t left;
        reswait_get (self->waiting, i, &key, &left);
        task_t *task = graph_task (self->graph, key);
        if (task && task->state == TASK_READY)
            s_heap_push (self, task);
    }
    //  Tasks that fit nobody before may fit the newcomer.
    for (size_t i = 0; i < self->n_blocked; i++) {
        task_t *task = graph_task (self->graph, self->blocked [i]);
        if (task && task->state == TASK_READY)
            s_heap_push (self, task);
    }
    self->n_blocked = 0;
}

static bool s_held_off (const gov_t *gov, const task_t *task);

//  Whether the task names the governor among those it may run on (or
//  prefers, when loose); false for a task that names none.
static bool
s_named (const gov_t *gov, const task_t *task)
{
    const task_extra_t *extra = task_extra (task);
    for (uint32_t g = 0; g < extra->n_governors; g++)
        if (extra->governors [g] == gov->id)
            return true;
    return false;
}

//  A task that names governors, on one it does not name.
static bool
s_unnamed (const gov_t *gov, const task_t *task)
{
    return task_extra (task)->n_governors && !s_named (gov, task);
}

//  A task no live governor can run is reported, not left hanging: it
//  fails with SQ_E_RESOURCES while other governors are up. With none up
//  (a cluster starting or restarting) it waits for them.
//  What the task asks for: "cpus=1, gpu=2".
static void
s_needs (const task_t *task, char *out, size_t size)
{
    const task_extra_t *extra = task_extra (task);
    int len = snprintf (out, size, "cpus=%u", extra->cpus);
    for (uint32_t r = 0; r < extra->n_resources && len > 0 && (size_t) len < size; r++) {
        char one [96];
        sq_resource_format (&extra->resources [r], one, sizeof one);
        len += snprintf (out + len, size - (size_t) len, ", %s", one);
    }
    if (extra->n_governors && !extra->loose && len > 0 && (size_t) len < size)
        len += snprintf (out + len, size - (size_t) len, ", on governor%s",
                         extra->n_governors > 1? "s": "");
    for (uint32_t g = 0; !extra->loose && g < extra->n_governors && len > 0 && (size_t) len < size; g++)
        len += snprintf (out + len, size - (size_t) len, "%s%u", g? ", ": " ", extra->governors [g]);
}

static void
s_unrunnable_after (scheduler_t *self, task_t *task, int64_t waited_ms)
{
    char needs [200], message [300];
    s_needs (task, needs, sizeof needs);
    if (waited_ms > 0)
        snprintf (message, sizeof message, "no live governor can run this task (it needs %s; "
                  "waited %.1f s for one, see --resource-wait)", needs, waited_ms / 1000.0);
    else
        snprintf (message, sizeof message, "no live governor can run this task (it needs %s)",
                  needs);
    graph_task_failed (self->graph, task, SQ_E_RESOURCES, message);
}

static void
s_unrunnable (scheduler_t *self, task_t *task)
{
    s_unrunnable_after (self, task, 0);
}

//  No connected governor fits the task: it waits for one (reswait.h) if
//  waits are on and there is room, else fails now.
static void
s_cannot_run (scheduler_t *self, task_t *task)
{
    if (self->waiting && reswait_add (self->waiting, task->key) == 0)
        return;
    s_unrunnable (self, task);
}

void
scheduler_governor_remove (scheduler_t *self, gov_t *gov)
{
    for (size_t i = 0; i < self->n_govs; i++)
        if (self->govs [i] == gov) {
            self->govs [i] = self->govs [--self->n_govs];
            break;
        }
    if (self->n_govs == 0)
        return;
    size_t kept = 0;
    for (size_t i = 0; i < self->n_blocked; i++) {
        task_t *task = graph_task (self->graph, self->blocked [i]);
        if (!task || task->state != TASK_READY)
            continue;
        bool fits = false;
        for (size_t g = 0; g < self->n_govs && !fits; g++)
            fits = scheduler_fits (self->govs [g], task);
        if (fits)
            self->blocked [kept++] = self->blocked [i];
        else
            s_cannot_run (self, task);
    }
    self->n_blocked = kept;
}

bool
scheduler_fits (const gov_t *gov, const task_t *task)
{
    const task_extra_t *extra = task_extra (task);
    if (extra->cpus > gov->cpus || (!extra->loose && s_unnamed (gov, task)))
        return false;
    for (uint32_t r = 0; r < extra->n_resources; r++)
        if (gov_resource (gov, extra->resources [r].name) < extra->resources [r].amount)
            return false;
    return true;
}

//  Input bytes the governor holds or will hold (produced or arriving there).
static uint64_t
s_local_bytes (const gov_t *gov, const task_t *task)
{
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < task->n_inputs; i++) {
        object_t *input = task->io [i];
        if (input && !input->data && graph_object_location (input, (gov_t *) gov))
            bytes += input->size;
    }
    return bytes;
}

bool
scheduler_has_work (scheduler_t *self)
{
    if (self->n_ready == 0)
        return false;
    for (size_t i = 0; i < self->n_govs; i++)
        if (gov_open (self->govs [i]))
            return true;
    return false;
}

//  Overbooking (a task "scheduled" before it is ready): a waiting task whose
//  unfinished inputs are all being produced on one governor can be sent
//  there now; the governor starts it the moment its local inputs exist,
//  without a round trip through the broker. This is what makes a chain run
//  at the governor's speed rather than the network's.
static bool
s_overbookable (const task_t *task, const gov_t *gov)
{
    //  An actor's calls go where its instance is, one at a time (graph_actor.c);
    //  a stream's readers once it opens (streams.c).
    if (task->state != TASK_WAITING || task->actor_call || task->stream_in
    ||  !scheduler_fits (gov, task) || s_unnamed (gov, task) || s_over_cap (task))
        return false;
    for (uint32_t i = 0; i < task->n_inputs; i++) {
        const object_t *input = task->io [i];
        if (input->state == OBJ_FINISHED)
            continue;
        if (input->state != OBJ_UNFINISHED || !input->producer
        ||  input->producer->gov != gov
        ||  (input->producer->state != TASK_ASSIGNED && input->producer->state != TASK_RUNNING))
            return false;
    }
    return true;
}

//  After `task` went to `gov`, follows its consumers (and theirs) while
//  they are overbookable and the governor has slots.
static size_t
s_overbook (scheduler_t *self, task_t *task, gov_t *gov,
            scheduler_assign_fn *assign, void *arg)
{
    size_t assigned = 0;
    task_t *current = task;
    while (current && gov_open (gov)) {
        task_t *next = NULL;
        for (uint32_t o = 0; o < current->n_outputs; o++) {
            object_t *output = current->io [current->n_inputs + o];
            for (uint32_t c = 0; output && c < output->n_consumers; c++) {
                task_t *consumer = object_consumers (output) [c];
                if (!gov_open (gov))
                    return assigned;
                if (!s_overbookable (consumer, gov) || s_held_off (gov, consumer))
                    continue;
                assign (arg, consumer, gov);
                assigned++;
                if (!next)
                    next = consumer;    //  follow one branch: chains first
            }
        }
        current = next;
    }
    (void) self;
    return assigned;
}

//  The governors with a free slot, once per run.
static void
s_open_build (scheduler_t *self)
{
    self->n_open = 0;
    for (size_t i = 0; i < self->n_govs; i++) {
        gov_t *gov = self->govs [i];
        gov->open_at = -1;
        if (gov_open (gov)) {
            gov->open_at = (int32_t) self->n_open;
            self->open [self->n_open++] = gov;
        }
    }
}

//  A governor whose slots just filled up leaves the open list.
static void
s_open_update (scheduler_t *self, gov_t *gov)
{
    if (gov->open_at < 0 || gov_open (gov))
        return;
    gov_t *last = self->open [--self->n_open];
    self->open [gov->open_at] = last;
    last->open_at = gov->open_at;
    gov->open_at = -1;
}

static int64_t
s_now_us (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);   //  the clock of task->stamp_us
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

//  Cpus of the governor not held by actors, and the tasks there that
//  compete for them (gov.h: n_apart).
static uint32_t
s_cpus (const gov_t *gov)
{
    return gov->cpus > gov->held_cpus? gov->cpus - gov->held_cpus: 0;
}

static size_t
s_work (const gov_t *gov)
{
    size_t size = sq_idmap_size (gov->tasks);
    return size > gov->n_apart? size - gov->n_apart: 0;
}

//  How long until the first of the governor's running tasks ends: each is
//  expected to take the governor's recent mean duration, and one that ran
//  past it as long again as it has run so far (a long task is likely to
//  stay long). Kept for S_STALL_REFRESH_US: placement stays O(1).
static double
s_stall_us (scheduler_t *self, gov_t *gov)
{
    if (gov->stall_at && self->now_us - gov->stall_at < S_STALL_REFRESH_US)
        return gov->stall_us;
    double soonest = -1;
    size_t cursor = 0, seen = 0;
    task_t *task;
    while (seen < S_STALL_SAMPLE && (task = (task_t *) sq_idmap_next (gov->tasks, &cursor, NULL))) {
        seen++;
        if (task->state != TASK_RUNNING || task->actor_host || task->actor_call || task->stream_in)
            continue;
        double ran = task->stamp_us && self->now_us > task->stamp_us
                   ? (double) (self->now_us - task->stamp_us): 0;
        double left = gov->avg_task_us > ran? gov->avg_task_us - ran: ran;
        if (soonest < 0 || left < soonest)
            soonest = left;
    }
    gov->stall_us = soonest < 0? 0: soonest;
    gov->stall_at = self->now_us;
    return gov->stall_us;
}

//  Expected us before `task` could start on the governor: none with a cpu
//  free; else the first running task's end, then the governor's mean
//  duration (shared by its cpus) per task queued ahead. -1: never, while
//  actors hold the cpus it needs (they hold them until they end).
static double
s_wait_us (scheduler_t *self, gov_t *gov, const task_t *task)
{
    uint32_t need = task_extra (task)->cpus, cpus = s_cpus (gov);
    if (need == 0)
        return 0;
    if (need > cpus)
        return -1;
    size_t work = s_work (gov);
    if (task->gov == gov && work)
        work--;                 //  queued there already: not ahead of itself
    if (work + need <= cpus)
        return 0;
    size_t ahead = work + need - cpus;  //  tasks that must end first
    return s_stall_us (self, gov) + (double) (ahead - 1) * gov->avg_task_us / cpus;
}

//  Estimated us to copy to the governor the inputs it lacks, and in
//  *local the input bytes it holds or will hold (produced or arriving
//  there). Inline inputs travel with the task and cost nothing.
static double
s_copy_us (scheduler_t *self, const gov_t *gov, const task_t *task, uint64_t *local)
{
    double us = 0;
    *local = 0;
    for (uint32_t i = 0; i < task->n_inputs; i++) {
        object_t *input = task->io [i];
        if (!input || input->data)
            continue;
        if (graph_object_location (input, (gov_t *) gov))
            *local += input->size;
        else
            us += S_COPY_SETUP_US + (double) input->size / self->copy_rate;
    }
    return us;
}

//  Actors hold the cpus the task needs there (until they end).
static bool
s_held_off (const gov_t *gov, const task_t *task)
{
    return gov->held_cpus && task_extra (task)->cpus > s_cpus (gov);
}

//  Copies too small to say anything about the rate (their time is the
//  round trips'), and the rates believed at all (a report is a peer's word).
#define S_COPY_SAMPLE_MIN (1u << 20)
#define S_COPY_RATE_MIN 1.0             //  bytes per us: 1 MB/s
#define S_COPY_RATE_MAX 100000.0        //  100 GB/s

void
scheduler_note_copy (scheduler_t *self, uint64_t bytes, uint64_t us)
{
    if (bytes < S_COPY_SAMPLE_MIN || us == 0)
        return;
    double rate = (double) bytes / (double) us;
    rate = rate < S_COPY_RATE_MIN? S_COPY_RATE_MIN: rate > S_COPY_RATE_MAX? S_COPY_RATE_MAX: rate;
    //  The first report replaces the default; later ones move a fifth of
    //  the way (one slow copy on a busy link does not make the cluster slow).
    self->copy_rate = self->copy_learned? 0.8 * self->copy_rate + 0.2 * rate: rate;
    self->copy_learned = true;
}

double
scheduler_copy_rate (scheduler_t *self)
{
    return self->copy_rate * 1e6;
}

//  Tasks per cpu on the governor, and a retried task avoids the governor
//  it just failed on (a machine-specific fault, or memory): any other is
//  better. Every placement of a task weighs governors by this.
static double
s_load (scheduler_t *self, const gov_t *gov, const task_t *task)
{
    double load = (double) sq_idmap_size (gov->tasks) / (gov->cpus? gov->cpus: 1);
    if (task_extra (task)->last_gov == gov->id && self->n_govs > 1)
        load += 1e9;
    return load;
}

typedef struct {
    gov_t *gov;
    double cost;                //  us: waiting there and copying inputs there
    uint64_t bytes;
    double load;
    bool weigh;                 //  the task has inputs to copy: costs differ
} s_pick_t;

//  Soonest start first (waiting for a cpu plus copying the inputs it
//  lacks), then most input bytes held, then the least loaded. Without
//  known durations, or with a cpu free everywhere, that is locality first;
//  a task with nothing to copy just goes where the load is least.
static void
s_consider (scheduler_t *self, const task_t *task, gov_t *gov, s_pick_t *best)
{
    if (gov->open_at < 0 || !scheduler_fits (gov, task) || s_held_off (gov, task))
        return;
    uint64_t bytes = 0;
    double cost = best->weigh? s_wait_us (self, gov, task) + s_copy_us (self, gov, task, &bytes): 0;
    double load = s_load (self, gov, task);
    //  A task whose gpus are taken there would wait in its queue (a
    //  governor starts a task only on free devices): one with them free
    //  is better, whatever the copies or the load.
    if (!gov_gpus_free (gov, task)) {
        cost += 1e15;
        load += 1e12;
    }
    //  One it only prefers (loose) wins over any other with room.
    if (s_unnamed (gov, task))
        cost += 1e18;
    if (!best->gov || cost < best->cost
    ||  (cost == best->cost && (bytes > best->bytes || (bytes == best->bytes && load < best->load))))
        *best = (s_pick_t) { gov, cost, bytes, load, best->weigh };
}


static bool
s_same_needs (const task_t *a, const task_t *b)
{
    const task_extra_t *x = task_extra (a), *y = task_extra (b);
    if (x->cpus != y->cpus || x->n_resources != y->n_resources
    ||  x->n_governors != y->n_governors || x->loose != y->loose
    ||  (x->n_governors && memcmp (x->governors, y->governors, x->n_governors * sizeof (uint32_t))))
        return false;
    for (uint32_t r = 0; r < x->n_resources; r++)
        if (x->resources [r].amount != y->resources [r].amount
        ||  x->resources [r].name.len != y->resources [r].name.len
        ||  memcmp (x->resources [r].name.ptr, y->resources [r].name.ptr, x->resources [r].name.len))
            return false;
    return true;
}

static bool
s_deferred_shape (const s_deferred_t *deferred, const task_t *task)
{
    for (size_t i = 0; i < deferred->n_shapes; i++)
        if (s_same_needs (deferred->shapes [i], task))
            return true;
    return false;
}

//  Takes the head task off the heap into `deferred`. True when there is
//  no room left (the task stays at the head: the run stops there).
static bool
s_defer (scheduler_t *self, s_queue_t *queue, s_deferred_t *deferred, const task_t *task)
{
    if (deferred->n == S_DEFER_MAX)
        return true;
    if (deferred->n_shapes < S_DEFER_SHAPES && !s_deferred_shape (deferred, task))
        deferred->shapes [deferred->n_shapes++] = task;
    deferred->entries [deferred->n++] = queue->heap [0];
    s_heap_pop (self, queue);
    return false;
}

//  Puts the set-aside entries back (their heaps had them a moment ago, and
//  never shrink: only tasks made ready meanwhile could take that room).
static void
s_undefer (scheduler_t *self, s_deferred_t *deferred)
{
    for (size_t d = 0; d < deferred->n; d++)
        if (s_queue_insert (self, &self->queues [deferred->entries [d].queue], &deferred->entries [d]))
            s_push (&self->blocked, &self->n_blocked, &self->cap_blocked, deferred->entries [d].key);
    deferred->n = 0;
}

size_t
scheduler_run (scheduler_t *self, scheduler_assign_fn *assign, void *arg)
{
    size_t assigned = 0;
    s_deferred_t *deferred = &self->deferred;
    deferred->n = deferred->n_shapes = 0;
    self->now_us = s_now_us ();
    s_open_build (self);
    for (size_t i = 0; i < self->n_active; i++)
        self->queues [self->active [i]].held = false;
    s_queue_t *queue;
    while (self->n_ready > 0 && self->n_open > 0 && (queue = s_next_queue (self))) {
        uint64_t key = queue->heap [0].key;
        task_t *task = graph_task (self->graph, key);
        if (!task || task->state != TASK_READY) {
            s_heap_pop (self, queue);   //  cancelled, failed, gone or a duplicate
            continue;
        }
        if (queue->share == NULL && task->session->share) {
            //  Queued before its session had a share (a journal replayed
            //  before tenants were counted): to its tenant's queue.
            s_heap_pop (self, queue);
            if (s_heap_push (self, task))
                s_push (&self->blocked, &self->n_blocked, &self->cap_blocked, task->key);
            continue;
        }
        if (s_over_cap (task)) {
            queue->held = true;
            continue;
        }
        if (s_deferred_shape (deferred, task)) {
            if (s_defer (self, queue, deferred, task))
                break;
            continue;
        }
        //  Candidates: where its inputs are, and a sample of the rest.
        s_pick_t best = { NULL, 0, 0, 0, false };
        for (uint32_t i = 0; i < task->n_inputs; i++) {
            object_t *input = task->io [i];
            best.weigh |= !input->data;
            for (uint32_t l = 0; !input->data && l < input->n_locations; l++)
                s_consider (self, task, object_locations (input) [l].gov, &best);
        }
        //  The governors it names, whatever the sample.
        for (size_t g = 0; task_extra (task)->n_governors && g < self->n_govs; g++)
            if (s_named (self->govs [g], task))
                s_consider (self, task, self->govs [g], &best);
        size_t start = self->cursor++;
        size_t sample = self->n_open < S_SAMPLE? self->n_open: S_SAMPLE;
        for (size_t k = 0; k < sample; k++)
            s_consider (self, task, self->open [(start + k) % self->n_open], &best);
        //  Only a task needing what few governors have gets past the sample.
        for (size_t k = sample; !best.gov && k < self->n_open; k++)
            s_consider (self, task, self->open [(start + k) % self->n_open], &best);
        if (!best.gov) {
            bool fits_somewhere = false;
            for (size_t i = 0; i < self->n_govs && !fits_somewhere; i++)
                fits_somewhere = scheduler_fits (self->govs [i], task);
            if (!fits_somewhere) {
                s_heap_pop (self, queue);
                s_cannot_run (self, task);  //  governors are up (n_open > 0)
                continue;
            }
            //  Every governor that could run it is full: it waits, and
            //  so does every task with the same needs behind it, but not
            //  the others (a GPU task must not hold back CPU work).
            if (s_defer (self, queue, deferred, task))
                break;
            continue;
        }
        s_heap_pop (self, queue);
        queue->served = ++self->picks;
        if (self->waiting && reswait_count (self->waiting))
            reswait_remove (self->waiting, task->key);
        assign (arg, task, best.gov);
        assigned++;
        assigned += s_overbook (self, task, best.gov, assign, arg);
        s_open_update (self, best.gov);
    }
    //  Every ready task left was set aside (the governors that fit it are
    //  full, or actors hold their cpus): none would go to an idle governor,
    //  so stealing may fill it.
    self->n_stuck = self->n_ready == 0? deferred->n: 0;
    s_undefer (self, deferred);
    return assigned;
}

size_t
scheduler_ready_count (scheduler_t *self)
{
    return self->n_ready;
}

size_t
scheduler_blocked_count (scheduler_t *self)
{
    return self->n_blocked;
}

int
scheduler_set_resource_wait (scheduler_t *self, int64_t wait_ms, size_t max)
{
    reswait_destroy (&self->waiting);
    self->wait_ms = wait_ms;
    if (wait_ms <= 0 || max == 0)
        return 0;
    self->waiting = reswait_new (max, wait_ms);
    return self->waiting? 0: -1;
}

static void
s_wait_over (void *arg, uint64_t key)
{
    scheduler_t *self = (scheduler_t *) arg;
    task_t *task = graph_task (self->graph, key);
    if (task && task->state == TASK_READY)
        s_unrunnable_after (self, task, self->wait_ms);
}

//  Ticks this far apart at most: a tick walks every waiting task.
#define S_TICK_MS 100

void
scheduler_tick (scheduler_t *self, int64_t now_ms)
{
    if (!self->waiting)
        return;
    if (reswait_count (self->waiting) && now_ms - self->last_tick < S_TICK_MS)
        return;
    self->last_tick = now_ms;
    //  Placed, cancelled or gone tasks leave the set first.
    size_t i = 0;
    while (i < reswait_count (self->waiting)) {
        uint64_t key;
        int64_t left;
        reswait_get (self->waiting, i, &key, &left);
        task_t *task = graph_task (self->graph, key);
        if (!task || task->state != TASK_READY)
            reswait_remove (self->waiting, key);
        else
            i++;
    }
    reswait_tick (self->waiting, now_ms, self->n_govs > 0, s_wait_over, self);
}

size_t
scheduler_waiting_count (scheduler_t *self)
{
    return self->waiting? reswait_count (self->waiting): 0;
}

bool
scheduler_waiting_get (scheduler_t *self, size_t i, uint64_t *key, int64_t *left_ms,
                       char *needs, size_t needs_size)
{
    if (i >= scheduler_waiting_count (self))
        return false;
    reswait_get (self->waiting, i, key, left_ms);
    task_t *task = graph_task (self->graph, *key);
    if (task)
        s_needs (task, needs, needs_size);
    else
        snprintf (needs, needs_size, "?");
    return true;
}

#define S_STAY_BYTES (1u << 20)     //  inputs this large keep a task in place...

//  ...unless it would wait there for a cpu longer than twice the copy to
//  the receiver takes (twice: estimates err, and a task moved back and
//  forth runs nowhere). Its inputs must all exist: one still being made
//  waits for its producer wherever it goes. An actor holding the cpus it
//  needs makes it wait for ever.
static bool
s_worth_moving (scheduler_t *self, gov_t *sender, gov_t *receiver, const task_t *task)
{
    if (task->unfinished || !scheduler_fits (receiver, task))
        return false;
    double wait = s_wait_us (self, sender, task);
    uint64_t local;
    return wait < 0 || wait > 2 * s_copy_us (self, receiver, task, &local);
}

//  Tasks a governor could give back: assigned, not started, not already
//  asked for, with little data of theirs on it or long to wait there.
//  Latest in order first: those would wait longest in its queue.
static size_t
s_stealable (scheduler_t *self, gov_t *gov, gov_t *receiver, task_t **out, size_t max)
{
    size_t n = 0, cursor = 0;
    task_t *task;
    while ((task = (task_t *) sq_idmap_next (gov->tasks, &cursor, NULL))) {
        //  An actor's calls run where its instance is.
        if (task->state != TASK_ASSIGNED || task->retracting || task->actor_call || task->stream_in)
            continue;
        //  It would come back where it is (or could only go there).
        if (s_unnamed (receiver, task))
            continue;
        if (s_local_bytes (gov, task) > S_STAY_BYTES && !s_worth_moving (self, gov, receiver, task))
            continue;
        //  Keep the `max` latest (largest order) seen so far.
        if (n < max)
            out [n++] = task;
        else {
            size_t least = 0;
            for (size_t i = 1; i < n; i++)
                if (out [i]->order < out [least]->order)
                    least = i;
            if (task->order > out [least]->order)
                out [least] = task;
        }
    }
    return n;
}

size_t
scheduler_rebalance (scheduler_t *self, scheduler_retract_fn *retract, void *arg)
{
    if (self->n_govs < 2 || self->n_ready > self->n_stuck)
        return 0;               //  ready work goes to idle governors anyway
    self->now_us = s_now_us ();
    size_t moved = 0;
    for (size_t r = 0; r < self->n_govs; r++) {
        gov_t *receiver = self->govs [r];
        //  Counted without actors: their hosts hold cpus for good, their
        //  calls take none.
        size_t in_r = s_work (receiver), cpus_r = s_cpus (receiver);
        if (in_r >= cpus_r)
            continue;           //  no idle cpu: nothing to steal for
        //  The most loaded governor with something to give; one whose
        //  cpus actors hold starts nothing it has queued.
        gov_t *sender = NULL;
        double load_s = 0;
        for (size_t s = 0; s < self->n_govs; s++) {
            gov_t *gov = self->govs [s];
            size_t work = s_work (gov);
            uint32_t cpus = s_cpus (gov);
            double load = cpus? (double) work / cpus: 1e18 * (double) work;
            if (gov != receiver && load > load_s && work > cpus) {
                sender = gov;
                load_s = load;
            }
        }
        if (!sender)
            continue;
        //  Toward equal load, without crossing over, at most the
        //  receiver's idle cpus.
        size_t in_s = s_work (sender), cpus_s = s_cpus (sender);
        size_t want = 0;
        while (want < cpus_r - in_r && want < in_s
        &&     (cpus_s == 0
                || (double) (in_s - want - 1) / cpus_s >= (double) (in_r + want + 1) / cpus_r))
            want++;
        //  Damped by half against moving tasks back and forth, except
        //  toward an empty governor (a newcomer): it is filled at once.
        if (in_r > 0)
            want = (want + 1) / 2;
        task_t *candidates [64];
        if (want > 64)
            want = 64;
        sender->stall_at = 0;   //  judged afresh: stealing looks seldom
        size_t n = s_stealable (self, sender, receiver, candidates, want);
        for (size_t i = 0; i < n; i++) {
            candidates [i]->retracting = true;
            retract (arg, candidates [i]);
            moved++;
        }
    }
    return moved;
}

//  --------------------------------------------------------------------------
//  Placement outside the ready queue (scheduler.h)

bool
scheduler_usable (const gov_t *gov)
{
    return !gov->draining && !gov->leaving && !gov->inventory;
}

//  The least loaded, whatever its slots (the task starts beside what runs
//  there); one the task only prefers (loose) wins over any other.
gov_t *
scheduler_place_now (scheduler_t *self, const task_t *task)
{
    gov_t *best = NULL;
    double best_load = 0;
    bool best_named = false;
    for (size_t i = 0; i < self->n_govs; i++) {
        gov_t *gov = self->govs [i];
        if (!scheduler_usable (gov) || !scheduler_fits (gov, task))
            continue;
        double load = s_load (self, gov, task);
        bool named = !s_unnamed (gov, task);
        if (!best || named > best_named || (named == best_named && load < best_load)) {
            best = gov;
            best_load = load;
            best_named = named;
        }
    }
    return best;
}

gov_t *
scheduler_place_copy (scheduler_t *self, scheduler_want_fn *want, void *arg)
{
    gov_t *best = NULL;
    for (size_t i = 0; i < self->n_govs; i++) {
        gov_t *gov = self->govs [i];
        if (!scheduler_usable (gov) || !want (arg, gov))
            continue;
        if (!best || gov->load.memory < best->load.memory)
            best = gov;
    }
    return best;
}
