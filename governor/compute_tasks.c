/*  compute_tasks: the task queue and resources of the compute thread
    (compute_tasks.h). Over 800 lines because it is one thing, a task's
    life from ASSIGN to its report; the kinds of tasks (builtin.c,
    execute.c, pyexec.c) and their streams (stream.c) live elsewhere. */
#include "compute_tasks.h"
#include "compute_batch.h"
#include "grow.h"

//  --------------------------------------------------------------------------
//  Small containers

int
compute_list_push (compute_list_t *list, void *item)
{
    if (list->n == list->cap
    &&  sq_grow ((void **) &list->items, &list->cap, list->n + 1, sizeof *list->items, 4, SIZE_MAX))
        return -1;
    list->items [list->n++] = item;
    return 0;
}

compute_list_t *
compute_list_of (sq_idmap_t *map, uint64_t key)
{
    compute_list_t *list = (compute_list_t *) sq_idmap_lookup (map, key);
    if (!list) {
        list = (compute_list_t *) calloc (1, sizeof *list);
        if (list && sq_idmap_insert (map, key, list)) {
            free (list);
            list = NULL;
        }
    }
    return list;
}

void
compute_order_free (compute_order_t *order)
{
    free (order->endpoint);
    free (order);
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

void
compute_ready_push (compute_t *self, task_t *task)
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
void
compute_wait_inputs (compute_t *self, task_t *task)
{
    task->missing = 0;
    for (uint32_t i = 0; i < task->n_inputs; i++) {
        uint64_t key = task->inputs [i];
        if (store_has (self->store, key) || (int32_t) i == task->stream_in)
            continue;
        compute_list_t *list = compute_list_of (self->waiters, key);
        //  Registrations of one task are consecutive, so a repeated input
        //  shows as this task at the end of the list.
        if (list && list->n && list->items [list->n - 1] == task)
            continue;
        if (!list || compute_list_push (list, task)) {
            sq_error ("out of memory queueing task %" PRIx64, task->key);
            continue;
        }
        task->pins++;
        task->missing++;
    }
    if (task->missing)
        task->state = TASK_WAITING;
    else
        compute_ready_push (self, task);
}

void
compute_unpin (task_t *task)
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
    compute_event_added (self);
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
    compute_event_added (self);
    //  The event leaves before the executor can use the key: the client
    //  retries a refused handshake for a while (bindings/python/squall/_worker.py).
    compute_flush (self);
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
void
compute_task_drop (compute_t *self, task_t *task)
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

static void
s_recent_end (compute_t *self, task_t *task, uint64_t duration_us)
{
    compute_end_t *end = &self->recent [(self->recent_at + self->n_recent) % S_RECENT_ENDS];
    if (self->n_recent < S_RECENT_ENDS)
        self->n_recent++;
    else
        self->recent_at = (self->recent_at + 1) % S_RECENT_ENDS;
    *end = (compute_end_t) { task->key, task->attempt, duration_us };
}

//  Reports the outcome of a running task, stores its outputs, frees it.
static void
s_complete (compute_t *self, task_t *task, int rc, const char *message)
{
    uint64_t duration = compute_duration_us (task);
    sq_idmap_remove (self->tasks, task->key);
    s_unrun (self, task);
    self->tasks_completed++;
    if (rc && task->has_exit_code && task->fail_reason == SQ_FAIL_TASK) {
        sq_debug ("task %" PRIx64 "/%u failed: %s", task->key, task->attempt, message);
        sq_pack_failed_exit (&self->events.pk, task->key, task->attempt, message, duration,
                             task->exit_code);
        compute_event_added (self);
        task_destroy (&task);
        return;
    }
    if (rc) {
        compute_failed_reason (self, task->key, task->attempt, message, duration, task->fail_reason);
        task_destroy (&task);
        return;
    }
    if (self->n_payloads + task->n_outputs > S_BATCH_FRAMES)
        compute_flush (self);
    sq_output_ref_t refs_small [16];
    sq_output_ref_t *refs = task->n_outputs <= 16? refs_small:
        (sq_output_ref_t *) malloc (task->n_outputs * sizeof *refs);
    if (!refs) {
        compute_failed (self, task->key, task->attempt, "out of memory on the governor", duration);
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
            refs [j].frame = compute_add_payload (self, blob);
    }
    sq_pack_finished (&self->events.pk, task->key, task->attempt, refs,
                      task->n_outputs, duration);
    if (task->n_outputs == 0)
        s_recent_end (self, task, duration);
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
            compute_object_stored (self, key);
        }
        task->results [j] = NULL;
    }
    task_destroy (&task);
    compute_event_added (self);
}

//  A task's stdout_path / stderr_path (its config): opened as the task
//  (its tenant's file-system identity, sandbox.h), truncated, in place of
//  its log descriptors, so that the output goes there instead of being
//  kept; %{CWD} in them is cwd (an execute task's working directory, NULL
//  for others). 0, or -1 with the failure in err (fds unchanged).
static int
s_user_outputs (compute_t *self, task_t *task, const char *cwd, int fds [2], char *err,
                size_t err_size)
{
    const mpr_str_t *paths [2] = { &task->conf.stdout_path, &task->conf.stderr_path };
    if (!paths [0]->len && !paths [1]->len)
        return 0;
    sandbox_id_t id;
    if (sandbox_identity (self->sandbox, task->tenant, &id, err, err_size))
        return -1;
    int opened [2] = { -1, -1 };
    char *path [2] = { NULL, NULL };
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++)
        if (paths [i]->len
        &&  !(path [i] = execute_expand_cwd (paths [i]->ptr, paths [i]->len, cwd? cwd: ""))) {
            snprintf (err, err_size, "out of memory on the governor");
            rc = -1;
        }
    sandbox_fs_enter (&id);
    for (int i = 0; i < 2 && rc == 0; i++) {
        if (!path [i])
            continue;
        if (i == 1 && opened [0] >= 0 && strcmp (path [0], path [1]) == 0)
            opened [1] = dup (opened [0]);      //  one file for both, interleaved
        else
            opened [i] = open (path [i], O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC
                                         | O_NOCTTY, 0644);
        if (opened [i] < 0) {
            snprintf (err, err_size, "cannot open %s '%s': %s",
                      i? "stderr_path": "stdout_path", path [i], strerror (errno));
            rc = -1;
        }
    }
    sandbox_fs_leave (&id);
    for (int i = 0; i < 2; i++) {
        free (path [i]);
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
    compute_event_added (self);
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
        //  Its directory first: %{CWD} in its output paths names it.
        task->exec = execute_new (task, self->workdir, self->sandbox, self->err,
                                  sizeof self->err);
        if (!task->exec
        ||  (logged && s_user_outputs (self, task, execute_cwd (task->exec), log_fds,
                                       self->err, sizeof self->err))
        ||  execute_start (task->exec, task, self->store, logged? log_fds: NULL,
                           logged? stderr_log: NULL, self->err, sizeof self->err)) {
            for (int i = 0; i < 2; i++)
                if (log_fds [i] >= 0)
                    close (log_fds [i]);
            execute_destroy (&task->exec);
            s_complete (self, task, -1, self->err);
            return;
        }
        task->exec_destroy = execute_destroy;
        for (int i = 0; i < 2; i++)
            if (log_fds [i] >= 0)
                close (log_fds [i]);
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
        if (self->n_execs == self->cap_execs
        &&  sq_grow ((void **) &self->execs, &self->cap_execs, self->n_execs + 1,
                     sizeof *self->execs, 16, SIZE_MAX)) {
            self->n_running--;
            s_hold (self, task, -1);
            sq_idmap_remove (self->tasks, task->key);
            compute_failed (self, task->key, task->attempt, "out of memory on the governor", 0);
            task_destroy (&task);
            return;
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
            if (logged && s_user_outputs (self, task, NULL, theirs + n_theirs - 2, self->err,
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
        compute_list_t *list = (compute_list_t *) sq_idmap_lookup (self->waiters, task->inputs [i]);
        for (size_t k = 0; list && k < list->n; k++)
            if (list->items [k] == task) {
                list->items [k--] = list->items [--list->n];
                task->missing--;
                compute_unpin (task);
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
    if (s_user_outputs (self, task, NULL, fds, why, sizeof why)) {
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
            compute_list_t *list = (compute_list_t *) sq_idmap_lookup (self->waiters, tail->outputs [j]);
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
void
compute_schedule (compute_t *self)
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
            compute_wait_inputs (self, task);
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
long
compute_memcheck_due (compute_t *self)
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

void
compute_check_memory (compute_t *self)
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
uint64_t
compute_beside_store (void *arg, uint64_t store_memory)
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
void
compute_relieve_box (void *arg)
{
    (void) arg;
    heap_release ();
}

//  Tasks grow without the store knowing: while any run, the box is looked
//  at every STORE_BOX_CHECK_MS. ms until then, -1 if not due.
long
compute_boxcheck_due (compute_t *self)
{
    if (!self->box || self->n_running == 0)
        return -1;
    uint64_t now = task_now_ns ();
    return now >= self->next_boxcheck_ns? 0
         : (long) ((self->next_boxcheck_ns - now) / 1000000) + 1;
}

void
compute_check_box (compute_t *self)
{
    if (compute_boxcheck_due (self) != 0)
        return;
    self->next_boxcheck_ns = task_now_ns () + STORE_BOX_CHECK_MS * 1000000ull;
    store_check_box (self->store);
}

void
compute_fire_deadlines (compute_t *self)
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

void
compute_child_exited (compute_t *self, task_t *task)
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
void
compute_stream_done (void *arg, uint64_t key, uint32_t attempt, uint64_t bytes, bool deserted)
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

//  stream_local_fn: the broker counts streams on the same-host path (INFO).
void
compute_stream_local (void *arg, uint64_t object)
{
    compute_t *self = (compute_t *) arg;
    sq_pack_streamlocal (&self->events.pk, object);
    compute_event_added (self);
}

void
compute_stream_progress (void *arg, uint64_t object, uint64_t bytes)
{
    compute_t *self = (compute_t *) arg;
    sq_pack_streamed (&self->events.pk, object, bytes);
    compute_event_added (self);
}

static void s_py_replied (compute_t *self, task_t *task, int rc);

//  Writers whose program ended (or py task replied) and whose stream has
//  too.
void
compute_reap_streams (compute_t *self)
{
    task_t *done [64];
    size_t n = 0;
    for (size_t i = 0; i < self->n_execs && n < 64; i++)
        if (self->execs [i]->exited && self->execs [i]->stream_ended)
            done [n++] = self->execs [i];
    for (size_t i = 0; i < n; i++)
        compute_child_exited (self, done [i]);
    for (size_t i = 0; i < self->n_draining; i++) {
        task_t *task = self->draining [i];
        if (!task->stream_ended)
            continue;
        self->draining [i--] = self->draining [--self->n_draining];
        s_py_replied (self, task, 0);
    }
}
//  A py task's reply: with a stream output still draining, it completes
//  once the stream has gone out (compute_reap_streams).
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
void
compute_py_outcomes (compute_t *self)
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
            compute_wait_inputs (self, task);
        }
        else
            s_py_replied (self, task, outcome == PYEXEC_DONE? 0: -1);
    }
}
