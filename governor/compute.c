/*  compute: task queueing, scheduling and event batching.

    Long because it is the compute thread's one loop and
    the state only that thread touches: the task queue, the resources in
    use, the object store's events and the orders from the broker that act
    on all of them. The parts with a life of their own already left: the
    tasks' kinds (builtin.c, execute.c, pyexec.c), copies (transfer.c), the
    serve socket (serve.c), the store (store.c). */
#include "compute.h"
#include "route.h"
#include "store.h"
#include "task.h"
#include "builtin.h"
#include "execute.h"
#include "pyexec.h"
#include "gpus.h"
#include "deadlines.h"
#include "transfer.h"
#include "stream.h"
#include "serve.h"
#include "tasklog.h"
#include "heap.h"
#include "cgroup.h"
#include "wire.h"
#include "idmap.h"
#include "log.h"
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_MAX_QUEUED 1000000        //  tasks waiting or ready
#define S_MAX_PENDING_SENDS 1000000 //  SEND orders for objects not here yet
#define S_BATCH_EVENTS 2000
#define S_BATCH_BYTES (4u << 20)
#define S_BATCH_FRAMES 60000        //  under SQ_MAX_FRAMES
#define S_READ_BURST 256            //  messages read before timers get a look
#define S_LOAD_EVERY_NS 10000000ull
#define S_WAITPID_MS 5
#define S_PY_HOLD_NS 1000000ull     //  UPDATE held while Python tasks run
#define S_ERR_SIZE 8192
//  Nested tasks waiting on their children at once (s_secede): each keeps
//  its executor process.
#define S_SECEDED_MAX(cpus) (64u + 8u * (cpus))
#define S_MAX_DRAINING 4096          //  py tasks whose stream output drains

//  Tasks waiting for one object, or SEND orders waiting for one object
typedef struct {
    size_t n, cap;
    void **items;
} s_list_t;

typedef struct {
    uint32_t version;
    uint32_t to;
    char *endpoint;
} s_order_t;

struct _compute_t {
    void *pipe;
    void *load;
    uint32_t governor_id;
    uint32_t cpus;
    uint64_t inline_max;
    char *workdir;
    bool terminated;

    store_t *store;
    transfer_t *transfer;       //  chunked copies to and from peers
    stream_t *streams;          //  streams written and read here
    uint64_t memory_limit;
    char *data_endpoint;
    sq_idmap_t *tasks;          //  task key -> task, every live attempt
    sq_idmap_t *waiters;        //  object key -> s_list_t of task_t
    sq_idmap_t *orders;         //  object key -> s_list_t of s_order_t
    size_t n_orders;
    task_t *ready_head, *ready_tail;
    //  Actors' calls, ready: they run on their actor's cpus, so nothing
    //  queued for cpus may hold them up.
    task_t *calls_head, *calls_tail;
    size_t n_queued;            //  waiting + ready
    size_t n_running;
    size_t n_piped;             //  of those, piped: not started yet
    uint64_t tasks_completed;   //  ran to an end here (finished or failed), for LOAD
    uint32_t cpus_used;
    uint32_t n_seceded;         //  running tasks that gave their cpus back
    bool has_broker_key;        //  keys: the broker's public key, for the
    uint8_t broker_key [32];    //  clients of tasks (squall.get_client())
    //  Named resources: what the governor offers, what running tasks hold.
    uint32_t n_res;
    const sq_resource_t *res;
    uint64_t res_used [SQ_MAX_RESOURCES];
    gpus_t *gpus;               //  devices (--gpus), NULL: none named
    uint64_t next_memcheck_ns;
    tasklog_t *tasklog;         //  every task's stdout and stderr
    bool piped_logged;          //  s_pipe: the task's log was started
    //  The cgroup the governor runs in (store_set_box), looked at while
    //  tasks run; NULL: none.
    cgroup_usage_t *box;
    uint64_t next_boxcheck_ns;
    deadlines_t *deadlines;
    //  py tasks that replied while their stream output drains (bounded:
    //  each holds its cpus meanwhile)
    task_t *draining [S_MAX_DRAINING];
    size_t n_draining;
    task_t **execs;             //  running execute tasks
    size_t n_execs, cap_execs;
    pyexec_t *pyexec;           //  Python executors of "py" tasks
    sandbox_t *sandbox;         //  who tasks run as

    //  Pending UPDATE
    sq_wbuf_t events;
    uint32_t n_events;
    zmq_msg_t *payloads;
    size_t n_payloads, cap_payloads;
    uint64_t payload_bytes;

    //  Load last told to the balance thread
    sq_load_t load_sent;
    uint64_t load_sent_ns;

    zmq_pollitem_t *items;
    task_t **item_tasks;
    size_t cap_items;
    size_t n_exec_items;        //  pidfds, from items [1]
    size_t stream_at;           //  then the streams' pipes
    size_t n_stream_items;
    size_t n_py_items;          //  at the end of items
    uint64_t flushed_ns;        //  when the last UPDATE left
    uint64_t heap_bytes;        //  object bytes in memory at the last look
    uint64_t release_ns;        //  when to give freed memory back (0: nothing to give)
    char err [S_ERR_SIZE];
};

static void s_flush (compute_t *self);
static void s_object_stored (compute_t *self, uint64_t key);
static void s_drop_orders (compute_t *self, uint64_t key);
static void s_task_drop (compute_t *self, task_t *task);

//  --------------------------------------------------------------------------
//  Small containers

static int
s_list_push (s_list_t *list, void *item)
{
    if (list->n == list->cap) {
        size_t cap = list->cap? list->cap * 2: 4;
        void **items = (void **) realloc (list->items, cap * sizeof (void *));
        if (!items)
            return -1;
        list->items = items;
        list->cap = cap;
    }
    list->items [list->n++] = item;
    return 0;
}

static s_list_t *
s_list_of (sq_idmap_t *map, uint64_t key)
{
    s_list_t *list = (s_list_t *) sq_idmap_lookup (map, key);
    if (!list) {
        list = (s_list_t *) calloc (1, sizeof *list);
        if (list && sq_idmap_insert (map, key, list)) {
            free (list);
            list = NULL;
        }
    }
    return list;
}

static void
s_order_free (s_order_t *order)
{
    free (order->endpoint);
    free (order);
}

//  --------------------------------------------------------------------------
//  Events and the UPDATE batch

static void
s_event_added (compute_t *self)
{
    self->n_events++;
    if (self->n_events >= S_BATCH_EVENTS || self->payload_bytes >= S_BATCH_BYTES
    ||  self->n_payloads >= S_BATCH_FRAMES)
        s_flush (self);
}

//  Payload index of a blob added to the batch (1 = first payload), -1 if
//  it cannot be inlined.
static int32_t
s_add_payload (compute_t *self, sq_blob_t *blob)
{
    if (self->n_payloads == self->cap_payloads) {
        size_t cap = self->cap_payloads? self->cap_payloads * 2: 64;
        zmq_msg_t *p = (zmq_msg_t *) realloc (self->payloads, cap * sizeof (zmq_msg_t));
        if (!p)
            return -1;
        self->payloads = p;
        self->cap_payloads = cap;
    }
    if (sq_blob_msg (blob, &self->payloads [self->n_payloads]))
        return -1;
    self->payload_bytes += sq_blob_size (blob);
    return (int32_t) ++self->n_payloads;
}

static void
s_flush (compute_t *self)
{
    if (self->n_events == 0)
        return;
    sq_wbuf_t header;
    sq_wbuf_init (&header);
    sq_batch_header (&header, SQ_MSG_UPDATE, self->n_events);
    msgpack_sbuffer_write (&header.buf, self->events.buf.data, self->events.buf.size);
    const char route = GOV_ROUTE_BROKER;
    if (sq_send (self->pipe, &route, 1, &header, self->payloads, self->n_payloads, 0))
        sq_warn ("cannot pass UPDATE on: %s", zmq_strerror (errno));
    sq_wbuf_release (&header);
    sq_wbuf_reset (&self->events);
    self->flushed_ns = task_now_ns ();
    self->n_events = 0;
    self->n_payloads = 0;
    self->payload_bytes = 0;
}

static uint64_t
s_duration_us (task_t *task)
{
    return task->start_ns? (task_now_ns () - task->start_ns) / 1000: 0;
}

static void
s_failed_reason (compute_t *self, uint64_t key, uint32_t attempt, const char *message,
                 uint64_t duration_us, uint32_t reason)
{
    sq_debug ("task %" PRIx64 "/%u failed: %s", key, attempt, message);
    sq_pack_failed_reason (&self->events.pk, key, attempt, message, duration_us, reason);
    s_event_added (self);
}

static void
s_failed (compute_t *self, uint64_t key, uint32_t attempt, const char *message,
          uint64_t duration_us)
{
    s_failed_reason (self, key, attempt, message, duration_us, SQ_FAIL_TASK);
}

//  Index of a named resource among those offered, -1 if not offered.
static int
s_res_index (compute_t *self, mpr_str_t name)
{
    for (uint32_t i = 0; i < self->n_res; i++)
        if (self->res [i].name.len == name.len
        &&  memcmp (self->res [i].name.ptr, name.ptr, name.len) == 0)
            return (int) i;
    return -1;
}

//  Whether the task's cpus and named resources are free now.
static bool
s_fits_now (compute_t *self, task_t *task)
{
    if (self->cpus_used + task->cpus > self->cpus)
        return false;
    for (uint32_t r = 0; r < task->n_resources; r++) {
        int i = s_res_index (self, task->resources [r].name);
        if (i < 0 || self->res_used [i] + task->resources [r].amount > self->res [i].amount)
            return false;
    }
    return !self->gpus || gpus_fit (self->gpus, task->gpus);
}

//  Takes (sign 1) or gives back (-1) what a running task holds.
static void
s_hold (compute_t *self, task_t *task, int sign)
{
    self->cpus_used += sign > 0? task->cpus: -task->cpus;
    for (uint32_t r = 0; r < task->n_resources; r++) {
        int i = s_res_index (self, task->resources [r].name);
        if (i >= 0)
            self->res_used [i] += sign > 0? task->resources [r].amount
                                          : -task->resources [r].amount;
    }
    //  Its devices, named in its environment (execute.c, pyexec.c).
    if (self->gpus && sign > 0) {
        task->gpu_mask = gpus_take (self->gpus, task->gpus);
        free (task->gpu_names);
        task->gpu_names = gpus_names (self->gpus, task->gpu_mask);
    }
    else
    if (self->gpus) {
        gpus_give (self->gpus, task->gpus, task->gpu_mask);
        task->gpu_mask = 0;
    }
}

//  --------------------------------------------------------------------------
//  Task life: waiting -> ready -> running -> gone

//  Actors' calls and stream readers skip the cpu queue: calls run on
//  their actor's cpus; a reader's writer holds cpus and waits for it.
static bool
s_bypasses_cpus (const task_t *task)
{
    return task->conf.call || task->stream_in >= 0;
}

static void
s_ready_push (compute_t *self, task_t *task)
{
    task_t **head = s_bypasses_cpus (task)? &self->calls_head: &self->ready_head;
    task_t **tail = s_bypasses_cpus (task)? &self->calls_tail: &self->ready_tail;
    task->state = TASK_READY;
    task->next = NULL;
    task->prev = *tail;
    if (*tail)
        (*tail)->next = task;
    else
        *head = task;
    *tail = task;
}

static void
s_ready_unlink (compute_t *self, task_t *task)
{
    task_t **head = s_bypasses_cpus (task)? &self->calls_head: &self->ready_head;
    task_t **tail = s_bypasses_cpus (task)? &self->calls_tail: &self->ready_tail;
    if (task->prev)
        task->prev->next = task->next;
    else
        *head = task->next;
    if (task->next)
        task->next->prev = task->prev;
    else
        *tail = task->prev;
    task->prev = task->next = NULL;
}

//  Registers the task with each missing input; ready if none is missing.
static void
s_wait_inputs (compute_t *self, task_t *task)
{
    task->missing = 0;
    for (uint32_t i = 0; i < task->n_inputs; i++) {
        uint64_t key = task->inputs [i];
        if (store_has (self->store, key) || (int32_t) i == task->stream_in)
            continue;
        s_list_t *list = s_list_of (self->waiters, key);
        //  Registrations of one task are consecutive, so a repeated input
        //  shows as this task at the end of the list.
        if (list && list->n && list->items [list->n - 1] == task)
            continue;
        if (!list || s_list_push (list, task)) {
            sq_error ("out of memory queueing task %" PRIx64, task->key);
            continue;
        }
        task->pins++;
        task->missing++;
    }
    if (task->missing)
        task->state = TASK_WAITING;
    else
        s_ready_push (self, task);
}

static void
s_unpin (task_t *task)
{
    assert (task->pins > 0);
    if (--task->pins == 0 && task->stopped)
        task_destroy (&task);
}

//  A running py task waits on tasks it submitted (squall.secede): its cpus
//  go to other tasks meanwhile, its children among them, so a recursion
//  deeper than the cpus does not deadlock. Its executor stays its own, so
//  at most S_SECEDED_MAX such tasks at once (each an executor process):
//  past that a task waits holding its cpus. The broker hears of it
//  (SECEDED) and assigns a task more here for each.
static void
s_secede (compute_t *self, task_t *task, bool seceded)
{
    if (task->state != TASK_RUNNING || task->piped || task->seceded == seceded)
        return;
    if (seceded && self->n_seceded >= S_SECEDED_MAX (self->cpus))
        return;
    task->seceded = seceded;
    if (seceded) {
        self->cpus_used -= task->cpus;
        self->n_seceded++;
    }
    else {
        //  It goes on at once, even if that is more than the cpus for a
        //  while: the tasks started meanwhile are not stopped.
        self->cpus_used += task->cpus;
        self->n_seceded--;
    }
    sq_pack_seceded (&self->events.pk, task->key, task->attempt, seceded);
    s_event_added (self);
}

//  A running py task's squall.get_client() asks for its client's key
//  (docs/security.md, "Tasks that submit tasks"): a fresh key pair, whose
//  public half goes to the broker (TASKKEY, with this attempt: the broker
//  admits it as a client of the task's tenant while the attempt runs here)
//  and whose secret goes to the executor over its socket only. Once per
//  attempt. Without keys the executor connects with none ("-").
static void
s_credential (compute_t *self, task_t *task)
{
    if (task->state != TASK_RUNNING || task->piped)
        return;
    //  The task's session and id end the answer: its client names the
    //  session of its children after them (docs/protocol.md, "Jobs").
    char parent [24];
    snprintf (parent, sizeof parent, " %u %u", sq_key_session (task->key), sq_key_id (task->key));
    if (!self->has_broker_key) {
        char text [32];
        snprintf (text, sizeof text, "-%s", parent);
        pyexec_credential (self->pyexec, task, text);
        return;
    }
    if (task->credentialed) {
        pyexec_credential (self->pyexec, task, "!this task attempt was given its key already");
        return;
    }
    char public_z85 [41], secret_z85 [41], broker_z85 [41];
    uint8_t public_key [32];
    if (zmq_curve_keypair (public_z85, secret_z85)
    ||  !zmq_z85_decode (public_key, public_z85)
    ||  !zmq_z85_encode (broker_z85, self->broker_key, sizeof self->broker_key)) {
        pyexec_credential (self->pyexec, task, "!cannot make a key pair on the governor");
        return;
    }
    task->credentialed = true;
    sq_pack_taskkey (&self->events.pk, task->key, task->attempt, public_key);
    s_event_added (self);
    //  The event leaves before the executor can use the key: the client
    //  retries a refused handshake for a while (bindings/python/squall/_worker.py).
    s_flush (self);
    char text [2 + 3 * 41 + 3 + sizeof parent];
    snprintf (text, sizeof text, "k %s %s %s%s", public_z85, secret_z85, broker_z85, parent);
    pyexec_credential (self->pyexec, task, text);
    memset (secret_z85, 0, sizeof secret_z85);
    memset (text, 0, sizeof text);
}

//  Takes a running task off the cpus, the timers and the children.
static void
s_unrun (compute_t *self, task_t *task)
{
    assert (task->state == TASK_RUNNING);
    if (task->seceded) {
        task->seceded = false;
        self->cpus_used += task->cpus;
        self->n_seceded--;
    }
    self->n_running--;
    if (!task->piped)
        s_hold (self, task, -1);
    else
        self->n_piped--;
    task->piped = false;
    deadlines_remove (self->deadlines, task);
    if (self->tasklog)
        tasklog_end (self->tasklog, task->key, task->attempt);
    //  A py task leaving without its reply (timeout, STOP) kills its executor.
    if (task->kind == SQ_KIND_PY)
        pyexec_abandon (self->pyexec, task);
    if (task->stream_out >= 0)
        stream_writer_remove (self->streams, task->key);
    for (size_t i = 0; task->exited && i < self->n_draining; i++)
        if (self->draining [i] == task)
            self->draining [i--] = self->draining [--self->n_draining];
    if (task->stream_in >= 0)
        stream_reader_remove (self->streams, task->key);
    if (task->exec) {
        //  The poll set of this turn may still name it (a STOP read after
        //  the poll): s_reap must not look at it.
        for (size_t k = 1; k <= self->n_exec_items && k < self->cap_items; k++)
            if (self->item_tasks [k] == task)
                self->item_tasks [k] = NULL;
        task_t *last = self->execs [--self->n_execs];
        self->execs [task->exec_slot] = last;
        last->exec_slot = task->exec_slot;
    }
}

//  Forgets a task in any state without reporting it (STOP, replaced
//  attempts, shutdown). A running child is killed and reaped.
static void
s_task_drop (compute_t *self, task_t *task)
{
    sq_idmap_remove (self->tasks, task->key);
    if (task->state == TASK_RUNNING)
        s_unrun (self, task);
    else {
        if (task->state == TASK_READY)
            s_ready_unlink (self, task);
        self->n_queued--;
    }
    if (task->state == TASK_WAITING && task->pins > 0) {
        task->stopped = true;           //  freed by the last waiter list
        return;
    }
    task_destroy (&task);
}

//  Reports the outcome of a running task, stores its outputs, frees it.
static void
s_complete (compute_t *self, task_t *task, int rc, const char *message)
{
    uint64_t duration = s_duration_us (task);
    sq_idmap_remove (self->tasks, task->key);
    s_unrun (self, task);
    self->tasks_completed++;
    if (rc && task->has_exit_code && task->fail_reason == SQ_FAIL_TASK) {
        sq_debug ("task %" PRIx64 "/%u failed: %s", task->key, task->attempt, message);
        sq_pack_failed_exit (&self->events.pk, task->key, task->attempt, message, duration,
                             task->exit_code);
        s_event_added (self);
        task_destroy (&task);
        return;
    }
    if (rc) {
        s_failed_reason (self, task->key, task->attempt, message, duration, task->fail_reason);
        task_destroy (&task);
        return;
    }
    if (self->n_payloads + task->n_outputs > S_BATCH_FRAMES)
        s_flush (self);
    sq_output_ref_t refs_small [16];
    sq_output_ref_t *refs = task->n_outputs <= 16? refs_small:
        (sq_output_ref_t *) malloc (task->n_outputs * sizeof *refs);
    if (!refs) {
        s_failed (self, task->key, task->attempt, "out of memory on the governor", duration);
        task_destroy (&task);
        return;
    }
    for (uint32_t j = 0; j < task->n_outputs; j++) {
        sq_blob_t *blob = task->results [j];
        refs [j].key = task->outputs [j];
        refs [j].frame = -1;
        if ((int32_t) j == task->stream_out) {
            refs [j].size = task->streamed;     //  gone to its readers, not here
            continue;
        }
        refs [j].size = sq_blob_size (blob);
        if (refs [j].size <= self->inline_max && self->n_payloads < S_BATCH_FRAMES)
            refs [j].frame = s_add_payload (self, blob);
    }
    sq_pack_finished (&self->events.pk, task->key, task->attempt, refs,
                      task->n_outputs, duration);
    if (refs != refs_small)
        free (refs);
    //  Stored before the event may be flushed out, so that a SEND or GFETCH
    //  that follows the broker's reading of it finds the object here.
    for (uint32_t j = 0; j < task->n_outputs; j++) {
        uint64_t key = task->outputs [j];
        if ((int32_t) j == task->stream_out)
            continue;
        if (store_put (self->store, key, task->results [j], task->out_types [j],
                       strlen (task->out_types [j])) == 0) {
            store_set_version (self->store, key, task->attempt);
            s_object_stored (self, key);
        }
        task->results [j] = NULL;
    }
    task_destroy (&task);
    s_event_added (self);
}

//  A task's stdout_path / stderr_path (its config): opened as the task
//  (its tenant's file-system identity, sandbox.h), truncated, in place of
//  its log descriptors, so that the output goes there instead of being
//  kept. 0, or -1 with the failure in err (fds unchanged).
static int
s_user_outputs (compute_t *self, task_t *task, int fds [2], char *err, size_t err_size)
{
    const mpr_str_t *paths [2] = { &task->conf.stdout_path, &task->conf.stderr_path };
    if (!paths [0]->len && !paths [1]->len)
        return 0;
    sandbox_id_t id;
    if (sandbox_identity (self->sandbox, task->tenant, &id, err, err_size))
        return -1;
    int opened [2] = { -1, -1 };
    int rc = 0;
    sandbox_fs_enter (&id);
    for (int i = 0; i < 2 && rc == 0; i++) {
        if (!paths [i]->len)
            continue;
        char path [4100];
        snprintf (path, sizeof path, "%.*s", (int) paths [i]->len, paths [i]->ptr);
        if (i == 1 && opened [0] >= 0 && mpr_str_eq (*paths [0], path))
            opened [1] = dup (opened [0]);      //  one file for both, interleaved
        else
            opened [i] = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC
                                     | O_NOCTTY, 0644);
        if (opened [i] < 0) {
            snprintf (err, err_size, "cannot open %s '%s': %s",
                      i? "stderr_path": "stdout_path", path, strerror (errno));
            rc = -1;
        }
    }
    sandbox_fs_leave (&id);
    for (int i = 0; i < 2; i++) {
        if (rc == 0 && opened [i] >= 0) {
            close (fds [i]);
            fds [i] = opened [i];
        }
        else
        if (opened [i] >= 0)
            close (opened [i]);
    }
    return rc;
}

//  A py task's stream pipes: the governor's ends to the streams, the
//  executor's into theirs (input's first). 0, or -1 with self->err.
static int
s_py_stream_pipes (compute_t *self, task_t *task, int *theirs, int *n_theirs)
{
    int in [2] = { -1, -1 }, out [2] = { -1, -1 };
    if ((task->stream_in >= 0 && pipe2 (in, O_CLOEXEC))
    ||  (task->stream_out >= 0 && pipe2 (out, O_CLOEXEC))) {
        snprintf (self->err, sizeof self->err, "cannot make a pipe: %s", strerror (errno));
        for (int i = 0; i < 2; i++) {
            if (in [i] >= 0)
                close (in [i]);
            if (out [i] >= 0)
                close (out [i]);
        }
        return -1;
    }
    int rc = 0;
    if (in [0] >= 0) {
        fcntl (in [1], F_SETPIPE_SZ, 1 << 20);
        theirs [(*n_theirs)++] = in [0];
        rc |= stream_reader_add (self->streams, task->key, task->inputs [task->stream_in],
                                 task->stream_in_version, in [1]);
    }
    if (out [0] >= 0) {
        fcntl (out [0], F_SETPIPE_SZ, 1 << 20);
        theirs [(*n_theirs)++] = out [1];
        rc |= stream_writer_add (self->streams, task->key, task->attempt,
                                 task->outputs [task->stream_out], task->stream_consumers, out [0]);
    }
    if (rc) {
        for (int i = 0; i < *n_theirs; i++)
            close (theirs [i]);
        *n_theirs = 0;
        snprintf (self->err, sizeof self->err, "out of memory on the governor (streams)");
    }
    return rc;
}

//  Only tasks that outlive this turn are announced: for inline ones the
//  FINISHED event says all, and one event per task is what costs. Once:
//  a piped task its executor handed back runs again as the same attempt.
static void
s_announce (compute_t *self, task_t *task)
{
    if (task->announced)
        return;
    task->announced = true;
    sq_pack_started (&self->events.pk, task->key, task->attempt);
    s_event_added (self);
}

static void
s_start (compute_t *self, task_t *task)
{
    task->state = TASK_RUNNING;
    task->start_ns = task_now_ns ();
    self->n_running++;
    s_hold (self, task, 1);
    uint64_t timeout_at = task->timeout_ms
        ? task->start_ns + (uint64_t) task->timeout_ms * 1000000ull: 0;
    if (task->kind == SQ_KIND_SLEEP) {
        uint64_t end = task->start_ns + (uint64_t) (task->conf.seconds * 1e9);
        task->deadline_ns = timeout_at && timeout_at < end? timeout_at: end;
    }
    else
    if (task->kind == SQ_KIND_EXECUTE) {
        int log_fds [2] = { -1, -1 };
        char stderr_log [4096];
        bool logged = self->tasklog
            && tasklog_start (self->tasklog, task->key, task->attempt, task->conf.log_limit,
                              log_fds, self->err, sizeof self->err) == 0;
        if (logged)
            tasklog_path (self->tasklog, task->key, task->attempt, 2, stderr_log, sizeof stderr_log);
        else
        if (self->tasklog)
            sq_warn ("%s", self->err);
        if (logged && s_user_outputs (self, task, log_fds, self->err, sizeof self->err)) {
            close (log_fds [0]);
            close (log_fds [1]);
            s_complete (self, task, -1, self->err);
            return;
        }
        task->exec = execute_new (task, self->store, self->workdir, self->sandbox,
                                  logged? log_fds: NULL, logged? stderr_log: NULL,
                                  self->err, sizeof self->err);
        for (int i = 0; i < 2; i++)
            if (log_fds [i] >= 0)
                close (log_fds [i]);
        if (!task->exec) {
            s_complete (self, task, -1, self->err);
            return;
        }
        if ((task->stream_out >= 0
             && stream_writer_add (self->streams, task->key, task->attempt,
                                   task->outputs [task->stream_out], task->stream_consumers,
                                   execute_take_pipe (task->exec, false)))
        ||  (task->stream_in >= 0
             && stream_reader_add (self->streams, task->key, task->inputs [task->stream_in],
                                   task->stream_in_version, execute_take_pipe (task->exec, true)))) {
            s_complete (self, task, -1, "out of memory on the governor (streams)");
            return;
        }
        if (self->n_execs == self->cap_execs) {
            size_t cap = self->cap_execs? self->cap_execs * 2: 16;
            task_t **execs = (task_t **) realloc (self->execs, cap * sizeof (task_t *));
            if (!execs) {
                self->n_running--;
                s_hold (self, task, -1);
                sq_idmap_remove (self->tasks, task->key);
                s_failed (self, task->key, task->attempt, "out of memory on the governor", 0);
                task_destroy (&task);
                return;
            }
            self->execs = execs;
            self->cap_execs = cap;
        }
        task->exec_slot = self->n_execs;
        self->execs [self->n_execs++] = task;
        task->deadline_ns = timeout_at;
    }
    else
    if (task->kind == SQ_KIND_PY) {
        //  Streams are pipes here too: ours go to the streams, the
        //  executor's ends with the task (pyexec.c).
        int theirs [4], n_theirs = 0;
        if (s_py_stream_pipes (self, task, theirs, &n_theirs)) {
            s_complete (self, task, -1, self->err);
            return;
        }
        //  Its log descriptors follow (not for a call: the actor's
        //  executor is told nothing of them, and its calls share its log).
        bool logged = false;
        if (self->tasklog && !task->conf.call) {
            char why [256];
            logged = tasklog_start (self->tasklog, task->key, task->attempt, task->conf.log_limit,
                                    theirs + n_theirs, why, sizeof why) == 0;
            if (logged)
                n_theirs += 2;
            else
                sq_warn ("%s", why);
            if (logged && s_user_outputs (self, task, theirs + n_theirs - 2, self->err,
                                          sizeof self->err)) {
                for (int i = 0; i < n_theirs; i++)
                    close (theirs [i]);
                s_complete (self, task, -1, self->err);
                return;
            }
        }
        int rc = pyexec_start (self->pyexec, task, self->store, theirs, (size_t) n_theirs,
                               logged, self->err, sizeof self->err);
        for (int i = 0; i < n_theirs; i++)
            close (theirs [i]);
        if (rc) {
            s_complete (self, task, -1, self->err);
            return;
        }
        task->deadline_ns = timeout_at;
    }
    else {
        int rc = builtin_run (task, self->store, self->err, sizeof self->err);
        s_complete (self, task, rc, self->err);
        return;
    }
    if (task->deadline_ns && deadlines_add (self->deadlines, task)) {
        s_complete (self, task, -1, "out of memory on the governor");
        return;
    }
    s_announce (self, task);
}

//  A waiting task that no longer waits for its missing inputs here (they
//  come to it another way): off their waiter lists.
static void
s_unwait (compute_t *self, task_t *task)
{
    for (uint32_t i = 0; i < task->n_inputs && task->missing; i++) {
        s_list_t *list = (s_list_t *) sq_idmap_lookup (self->waiters, task->inputs [i]);
        for (size_t k = 0; list && k < list->n; k++)
            if (list->items [k] == task) {
                list->items [k--] = list->items [--list->n];
                task->missing--;
                s_unpin (task);
            }
    }
}

//  A piped task's log descriptors, opened only once an executor takes it
//  (pyexec_pipe's callback): a task tried for piping and not piped costs
//  no files. 0, or -1 (it is not piped: a stdout_path it cannot open fails
//  it when it starts the usual way).
static int
s_pipe_log (void *arg, task_t *task, int fds [2])
{
    compute_t *self = (compute_t *) arg;
    char why [256];
    if (!self->tasklog)
        return 0;               //  no capture: the executor's fds stay
    if (tasklog_start (self->tasklog, task->key, task->attempt, task->conf.log_limit,
                       fds, why, sizeof why)) {
        sq_warn ("%s", why);
        return 0;
    }
    self->piped_logged = true;
    if (s_user_outputs (self, task, fds, why, sizeof why)) {
        close (fds [0]);
        close (fds [1]);
        fds [0] = fds [1] = -1;
        return -1;
    }
    return 0;
}

static bool s_pipe (compute_t *self, task_t *task);

//  Chains: a waiting py task whose missing inputs are all outputs of the
//  task written last to an executor goes behind it there, and takes them
//  from the executor's memory (pyexec_pipe), without waiting for the
//  reply to come here and the task to be sent back.
static void
s_pipe_chains (compute_t *self)
{
    size_t cursor = 0;
    task_t *tail;
    while ((tail = pyexec_tail (self->pyexec, &cursor))) {
        task_t *next = NULL;
        for (uint32_t j = 0; j < tail->n_outputs && !next; j++) {
            s_list_t *list = (s_list_t *) sq_idmap_lookup (self->waiters, tail->outputs [j]);
            for (size_t k = 0; list && k < list->n && !next; k++) {
                task_t *task = (task_t *) list->items [k];
                if (!task->stopped && task->state == TASK_WAITING && task->kind == SQ_KIND_PY)
                    next = task;
            }
        }
        //  Written behind it, it is that executor's last: look there again.
        if (next && s_pipe (self, next))
            cursor--;
    }
}

//  A ready py task with no cpu free: written to a busy executor to run
//  next there (pyexec_pipe), so that the executor does not wait for us
//  between tasks. It is out of reach of RETRACT (TASK_RUNNING here) but
//  holds nothing, is not announced STARTED and counts as queued in LOAD
//  until it runs (PYEXEC_RUNS). False if it cannot be.
static bool
s_pipe (compute_t *self, task_t *task)
{
    if (task->kind != SQ_KIND_PY)
        return false;
    self->piped_logged = false;
    int rc = pyexec_pipe (self->pyexec, task, self->store, s_pipe_log, self);
    if (rc) {
        if (self->piped_logged)
            tasklog_end (self->tasklog, task->key, task->attempt);
        return false;
    }
    if (task->state == TASK_READY)
        s_ready_unlink (self, task);
    else
        s_unwait (self, task);
    self->n_queued--;
    task->state = TASK_RUNNING;
    task->piped = true;
    task->start_ns = task_now_ns ();
    self->n_running++;
    self->n_piped++;
    return true;
}

//  Starts ready tasks in FIFO order while they fit in the cpus and named
//  resources; one bigger than the governor runs alone.
static void
s_schedule (compute_t *self)
{
    for (;;) {
        task_t *task = self->calls_head? self->calls_head: self->ready_head;
        if (!task)
            break;
        if (task == self->ready_head && !s_fits_now (self, task) && self->n_running > 0) {
            if (s_pipe (self, task))
                continue;
            break;
        }
        s_ready_unlink (self, task);
        self->n_queued--;
        //  An input DROPped while the task was ready (a broker bug): wait
        //  for it again rather than run without it.
        bool complete = true;
        for (uint32_t i = 0; complete && i < task->n_inputs; i++)
            complete = store_has (self->store, task->inputs [i]) || (int32_t) i == task->stream_in;
        if (!complete) {
            sq_warn ("task %" PRIx64 " lost an input before running; waiting again", task->key);
            self->n_queued++;
            s_wait_inputs (self, task);
            continue;
        }
        s_start (self, task);
    }
    s_pipe_chains (self);
}

//  Kills programs (and Python executors) using more memory than their
//  task asked for. They fail with SQ_FAIL_MEMORY, which the broker retries
//  on a governor with more memory free. Looked at every 200 ms while such
//  tasks run.
#define S_MEMCHECK_NS 200000000ull

//  ms until the next memory check (and log trim), -1 when no running task
//  has a limit and none runs.
static long
s_memcheck_due (compute_t *self)
{
    //  Running tasks' logs are trimmed at the same pace (tasklog_trim).
    bool limited = pyexec_limited (self->pyexec) || (self->tasklog && self->n_running > 0);
    for (size_t i = 0; i < self->n_execs && !limited; i++)
        limited = self->execs [i]->memory > 0;
    if (!limited)
        return -1;
    uint64_t now = task_now_ns ();
    return now >= self->next_memcheck_ns? 0
         : (long) ((self->next_memcheck_ns - now) / 1000000) + 1;
}

static void
s_check_memory (compute_t *self)
{
    uint64_t now = task_now_ns ();
    if (now < self->next_memcheck_ns)
        return;
    self->next_memcheck_ns = now + S_MEMCHECK_NS;
    if (self->tasklog)
        tasklog_trim (self->tasklog);
    for (size_t i = 0; i < self->n_execs; ) {
        task_t *task = self->execs [i];
        uint64_t rss = task->memory? execute_rss (task->exec): 0;
        if (rss > task->memory) {
            snprintf (self->err, sizeof self->err,
                      "killed for using %" PRIu64 " bytes of memory, more than the %" PRIu64
                      " it asked for", rss, task->memory);
            task->fail_reason = SQ_FAIL_MEMORY;
            s_complete (self, task, -1, self->err);     //  moves the last exec to slot i
            continue;
        }
        i++;
    }
    size_t cursor = 0;
    uint64_t grown;
    task_t *task;
    while ((task = pyexec_over_memory (self->pyexec, &cursor, &grown))) {
        snprintf (self->err, sizeof self->err,
                  "killed for using %" PRIu64 " bytes of memory, more than the %" PRIu64
                  " it asked for (its Python executor's growth while it ran)",
                  grown, task->memory);
        task->fail_reason = SQ_FAIL_MEMORY;
        s_complete (self, task, -1, self->err);         //  kills its executor
    }
}

//  What runs beside the store in the governor's cgroup: its usage (less
//  file pages) less the store's memory. The free heap kept for copies
//  counts: it is resident, and objects made elsewhere (executors'
//  replies, mapped) do not reuse it.
static uint64_t
s_beside_store (void *arg, uint64_t store_memory)
{
    compute_t *self = (compute_t *) arg;
    uint64_t used;
    if (cgroup_usage_read (self->box, &used))
        return 0;
    return used > store_memory? used - store_memory: 0;
}

//  After the box made the store spill: what it freed into the heap (and
//  the heap kept for copies) goes back to the system, or the box would
//  not see it go.
static void
s_relieve_box (void *arg)
{
    (void) arg;
    heap_release ();
}

//  Tasks grow without the store knowing: while any run, the box is looked
//  at every STORE_BOX_CHECK_MS. ms until then, -1 if not due.
static long
s_boxcheck_due (compute_t *self)
{
    if (!self->box || self->n_running == 0)
        return -1;
    uint64_t now = task_now_ns ();
    return now >= self->next_boxcheck_ns? 0
         : (long) ((self->next_boxcheck_ns - now) / 1000000) + 1;
}

static void
s_check_box (compute_t *self)
{
    if (s_boxcheck_due (self) != 0)
        return;
    self->next_boxcheck_ns = task_now_ns () + STORE_BOX_CHECK_MS * 1000000ull;
    store_check_box (self->store);
}

static void
s_fire_deadlines (compute_t *self)
{
    uint64_t now = task_now_ns ();
    task_t *task;
    while ((task = deadlines_first (self->deadlines)) && task->deadline_ns <= now) {
        deadlines_remove (self->deadlines, task);
        if (task->timeout_ms
        &&  now >= task->start_ns + (uint64_t) task->timeout_ms * 1000000ull) {
            snprintf (self->err, sizeof self->err, "timed out after %g s",
                      task->timeout_ms / 1000.0);
            s_complete (self, task, -1, self->err);
        }
        else {
            int rc = builtin_run (task, self->store, self->err, sizeof self->err);
            s_complete (self, task, rc, self->err);
        }
    }
}

static void
s_child_exited (compute_t *self, task_t *task)
{
    //  A writer is done once its stream is sent to its end too.
    if (task->stream_out >= 0 && !task->stream_ended) {
        task->exited = true;
        return;
    }
    int rc = execute_finish (task->exec, task, self->err, sizeof self->err);
    task->has_exit_code = execute_exit_code (task->exec, &task->exit_code);
    if (rc == 0 && task->stream_in >= 0 && stream_reader_broken (self->streams, task->key)) {
        snprintf (self->err, sizeof self->err, "its input stream %" PRIx64 " broke off "
                  "(see the governor's log); the program read part of it only",
                  task->inputs [task->stream_in]);
        rc = -1;
    }
    if (rc == 0 && task->stream_out >= 0)
        stream_writer_end (self->streams, task->key);
    s_complete (self, task, rc, self->err);
}

//  stream_done_fn: a writer's stream went out to its end.
static void
s_stream_done (void *arg, uint64_t key, uint32_t attempt, uint64_t bytes, bool deserted)
{
    compute_t *self = (compute_t *) arg;
    task_t *task = (task_t *) sq_idmap_lookup (self->tasks, key);
    if (task && task->attempt == attempt && task->state == TASK_RUNNING) {
        task->stream_ended = true;
        task->streamed = bytes;
        if (deserted && task->exec)
            execute_allow_sigpipe (task->exec);
    }
}

static void
s_stream_progress (void *arg, uint64_t object, uint64_t bytes)
{
    compute_t *self = (compute_t *) arg;
    sq_pack_streamed (&self->events.pk, object, bytes);
    s_event_added (self);
}

static void s_py_replied (compute_t *self, task_t *task, int rc);

//  Writers whose program ended (or py task replied) and whose stream has
//  too.
static void
s_reap_streams (compute_t *self)
{
    task_t *done [64];
    size_t n = 0;
    for (size_t i = 0; i < self->n_execs && n < 64; i++)
        if (self->execs [i]->exited && self->execs [i]->stream_ended)
            done [n++] = self->execs [i];
    for (size_t i = 0; i < n; i++)
        s_child_exited (self, done [i]);
    for (size_t i = 0; i < self->n_draining; i++) {
        task_t *task = self->draining [i];
        if (!task->stream_ended)
            continue;
        self->draining [i--] = self->draining [--self->n_draining];
        s_py_replied (self, task, 0);
    }
}

//  --------------------------------------------------------------------------
//  Objects

static void
s_send_object (compute_t *self, uint64_t key, uint32_t version, const char *endpoint)
{
    //  Chunked, credit-controlled and zero-copy: see transfer.h.
    if (transfer_send (self->transfer, key, version, endpoint))
        sq_warn ("cannot start the copy of %" PRIx64 " to %s", key, endpoint);
}

//  transfer_fn: a copy arrived (located) or could not be had (lost), or
//  an upload is complete (the broker waits for that to count it).
static void
s_copy_done (void *arg, uint64_t key, uint64_t size, transfer_outcome_t outcome,
             uint64_t duration_us)
{
    compute_t *self = (compute_t *) arg;
    if (outcome == TRANSFER_LOST)
        sq_pack_lost (&self->events.pk, key);
    else {
        s_object_stored (self, key);
        if (outcome == TRANSFER_LOCATED && duration_us)
            sq_pack_located_in (&self->events.pk, key, size, duration_us);
        else
        if (outcome == TRANSFER_LOCATED)
            sq_pack_located (&self->events.pk, key, size);
        else
            sq_pack_uploaded (&self->events.pk, key, size);
    }
    s_event_added (self);
}

//  An object just entered the store: wake its waiters, run its orders.
static void
s_object_stored (compute_t *self, uint64_t key)
{
    s_list_t *list = (s_list_t *) sq_idmap_remove (self->waiters, key);
    for (size_t i = 0; list && i < list->n; i++) {
        task_t *task = (task_t *) list->items [i];
        if (!task->stopped && --task->missing == 0)
            s_ready_push (self, task);
        s_unpin (task);
    }
    if (list) {
        free (list->items);
        free (list);
    }
    list = (s_list_t *) sq_idmap_remove (self->orders, key);
    for (size_t i = 0; list && i < list->n; i++) {
        s_order_t *order = (s_order_t *) list->items [i];
        s_send_object (self, key, order->version, order->endpoint);
        s_order_free (order);
        self->n_orders--;
    }
    if (list) {
        free (list->items);
        free (list);
    }
}

static void
s_drop_orders (compute_t *self, uint64_t key)
{
    s_list_t *list = (s_list_t *) sq_idmap_remove (self->orders, key);
    for (size_t i = 0; list && i < list->n; i++) {
        s_order_free ((s_order_t *) list->items [i]);
        self->n_orders--;
    }
    if (list) {
        free (list->items);
        free (list);
    }
}

//  --------------------------------------------------------------------------
//  Messages from the broker, peers and clients

//  One ASSIGN entry; msg frame 1 is the ASSIGN header, so payload index f
//  is frame 1 + f.
static void
s_accept (compute_t *self, const sq_assign_t *assign, sq_msg_t *msg)
{
    if (self->n_queued >= S_MAX_QUEUED) {
        s_failed (self, assign->key, assign->attempt,
                  "governor queue is full (1000000 tasks queued)", 0);
        return;
    }
    for (uint32_t i = 0; i < assign->n_inputs; i++) {
        int32_t f = assign->inputs [i].frame;
        if (f >= 0 && (f < 1 || (size_t) f + 1 >= msg->n)) {
            snprintf (self->err, sizeof self->err,
                      "input %u refers to payload frame %d, which the ASSIGN lacks", i, f);
            s_failed (self, assign->key, assign->attempt, self->err, 0);
            return;
        }
    }
    sq_errbuf_t err;
    task_t *task = task_new (assign, &err);
    if (!task) {
        s_failed (self, assign->key, assign->attempt, err.text, 0);
        return;
    }
    task_t *old = (task_t *) sq_idmap_lookup (self->tasks, task->key);
    if (old && old->attempt == task->attempt) {
        sq_warn ("task %" PRIx64 "/%u assigned twice; ignoring the copy", task->key, task->attempt);
        task_destroy (&task);
        return;
    }
    if (old)
        s_task_drop (self, old);
    //  Inline inputs share the received frame's buffer (zmq_msg_copy).
    for (uint32_t i = 0; i < assign->n_inputs; i++) {
        const sq_input_ref_t *in = &assign->inputs [i];
        if (in->frame < 0 || store_has (self->store, in->key))
            continue;
        zmq_msg_t copy;
        zmq_msg_init (&copy);
        zmq_msg_copy (&copy, &msg->frames [1 + in->frame]);
        sq_blob_t *blob = sq_blob_from_msg (&copy);
        if (!blob || store_put (self->store, in->key, blob, in->content_type.ptr,
                                in->content_type.len))
            sq_error ("out of memory storing input %" PRIx64, in->key);
        else
            s_object_stored (self, in->key);
    }
    if (sq_idmap_insert (self->tasks, task->key, task)) {
        s_failed (self, task->key, task->attempt, "out of memory on the governor", 0);
        task_destroy (&task);
        return;
    }
    self->n_queued++;
    s_wait_inputs (self, task);
}

static void
s_on_assign (compute_t *self, sq_msg_t *msg)
{
    sq_errbuf_t err;
    sq_iter_t it;
    sq_assign_t assign;
    int rc = sq_assign_begin (&it, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err);
    while (rc == 0 && (rc = sq_assign_next (&it, &assign)) == 1) {
        s_accept (self, &assign, msg);
        rc = 0;
    }
    if (rc < 0)
        sq_warn ("bad ASSIGN (tasks before the error were taken): %s", err.text);
    sq_iter_release (&it);
}

static void
s_on_send (compute_t *self, sq_msg_t *msg)
{
    sq_errbuf_t err;
    sq_iter_t it;
    sq_send_t order;
    int rc = sq_send_begin (&it, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err);
    while (rc == 0 && (rc = sq_send_next (&it, &order)) == 1) {
        rc = 0;
        char address [SQ_MAX_NAME + 48];
        if (gov_peer_address (address, sizeof address, order.to_key.len? (const uint8_t *) order.to_key.ptr: NULL,
                              order.endpoint.ptr, order.endpoint.len) < 0)
            continue;
        char *endpoint = strdup (address);
        if (!endpoint)
            continue;
        if (store_has (self->store, order.key)) {
            s_send_object (self, order.key, order.version, endpoint);
            free (endpoint);
            continue;
        }
        s_order_t *pending = (s_order_t *) calloc (1, sizeof *pending);
        s_list_t *list = self->n_orders < S_MAX_PENDING_SENDS? s_list_of (self->orders, order.key): NULL;
        if (!pending || !list || s_list_push (list, pending)) {
            sq_warn ("dropping SEND of %" PRIx64 " to %s: too many pending", order.key, endpoint);
            free (pending);
            free (endpoint);
            continue;
        }
        pending->version = order.version;
        pending->to = order.to;
        pending->endpoint = endpoint;
        self->n_orders++;
    }
    if (rc < 0)
        sq_warn ("bad SEND: %s", err.text);
    sq_iter_release (&it);
}

static void
s_on_drop (compute_t *self, sq_msg_t *msg)
{
    sq_errbuf_t err;
    sq_iter_t it;
    uint64_t key;
    int rc = sq_keys_begin (&it, SQ_MSG_DROP, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err);
    while (rc == 0 && (rc = sq_drop_next (&it, &key)) == 1) {
        rc = 0;
        store_remove (self->store, key);
        transfer_forget (self->transfer, key);
        s_drop_orders (self, key);
    }
    if (rc < 0)
        sq_warn ("bad DROP: %s", err.text);
    sq_iter_release (&it);
}

static void
s_on_stop (compute_t *self, sq_msg_t *msg)
{
    sq_errbuf_t err;
    sq_iter_t it;
    uint64_t key;
    uint32_t attempt;
    int rc = sq_keys_begin (&it, SQ_MSG_STOP, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err);
    while (rc == 0 && (rc = sq_stop_next (&it, &key, &attempt)) == 1) {
        rc = 0;
        task_t *task = (task_t *) sq_idmap_lookup (self->tasks, key);
        if (task && task->attempt == attempt)
            s_task_drop (self, task);
    }
    if (rc < 0)
        sq_warn ("bad STOP: %s", err.text);
    sq_iter_release (&it);
}

//  Work stealing: the broker asks for tasks back; only those not started
//  are given (RETRACTED), so none runs twice and none is lost.
//  LOGTAIL: the last bytes of a task's output, for the dashboard; answered
//  in the next UPDATE (empty when no such log is kept here).
static void
s_on_logtail (compute_t *self, sq_msg_t *msg)
{
    sq_logtail_t q;
    sq_errbuf_t err;
    if (sq_logtail_decode (&q, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err)) {
        sq_warn ("bad LOGTAIL: %s", err.text);
        return;
    }
    char tail [SQ_LOGTAIL_MAX + 1];
    tail [0] = 0;
    if (self->tasklog)
        tasklog_tail (self->tasklog, q.key, q.attempt, q.stream, tail, sizeof tail);
    sq_pack_logtail_event (&self->events.pk, q.key, q.attempt, q.req, tail, strlen (tail));
    s_event_added (self);
}

static void
s_on_retract (compute_t *self, sq_msg_t *msg)
{
    sq_errbuf_t err;
    sq_iter_t it;
    uint64_t key;
    uint32_t attempt;
    int rc = sq_keys_begin (&it, SQ_MSG_RETRACT, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err);
    while (rc == 0 && (rc = sq_stop_next (&it, &key, &attempt)) == 1) {
        rc = 0;
        task_t *task = (task_t *) sq_idmap_lookup (self->tasks, key);
        if (!task || task->attempt != attempt || task->state == TASK_RUNNING)
            continue;
        s_task_drop (self, task);
        sq_pack_retracted (&self->events.pk, key, attempt);
        s_event_added (self);
    }
    if (rc < 0)
        sq_warn ("bad RETRACT: %s", err.text);
    sq_iter_release (&it);
}

//  A client's restart: its tenant's Python executors get no other task.
static void
s_on_refresh (compute_t *self, sq_msg_t *msg)
{
    sq_errbuf_t err;
    mpr_str_t tenant;
    char name [SQ_MAX_NAME + 1];
    if (sq_refresh_decode (sq_msg_data (msg, 1), sq_msg_size (msg, 1), &tenant, &err)) {
        sq_warn ("bad REFRESH: %s", err.text);
        return;
    }
    memcpy (name, tenant.ptr, tenant.len);
    name [tenant.len] = 0;
    pyexec_refresh (self->pyexec, name);
}

static void
s_on_object (compute_t *self, sq_msg_t *msg)
{
    sq_errbuf_t err;
    sq_object_msg_t object;
    if (msg->n != 3 || msg->truncated) {
        sq_warn ("OBJECT with %zu frames instead of 2; discarded", msg->n - 1);
        return;
    }
    if (sq_object_decode (&object, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err)) {
        sq_warn ("bad OBJECT: %s", err.text);
        return;
    }
    if (object.size != sq_msg_size (msg, 2)) {
        sq_warn ("OBJECT %" PRIx64 " says %" PRIu64 " bytes but carries %zu; discarded",
                 object.key, object.size, sq_msg_size (msg, 2));
        return;
    }
    if (!store_has (self->store, object.key)) {
        sq_blob_t *blob = sq_blob_from_msg (&msg->frames [2]);
        zmq_msg_init (&msg->frames [2]);
        if (!blob || store_put (self->store, object.key, blob, object.content_type.ptr,
                                object.content_type.len)) {
            sq_error ("out of memory storing OBJECT %" PRIx64, object.key);
            return;
        }
        s_object_stored (self, object.key);
    }
    sq_pack_located (&self->events.pk, object.key, object.size);
    s_event_added (self);
}

//  The broker took us back after a loss: it learns what runs and what is
//  held here (reattach inventory, docs/protocol.md); what only waited is
//  dropped, the broker places it again (it cannot know what we queued).
//  A piped task has not started either: listed as running, the broker
//  would stop it when its input is not finished there (a chain), and its
//  reply could race that STOP and report a run the broker then repeats.
static void
s_inventory (compute_t *self)
{
    size_t n_tasks = sq_idmap_size (self->tasks), k = 0, cursor = 0;
    task_t **drop = (task_t **) malloc ((n_tasks + 1) * sizeof (task_t *));
    task_t *task;
    size_t running = 0, held = 0;
    while (drop && (task = (task_t *) sq_idmap_next (self->tasks, &cursor, NULL))) {
        if (task->state == TASK_RUNNING && !task->piped) {
            sq_pack_running (&self->events.pk, task->key, task->attempt);
            s_event_added (self);
            running++;
        }
        else
            drop [k++] = task;
    }
    for (size_t i = 0; i < k; i++)
        s_task_drop (self, drop [i]);
    free (drop);
    //  Copies the old broker ordered: the new one orders what it needs.
    size_t n_keys = sq_idmap_size (self->orders);
    uint64_t *keys = (uint64_t *) malloc ((n_keys + 1) * sizeof (uint64_t));
    uint64_t key;
    cursor = k = 0;
    while (keys && k < n_keys && sq_idmap_next (self->orders, &cursor, &key))
        keys [k++] = key;
    for (size_t i = 0; keys && i < k; i++)
        s_drop_orders (self, keys [i]);
    free (keys);
    cursor = 0;
    uint32_t version;
    uint64_t size;
    while (store_next (self->store, &cursor, &key, &version, &size)) {
        sq_pack_held (&self->events.pk, key, version, size);
        s_event_added (self);
        held++;
    }
    sq_pack_inventory_end (&self->events.pk);
    s_event_added (self);
    s_flush (self);
    sq_info ("reattach: %zu running tasks and %zu objects listed, %zu queued tasks dropped",
             running, held, n_tasks - running);
}

static void
s_on_message (compute_t *self, sq_msg_t *msg)
{
    char route = msg->n? *(char *) sq_msg_data (msg, 0): 0;
    uint32_t type = 0, req;
    if (msg->n == 1 && sq_msg_size (msg, 0) == strlen (GOV_TERM)
    &&  memcmp (sq_msg_data (msg, 0), GOV_TERM, strlen (GOV_TERM)) == 0)
        self->terminated = true;
    else
    if (msg->n == 1 && sq_msg_size (msg, 0) == strlen (GOV_REATTACH)
    &&  memcmp (sq_msg_data (msg, 0), GOV_REATTACH, strlen (GOV_REATTACH)) == 0)
        s_inventory (self);
    else
    if (route == GOV_ROUTE_SERVE && msg->n == 3 && !msg->truncated
    &&  sq_proto_peek (sq_msg_data (msg, 2), sq_msg_size (msg, 2), &type, &req) == 0
    &&  type == SQ_MSG_GREAD)
        serve_gread (self->store, self->pipe, msg);
    else
    if (route == GOV_ROUTE_SERVE && msg->n == 3 && !msg->truncated
    &&  sq_proto_peek (sq_msg_data (msg, 2), sq_msg_size (msg, 2), &type, &req) == 0
    &&  type == SQ_MSG_LOGREAD)
        serve_logread (self->tasklog, self->pipe, msg);
    else
    if (route == GOV_ROUTE_SERVE && msg->n == 4 && !msg->truncated
    &&  sq_proto_peek (sq_msg_data (msg, 2), sq_msg_size (msg, 2), &type, &req) == 0
    &&  type == SQ_MSG_PUT)
        serve_put (self->transfer, self->pipe, msg);
    else
    if (route == GOV_ROUTE_SERVE)
        serve_gfetch (self->store, self->pipe, msg);
    else
    if (msg->n < 2 || msg->truncated
    ||  sq_proto_peek (sq_msg_data (msg, 1), sq_msg_size (msg, 1), &type, &req))
        sq_warn ("unreadable message from '%c'; discarded", route);
    else
    if (route == GOV_ROUTE_DATA && type == SQ_MSG_OBJECT)
        s_on_object (self, msg);
    else
    if (route == GOV_ROUTE_DATA && type == SQ_MSG_CHUNK)
        transfer_on_chunk (self->transfer, msg);
    else
    if (route == GOV_ROUTE_DATA && type == SQ_MSG_CREDIT)
        transfer_on_credit (self->transfer, msg);
    else
    if (route == GOV_ROUTE_DATA && type == SQ_MSG_SCHUNK)
        stream_on_chunk (self->streams, msg);
    else
    if (route == GOV_ROUTE_DATA && type == SQ_MSG_SCREDIT)
        stream_on_credit (self->streams, msg);
    else
    if (route == GOV_ROUTE_BROKER && (type == SQ_MSG_STREAM || type == SQ_MSG_UNSTREAM))
        stream_on_order (self->streams, type, msg);
    else
    if (route == GOV_ROUTE_BROKER && type == SQ_MSG_ASSIGN)
        s_on_assign (self, msg);
    else
    if (route == GOV_ROUTE_BROKER && type == SQ_MSG_SEND)
        s_on_send (self, msg);
    else
    if (route == GOV_ROUTE_BROKER && type == SQ_MSG_DROP)
        s_on_drop (self, msg);
    else
    if (route == GOV_ROUTE_BROKER && type == SQ_MSG_STOP)
        s_on_stop (self, msg);
    else
    if (route == GOV_ROUTE_BROKER && type == SQ_MSG_RETRACT)
        s_on_retract (self, msg);
    else
    if (route == GOV_ROUTE_BROKER && type == SQ_MSG_LOGTAIL)
        s_on_logtail (self, msg);
    if (route == GOV_ROUTE_BROKER && type == SQ_MSG_REFRESH)
        s_on_refresh (self, msg);
    else
        sq_warn ("unexpected message type %u from '%c'; discarded", type, route);
}

//  --------------------------------------------------------------------------
//  The loop

static void
s_read_pipe (compute_t *self)
{
    sq_msg_t msg;
    sq_msg_init (&msg);
    for (int i = 0; i < S_READ_BURST && !self->terminated; i++) {
        if (sq_msg_recv (&msg, self->pipe, ZMQ_DONTWAIT, SQ_MAX_FRAMES + 2))
            break;
        s_on_message (self, &msg);
    }
    sq_msg_close (&msg);
    free (msg.frames);
}

//  Tells the balance thread about a change, at most every 10 ms. Returns
//  the ms until it may tell again if a change is still untold, else -1.
static long
s_report_load (compute_t *self)
{
    sq_load_t load = {
        .running = self->n_running - self->n_piped,
        .queued = self->n_queued + self->n_piped, .piped = self->n_piped,
        .memory = store_memory (self->store) + transfer_incoming_bytes (self->transfer)
                + stream_bytes (self->streams),
        .spilled = store_spilled (self->store),
        .objects = store_count (self->store),
        .tasks = self->tasks_completed
    };
    if (memcmp (&load, &self->load_sent, sizeof load) == 0)
        return -1;
    uint64_t now = task_now_ns ();
    if (now - self->load_sent_ns < S_LOAD_EVERY_NS)
        return (long) ((self->load_sent_ns + S_LOAD_EVERY_NS - now) / 1000000) + 1;
    //  Dropped if balance is behind: the next change tells it again.
    if (zmq_send (self->load, &load, sizeof load, ZMQ_DONTWAIT) == sizeof load) {
        self->load_sent = load;
        self->load_sent_ns = now;
    }
    return -1;
}

static long
s_min_timeout (long a, long b)
{
    return a < 0? b: b < 0? a: a < b? a: b;
}

//  Freed object memory stays in the heap for the next copies (heap.h)
//  until nothing has been freed for HEAP_RELEASE_IDLE_MS. Returns the ms
//  until then, -1 when there is nothing to give back.
static long
s_heap_release (compute_t *self)
{
    uint64_t bytes = store_memory (self->store) + transfer_incoming_bytes (self->transfer);
    uint64_t now = task_now_ns ();
    if (bytes < self->heap_bytes)
        self->release_ns = now + (uint64_t) HEAP_RELEASE_IDLE_MS * 1000000ull;
    self->heap_bytes = bytes;
    if (self->release_ns == 0)
        return -1;
    if (now < self->release_ns)
        return (long) ((self->release_ns - now) / 1000000) + 1;
    heap_release ();
    self->release_ns = 0;
    return -1;
}

//  While Python executors are busy their replies come within about a
//  millisecond, and an UPDATE per reply would cost the broker more than
//  the tasks: events then wait up to S_PY_HOLD_NS after the last UPDATE.
//  Returns the ms to hold, or -1 to flush now.
static long
s_py_hold (compute_t *self)
{
    if (self->n_events == 0 || pyexec_busy (self->pyexec) == 0)
        return -1;
    uint64_t now = task_now_ns ();
    return now - self->flushed_ns < S_PY_HOLD_NS? 1: -1;
}

//  Poll set: the pipe, then one pidfd per child. Returns the item count
//  and the ms to wait at most (timers, children without pidfd, load).
static int
s_poll_set (compute_t *self, long *timeout)
{
    size_t need = self->n_execs + 1 + pyexec_watched (self->pyexec)
                + sq_idmap_size (self->tasks);   //  stream pipes: at most two a task
    if (self->cap_items < need) {
        size_t cap = need * 2;
        zmq_pollitem_t *items = (zmq_pollitem_t *) realloc (self->items, cap * sizeof *items);
        if (items)
            self->items = items;
        task_t **tasks = (task_t **) realloc (self->item_tasks, cap * sizeof *tasks);
        if (tasks)
            self->item_tasks = tasks;
        if (items && tasks)
            self->cap_items = cap;
    }
    self->items [0] = (zmq_pollitem_t) { self->pipe, 0, ZMQ_POLLIN, 0 };
    int n = 1;
    *timeout = -1;
    for (size_t i = 0; i < self->n_execs; i++) {
        if (self->execs [i]->exited)
            continue;           //  its stream drains (below)
        int fd = execute_fd (self->execs [i]->exec);
        if (fd >= 0 && (size_t) n < self->cap_items) {
            self->item_tasks [n] = self->execs [i];
            self->items [n++] = (zmq_pollitem_t) { NULL, fd, ZMQ_POLLIN, 0 };
        }
        else
            *timeout = S_WAITPID_MS;
    }
    self->n_exec_items = (size_t) n - 1;
    self->stream_at = (size_t) n;
    self->n_stream_items = stream_items (self->streams, self->items + n,
                                         self->cap_items > 2 * (size_t) n
                                         ? (self->cap_items - (size_t) n) / 2: 0);
    n += (int) self->n_stream_items;
    //  Busy Python executors last: s_reap_py finds them from n_items back.
    self->n_py_items = pyexec_items (self->pyexec, self->items + n, self->cap_items - (size_t) n);
    n += (int) self->n_py_items;
    task_t *first = deadlines_first (self->deadlines);
    if (first) {
        uint64_t now = task_now_ns ();
        long ms = first->deadline_ns > now? (long) ((first->deadline_ns - now + 999999) / 1000000): 0;
        *timeout = s_min_timeout (*timeout, ms);
    }
    return n;
}

static void
s_reap (compute_t *self, int n_items)
{
    //  Collect first: completing a task reshuffles the execs array.
    task_t *done_small [64];
    size_t n_done = 0;
    for (int i = 1; i < n_items && (size_t) i <= self->n_exec_items && n_done < 64; i++)
        if ((self->items [i].revents & ZMQ_POLLIN) && self->item_tasks [i]
        &&  execute_poll (self->item_tasks [i]->exec))
            done_small [n_done++] = self->item_tasks [i];
    for (size_t i = 0; i < self->n_execs && n_done < 64; i++)
        if (!self->execs [i]->exited && execute_fd (self->execs [i]->exec) < 0
        &&  execute_poll (self->execs [i]->exec))
            done_small [n_done++] = self->execs [i];
    for (size_t i = 0; i < n_done; i++)
        s_child_exited (self, done_small [i]);
}

//  A py task's reply: with a stream output still draining, it completes
//  once the stream has gone out (s_reap_streams).
static void
s_py_replied (compute_t *self, task_t *task, int rc)
{
    if (rc == 0 && task->stream_out >= 0 && !task->stream_ended) {
        if (self->n_draining < S_MAX_DRAINING) {
            task->exited = true;
            self->draining [self->n_draining++] = task;
            return;
        }
        rc = -1;
        snprintf (self->err, sizeof self->err, "too many streams draining on this governor");
    }
    if (rc == 0 && task->stream_in >= 0 && stream_reader_broken (self->streams, task->key)) {
        snprintf (self->err, sizeof self->err, "its input stream broke off (see the "
                  "governor's log); the task read part of it only");
        rc = -1;
    }
    if (rc == 0 && task->stream_out >= 0)
        stream_writer_end (self->streams, task->key);
    s_complete (self, task, rc, self->err);
}

//  What became of py tasks (pyexec_next): replies, tasks that ended with
//  an actor, and piped tasks that run now or were handed back unrun.
static void
s_py_outcomes (compute_t *self)
{
    task_t *task;
    pyexec_outcome_t outcome;
    while ((task = pyexec_next (self->pyexec, &outcome, self->err, sizeof self->err))) {
        if (outcome == PYEXEC_RUNS) {
            //  It takes over the cpu of the one before (both plain py
            //  tasks of one cpu), which its reply just gave back.
            task->piped = false;
            self->n_piped--;
            s_hold (self, task, 1);
        }
        else
        if (outcome == PYEXEC_STARTED)
            s_announce (self, task);        //  since task->start_ns
        else
        if (outcome == PYEXEC_SECEDED || outcome == PYEXEC_REJOINED)
            s_secede (self, task, outcome == PYEXEC_SECEDED);
        else
        if (outcome == PYEXEC_CREDENTIAL)
            s_credential (self, task);
        else
        if (outcome == PYEXEC_UNRUN) {
            //  Back to wait for what it was to take from the executor.
            s_unrun (self, task);
            self->n_queued++;
            s_wait_inputs (self, task);
        }
        else
            s_py_replied (self, task, outcome == PYEXEC_DONE? 0: -1);
    }
}

//  Replies of Python executors: the last n_py_items poll items.
static void
s_reap_py (compute_t *self, int n_items)
{
    for (int i = n_items - (int) self->n_py_items; i > 0 && i < n_items; i++)
        if (self->items [i].revents & (ZMQ_POLLIN | ZMQ_POLLERR))
            pyexec_read (self->pyexec, self->items [i].fd);
    s_py_outcomes (self);
}

int
compute_run (compute_t *self)
{
    while (!self->terminated) {
        long timeout;
        int n = s_poll_set (self, &timeout);
        int rc = zmq_poll (self->items, n, 0);
        if (rc == 0) {
            //  Nothing more to read now: send what we have before waiting
            //  (unless Python tasks are about to add to it).
            long hold = s_py_hold (self);
            if (hold < 0)
                s_flush (self);
            timeout = s_min_timeout (timeout, hold);
            timeout = s_min_timeout (timeout, s_report_load (self));
            timeout = s_min_timeout (timeout, transfer_tick (self->transfer));
            timeout = s_min_timeout (timeout, stream_poll (self->streams, NULL, 0));
            timeout = s_min_timeout (timeout, s_memcheck_due (self));
            timeout = s_min_timeout (timeout, s_boxcheck_due (self));
            timeout = s_min_timeout (timeout, s_heap_release (self));
            rc = zmq_poll (self->items, n, timeout);
        }
        if (rc < 0 && errno == ETERM)
            break;
        if (rc > 0 && (self->items [0].revents & ZMQ_POLLIN))
            s_read_pipe (self);
        s_reap (self, rc > 0? n - (int) self->n_py_items: 0);
        stream_poll (self->streams, self->items + self->stream_at,
                     rc > 0? self->n_stream_items: 0);
        s_reap_streams (self);
        s_reap_py (self, rc > 0? n: 0);
        s_fire_deadlines (self);
        s_check_memory (self);
        s_check_box (self);
        s_schedule (self);
    }
    s_flush (self);
    return zmq_send (self->pipe, GOV_DONE, strlen (GOV_DONE), 0) < 0? -1: 0;
}

//  --------------------------------------------------------------------------

compute_t *
compute_new (const compute_args_t *args)
{
    compute_t *self = (compute_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->governor_id = args->governor_id;
    self->cpus = args->cpus;
    self->n_res = args->n_resources;
    self->res = args->resources;
    char gpus_err [128];
    if (args->gpus && !(self->gpus = gpus_new (args->gpus, gpus_err, sizeof gpus_err))) {
        free (self);
        return NULL;
    }
    self->inline_max = args->inline_max;
    if (args->broker_key) {
        self->has_broker_key = true;
        memcpy (self->broker_key, args->broker_key, sizeof self->broker_key);
    }
    self->workdir = strdup (args->workdir);
    self->memory_limit = args->memory_limit;
    self->data_endpoint = strdup (args->data_endpoint? args->data_endpoint: "");
    self->store = store_new ();
    self->tasks = sq_idmap_new ();
    self->waiters = sq_idmap_new ();
    self->orders = sq_idmap_new ();
    self->deadlines = deadlines_new ();
    self->sandbox = sandbox_new (args->task_uid_first, args->task_uid_count);
    self->pyexec = self->sandbox? pyexec_new (self->cpus, self->workdir, self->sandbox): NULL;
    if (self->workdir) {
        char log_dir [4096];
        snprintf (log_dir, sizeof log_dir, "%s/logs", self->workdir);
        self->tasklog = tasklog_new (log_dir, args->log_limit);
    }
    self->cap_items = 16;
    self->items = (zmq_pollitem_t *) calloc (self->cap_items, sizeof (zmq_pollitem_t));
    self->item_tasks = (task_t **) calloc (self->cap_items, sizeof (task_t *));
    sq_wbuf_init (&self->events);
    //  Spill files live in the workdir, which goes when the governor exits.
    char spill_dir [4096];
    snprintf (spill_dir, sizeof spill_dir, "%s", self->workdir? self->workdir: "");
    if (self->store && self->workdir
    &&  store_configure (self->store, self->memory_limit, spill_dir) == 0) {
        if (args->box_memory && (self->box = cgroup_usage_new (""))) {
            store_set_box (self->store, args->box_memory, s_beside_store, s_relieve_box, self);
            sq_debug ("store: spills above %d percent of the cgroup's %" PRIu64 " bytes, "
                      "whatever runs beside it", STORE_BOX_HIGH, args->box_memory);
        }
        transfer_args_t targs = {
            .pipe = args->pipe, .store = self->store, .governor_id = self->governor_id,
            .data_endpoint = self->data_endpoint, .done = s_copy_done, .arg = self
        };
        self->transfer = transfer_new (&targs);
    }
    stream_args_t sargs = {
        .pipe = args->pipe, .governor_id = self->governor_id,
        .data_endpoint = self->data_endpoint, .done = s_stream_done,
        .progress = s_stream_progress, .arg = self
    };
    self->streams = stream_new (&sargs);
    if (!self->workdir || !self->data_endpoint || !self->transfer || !self->streams || !self->store || !self->tasks || !self->waiters || !self->orders
    ||  !self->deadlines || !self->pyexec || !self->items || !self->item_tasks) {
        compute_destroy (&self);
        return NULL;
    }
    //  Taken over only on success, so that a failed start can still talk.
    self->pipe = args->pipe;
    self->load = args->load;
    return self;
}

static void
s_free_lists (sq_idmap_t *map, bool orders)
{
    size_t cursor = 0;
    s_list_t *list;
    while ((list = (s_list_t *) sq_idmap_next (map, &cursor, NULL))) {
        for (size_t i = 0; i < list->n; i++)
            if (orders)
                s_order_free ((s_order_t *) list->items [i]);
            else
                s_unpin ((task_t *) list->items [i]);
        free (list->items);
        free (list);
    }
}

void
compute_destroy (compute_t **self_p)
{
    compute_t *self = *self_p;
    if (!self)
        return;
    gpus_destroy (&self->gpus);
    if (self->tasks) {
        size_t n = sq_idmap_size (self->tasks), cursor = 0, i = 0;
        task_t **all = (task_t **) malloc ((n + 1) * sizeof (task_t *));
        task_t *task;
        while (all && (task = (task_t *) sq_idmap_next (self->tasks, &cursor, NULL)))
            all [i++] = task;
        for (size_t j = 0; j < i; j++)
            s_task_drop (self, all [j]);
        free (all);
    }
    if (self->waiters)
        s_free_lists (self->waiters, false);
    if (self->orders)
        s_free_lists (self->orders, true);
    for (size_t i = 0; i < self->n_payloads; i++)
        zmq_msg_close (&self->payloads [i]);
    free (self->payloads);
    sq_wbuf_release (&self->events);
    sq_idmap_destroy (&self->tasks);
    sq_idmap_destroy (&self->waiters);
    sq_idmap_destroy (&self->orders);
    deadlines_destroy (&self->deadlines);
    transfer_destroy (&self->transfer);
    stream_destroy (&self->streams);
    store_destroy (&self->store);
    cgroup_usage_destroy (&self->box);
    free (self->data_endpoint);
    pyexec_destroy (&self->pyexec);
    tasklog_destroy (&self->tasklog);
    sandbox_destroy (&self->sandbox);
    free (self->execs);
    free (self->items);
    free (self->item_tasks);
    free (self->workdir);
    if (self->pipe)
        zmq_close (self->pipe);
    if (self->load)
        zmq_close (self->load);
    free (self);
    *self_p = NULL;
}
