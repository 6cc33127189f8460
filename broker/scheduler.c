/*  scheduler: ready tasks by priority, locality-first placement. */
#include "scheduler.h"
#include "reswait.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX_GOVERNORS 4096
//  Governors with a free slot a task looks at besides those holding its
//  inputs: placing a task costs the same with 2 governors or 2000.
#define S_SAMPLE 8

//  A ready task in the heap: user priority first (higher first), then the
//  static order (lower first). The task is found by key when popped.
typedef struct {
    uint32_t rank;              //  INT32_MAX - priority
    uint64_t order;
    uint64_t key;
} s_entry_t;

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
    s_entry_t *ready;           //  binary min-heap
    size_t n_ready;
    size_t cap_ready;
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
};

static int
s_push (uint64_t **array, size_t *n, size_t *cap, uint64_t key)
{
    if (*n == *cap) {
        size_t new_cap = *cap? *cap * 2: 1024;
        uint64_t *p = (uint64_t *) realloc (*array, new_cap * sizeof *p);
        if (!p)
            return -1;
        *array = p;
        *cap = new_cap;
    }
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
    self->govs = (gov_t **) calloc (S_MAX_GOVERNORS, sizeof (gov_t *));
    self->open = (gov_t **) calloc (S_MAX_GOVERNORS, sizeof (gov_t *));
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
    free (self->ready);
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

static int
s_heap_push (scheduler_t *self, task_t *task)
{
    if (self->n_ready == self->cap_ready) {
        size_t cap = self->cap_ready? self->cap_ready * 2: 1024;
        s_entry_t *p = (s_entry_t *) realloc (self->ready, cap * sizeof *p);
        if (!p)
            return -1;
        self->ready = p;
        self->cap_ready = cap;
    }
    s_entry_t entry = {
        (uint32_t) ((int64_t) INT32_MAX - task_extra (task)->priority), task->order, task->key
    };
    size_t i = self->n_ready++;
    while (i > 0 && s_before (&entry, &self->ready [(i - 1) / 2])) {
        self->ready [i] = self->ready [(i - 1) / 2];
        i = (i - 1) / 2;
    }
    self->ready [i] = entry;
    return 0;
}

static void
s_heap_pop (scheduler_t *self)
{
    s_entry_t last = self->ready [--self->n_ready];
    size_t i = 0, n = self->n_ready;
    while (2 * i + 1 < n) {
        size_t child = 2 * i + 1;
        if (child + 1 < n && s_before (&self->ready [child + 1], &self->ready [child]))
            child++;
        if (!s_before (&self->ready [child], &last))
            break;
        self->ready [i] = self->ready [child];
        i = child;
    }
    if (n)
        self->ready [i] = last;
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
    if (self->n_govs < S_MAX_GOVERNORS)
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

static bool s_fits (const gov_t *gov, const task_t *task);

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
            fits = s_fits (self->govs [g], task);
        if (fits)
            self->blocked [kept++] = self->blocked [i];
        else
            s_cannot_run (self, task);
    }
    self->n_blocked = kept;
}

static bool
s_fits (const gov_t *gov, const task_t *task)
{
    const task_extra_t *extra = task_extra (task);
    if (extra->cpus > gov->cpus)
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
        if (sq_idmap_size (self->govs [i]->tasks) < self->govs [i]->slots)
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
    if (task->state != TASK_WAITING || task->actor_call || task->stream_in || !s_fits (gov, task))
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
    while (current && sq_idmap_size (gov->tasks) < gov->slots) {
        task_t *next = NULL;
        for (uint32_t o = 0; o < current->n_outputs; o++) {
            object_t *output = current->io [current->n_inputs + o];
            for (uint32_t c = 0; output && c < output->n_consumers; c++) {
                task_t *consumer = object_consumers (output) [c];
                if (sq_idmap_size (gov->tasks) >= gov->slots)
                    return assigned;
                if (!s_overbookable (consumer, gov))
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
        if (sq_idmap_size (gov->tasks) < gov->slots) {
            gov->open_at = (int32_t) self->n_open;
            self->open [self->n_open++] = gov;
        }
    }
}

//  A governor whose slots just filled up leaves the open list.
static void
s_open_update (scheduler_t *self, gov_t *gov)
{
    if (gov->open_at < 0 || sq_idmap_size (gov->tasks) < gov->slots)
        return;
    gov_t *last = self->open [--self->n_open];
    self->open [gov->open_at] = last;
    last->open_at = gov->open_at;
    gov->open_at = -1;
}

typedef struct {
    gov_t *gov;
    uint64_t bytes;
    double load;
} s_pick_t;

//  Most input bytes held first, then the least loaded.
static void
s_consider (scheduler_t *self, const task_t *task, gov_t *gov, s_pick_t *best)
{
    if (gov->open_at < 0 || !s_fits (gov, task))
        return;
    uint64_t bytes = s_local_bytes (gov, task);
    double load = (double) sq_idmap_size (gov->tasks) / (gov->cpus? gov->cpus: 1);
    //  A retried task avoids the governor it just failed on (a
    //  machine-specific fault, or memory): any other is better.
    if (task_extra (task)->last_gov == gov->id && self->n_govs > 1)
        load += 1e9;
    if (!best->gov || bytes > best->bytes || (bytes == best->bytes && load < best->load))
        *best = (s_pick_t) { gov, bytes, load };
}


static bool
s_same_needs (const task_t *a, const task_t *b)
{
    const task_extra_t *x = task_extra (a), *y = task_extra (b);
    if (x->cpus != y->cpus || x->n_resources != y->n_resources)
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
s_defer (scheduler_t *self, s_deferred_t *deferred, const task_t *task)
{
    if (deferred->n == S_DEFER_MAX)
        return true;
    if (deferred->n_shapes < S_DEFER_SHAPES && !s_deferred_shape (deferred, task))
        deferred->shapes [deferred->n_shapes++] = task;
    deferred->entries [deferred->n++] = self->ready [0];
    s_heap_pop (self);
    return false;
}

//  Puts the set-aside entries back: the heap had them a moment ago, so it
//  has room (its array never shrinks).
static void
s_undefer (scheduler_t *self, s_deferred_t *deferred)
{
    for (size_t d = 0; d < deferred->n; d++) {
        s_entry_t entry = deferred->entries [d];
        size_t i = self->n_ready++;
        while (i > 0 && s_before (&entry, &self->ready [(i - 1) / 2])) {
            self->ready [i] = self->ready [(i - 1) / 2];
            i = (i - 1) / 2;
        }
        self->ready [i] = entry;
    }
    deferred->n = 0;
}

size_t
scheduler_run (scheduler_t *self, scheduler_assign_fn *assign, void *arg)
{
    size_t assigned = 0;
    s_deferred_t *deferred = &self->deferred;
    deferred->n = deferred->n_shapes = 0;
    s_open_build (self);
    while (self->n_ready > 0 && self->n_open > 0) {
        uint64_t key = self->ready [0].key;
        task_t *task = graph_task (self->graph, key);
        if (!task || task->state != TASK_READY) {
            s_heap_pop (self);  //  cancelled, failed, gone or a duplicate
            continue;
        }
        if (s_deferred_shape (deferred, task)) {
            if (s_defer (self, deferred, task))
                break;
            continue;
        }
        //  Candidates: where its inputs are, and a sample of the rest.
        s_pick_t best = { NULL, 0, 0 };
        for (uint32_t i = 0; i < task->n_inputs; i++) {
            object_t *input = task->io [i];
            for (uint32_t l = 0; !input->data && l < input->n_locations; l++)
                s_consider (self, task, object_locations (input) [l].gov, &best);
        }
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
                fits_somewhere = s_fits (self->govs [i], task);
            if (!fits_somewhere) {
                s_heap_pop (self);
                s_cannot_run (self, task);  //  governors are up (n_open > 0)
                continue;
            }
            //  Every governor that could run it is full: it waits, and
            //  so does every task with the same needs behind it, but not
            //  the others (a GPU task must not hold back CPU work).
            if (s_defer (self, deferred, task))
                break;
            continue;
        }
        s_heap_pop (self);
        if (self->waiting && reswait_count (self->waiting))
            reswait_remove (self->waiting, task->key);
        assign (arg, task, best.gov);
        assigned++;
        assigned += s_overbook (self, task, best.gov, assign, arg);
        s_open_update (self, best.gov);
    }
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

#define S_STAY_BYTES (1u << 20)     //  inputs this large keep a task in place

//  Tasks a governor could give back: assigned, not started, not already
//  asked for, with little data of theirs on it. Latest in order first:
//  those would wait longest in its queue.
static size_t
s_stealable (gov_t *gov, task_t **out, size_t max)
{
    size_t n = 0, cursor = 0;
    task_t *task;
    while ((task = (task_t *) sq_idmap_next (gov->tasks, &cursor, NULL))) {
        //  An actor's calls run where its instance is.
        if (task->state != TASK_ASSIGNED || task->retracting || task->actor_call || task->stream_in
        ||  s_local_bytes (gov, task) > S_STAY_BYTES)
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
    if (self->n_govs < 2 || self->n_ready > 0)
        return 0;               //  ready work goes to idle governors anyway
    size_t moved = 0;
    for (size_t r = 0; r < self->n_govs; r++) {
        gov_t *receiver = self->govs [r];
        size_t in_r = sq_idmap_size (receiver->tasks);
        if (in_r >= receiver->cpus)
            continue;           //  no idle cpu: nothing to steal for
        //  The most loaded governor with something to give.
        gov_t *sender = NULL;
        double load_s = 0;
        for (size_t s = 0; s < self->n_govs; s++) {
            gov_t *gov = self->govs [s];
            double load = (double) sq_idmap_size (gov->tasks) / (gov->cpus? gov->cpus: 1);
            if (gov != receiver && load > load_s && sq_idmap_size (gov->tasks) > gov->cpus) {
                sender = gov;
                load_s = load;
            }
        }
        if (!sender)
            continue;
        //  Toward equal load, without crossing over, at most the
        //  receiver's idle cpus.
        size_t in_s = sq_idmap_size (sender->tasks);
        size_t want = 0;
        while (want < receiver->cpus - in_r
        &&     (double) (in_s - want - 1) / (sender->cpus? sender->cpus: 1)
               >= (double) (in_r + want + 1) / receiver->cpus)
            want++;
        //  Damped by half against moving tasks back and forth, except
        //  toward an empty governor (a newcomer): it is filled at once.
        if (in_r > 0)
            want = (want + 1) / 2;
        task_t *candidates [64];
        if (want > 64)
            want = 64;
        size_t n = s_stealable (sender, candidates, want);
        for (size_t i = 0; i < n; i++) {
            candidates [i]->retracting = true;
            retract (arg, candidates [i]);
            moved++;
        }
    }
    return moved;
}
