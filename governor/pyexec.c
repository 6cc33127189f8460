/*  pyexec: Python executor processes over Unix socketpairs, with the
    length-prefixed framing described in governor/executor.py. */
#include "pyexec.h"
#include "log.h"
#include "pyexec_source.h"      //  s_executor_source: governor/executor.py
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define S_EXEC_FD "3"           //  where the executor finds its socket
#define S_REPLY_MAX (1ull << 40)

typedef struct {
    pid_t pid;                  //  0: not running
    int fd;                     //  our end of the socketpair, -1 if none
    task_t *task;               //  the task it runs, NULL when idle
    //  Actors: the host whose instance lives here (the executor serves
    //  nothing else while it does), a call that came while the instance
    //  was still being made (its frame ready to send), and replies still
    //  to come for calls that were stopped (read and dropped, in order).
    task_t *host;
    task_t *pending;
    uint8_t *pending_frame;
    size_t pending_size;
    uint32_t discard;
} s_exec_t;

//  Tasks that ended without a reply of their own (an actor's executor
//  died, or its host was stopped): the compute thread fails them.
typedef struct {
    task_t *task;
    char *message;
} s_orphan_t;

struct _pyexec_t {
    s_exec_t *execs;
    size_t n_execs;
    uint32_t cpus;
    char *python;
    char *script;
    s_orphan_t *orphans;
    size_t n_orphans;
    size_t cap_orphans;
};

static s_exec_t *s_idle_slot (pyexec_t *self);

//  --------------------------------------------------------------------------
//  Little-endian fields, so the Python side reads them with struct "<"

static uint8_t *
s_put32 (uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        *p++ = (uint8_t) (v >> (8 * i));
    return p;
}

static uint8_t *
s_put64 (uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        *p++ = (uint8_t) (v >> (8 * i));
    return p;
}

static uint64_t
s_get (const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = (v << 8) | p [i];
    return v;
}

//  The first byte of a task goes with the executor's ends of its stream
//  pipes (SCM_RIGHTS), the rest as usual.
static int
s_write_all (int fd, const uint8_t *data, size_t size);

static int
s_write_with_fds (int fd, const uint8_t *data, size_t size, const int *fds, size_t n_fds)
{
    if (n_fds == 0)
        return s_write_all (fd, data, size);
    char control [CMSG_SPACE (2 * sizeof (int))];
    memset (control, 0, sizeof control);
    struct iovec iov = { (void *) data, 1 };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                          .msg_controllen = CMSG_SPACE (n_fds * sizeof (int)) };
    struct cmsghdr *cmsg = CMSG_FIRSTHDR (&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN (n_fds * sizeof (int));
    memcpy (CMSG_DATA (cmsg), fds, n_fds * sizeof (int));
    ssize_t n;
    while ((n = sendmsg (fd, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (n != 1)
        return -1;
    return s_write_all (fd, data + 1, size - 1);
}

static int
s_write_all (int fd, const uint8_t *data, size_t size)
{
    while (size) {
        ssize_t n = write (fd, data, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        data += n;
        size -= (size_t) n;
    }
    return 0;
}

//  0, or -1 on end of file or error (errno 0 at end of file).
static int
s_read_all (int fd, uint8_t *data, size_t size)
{
    while (size) {
        ssize_t n = read (fd, data, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0)
            errno = 0;
        if (n <= 0)
            return -1;
        data += n;
        size -= (size_t) n;
    }
    return 0;
}

//  --------------------------------------------------------------------------
//  Processes

static int
s_spawn (pyexec_t *self, s_exec_t *ex, char *err, size_t err_size)
{
    int sv [2];
    if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
        snprintf (err, err_size, "cannot start a Python executor: socketpair: %s",
                  strerror (errno));
        return -1;
    }
    //  The child gets its end as fd 3 (dup2 clears close-on-exec), no stdin,
    //  and stderr as stdout so that print() in tasks lands in our log. The
    //  governor blocks SIGINT/SIGTERM in every thread; the child must not
    //  inherit that mask.
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init (&actions);
    posix_spawn_file_actions_adddup2 (&actions, sv [1], atoi (S_EXEC_FD));
    posix_spawn_file_actions_addopen (&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2 (&actions, 2, 1);
    posix_spawnattr_init (&attr);
    sigset_t none;
    sigemptyset (&none);
    posix_spawnattr_setsigmask (&attr, &none);
    posix_spawnattr_setflags (&attr, POSIX_SPAWN_SETSIGMASK);
    //  Our pid lets the executor tell whether we died before it asked for
    //  a death signal (executor.py, _die_with_governor).
    char governor_pid [24];
    snprintf (governor_pid, sizeof governor_pid, "%d", (int) getpid ());
    char *argv [] = { self->python, self->script, (char *) S_EXEC_FD, governor_pid, NULL };
    pid_t pid;
    int rc = posix_spawnp (&pid, self->python, &actions, &attr, argv, environ);
    posix_spawn_file_actions_destroy (&actions);
    posix_spawnattr_destroy (&attr);
    close (sv [1]);
    if (rc) {
        close (sv [0]);
        snprintf (err, err_size, "cannot start the Python executor '%s': %s "
                  "(set the interpreter with --python or $SQUALL_PYTHON)",
                  self->python, strerror (rc));
        return -1;
    }
    ex->pid = pid;
    ex->fd = sv [0];
    ex->task = NULL;
    sq_debug ("started Python executor %d (%s)", (int) pid, self->python);
    return 0;
}

//  Stops an executor: waits a little for one that is already exiting (so
//  its own status is reported), else kills it. Returns the wait status.
static int
s_stop (s_exec_t *ex, bool grace)
{
    int status = 0;
    if (ex->fd >= 0)
        close (ex->fd);
    ex->fd = -1;
    ex->task = NULL;
    ex->host = NULL;
    ex->pending = NULL;
    free (ex->pending_frame);
    ex->pending_frame = NULL;
    ex->discard = 0;
    if (ex->pid <= 0)
        return 0;
    pid_t got = 0;
    for (int i = 0; grace && i < 50 && got == 0; i++) {
        got = waitpid (ex->pid, &status, WNOHANG);
        if (got == 0)
            nanosleep (&(struct timespec) { 0, 2000000 }, NULL);
    }
    if (got == 0) {
        kill (ex->pid, SIGKILL);
        while (waitpid (ex->pid, &status, 0) < 0 && errno == EINTR)
            ;
    }
    ex->pid = 0;
    return status;
}

//  --------------------------------------------------------------------------

pyexec_t *
pyexec_new (uint32_t cpus, const char *workdir)
{
    pyexec_t *self = (pyexec_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->cpus = cpus? cpus: 1;
    const char *python = getenv ("SQUALL_PYTHON");
    self->python = strdup (python && *python? python: "python3");
    if (asprintf (&self->script, "%s/squall-executor.py", workdir) < 0)
        self->script = NULL;
    FILE *file = self->python && self->script? fopen (self->script, "w"): NULL;
    bool written = file
        && fwrite (s_executor_source, 1, strlen (s_executor_source), file)
           == strlen (s_executor_source);
    if (file && fclose (file))
        written = false;
    if (!written) {
        sq_error ("cannot write the Python executor script: %s", strerror (errno));
        pyexec_destroy (&self);
    }
    //  --python-prestart: the executors start now, with the governor, so
    //  that the first tasks do not wait for an interpreter (and the imports
    //  of --python-preload). They wait for tasks like any idle executor.
    const char *prestart = getenv ("SQUALL_PYTHON_PRESTART");
    if (self && prestart && *prestart && strcmp (prestart, "0") != 0) {
        char err [256];
        for (uint32_t i = 0; i < self->cpus; i++) {
            s_exec_t *ex = s_idle_slot (self);
            if (!ex || s_spawn (self, ex, err, sizeof err)) {
                sq_warn ("cannot start Python executors in advance: %s",
                         ex? err: "out of memory");
                break;
            }
        }
    }
    return self;
}

void
pyexec_destroy (pyexec_t **self_p)
{
    pyexec_t *self = *self_p;
    if (!self)
        return;
    for (size_t i = 0; i < self->n_execs; i++)
        s_stop (&self->execs [i], false);
    for (size_t i = 0; i < self->n_orphans; i++)
        free (self->orphans [i].message);
    free (self->orphans);
    free (self->execs);
    free (self->python);
    free (self->script);
    free (self);
    *self_p = NULL;
}

//  The task as one frame: see governor/executor.py. NULL if out of memory.
static uint8_t *
s_encode (task_t *task, store_t *store, size_t *size_p)
{
    //  With fn_in the function is input 0 (one object per function and
    //  session, which each governor receives once): the executor gets it
    //  in the fn field as before, and the other inputs as its inputs.
    sq_blob_t *fn_blob = NULL;
    uint32_t first = 0;
    //  A call's fn field is the method's name.
    const char *fn_ptr = task->conf.call? task->conf.method.ptr: task->conf.fn.ptr;
    size_t fn_len = task->conf.call? task->conf.method.len: task->conf.fn.len;
    if (task->conf.fn_in) {
        const char *type = NULL;
        if (task->n_inputs == 0 || !(fn_blob = store_get (store, task->inputs [0], &type)))
            return NULL;
        fn_len = sq_blob_size (fn_blob);
        first = 1;
    }
    if (fn_len > UINT32_MAX)
        return NULL;
    //  Op 4: a task with a stream (its two indexes follow the header).
    bool streams = task->stream_in >= 0 || task->stream_out >= 0;
    size_t size = 8 + 17 + (streams? 8: 0) + fn_len + task->conf.py_args.len;
    for (uint32_t i = first; i < task->n_inputs; i++) {
        if ((int32_t) i == task->stream_in) {
            size += 12;         //  no type, no bytes: a pipe
            continue;
        }
        const char *type = NULL;
        sq_blob_t *blob = store_get (store, task->inputs [i], &type);
        if (!blob)
            return NULL;
        size += 12 + strlen (type) + sq_blob_size (blob);
    }
    for (uint32_t j = 0; j < task->n_outputs; j++)
        size += 4 + strlen (task->out_types [j]);
    uint8_t *frame = (uint8_t *) malloc (size);
    if (!frame)
        return NULL;
    uint8_t *p = s_put64 (frame, size - 8);
    *p++ = task->conf.call? 3: task->conf.actor? 2: streams? 4: 1;
    p = s_put32 (p, task->n_inputs - first);
    p = s_put32 (p, task->n_outputs);
    p = s_put32 (p, (uint32_t) fn_len);
    p = s_put32 (p, task->conf.py_args.len);
    if (streams) {
        p = s_put32 (p, task->stream_in >= 0? (uint32_t) task->stream_in - first: UINT32_MAX);
        p = s_put32 (p, task->stream_out >= 0? (uint32_t) task->stream_out: UINT32_MAX);
    }
    if (fn_blob)
        sq_blob_read (fn_blob, 0, p, fn_len);
    else
    if (fn_len)
        memcpy (p, fn_ptr, fn_len);
    p += fn_len;
    if (task->conf.py_args.len)
        memcpy (p, task->conf.py_args.ptr, task->conf.py_args.len);
    p += task->conf.py_args.len;
    for (uint32_t i = first; i < task->n_inputs; i++) {
        if ((int32_t) i == task->stream_in) {
            p = s_put32 (p, 0);
            p = s_put64 (p, 0);
            continue;
        }
        const char *type = NULL;
        sq_blob_t *blob = store_get (store, task->inputs [i], &type);
        size_t type_len = strlen (type), data_len = sq_blob_size (blob);
        p = s_put32 (p, (uint32_t) type_len);
        p = s_put64 (p, data_len);
        memcpy (p, type, type_len);
        p += type_len;
        sq_blob_read (blob, 0, p, data_len);
        p += data_len;
    }
    for (uint32_t j = 0; j < task->n_outputs; j++) {
        size_t type_len = strlen (task->out_types [j]);
        p = s_put32 (p, (uint32_t) type_len);
        memcpy (p, task->out_types [j], type_len);
        p += type_len;
    }
    *size_p = size;
    return frame;
}

static s_exec_t *s_new_slot (pyexec_t *self);

//  A slot with no process (free, else new); NULL if out of memory.
static s_exec_t *
s_idle_slot (pyexec_t *self)
{
    for (size_t i = 0; i < self->n_execs; i++)
        if (!self->execs [i].pid)
            return &self->execs [i];
    return s_new_slot (self);
}

//  An idle running executor, else a free slot, else a new slot; NULL if
//  out of memory.
static s_exec_t *
s_idle (pyexec_t *self)
{
    s_exec_t *free_slot = NULL;
    for (size_t i = 0; i < self->n_execs; i++) {
        s_exec_t *ex = &self->execs [i];
        if (ex->pid && !ex->task && !ex->host)
            return ex;
        if (!ex->pid && !free_slot)
            free_slot = ex;
    }
    if (free_slot)
        return free_slot;
    return s_new_slot (self);
}

static s_exec_t *
s_new_slot (pyexec_t *self)
{
    s_exec_t *execs = (s_exec_t *) realloc (self->execs, (self->n_execs + 1) * sizeof *execs);
    if (!execs)
        return NULL;
    self->execs = execs;
    s_exec_t *ex = &self->execs [self->n_execs++];
    *ex = (s_exec_t) { .pid = 0, .fd = -1 };
    return ex;
}

static s_exec_t *
s_actor_exec (pyexec_t *self, uint64_t host_key)
{
    for (size_t i = 0; i < self->n_execs; i++)
        if (self->execs [i].host && self->execs [i].host->key == host_key)
            return &self->execs [i];
    return NULL;
}

//  A call goes to its actor's executor, after the instance is made.
static int
s_start_call (pyexec_t *self, task_t *task, uint8_t *frame, size_t size,
              char *err, size_t err_size)
{
    uint64_t host_key = sq_key (sq_key_session (task->key), task->conf.call);
    s_exec_t *ex = s_actor_exec (self, host_key);
    if (!ex || ex->pending || (ex->task && ex->task != ex->host)) {
        snprintf (err, err_size, ex? "actor %u is busy with another call (a broker fault)"
                                   : "actor %u is not running on this governor", task->conf.call);
        free (frame);
        return -1;
    }
    if (ex->task) {             //  still being made
        ex->pending = task;
        ex->pending_frame = frame;
        ex->pending_size = size;
        return 0;
    }
    //  A write that fails means the executor died: its end of file fails
    //  the actor and this call (pyexec_reply).
    if (s_write_all (ex->fd, frame, size) == 0)
        ex->task = task;
    else {
        ex->pending = task;
        ex->pending_frame = NULL;
    }
    free (frame);
    return 0;
}

int
pyexec_start (pyexec_t *self, task_t *task, store_t *store, const int *fds, size_t n_fds,
              char *err, size_t err_size)
{
    size_t size = 0;
    uint8_t *frame = s_encode (task, store, &size);
    if (!frame) {
        snprintf (err, err_size, "out of memory on the governor (or an input is missing)");
        return -1;
    }
    if (task->conf.call)
        return s_start_call (self, task, frame, size, err, err_size);
    //  An idle executor may have died since its last task: the write then
    //  fails and the task goes to a fresh one.
    int rc = -1;
    for (int attempt = 0; attempt < 2 && rc; attempt++) {
        s_exec_t *ex = s_idle (self);
        if (!ex) {
            snprintf (err, err_size, "out of memory on the governor");
            break;
        }
        if (!ex->pid && s_spawn (self, ex, err, err_size))
            break;
        if (s_write_with_fds (ex->fd, frame, size, fds, n_fds) == 0) {
            ex->task = task;
            if (task->conf.actor)
                ex->host = task;
            rc = 0;
        }
        else {
            snprintf (err, err_size, "cannot send the task to the Python executor: %s",
                      strerror (errno));
            s_stop (ex, true);
        }
    }
    free (frame);
    return rc;
}

size_t
pyexec_busy (pyexec_t *self)
{
    size_t n = 0;
    for (size_t i = 0; i < self->n_execs; i++)
        n += self->execs [i].task != NULL || self->execs [i].discard > 0;
    return n;
}

//  Busy executors, and idle ones holding an actor (its death must be seen).
static bool
s_watched (const s_exec_t *ex)
{
    return ex->fd >= 0 && (ex->task || ex->host || ex->discard);
}

size_t
pyexec_watched (pyexec_t *self)
{
    size_t n = 0;
    for (size_t i = 0; i < self->n_execs; i++)
        n += s_watched (&self->execs [i]);
    return n;
}

size_t
pyexec_items (pyexec_t *self, zmq_pollitem_t *items, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < self->n_execs && n < max; i++)
        if (s_watched (&self->execs [i]))
            items [n++] = (zmq_pollitem_t) { NULL, self->execs [i].fd, ZMQ_POLLIN, 0 };
    return n;
}

static void
s_orphan (pyexec_t *self, task_t *task, const char *message)
{
    if (!task)
        return;
    if (self->n_orphans == self->cap_orphans) {
        size_t cap = self->cap_orphans? self->cap_orphans * 2: 4;
        s_orphan_t *p = (s_orphan_t *) realloc (self->orphans, cap * sizeof *p);
        if (!p) {
            sq_error ("out of memory: task %" PRIx64 " stays running", task->key);
            return;
        }
        self->orphans = p;
        self->cap_orphans = cap;
    }
    self->orphans [self->n_orphans++] = (s_orphan_t) { task, strdup (message) };
}

task_t *
pyexec_orphan (pyexec_t *self, char *err, size_t err_size)
{
    if (self->n_orphans == 0)
        return NULL;
    s_orphan_t orphan = self->orphans [--self->n_orphans];
    snprintf (err, err_size, "%s", orphan.message? orphan.message: "out of memory");
    free (orphan.message);
    return orphan.task;
}

//  An actor's executor is gone (died, or killed with its host): the host
//  and its calls that have no reply of their own end with it.
static void
s_actor_gone (pyexec_t *self, s_exec_t *ex, task_t *primary, const char *why)
{
    //  The broker names the actor in its calls' failures.
    if (ex->host && ex->host != primary)
        s_orphan (self, ex->host, why);
    if (ex->task && ex->task != primary && ex->task != ex->host)
        s_orphan (self, ex->task, why);
    if (ex->pending && ex->pending != primary)
        s_orphan (self, ex->pending, why);
}

static void
s_died (s_exec_t *ex, char *err, size_t err_size)
{
    pid_t pid = ex->pid;
    int status = s_stop (ex, true);
    if (WIFSIGNALED (status))
        snprintf (err, err_size, "the Python executor (pid %d) died while running the "
                  "task: killed by signal %d (%s)", (int) pid, WTERMSIG (status),
                  strsignal (WTERMSIG (status)));
    else
        snprintf (err, err_size, "the Python executor (pid %d) died while running the "
                  "task: exit status %d", (int) pid, WEXITSTATUS (status));
    sq_warn ("%s", err);
}

//  The executor's instance was made: a call that waited goes now.
static void
s_constructed (s_exec_t *ex)
{
    ex->task = NULL;
    if (!ex->pending)
        return;
    task_t *call = ex->pending;
    ex->pending = NULL;
    if (ex->pending_frame && s_write_all (ex->fd, ex->pending_frame, ex->pending_size) == 0)
        ex->task = call;
    else
        ex->pending = call;     //  died: its end of file fails both
    free (ex->pending_frame);
    ex->pending_frame = NULL;
}

task_t *
pyexec_reply (pyexec_t *self, int fd, int *rc, char *err, size_t err_size)
{
    s_exec_t *ex = NULL;
    for (size_t i = 0; i < self->n_execs && !ex; i++)
        if (self->execs [i].fd == fd && s_watched (&self->execs [i]))
            ex = &self->execs [i];
    if (!ex)
        return NULL;
    //  Whose reply this is: a stopped call's (dropped), else the running
    //  task's; with neither, only an actor's death can come.
    task_t *task = ex->discard? NULL: ex->task? ex->task: ex->host;
    *rc = -1;
    uint8_t head [8];
    //  An actor's executor that dies fails its host first, then the call
    //  it ran: the broker then knows the call was lost with the actor.
    if (s_read_all (fd, head, sizeof head)) {
        if (ex->host) {
            task_t *primary = ex->host;
            s_actor_gone (self, ex, primary, "its Python executor died");
            s_died (ex, err, err_size);
            return primary;
        }
        s_died (ex, err, err_size);
        return task;
    }
    uint64_t size = s_get (head, 8);
    uint8_t *body = size >= 1 && size <= S_REPLY_MAX? (uint8_t *) malloc (size): NULL;
    if (!body) {
        snprintf (err, err_size, "Python executor reply of %llu bytes refused (or out of memory)",
                  (unsigned long long) size);
        s_stop (ex, false);
        return task;
    }
    if (s_read_all (fd, body, size)) {
        free (body);
        task_t *primary = ex->host? ex->host: task;
        if (ex->host)
            s_actor_gone (self, ex, primary, "its Python executor died");
        s_died (ex, err, err_size);
        return primary;
    }
    if (ex->discard) {
        ex->discard--;
        free (body);
        return NULL;
    }
    if (!task) {
        //  A reply nobody asked for: the executor is not to be trusted.
        free (body);
        snprintf (err, err_size, "the Python executor of actor %u sent a reply nobody asked for",
                  sq_key_id (ex->host->key));
        task_t *host = ex->host;
        s_actor_gone (self, ex, host, err);
        s_stop (ex, false);
        return host;
    }
    if (task == ex->host) {
        //  The instance is made (it stays), or its constructor failed.
        if (body [0] == 0) {
            free (body);
            s_constructed (ex);
            return NULL;
        }
        size_t len = size - 1 < err_size - 1? size - 1: err_size - 1;
        memcpy (err, body + 1, len);
        err [len] = 0;
        free (body);
        char why [300];
        snprintf (why, sizeof why, "its constructor failed: %.*s",
                  (int) strcspn (err, "\n"), err);
        s_actor_gone (self, ex, task, why);
        s_stop (ex, false);
        return task;
    }
    ex->task = NULL;
    if (body [0] == 1) {
        size_t len = size - 1 < err_size - 1? size - 1: err_size - 1;
        memcpy (err, body + 1, len);
        err [len] = 0;
    }
    else {
        bool ok = body [0] == 0 && size >= 5 && s_get (body + 1, 4) == task->n_outputs;
        uint64_t pos = 5;
        for (uint32_t j = 0; ok && j < task->n_outputs; j++) {
            uint64_t len = pos + 8 <= size? s_get (body + pos, 8): UINT64_MAX;
            ok = len <= size - pos - 8;
            if (ok) {
                task->results [j] = sq_blob_copy (body + pos + 8, len);
                ok = task->results [j] != NULL;
                pos += 8 + len;
            }
        }
        if (ok && pos == size)
            *rc = 0;
        else {
            for (uint32_t j = 0; j < task->n_outputs; j++)
                sq_blob_unref (&task->results [j]);
            snprintf (err, err_size, "malformed reply from the Python executor (or out of memory)");
            s_stop (ex, false);
        }
    }
    free (body);
    return task;
}

void
pyexec_abandon (pyexec_t *self, task_t *task)
{
    for (size_t i = 0; i < self->n_orphans; i++)
        if (self->orphans [i].task == task) {
            free (self->orphans [i].message);
            self->orphans [i--] = self->orphans [--self->n_orphans];
        }
    for (size_t i = 0; i < self->n_execs; i++) {
        s_exec_t *ex = &self->execs [i];
        if (ex->host && ex->host != task && (ex->task == task || ex->pending == task)) {
            //  A call stopped: the actor lives on; its reply, if it was
            //  sent, is dropped when it comes.
            if (ex->pending == task) {
                ex->pending = NULL;
                free (ex->pending_frame);
                ex->pending_frame = NULL;
            }
            else {
                ex->task = NULL;
                ex->discard++;
            }
        }
        else
        if (ex->task == task || ex->host == task) {
            sq_debug ("killing Python executor %d: its task stopped", (int) ex->pid);
            if (ex->host == task)
                s_actor_gone (self, ex, task, "the actor was stopped");
            s_stop (ex, false);
        }
    }
}
