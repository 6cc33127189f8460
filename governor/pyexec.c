/*  pyexec: Python executor processes over Unix socketpairs, with the
    length-prefixed framing described in governor/executor.py.

    Over 800 lines: one executor's protocol (framing, operations, replies,
    pipelined tasks, descriptors passed, shared segments) is one state
    machine over its socketpair; split, its parts would share every field of
    the executor. */
#include "pyexec.h"
#include "grow.h"
#include "files.h"
#include "log.h"
#include "fdpass.h"
#include "pyexec_source.h"      //  s_executor_source: governor/executor.py
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define S_EXEC_FD "3"           //  where the executor finds its socket
#define S_REPLY_MAX (1ull << 40)
//  Pipelining (pyexec_pipe): at most this many small tasks wait in a busy
//  executor behind the one it runs, so that it goes from one to the next
//  without a round trip through the governor (two context switches per
//  task on a loaded machine). Small, because a piped task is out of reach
//  of work stealing; its frame is small, because the socket must take it
//  at once while the executor is busy.
#define S_PIPE_MAX 4
#define S_PIPE_FRAME_MAX (16u << 10)
#define S_SNDBUF (256 << 10)
//  Replies are read into a buffer per executor, all of them that came in
//  one read; a bigger one is read on into a buffer of its own.
#define S_RBUF_SIZE (64u << 10)
//  Executor operations (governor/executor.py); a piped task's op has
//  S_OP_TELL set: the executor says when it starts it (S_REPLY_STARTED,
//  with the time), since only it knows.
#define S_OP_CANCEL 5
#define S_OP_TELL 0x80
//  The run frame's first byte also carries the task's log descriptors
//  (tasklog.c), after its stream pipes: its fds 1 and 2 while it runs.
#define S_OP_LOGS 0x40
//  Descriptors that go with a run frame: its stream pipes, its logs.
#define S_FDS_MAX 4
#define S_REPLY_STARTED 3
//  The executor's first message: u8 4, u64 its resident bytes once it is
//  ready for tasks (what memory limits count from on a new executor).
#define S_REPLY_READY 4
//  Failure messages are kept up to the compute thread's size.
#define S_MESSAGE_MAX 8192
#define S_REPLY_NOT_RUN 2
//  Nested tasks: the task waits on tasks it submitted (squall.secede, u8 6)
//  or goes on (rejoin, u8 7). Neither is a reply.
#define S_REPLY_SECEDED 6
#define S_REPLY_REJOINED 7
//  A task that seceded has ended: before the executor starts another, it
//  asks (u8 11, not a reply) and waits for the answer (u8 7), written
//  once all it said before is read here, so after the cancels of the tasks
//  piped behind the one that seceded; else it could start one of those
//  while it is handed back, and it would run twice.
#define S_REPLY_SYNC 11
#define S_OP_SYNCED 7
//  squall.get_client() inside a task asks for its credential (u8 8); the
//  answer is a frame u8 6 and its text (pyexec_credential).
#define S_REPLY_CREDENTIAL 8
#define S_OP_CREDENTIAL 6
#define S_KEPT_INPUT UINT32_MAX
#define S_PICKLE "py/pickle"
//  Shared segments (docs/architecture.md, "Shared objects"): an input of
//  at least S_SHARE_MIN bytes goes to the executor as the descriptor of a
//  memory file it maps read-only (SCM_RIGHTS with the frame's first byte,
//  after its stream pipes and log descriptors), not as bytes in the frame; at most S_SEGS_MAX
//  per frame (the rest are copied). A frame with any has S_OP_SEGMENTS
//  set in its op and a u32 count after its head; such an input's type
//  length has S_SEG_INPUT set and is followed by the value's size, its
//  type and the segment's id. Smaller ones cost less copied than a memory
//  file's creation, sealing and mapping (docs/architecture.md).
#define S_SHARE_MIN (1u << 20)
#define S_SEGS_MAX 64
_Static_assert (S_FDS_MAX + S_SEGS_MAX <= SQ_FDPASS_MAX, "a frame's descriptors fit one message");
#define S_OP_SEGMENTS 0x20
#define S_SEG_INPUT 0x80000000u
//  A reply's output whose size has S_SEG_OUTPUT set is not in the reply:
//  it is the next memory file the executor passed (SCM_RIGHTS), which the
//  governor seals and keeps. At most S_FDQ_MAX wait to be taken.
#define S_SEG_OUTPUT (1ull << 63)
#define S_FDQ_MAX 256
//  The executor no longer maps segments: u8 9, u32 n, then per segment
//  u64 id, u32 how many times it was handed over (see s_seg_released).
#define S_REPLY_RELEASED 9
//  RUN (a client's run, GRUN): a frame u8 0x10 and the pickled call goes to
//  every live executor of the tenant; it reads it when idle, or between
//  tasks when busy (with its frames in order: after the task, piped tasks
//  and calls written before), runs it and answers u8 10, u8 ok, then the
//  pickled result (or exception): not a task's reply. A frame to an
//  executor that is busy (or not ready yet) is at most S_PIPE_FRAME_MAX
//  bytes, so that the socket takes it at once.
//  The answers stay here (RAN says only how many and how large) until the
//  client reads them to their end (RUNREAD, pyexec_ran_read), or for
//  S_RAN_KEEP_NS (dropped at the next run or read after that), or until
//  the room is needed. Runs answering and runs kept together: at most
//  S_RUNS_MAX, and SQ_RUN_RESULTS_MAX bytes of answers (kept runs, oldest
//  first, make room for new answers; an answer that still does not fit is
//  replaced by an error saying so). Errors are at most S_RAN_ROOM bytes and
//  need no room: they may pass the bound by S_RUNS_MAX * SQ_RUN_EXECS_MAX *
//  S_RAN_ROOM at most (768 KiB).
#define S_OP_RUN 0x10
#define S_REPLY_RAN 10
#define S_RUNS_MAX 16
#define S_RAN_ROOM 192u
#define S_RAN_ENTRY 16u             //  an answer's msgpack array, pid, ok, bin header
#define S_RAN_HEAD 5u               //  the answers' array header (array32, patched)
#define S_RAN_KEEP_NS (60ull * 1000000000ull)
#define S_RUN_STOPPED "the executor stopped before it answered"

//  Input cache (docs/architecture.md, "Input cache"): a task that does not
//  change its inputs (conf.share_inputs: a Dask node) may be handed values
//  its executor kept, unpickled, from earlier tasks, so that a block read
//  by many tasks is copied here and unpickled there once. The governor
//  decides what an executor keeps and knows it exactly: it offers a
//  py/pickle input of S_CACHE_MIN bytes up to S_SHARE_MIN (bigger ones
//  are segments, mapped, not copied) under a token (its type_len has
//  S_CACHE_OFFER set, a u64 token after its bytes); a later task's input
//  that is that same object (key and store generation) goes as
//  S_CACHED_INPUT and the token, nothing else. Tokens to forget (the
//  object left the store, or was pushed out by newer ones: at most
//  S_CACHE_ENTRIES and S_CACHE_BYTES of pickles per executor, least
//  recently used out first) ride at the end of the next run frame, after
//  its outputs (u32 n, n u64 tokens; n S_FORGET_ALL: every one), applied
//  once its references are resolved and before its offers are kept; an
//  idle executor is told at once (op S_OP_FORGET, the same list). The
//  bound is part of the executor's STORE_EXEC_RESERVE, and what its cache
//  grew by during a task is not counted as the task's memory.
#define S_CACHE_MIN (4u << 10)
#define S_CACHE_BYTES (32ull << 20)
#define S_CACHE_ENTRIES 256u
#define S_CACHE_OFFER 0x40000000u
#define S_CACHED_INPUT 0xFFFFFFFEu
#define S_FORGET_ALL UINT32_MAX
#define S_OP_FORGET 0x14

typedef struct {
    uint64_t key;
    uint64_t gen;               //  store_generation of the object kept
    uint64_t token;
    uint64_t size;              //  its pickle's
    uint64_t used;              //  when a frame last named it (pyexec tick)
} s_cached_t;

//  A frame's use of its executor's cache, per input (n_inputs each; 0:
//  none): a token the executor holds it under, or one it is to keep it
//  under; and the tokens to forget that ride with it.
typedef struct {
    uint64_t *ref;
    uint64_t *offer;
    uint32_t n_drops;           //  S_FORGET_ALL: every one
    const uint64_t *drops;
} s_plan_t;

typedef struct {
    uint64_t id;
    uint32_t waiting;           //  executors that did not answer yet
    uint32_t n;                 //  answers in results
    bool done;                  //  every executor answered: kept for RUNREAD
    uint64_t done_ns;           //  when
    sq_wbuf_t results;          //  a msgpack array of the answers (RAN_RESULT)
} s_run_t;

typedef struct {
    task_t *task;               //  NULL: stopped; its reply is dropped
    uint32_t seq;               //  its run frame's number
} s_piped_t;

//  An actor's calls queued behind the one its executor runs: the broker
//  sends several at once (broker/graph_actor.c, S_WINDOW, fewer than
//  S_CALLS_MAX), so that a call costs no round trip through it. Small ones
//  are written to the executor ahead (at most S_CALLS_AHEAD, of
//  S_CALLS_AHEAD_BYTES together: a socketpair holds more, so such a write
//  never waits for the executor); the others wait here with their frames
//  until it is idle. A call's inputs of S_SHARE_MIN bytes or more go as
//  segments, as a task's do (the call holds their references until it is
//  written); such a call is written only to an idle executor, so that one
//  cancelled never leaves segments handed over that it will not map.
//  Calls written ahead go in one write (s_calls_write): the ones the
//  broker's ASSIGN brought, and those a read of several replies makes
//  room for, once that read or turn is over (`calls_due`, pyexec_items).
//  The executor answers them several in one write too (executor.py,
//  _REPLIES_HELD, half of S_CALLS_AHEAD: it keeps running while we
//  write the next ones).
#define S_CALLS_MAX 64
#define S_CALLS_AHEAD 32
#define S_CALLS_AHEAD_BYTES (64 * 1024)

typedef struct {
    task_t *task;               //  NULL: stopped; a written one's reply is dropped
    uint8_t *frame;             //  NULL once written
    size_t size;
    uint32_t seq;               //  its run frame's number, once written
    sq_blob_t **segs;           //  per input (n_inputs), its segment or NULL; NULL: none
    uint32_t n_inputs;
    uint32_t n_segs;            //  segments in segs
} s_call_t;

//  A segment handed to an executor, which may map it for as long as it
//  likes: the reference keeps the memory file (and the accounting of it)
//  here until the executor says it let go, or dies. `handed` counts the
//  descriptors sent and not yet let go.
typedef struct {
    uint64_t id;
    sq_blob_t *blob;
    uint32_t handed;
} s_seg_t;

//  What a queued call holds (its frame, its segments' references) goes.
static void
s_call_free (s_call_t *call)
{
    free (call->frame);
    call->frame = NULL;
    for (uint32_t i = 0; call->segs && i < call->n_inputs; i++)
        sq_blob_unref (&call->segs [i]);
    free (call->segs);
    call->segs = NULL;
    call->n_segs = 0;
}

typedef struct {
    pid_t pid;                  //  0: not running
    int fd;                     //  our end of the socketpair, -1 if none
    //  Whose tasks it runs (one tenant's only, for its life), as which
    //  identity, in which directory of its own (NULL: the governor's
    //  working directory, when tasks keep the governor's identity).
    char *tenant;
    sandbox_id_t id;
    char *dir;
    //  The devices in its CUDA_VISIBLE_DEVICES (governor --gpus), NULL or
    //  "": the governor's. CUDA reads it once, at init, so an executor only
    //  runs tasks that hold the same devices.
    char *gpus;
    //  Started in advance and no task yet: with the governor's identity,
    //  the first tenant to come takes it.
    bool fresh;
    //  Its tenant restarted (pyexec_refresh): it runs nothing new, and
    //  goes once idle.
    bool retired;
    task_t *task;               //  the task it runs, NULL when idle
    //  Actors: the host whose instance lives here (the executor serves
    //  nothing else while it does; `task` is the call whose reply comes
    //  next), the calls behind it (the first `n_written` of them written
    //  to the executor, replied to in this order), and replies still to
    //  come before `task`'s for calls that were stopped (read and dropped).
    task_t *host;
    s_call_t calls [S_CALLS_MAX];
    uint32_t n_calls;
    uint32_t n_written;
    bool calls_due;             //  calls may be written: at the turn's end
    uint32_t discard;
    //  Tasks written behind `task`, replied to in this order; run frames
    //  written so far (the executor numbers them the same way: a cancel
    //  names one); replies read but not yet whole.
    s_piped_t piped [S_PIPE_MAX];
    uint32_t n_piped;
    bool unstarted;             //  `task` was piped and has not said it started
    bool seceded;               //  `task` waits on tasks it submitted: nothing
                                //  is piped behind it (its children could be)
    uint64_t replied_ns;        //  when the reply of the task before it was read
    //  Memory limits: whether it said READY, and its resident bytes when
    //  `task` was given to it (what the task's `memory` counts from).
    bool ready;
    uint64_t task_rss;
    uint32_t seq;
    uint8_t *rbuf;
    size_t rlen;
    //  Segments it may map (see s_seg_t), and memory files it sent with
    //  its replies, not yet taken by them (in the order they came).
    s_seg_t *segs;
    size_t n_segs;
    size_t cap_segs;
    int fdq [S_FDQ_MAX];
    size_t n_fdq;
    //  Runs written to it and not answered, in order (its answers come so).
    uint64_t runs [S_RUNS_MAX];
    uint32_t n_runs;
    //  Its input cache (S_CACHE_ENTRIES at most, allocated with the first
    //  offer), the pickles' bytes in it, those when `task` was given to it
    //  (its memory check does not count the growth), and the tokens it is
    //  to forget with its next frame (drop_all: every one).
    s_cached_t *cache;
    uint32_t n_cache;
    uint64_t cache_bytes;
    uint64_t task_cache;
    uint64_t drops [S_CACHE_ENTRIES];
    uint32_t n_drops;
    bool drop_all;
} s_exec_t;

//  What became of tasks, for the compute thread, in the order it happened.
typedef struct {
    task_t *task;
    pyexec_outcome_t outcome;
    char *message;              //  PYEXEC_FAILED: why (NULL: out of memory)
} s_outcome_t;

struct _pyexec_t {
    s_exec_t *execs;
    size_t n_execs;
    uint32_t cpus;
    char *python;
    char *script;
    char *workdir;
    sandbox_t *sandbox;         //  borrowed
    uint64_t n_dirs;            //  executors' directories made so far
    s_outcome_t *outcomes;      //  a FIFO: [first, n) are pending
    size_t first_outcome;
    size_t n_outcomes;
    size_t cap_outcomes;
    s_run_t runs [S_RUNS_MAX];  //  RUN: those waiting for answers
    size_t n_runs;
    uint64_t tokens;            //  input cache tokens given so far
    uint64_t tick;              //  frames that used a cache
};

static s_exec_t *s_idle_slot (pyexec_t *self);
static void s_run_answer (pyexec_t *self, uint64_t run, pid_t pid, bool ok,
                          const void *data, size_t size);

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
s_write_with_fds (int fd, const uint8_t *data, size_t size, const int *fds, size_t n_fds)
{
    if (n_fds == 0)
        return sq_write_all (fd, data, size);
    //  The descriptors go with the first byte; the rest as any write.
    ssize_t n = sq_fdpass_send (fd, NULL, 0, data, 1, fds, n_fds, 0);
    if (n != 1)
        return -1;
    return sq_write_all (fd, data + 1, size - 1);
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

//  The executor's environment: the governor's, with HOME its own
//  directory when it runs as another user, and the devices it was started
//  for (governor --gpus) first; only one of each name, as sh takes the
//  last and getenv the first. NULL if out of memory; free with
//  s_environ_free.
static char **
s_environ (const s_exec_t *ex)
{
    size_t n = 0;
    while (environ [n])
        n++;
    char **envp = (char **) calloc (n + 4, sizeof (char *));
    if (!envp)
        return NULL;
    size_t at = 0;
    bool ok = true;
    if (ex->gpus) {
        ok = asprintf (&envp [at++], "CUDA_VISIBLE_DEVICES=%s", ex->gpus) >= 0;
        if (ok)
            ok = asprintf (&envp [at++], "SQUALL_GPUS=%s", ex->gpus) >= 0;
    }
    if (ok && ex->dir)
        ok = asprintf (&envp [at++], "HOME=%s", ex->dir) >= 0;
    if (!ok) {
        //  asprintf leaves its pointer undefined on failure.
        for (size_t i = 0; i + 1 < at; i++)
            free (envp [i]);
        free (envp);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (ex->dir && strncmp (environ [i], "HOME=", 5) == 0)
            continue;
        if (ex->gpus && (strncmp (environ [i], "CUDA_VISIBLE_DEVICES=", 21) == 0
                     ||  strncmp (environ [i], "SQUALL_GPUS=", 12) == 0))
            continue;
        envp [at++] = environ [i];
    }
    return envp;
}

static void
s_environ_free (const s_exec_t *ex, char **envp)
{
    size_t owned = (ex->gpus? 2: 0) + (ex->dir? 1: 0);
    for (size_t i = 0; envp && i < owned; i++)
        free (envp [i]);
    free (envp);
}

//  A slot whose process is gone forgets its tenant and devices; its
//  directory goes.
static void
s_release (s_exec_t *ex)
{
    free (ex->tenant);
    ex->tenant = NULL;
    free (ex->gpus);
    ex->gpus = NULL;
    ex->fresh = false;
    ex->seceded = false;
    ex->retired = false;
    if (ex->dir)
        files_rmtree (ex->dir);
    free (ex->dir);
    ex->dir = NULL;
}

static int s_spawn_in (pyexec_t *self, s_exec_t *ex, const char *tenant, const char *gpus,
                       char *err, size_t err_size);

//  --------------------------------------------------------------------------
//  Input cache (see S_CACHE_MIN)

//  The executor is to forget everything it keeps (it handed a task back
//  for an input it did not have: our table is wrong somewhere).
static void
s_cache_clear (s_exec_t *ex)
{
    ex->drop_all = true;
    ex->n_drops = 0;
    ex->n_cache = 0;
    ex->cache_bytes = 0;
}

//  The executor is to forget entry k: gone from our table now, told with
//  its next frame (or at once when idle: s_cache_flush). More tokens than
//  the list holds: it forgets every one.
static void
s_cache_drop (s_exec_t *ex, uint32_t k)
{
    uint64_t token = ex->cache [k].token;
    ex->cache_bytes -= ex->cache [k].size;
    ex->cache [k] = ex->cache [--ex->n_cache];
    if (ex->drop_all)
        return;
    if (ex->n_drops < S_CACHE_ENTRIES) {
        ex->drops [ex->n_drops++] = token;
        return;
    }
    s_cache_clear (ex);
}

//  An idle executor is told at once what to forget, so that it does not
//  hold values of freed objects until its next task. A busy one (or one
//  with frames queued) is told with its next frame, in order with them.
static void
s_cache_flush (s_exec_t *ex)
{
    if ((!ex->n_drops && !ex->drop_all) || ex->fd < 0 || !ex->pid || ex->task
    ||  ex->host || ex->n_piped || ex->discard)
        return;
    uint8_t frame [8 + 5 + 8 * S_CACHE_ENTRIES];
    uint32_t n = ex->drop_all? 0: ex->n_drops;
    uint8_t *p = s_put64 (frame, 5 + 8 * (uint64_t) n);
    *p++ = S_OP_FORGET;
    p = s_put32 (p, ex->drop_all? S_FORGET_ALL: n);
    for (uint32_t i = 0; i < n; i++)
        p = s_put64 (p, ex->drops [i]);
    //  A write that fails means it died: its cache goes with it (s_stop).
    if (sq_write_all (ex->fd, frame, (size_t) (p - frame)) == 0) {
        ex->n_drops = 0;
        ex->drop_all = false;
    }
}

//  How the task's frame to ex uses ex's cache (plan->ref NULL: not at all;
//  it carries ex's pending forgets all the same). segs: inputs that go as
//  segments (never cached). A plan that cannot be made is no plan.
static void
s_cache_plan (pyexec_t *self, s_exec_t *ex, task_t *task, store_t *store, uint32_t first,
              sq_blob_t **segs, s_plan_t *plan)
{
    memset (plan, 0, sizeof *plan);
    //  An actor's executor serves its calls only, whose frames carry no
    //  forgets: what it keeps goes now, with the actor's own frame.
    if (task->conf.actor && ex->n_cache)
        s_cache_clear (ex);
    plan->n_drops = ex->drop_all? S_FORGET_ALL: ex->n_drops;
    plan->drops = ex->drops;
    if (!task->conf.share_inputs || task->conf.call || task->conf.actor || !task->n_inputs)
        return;
    if (!ex->cache && !(ex->cache = (s_cached_t *) calloc (S_CACHE_ENTRIES, sizeof *ex->cache)))
        return;
    if (!(plan->ref = (uint64_t *) calloc (2 * (size_t) task->n_inputs, sizeof (uint64_t))))
        return;
    plan->offer = plan->ref + task->n_inputs;
    uint32_t offers = 0;
    uint64_t offered = 0;
    for (uint32_t i = first; i < task->n_inputs; i++) {
        if ((int32_t) i == task->stream_in || (segs && segs [i]))
            continue;
        uint64_t key = task->inputs [i];
        const char *type = NULL;
        sq_blob_t *blob = store_get (store, key, &type);
        if (!blob || strcmp (type, S_PICKLE))
            continue;
        uint64_t gen = store_generation (store, key);
        uint32_t k = 0;
        while (k < ex->n_cache && (ex->cache [k].key != key || ex->cache [k].gen != gen))
            k++;
        if (k < ex->n_cache) {
            plan->ref [i] = ex->cache [k].token;
            continue;
        }
        size_t size = sq_blob_size (blob);
        bool again = false;         //  offered once is enough
        for (uint32_t j = first; j < i && !again; j++)
            again = task->inputs [j] == key;
        if (again || size < S_CACHE_MIN || size >= S_SHARE_MIN || offers == S_CACHE_ENTRIES
        ||  offered + size > S_CACHE_BYTES)
            continue;
        plan->offer [i] = ++self->tokens;
        offers++;
        offered += size;
    }
}

static void
s_plan_release (s_plan_t *plan)
{
    free (plan->ref);
    plan->ref = plan->offer = NULL;
}

//  The frame made by plan was written to ex: the forgets it carried are
//  told, its offers kept (the least recently used go past the bounds).
static void
s_cache_commit (pyexec_t *self, s_exec_t *ex, task_t *task, store_t *store,
                const s_plan_t *plan)
{
    if (plan->n_drops) {
        ex->n_drops = 0;
        ex->drop_all = false;
    }
    if (!plan->ref)
        return;
    uint64_t tick = ++self->tick;
    for (uint32_t i = 0; i < task->n_inputs; i++) {
        for (uint32_t k = 0; plan->ref [i] && k < ex->n_cache; k++)
            if (ex->cache [k].token == plan->ref [i])
                ex->cache [k].used = tick;
        if (!plan->offer [i])
            continue;
        sq_blob_t *blob = store_get (store, task->inputs [i], NULL);
        uint64_t size = blob? sq_blob_size (blob): 0;
        while (ex->n_cache && (ex->n_cache == S_CACHE_ENTRIES
                               || ex->cache_bytes + size > S_CACHE_BYTES)) {
            uint32_t lru = 0;
            for (uint32_t k = 1; k < ex->n_cache; k++)
                if (ex->cache [k].used < ex->cache [lru].used)
                    lru = k;
            s_cache_drop (ex, lru);
        }
        ex->cache [ex->n_cache++] = (s_cached_t) {
            task->inputs [i], store_generation (store, task->inputs [i]), plan->offer [i],
            size, tick };
        ex->cache_bytes += size;
    }
}

static void
s_cache_reset (s_exec_t *ex)
{
    ex->n_cache = 0;
    ex->cache_bytes = 0;
    ex->task_cache = 0;
    ex->n_drops = 0;
    ex->drop_all = false;
}

void
pyexec_forget (pyexec_t *self, uint64_t key, uint64_t gen)
{
    for (size_t i = 0; self && i < self->n_execs; i++) {
        s_exec_t *ex = &self->execs [i];
        for (uint32_t k = 0; k < ex->n_cache; k++)
            if (ex->cache [k].key == key && ex->cache [k].gen == gen) {
                s_cache_drop (ex, k);
                s_cache_flush (ex);
                break;
            }
    }
}

//  Starts an executor for the tenant's tasks that hold the devices gpus
//  (NULL or "": none) in the free slot ex.
static int
s_spawn (pyexec_t *self, s_exec_t *ex, const char *tenant, const char *gpus, char *err,
         size_t err_size)
{
    int rc = s_spawn_in (self, ex, tenant, gpus, err, err_size);
    if (rc)
        s_release (ex);
    return rc;
}

static int
s_spawn_in (pyexec_t *self, s_exec_t *ex, const char *tenant, const char *gpus, char *err,
            size_t err_size)
{
    ex->tenant = strdup (tenant);
    ex->gpus = gpus && *gpus? strdup (gpus): NULL;
    if (!ex->tenant || (gpus && *gpus && !ex->gpus)) {
        snprintf (err, err_size, "out of memory on the governor");
        return -1;
    }
    if (sandbox_identity (self->sandbox, tenant, &ex->id, err, err_size))
        return -1;
    if (ex->id.switched) {
        //  A directory of its own to work in, the tenant's identity's.
        if (asprintf (&ex->dir, "%s/py-%" PRIu64, self->workdir, self->n_dirs++) < 0) {
            ex->dir = NULL;
            snprintf (err, err_size, "out of memory on the governor");
            return -1;
        }
        files_rmtree (ex->dir);
        if (sandbox_mkdir (&ex->id, ex->dir)) {
            snprintf (err, err_size, "cannot start a Python executor: cannot create '%s': %s",
                      ex->dir, strerror (errno));
            return -1;
        }
    }
    int sv [2];
    if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
        snprintf (err, err_size, "cannot start a Python executor: socketpair: %s",
                  strerror (errno));
        return -1;
    }
    //  The child gets its end as fd 3 (dup2 clears close-on-exec), no stdin,
    //  and stderr as stdout so that print() in tasks lands in our log.
    //  Our pid lets the executor tell whether we died before it asked for
    //  a death signal (executor.py, _die_with_governor).
    char governor_pid [24];
    snprintf (governor_pid, sizeof governor_pid, "%d", (int) getpid ());
    char *argv [] = { self->python, self->script, (char *) S_EXEC_FD, governor_pid, NULL };
    sandbox_fd_t fds [] = {
        { atoi (S_EXEC_FD), sv [1], NULL, 0, 0 },
        { 0, -1, "/dev/null", O_RDONLY, 0 },
        { 1, 2, NULL, 0, 0 }
    };
    char **envp = s_environ (ex);
    sandbox_spawn_t how = {
        .id = &ex->id, .argv = argv, .envp = envp, .search_path = true,
        .cwd = ex->dir, .fds = fds, .n_fds = 3, .own_dir = ex->dir, .own_file = self->script
    };
    pid_t pid;
    char why [512];
    int rc = envp? sandbox_spawn (&how, &pid, why, sizeof why): -1;
    s_environ_free (ex, envp);
    close (sv [1]);
    if (rc) {
        close (sv [0]);
        snprintf (err, err_size, "cannot start the Python executor '%s': %s "
                  "(set the interpreter with --python or $SQUALL_PYTHON)",
                  self->python, envp? why: "out of memory");
        return -1;
    }
    //  Room for the frames piped to a busy executor (S_PIPE_MAX of
    //  S_PIPE_FRAME_MAX), whatever the system's default; capped by Linux
    //  at net.core.wmem_max, which is enough too.
    int sndbuf = S_SNDBUF;
    setsockopt (sv [0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    ex->pid = pid;
    ex->fd = sv [0];
    ex->task = NULL;
    sq_debug ("started Python executor %d (%s)", (int) pid, self->python);
    return 0;
}

static void s_push (pyexec_t *self, task_t *task, pyexec_outcome_t outcome,
                    const char *message);

//  Stops an executor: waits a little for one that is already exiting (so
//  its own status is reported), else kills it. Returns the wait status.
//  Tasks piped behind its task never ran: they go back to be run again.
static int
s_stop (pyexec_t *self, s_exec_t *ex, bool grace)
{
    int status = 0;
    if (ex->fd >= 0)
        close (ex->fd);
    ex->fd = -1;
    for (uint32_t i = 0; i < ex->n_runs; i++)
        s_run_answer (self, ex->runs [i], ex->pid, false, S_RUN_STOPPED,
                      strlen (S_RUN_STOPPED));
    ex->n_runs = 0;
    for (uint32_t i = 0; i < ex->n_piped; i++)
        if (ex->piped [i].task)
            s_push (self, ex->piped [i].task, PYEXEC_UNRUN, NULL);
    ex->n_piped = 0;
    ex->unstarted = false;
    ex->ready = false;
    ex->seq = 0;
    ex->rlen = 0;
    //  What it kept and mapped goes with it: our references go.
    s_cache_reset (ex);
    for (size_t i = 0; i < ex->n_segs; i++)
        sq_blob_unref (&ex->segs [i].blob);
    ex->n_segs = 0;
    for (size_t i = 0; i < ex->n_fdq; i++)
        close (ex->fdq [i]);
    ex->n_fdq = 0;
    ex->task = NULL;
    ex->host = NULL;
    for (uint32_t i = 0; i < ex->n_calls; i++)
        s_call_free (&ex->calls [i]);
    ex->n_calls = ex->n_written = 0;
    ex->discard = 0;
    if (ex->pid <= 0) {
        s_release (ex);
        return 0;
    }
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
    s_release (ex);
    return status;
}

//  --------------------------------------------------------------------------

pyexec_t *
pyexec_new (uint32_t cpus, const char *workdir, sandbox_t *sandbox)
{
    pyexec_t *self = (pyexec_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->cpus = cpus? cpus: 1;
    self->sandbox = sandbox;
    const char *python = getenv ("SQUALL_PYTHON");
    self->python = strdup (python && *python? python: "python3");
    self->workdir = strdup (workdir);
    if (asprintf (&self->script, "%s/squall-executor.py", workdir) < 0)
        self->script = NULL;
    //  Read-only, the governor's, in a directory only the governor writes:
    //  a task (running as another user) cannot change what executors of
    //  other tasks run. Made anew: an earlier incarnation's is replaced.
    int fd = -1;
    if (self->python && self->workdir && self->script) {
        unlink (self->script);
        fd = open (self->script, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
    }
    //  0444 whatever our umask: under a umask of 077 (a hardened
    //  service's, Compose's governor-start.sh) executors under task ids
    //  could not read it, and every Python task would fail.
    if (fd >= 0 && fchmod (fd, 0444)) {
        int saved = errno;
        close (fd);
        fd = -1;
        errno = saved;
    }
    size_t length = strlen (s_executor_source);
    bool written = fd >= 0 && sq_write_all (fd, (const uint8_t *) s_executor_source, length) == 0;
    if (fd >= 0 && close (fd))
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
        char err [768];
        for (uint32_t i = 0; i < self->cpus; i++) {
            s_exec_t *ex = s_idle_slot (self);
            //  The tenant of tasks without keys, with no devices; with keys
            //  the first task of a tenant replaces one (an executor serves
            //  one tenant), as does a task with devices.
            if (!ex || s_spawn (self, ex, "", NULL, err, sizeof err)) {
                sq_warn ("cannot start Python executors in advance: %s",
                         ex? err: "out of memory");
                break;
            }
            ex->fresh = true;
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
    for (size_t i = 0; i < self->n_execs; i++) {
        s_stop (self, &self->execs [i], false);
        free (self->execs [i].rbuf);
        free (self->execs [i].segs);
        free (self->execs [i].cache);
    }
    for (size_t i = self->first_outcome; i < self->n_outcomes; i++)
        free (self->outcomes [i].message);
    for (size_t i = 0; i < self->n_runs; i++)
        sq_wbuf_release (&self->runs [i].results);
    free (self->outcomes);
    free (self->execs);
    free (self->python);
    free (self->script);
    free (self->workdir);
    free (self);
    *self_p = NULL;
}

//  The frame's fn field: a call's is the method's name; with fn_in the
//  function is input 0 (one object per function and session, which each
//  governor receives once), given to the executor in the fn field as
//  before, and the other inputs are its inputs (from *first on). -1 if
//  input 0 is missing.
static int
s_fn_field (task_t *task, store_t *store, sq_blob_t **blob, const char **ptr, size_t *len,
            uint32_t *first)
{
    *blob = NULL;
    *first = 0;
    *ptr = task->conf.call? task->conf.method.ptr: task->conf.fn.ptr;
    *len = task->conf.call? task->conf.method.len: task->conf.fn.len;
    if (task->conf.fn_in) {
        const char *type = NULL;
        *blob = task->n_inputs? store_get (store, task->inputs [0], &type): NULL;
        if (!*blob)
            return -1;
        *len = sq_blob_size (*blob);
        *first = 1;
    }
    return *len > UINT32_MAX? -1: 0;
}

//  Chains: the output of `tail` (the task written last to an executor,
//  NULL if none) that input i is, when the input is not in the store and
//  that output is one the executor may keep (a pickle; executor.py, _kept):
//  its index, else -1.
static int
s_kept_output (const task_t *task, uint32_t i, const task_t *tail)
{
    for (uint32_t j = 0; tail && j < tail->n_outputs; j++)
        if (tail->outputs [j] == task->inputs [i] && strcmp (tail->out_types [j], S_PICKLE) == 0)
            return (int) j;
    return -1;
}

//  Which inputs of the task go as shared segments: segs [i] a new
//  reference for those (at most S_SEGS_MAX), NULL for the others (segs
//  holds n_inputs, zeroed). Returns their count.
static uint32_t
s_share_inputs (task_t *task, store_t *store, uint32_t first, sq_blob_t **segs)
{
    uint32_t n = 0;
    for (uint32_t i = first; i < task->n_inputs && n < S_SEGS_MAX; i++) {
        if ((int32_t) i == task->stream_in)
            continue;
        const char *type = NULL;
        sq_blob_t *blob = store_get (store, task->inputs [i], &type);
        if (blob && sq_blob_size (blob) >= S_SHARE_MIN
        &&  (segs [i] = store_get_shared (store, task->inputs [i], &type)))
            n++;
    }
    return n;
}

//  The size of the task's frame (see s_encode); -1 if an input is missing
//  (and not an output of `tail` either). segs as s_share_inputs made it,
//  or NULL (every input in the frame).
static int
s_frame_size (task_t *task, store_t *store, const task_t *tail, sq_blob_t **segs,
              const s_plan_t *plan, size_t *size_p)
{
    sq_blob_t *fn_blob;
    const char *fn_ptr;
    size_t fn_len;
    uint32_t first;
    if (s_fn_field (task, store, &fn_blob, &fn_ptr, &fn_len, &first))
        return -1;
    bool streams = task->stream_in >= 0 || task->stream_out >= 0;
    size_t size = 8 + 17 + (streams? 8: 0) + (segs? 4: 0) + fn_len + task->conf.py_args.len;
    for (uint32_t i = first; i < task->n_inputs; i++) {
        if ((int32_t) i == task->stream_in) {
            size += 12;         //  no type, no bytes: a pipe
            continue;
        }
        const char *type = NULL;
        sq_blob_t *blob = store_get (store, task->inputs [i], &type);
        if (!blob && s_kept_output (task, i, tail) < 0)
            return -1;
        if (blob && plan && plan->ref && plan->ref [i])
            size += 12;
        else
        if (blob && plan && plan->ref && plan->offer [i])
            size += 12 + strlen (type) + sq_blob_size (blob) + 8;
        else
        if (segs && segs [i])
            size += 12 + strlen (type) + 8;
        else
            size += 12 + (blob? strlen (type) + sq_blob_size (blob): 0);
    }
    for (uint32_t j = 0; j < task->n_outputs; j++)
        size += 4 + strlen (task->out_types [j]);
    if (plan && plan->n_drops)
        size += 4 + (plan->n_drops == S_FORGET_ALL? 0: 8 * (size_t) plan->n_drops);
    *size_p = size;
    return 0;
}

//  The task as one frame: see governor/executor.py. Inputs not in the
//  store are outputs of `tail`, run before it in the same executor (whose
//  run number is tail_seq), taken from the executor's memory; those in
//  segs (s_share_inputs, n_segs of them; segs may be NULL) are named, and
//  their descriptors go with the frame. NULL if out of memory (or an input
//  is missing).
static uint8_t *
s_encode (task_t *task, store_t *store, const task_t *tail, uint32_t tail_seq,
          sq_blob_t **segs, uint32_t n_segs, const s_plan_t *plan, size_t *size_p)
{
    size_t size;
    sq_blob_t *fn_blob;
    const char *fn_ptr;
    size_t fn_len;
    uint32_t first;
    if (!n_segs)
        segs = NULL;
    if (s_frame_size (task, store, tail, segs, plan, &size)
    ||  s_fn_field (task, store, &fn_blob, &fn_ptr, &fn_len, &first))
        return NULL;
    bool streams = task->stream_in >= 0 || task->stream_out >= 0;
    uint8_t *frame = (uint8_t *) malloc (size);
    if (!frame)
        return NULL;
    uint8_t *p = s_put64 (frame, size - 8);
    *p++ = (task->conf.call? 3: task->conf.actor? 2: streams? 4: 1) | (segs? S_OP_SEGMENTS: 0);
    p = s_put32 (p, task->n_inputs - first);
    p = s_put32 (p, task->n_outputs);
    p = s_put32 (p, (uint32_t) fn_len);
    p = s_put32 (p, task->conf.py_args.len);
    if (streams) {
        p = s_put32 (p, task->stream_in >= 0? (uint32_t) task->stream_in - first: UINT32_MAX);
        p = s_put32 (p, task->stream_out >= 0? (uint32_t) task->stream_out: UINT32_MAX);
    }
    if (segs)
        p = s_put32 (p, n_segs);
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
        if (!blob) {
            p = s_put32 (p, S_KEPT_INPUT);
            p = s_put64 (p, (uint64_t) s_kept_output (task, i, tail) << 32 | tail_seq);
            continue;
        }
        size_t type_len = strlen (type), data_len = sq_blob_size (blob);
        if (plan && plan->ref && plan->ref [i]) {
            p = s_put32 (p, S_CACHED_INPUT);
            p = s_put64 (p, plan->ref [i]);
            continue;
        }
        if (plan && plan->ref && plan->offer [i]) {
            p = s_put32 (p, S_CACHE_OFFER | (uint32_t) type_len);
            p = s_put64 (p, data_len);
            memcpy (p, type, type_len);
            p += type_len;
            sq_blob_read (blob, 0, p, data_len);
            p = s_put64 (p + data_len, plan->offer [i]);
            continue;
        }
        if (segs && segs [i]) {
            p = s_put32 (p, S_SEG_INPUT | (uint32_t) type_len);
            p = s_put64 (p, data_len);
            memcpy (p, type, type_len);
            p = s_put64 (p + type_len, sq_blob_shm_id (segs [i]));
            continue;
        }
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
    if (plan && plan->n_drops) {
        p = s_put32 (p, plan->n_drops);
        for (uint32_t i = 0; plan->n_drops != S_FORGET_ALL && i < plan->n_drops; i++)
            p = s_put64 (p, plan->drops [i]);
    }
    *size_p = size;
    return frame;
}

//  The executor was sent the segments in segs (s_share_inputs): it may map
//  them from now on. Takes over their references.
static void
s_seg_hand (s_exec_t *ex, sq_blob_t **segs, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (!segs [i])
            continue;
        uint64_t id = sq_blob_shm_id (segs [i]);
        size_t k = 0;
        while (k < ex->n_segs && ex->segs [k].id != id)
            k++;
        if (k < ex->n_segs) {
            ex->segs [k].handed++;
            sq_blob_unref (&segs [i]);
            continue;
        }
        if (ex->n_segs == ex->cap_segs
        &&  sq_grow ((void **) &ex->segs, &ex->cap_segs, ex->n_segs + 1, sizeof *ex->segs, 16, SIZE_MAX)) {
            //  The executor maps it all the same (the kernel keeps the
            //  memory); only our count of it is lost.
            sq_warn ("out of memory: a segment mapped by Python executor %d is not "
                     "accounted", (int) ex->pid);
            sq_blob_unref (&segs [i]);
            continue;
        }
        ex->segs [ex->n_segs++] = (s_seg_t) { id, segs [i], 1 };
        segs [i] = NULL;
    }
}

//  S_REPLY_RELEASED: u8 9, u32 n, then per segment u64 id, u32 count: the
//  executor unmapped the segment after it had been handed `count` times.
//  One handed again since (a frame on its way) stays: the executor maps
//  it anew and says so again later. Malformed: -1.
static int
s_seg_released (s_exec_t *ex, const uint8_t *body, uint64_t size)
{
    if (size < 5 || s_get (body + 1, 4) != (size - 5) / 12 || (size - 5) % 12)
        return -1;
    for (const uint8_t *p = body + 5; p < body + size; p += 12) {
        uint64_t id = s_get (p, 8);
        uint32_t count = (uint32_t) s_get (p + 8, 4);
        for (size_t k = 0; k < ex->n_segs; k++) {
            if (ex->segs [k].id != id)
                continue;
            if (count >= ex->segs [k].handed) {
                sq_blob_unref (&ex->segs [k].blob);
                ex->segs [k] = ex->segs [--ex->n_segs];
            }
            else
                ex->segs [k].handed -= count;
            break;
        }
    }
    return 0;
}

//  Resident bytes of a process (/proc/PID/status), 0 if unknown, less its
//  resident shared memory: the segments it maps are its inputs, the
//  governor's objects, which a task's `memory` does not count (a segment an
//  executor keeps mapped after its task is the governor's to account for:
//  s_seg_t). executor.py counts the same way (_resident).
static uint64_t
s_rss (pid_t pid)
{
    char path [64], line [128];
    snprintf (path, sizeof path, "/proc/%d/status", (int) pid);
    FILE *file = fopen (path, "r");
    unsigned long long resident = 0, shared = 0, kib;
    if (!file)
        return 0;
    while (fgets (line, sizeof line, file)) {
        if (sscanf (line, "VmRSS: %llu kB", &kib) == 1)
            resident = kib;
        else
        if (sscanf (line, "RssShmem: %llu kB", &kib) == 1)
            shared = kib;
    }
    fclose (file);
    return resident > shared? (uint64_t) (resident - shared) << 10: 0;
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

static bool
s_tenant_is (const s_exec_t *ex, const char *tenant)
{
    return ex->pid && ex->tenant && !ex->retired
        && (strcmp (ex->tenant, tenant) == 0 || (ex->fresh && !ex->id.switched));
}

static bool
s_same_gpus (const char *a, const char *b)
{
    return strcmp (a? a: "", b? b: "") == 0;
}

//  Whether the executor may run a task of the tenant holding the devices
//  gpus: CUDA reads CUDA_VISIBLE_DEVICES once, at init, so only tasks
//  with the devices it was started for.
static bool
s_serves (const s_exec_t *ex, const char *tenant, const char *gpus)
{
    return s_tenant_is (ex, tenant) && s_same_gpus (ex->gpus, gpus);
}

//  The executor serves this tenant from now on. -1 if out of memory.
static int
s_claim (s_exec_t *ex, const char *tenant)
{
    if (!ex->fresh)
        return 0;
    char *copy = strdup (tenant);
    if (!copy)
        return -1;
    free (ex->tenant);
    ex->tenant = copy;
    ex->fresh = false;
    return 0;
}

//  An idle running executor of the tenant with the task's devices, else a
//  free slot, else the slot of an idle executor of another tenant or with
//  other devices (stopped: executors are never shared between tenants,
//  and the pool stays as big as the tasks that run at once), else a new
//  slot; NULL if out of memory. One still busy with stopped piped tasks
//  takes a frame of `size` bytes behind them only if the socket can hold
//  it at once.
static s_exec_t *
s_idle (pyexec_t *self, size_t size, const char *tenant, const char *gpus)
{
    s_exec_t *free_slot = NULL, *draining = NULL, *other = NULL;
    for (size_t i = 0; i < self->n_execs; i++) {
        s_exec_t *ex = &self->execs [i];
        bool idle = ex->pid && !ex->task && !ex->host;
        if (idle && ex->retired && !ex->n_piped && !ex->discard) {
            sq_debug ("stopping Python executor %d: its tenant restarted", (int) ex->pid);
            s_stop (self, ex, false);
            if (!free_slot)
                free_slot = ex;
            continue;
        }
        bool mine = s_serves (ex, tenant, gpus);
        if (idle && mine && !ex->discard)
            return ex;
        if (idle && mine && !draining && size <= S_PIPE_FRAME_MAX)
            draining = ex;
        if (idle && !mine && !ex->discard && !other)
            other = ex;
        if (!ex->pid && !free_slot)
            free_slot = ex;
    }
    if (draining)
        return draining;
    if (free_slot)
        return free_slot;
    //  Executors stay within the cpus: one of another tenant or started
    //  for other devices goes.
    if (other) {
        sq_debug ("stopping Python executor %d: its tasks are done, another tenant's "
                  "or other devices' come", (int) other->pid);
        s_stop (self, other, false);
        return other;
    }
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

//  Writes an actor's queued calls to its executor: the first one when it
//  is idle (it becomes `task`), small ones ahead of the call it runs. Not
//  before the instance is made. A write that fails means the executor
//  died: its end of file fails the actor and the calls (pyexec_read).
//  Writes iov [0..n) whole (the executor reads while we write).
static int
s_writev_all (int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t done = writev (fd, iov, n);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0)
            return -1;
        while (n > 0 && (size_t) done >= iov->iov_len) {
            done -= (ssize_t) iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *) iov->iov_base + done;
            iov->iov_len -= (size_t) done;
        }
    }
    return 0;
}

static void
s_calls_write (s_exec_t *ex)
{
    ex->calls_due = false;
    if (ex->fd < 0 || (ex->task && ex->task == ex->host))
        return;
    size_t ahead = 0;
    for (uint32_t i = 0; i < ex->n_written; i++)
        ahead += ex->calls [i].size;
    //  Frames without segments written ahead, gathered for one write.
    struct iovec iov [S_CALLS_AHEAD];
    int n_iov = 0;
    uint32_t first = ex->n_written;
    while (ex->n_written < ex->n_calls) {
        s_call_t *call = &ex->calls [ex->n_written];
        bool idle = !ex->task && ex->n_written == 0;
        ahead += call->size;
        if (!idle && (ex->n_written >= S_CALLS_AHEAD || ahead > S_CALLS_AHEAD_BYTES
                      || call->n_segs))
            break;
        if (!idle) {
            iov [n_iov++] = (struct iovec) { call->frame, call->size };
            call->seq = ++ex->seq;
            ex->n_written++;
            continue;
        }
        int fds [S_SEGS_MAX];
        uint32_t n_fds = 0;
        for (uint32_t i = 0; i < call->n_inputs && call->n_segs; i++)
            if (call->segs [i])
                fds [n_fds++] = sq_blob_shm_fd (call->segs [i]);
        if (s_write_with_fds (ex->fd, call->frame, call->size, fds, n_fds))
            return;
        if (call->n_segs)
            s_seg_hand (ex, call->segs, call->n_inputs);
        call->seq = ++ex->seq;
        s_call_free (call);
        ex->task = call->task;
        memmove (ex->calls, ex->calls + 1, --ex->n_calls * sizeof ex->calls [0]);
        ahead = 0;
        first = 0;
    }
    if (n_iov && s_writev_all (ex->fd, iov, n_iov))
        sq_debug ("cannot write to Python executor %d: it is gone", (int) ex->pid);
    //  Written or not (a failed write means the executor died: its end of
    //  file fails the actor and these calls), their frames go.
    for (uint32_t i = first; i < ex->n_written; i++)
        s_call_free (&ex->calls [i]);
}

//  The reply of an actor's `task` was read, or it was stopped: the next
//  written call's reply comes next (stopped ones' are dropped first), and
//  more calls may be written.
static void
s_calls_next (s_exec_t *ex)
{
    while (!ex->task && ex->n_written > 0) {
        ex->task = ex->calls [0].task;
        if (!ex->task)
            ex->discard++;
        memmove (ex->calls, ex->calls + 1, --ex->n_calls * sizeof ex->calls [0]);
        ex->n_written--;
    }
    //  An idle executor gets its next call now; else the calls this read
    //  of replies made room for go together at the turn's end.
    if (ex->task)
        ex->calls_due = true;
    else
        s_calls_write (ex);
}

//  A call goes to its actor's executor, after the calls before it. Takes
//  over frame and segs (n_segs of them).
static int
s_start_call (pyexec_t *self, task_t *task, uint8_t *frame, size_t size,
              sq_blob_t **segs, uint32_t n_segs, char *err, size_t err_size)
{
    uint64_t host_key = sq_key (sq_key_session (task->key), task->conf.call);
    s_exec_t *ex = s_actor_exec (self, host_key);
    s_call_t call = { .task = task, .frame = frame, .size = size, .segs = segs,
                      .n_inputs = task->n_inputs, .n_segs = n_segs };
    if (!ex || ex->n_calls == S_CALLS_MAX) {
        snprintf (err, err_size, ex? "actor %u has too many calls queued (a broker fault)"
                                   : "actor %u is not running on this governor", task->conf.call);
        s_call_free (&call);
        return -1;
    }
    ex->calls [ex->n_calls++] = call;
    //  Behind a running call: with the others of this turn (pyexec_items).
    if (ex->task)
        ex->calls_due = true;
    else
        s_calls_write (ex);
    return 0;
}

//  A stopped call of the actor living in `ex`: one not written goes; one
//  written is cancelled (the executor skips it if it comes before it gets
//  there, else it runs) and its reply is dropped; the running one runs on,
//  its reply dropped. False if not one of its.
static bool
s_call_stop (s_exec_t *ex, const task_t *task)
{
    if (ex->task == task) {
        ex->task = NULL;
        ex->discard++;
        s_calls_next (ex);
        return true;
    }
    for (uint32_t k = 0; k < ex->n_calls; k++) {
        if (ex->calls [k].task != task)
            continue;
        if (k < ex->n_written) {
            uint8_t cancel [13], *p = s_put64 (cancel, 5);
            *p++ = S_OP_CANCEL;
            s_put32 (p, ex->calls [k].seq);
            ex->calls [k].task = NULL;
            if (sq_write_all (ex->fd, cancel, sizeof cancel))
                sq_debug ("cannot cancel an actor's call: its executor is gone");
        }
        else {
            s_call_free (&ex->calls [k]);
            memmove (ex->calls + k, ex->calls + k + 1,
                     (--ex->n_calls - k) * sizeof ex->calls [0]);
        }
        return true;
    }
    return false;
}

int
pyexec_start (pyexec_t *self, task_t *task, store_t *store, const int *fds, size_t n_fds,
              bool log_fds, char *err, size_t err_size)
{
    size_t size = 0;
    //  A call's frame and segments may wait here (s_start_call).
    sq_blob_t **segs = NULL;
    uint32_t n_segs = 0;
    if (task->n_inputs) {
        segs = (sq_blob_t **) calloc (task->n_inputs, sizeof *segs);
        if (!segs) {
            snprintf (err, err_size, "out of memory on the governor");
            return -1;
        }
        n_segs = s_share_inputs (task, store, task->conf.fn_in? 1: 0, segs);
    }
    //  Its stream pipes and log descriptors, then its segments (the order
    //  executor.py takes them in).
    int all_fds [S_FDS_MAX + S_SEGS_MAX];
    size_t n_all = 0;
    for (size_t i = 0; i < n_fds && n_all < S_FDS_MAX; i++)
        all_fds [n_all++] = fds [i];
    for (uint32_t i = 0; segs && i < task->n_inputs; i++)
        if (segs [i])
            all_fds [n_all++] = sq_blob_shm_fd (segs [i]);
    //  A call's frame is made now (it may wait); a task's once its executor
    //  is known, since what it holds in its cache is not sent again.
    uint8_t *frame = task->conf.call? s_encode (task, store, NULL, 0, segs, n_segs, NULL, &size)
                                    : NULL;
    if (task->conf.call? !frame: s_frame_size (task, store, NULL, n_segs? segs: NULL, NULL,
                                               &size) != 0) {
        for (uint32_t i = 0; segs && i < task->n_inputs; i++)
            sq_blob_unref (&segs [i]);
        free (segs);
        snprintf (err, err_size, "out of memory on the governor (or an input is missing)");
        return -1;
    }
    if (task->conf.call) {
        if (!n_segs) {
            free (segs);
            segs = NULL;
        }
        return s_start_call (self, task, frame, size, segs, n_segs, err, err_size);
    }
    //  An idle executor may have died since its last task: the write then
    //  fails and the task goes to a fresh one.
    int rc = -1;
    for (int attempt = 0; attempt < 2 && rc; attempt++) {
        s_exec_t *ex = s_idle (self, size, task->tenant, task->gpu_names);
        if (!ex) {
            snprintf (err, err_size, "out of memory on the governor");
            break;
        }
        if (!ex->pid && s_spawn (self, ex, task->tenant, task->gpu_names, err, err_size))
            break;
        if (s_claim (ex, task->tenant)) {
            snprintf (err, err_size, "out of memory on the governor");
            break;
        }
        s_plan_t plan;
        s_cache_plan (self, ex, task, store, task->conf.fn_in? 1: 0, n_segs? segs: NULL, &plan);
        frame = s_encode (task, store, NULL, 0, segs, n_segs, &plan, &size);
        if (!frame) {
            s_plan_release (&plan);
            snprintf (err, err_size, "out of memory on the governor (or an input is missing)");
            break;
        }
        frame [8] |= log_fds? S_OP_LOGS: 0;
        if (s_write_with_fds (ex->fd, frame, size, all_fds, n_all) == 0) {
            if (segs)
                s_seg_hand (ex, segs, task->n_inputs);
            ex->task = task;
            ex->task_rss = ex->ready && task->memory? s_rss (ex->pid): 0;
            ex->task_cache = ex->cache_bytes;
            s_cache_commit (self, ex, task, store, &plan);
            ex->seq++;
            if (task->conf.actor)
                ex->host = task;
            rc = 0;
        }
        else {
            snprintf (err, err_size, "cannot send the task to the Python executor: %s",
                      strerror (errno));
            s_stop (self, ex, true);
        }
        s_plan_release (&plan);
        free (frame);
        frame = NULL;
    }
    for (uint32_t i = 0; segs && i < task->n_inputs; i++)
        sq_blob_unref (&segs [i]);
    free (segs);
    free (frame);
    return rc;
}

//  Tasks that may wait in an executor behind another: plain calls with no
//  timeout or memory limit (they would count from when they run), streams,
//  actors or needs but one cpu (so the one that runs next takes over
//  exactly what the one before held).
static bool
s_pipeable (const task_t *task)
{
    return task->kind == SQ_KIND_PY && !task->conf.actor && !task->conf.call
        && task->stream_in < 0 && task->stream_out < 0 && task->timeout_ms == 0
        && task->memory == 0 && task->cpus == 1 && task->n_resources == 0;
}

//  The task written last to an executor, if another plain one may follow
//  it there (NULL if not, or if that one was stopped), and its run number.
static task_t *
s_tail (const s_exec_t *ex, uint32_t *seq)
{
    if (ex->fd < 0 || !ex->task || ex->host || ex->seceded || ex->n_piped >= S_PIPE_MAX)
        return NULL;
    task_t *tail = ex->n_piped? ex->piped [ex->n_piped - 1].task: ex->task;
    *seq = ex->n_piped? ex->piped [ex->n_piped - 1].seq: ex->seq;
    return tail && s_pipeable (tail)? tail: NULL;
}

task_t *
pyexec_tail (pyexec_t *self, size_t *cursor)
{
    uint32_t seq;
    while (*cursor < self->n_execs) {
        task_t *tail = s_tail (&self->execs [(*cursor)++], &seq);
        if (tail)
            return tail;
    }
    return NULL;
}

int
pyexec_pipe (pyexec_t *self, task_t *task, store_t *store, pyexec_log_fn *log_fds, void *arg)
{
    if (!s_pipeable (task))
        return -1;
    //  Inputs not in the store must all be outputs of the task an executor
    //  has last (a chain): only the one whose last made the first missing
    //  input can take it, and the frame is sized once, so that a task that
    //  cannot be chained costs little at each turn. Else the executor with
    //  the fewest tasks waiting.
    const uint64_t *missing = NULL;
    for (uint32_t i = 0; i < task->n_inputs && !missing; i++)
        if (!store_has (store, task->inputs [i]))
            missing = &task->inputs [i];
    s_exec_t *best = NULL;
    task_t *tail = NULL;
    uint32_t tail_seq = 0;
    for (size_t i = 0; i < self->n_execs && !tail; i++) {
        s_exec_t *ex = &self->execs [i];
        uint32_t seq;
        task_t *last = s_tail (ex, &seq);
        if (!last || !s_serves (ex, task->tenant, task->gpu_names))
            continue;
        if (!missing) {
            if (!best || ex->n_piped < best->n_piped)
                best = ex;
            continue;
        }
        for (uint32_t j = 0; j < last->n_outputs && !tail; j++)
            if (last->outputs [j] == *missing) {
                best = ex;
                tail = last;
                tail_seq = seq;
            }
    }
    size_t size;
    if (!best)
        return -1;
    //  Inputs its executor keeps are named only: a task reading blocks
    //  others read before may be small enough to pipe.
    s_plan_t plan;
    s_cache_plan (self, best, task, store, task->conf.fn_in? 1: 0, NULL, &plan);
    if (s_frame_size (task, store, tail, NULL, &plan, &size) || size > S_PIPE_FRAME_MAX) {
        s_plan_release (&plan);
        return -1;
    }
    uint8_t *frame = s_encode (task, store, tail, tail_seq, NULL, 0, &plan, &size);
    int fds [2] = { -1, -1 };
    size_t n_fds = 0;
    if (!frame || (log_fds && log_fds (arg, task, fds))) {
        s_plan_release (&plan);
        free (frame);
        return -1;
    }
    if (fds [0] >= 0 && fds [1] >= 0)
        n_fds = 2;
    frame [8] |= S_OP_TELL | (n_fds? S_OP_LOGS: 0);
    //  The executor is busy: a frame the socket cannot take now waits for
    //  a free cpu instead of holding the compute thread. One it took in
    //  part is finished: the executor reads all it is sent between tasks
    //  (a write that fails means it died: its end of file hands the task
    //  back, PYEXEC_UNRUN).
    ssize_t n = sq_fdpass_send (best->fd, NULL, 0, frame, size, fds, n_fds, MSG_DONTWAIT);
    if (n > 0 && (size_t) n < size)
        sq_write_all (best->fd, frame + n, size - (size_t) n);
    free (frame);
    for (size_t i = 0; i < n_fds; i++)
        close (fds [i]);
    if (n > 0)
        s_cache_commit (self, best, task, store, &plan);
    s_plan_release (&plan);
    if (n <= 0)
        return -1;
    best->piped [best->n_piped++] = (s_piped_t) { task, ++best->seq };
    return 0;
}

bool
pyexec_limited (pyexec_t *self)
{
    for (size_t i = 0; i < self->n_execs; i++)
        if (self->execs [i].task && self->execs [i].task->memory && !self->execs [i].host)
            return true;
    return false;
}

task_t *
pyexec_over_memory (pyexec_t *self, size_t *cursor, uint64_t *grown)
{
    while (*cursor < self->n_execs) {
        s_exec_t *ex = &self->execs [(*cursor)++];
        //  An executor that has not said READY has not started the task.
        //  An actor's is not looked at: its instance outlives its calls.
        if (!ex->task || !ex->task->memory || !ex->ready || ex->unstarted || ex->host)
            continue;
        uint64_t rss = s_rss (ex->pid);
        //  What its input cache grew by is the governor's (bounded), not
        //  the task's.
        uint64_t cached = ex->cache_bytes > ex->task_cache? ex->cache_bytes - ex->task_cache: 0;
        rss -= rss < cached? rss: cached;
        if (rss > ex->task_rss && rss - ex->task_rss > ex->task->memory) {
            *grown = rss - ex->task_rss;
            return ex->task;
        }
    }
    return NULL;
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
    return ex->fd >= 0 && (ex->task || ex->host || ex->discard || ex->n_runs);
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
    for (size_t i = 0; i < self->n_execs; i++)
        if (self->execs [i].calls_due)
            s_calls_write (&self->execs [i]);
    for (size_t i = 0; i < self->n_execs && n < max; i++)
        if (s_watched (&self->execs [i]))
            items [n++] = (zmq_pollitem_t) { NULL, self->execs [i].fd, ZMQ_POLLIN, 0 };
    return n;
}

static void
s_push (pyexec_t *self, task_t *task, pyexec_outcome_t outcome, const char *message)
{
    if (!task)
        return;
    if (self->first_outcome == self->n_outcomes)
        self->first_outcome = self->n_outcomes = 0;
    if (self->n_outcomes == self->cap_outcomes
    &&  sq_grow ((void **) &self->outcomes, &self->cap_outcomes, self->n_outcomes + 1,
                 sizeof *self->outcomes, 16, SIZE_MAX)) {
        sq_error ("out of memory: task %" PRIx64 " stays running", task->key);
        return;
    }
    self->outcomes [self->n_outcomes++] = (s_outcome_t) {
        task, outcome, outcome == PYEXEC_FAILED? strdup (message? message: ""): NULL };
}

task_t *
pyexec_next (pyexec_t *self, pyexec_outcome_t *outcome, char *err, size_t err_size)
{
    if (self->first_outcome == self->n_outcomes)
        return NULL;
    s_outcome_t next = self->outcomes [self->first_outcome++];
    *outcome = next.outcome;
    if (next.outcome == PYEXEC_FAILED)
        snprintf (err, err_size, "%s", next.message? next.message: "out of memory");
    free (next.message);
    return next.task;
}

//  An actor's executor is gone (died, or killed with its host): the host
//  and its calls that have no reply of their own end with it. `ex` may be
//  a copy taken before the executor was stopped.
static void
s_actor_gone (pyexec_t *self, const s_exec_t *ex, task_t *primary, const char *why)
{
    //  The broker names the actor in its calls' failures.
    if (ex->host && ex->host != primary)
        s_push (self, ex->host, PYEXEC_FAILED, why);
    if (ex->task && ex->task != primary && ex->task != ex->host)
        s_push (self, ex->task, PYEXEC_FAILED, why);
    for (uint32_t k = 0; k < ex->n_calls; k++)
        if (ex->calls [k].task && ex->calls [k].task != primary)
            s_push (self, ex->calls [k].task, PYEXEC_FAILED, why);
}

//  After an executor is stopped, from `was` (a copy of it taken before):
//  its actor's host, else its task, fails with `message` (the actor's
//  calls with `why`), except a task behind replies still to drop, or
//  piped and not started, which never ran: it goes back, as piped ones
//  do (s_stop). The host comes
//  first, then the call it ran, so that the broker knows the call was
//  lost with the actor.
static void
s_gone (pyexec_t *self, const s_exec_t *was, const char *message, const char *why)
{
    bool unrun = was->discard || was->unstarted;
    task_t *primary = was->host? was->host: unrun? NULL: was->task;
    s_push (self, primary, PYEXEC_FAILED, message);
    if (!was->host && unrun && was->task)
        s_push (self, was->task, PYEXEC_UNRUN, NULL);
    if (was->host)
        s_actor_gone (self, was, primary, why);
}

//  The executor ended (end of file, or a reply cut short): what it ran
//  fails, saying how it died.
static void
s_died (pyexec_t *self, s_exec_t *ex)
{
    s_exec_t was = *ex;
    int status = s_stop (self, ex, true);
    char err [256];
    if (WIFSIGNALED (status))
        snprintf (err, sizeof err, "the Python executor (pid %d) died while running the "
                  "task: killed by signal %d (%s)", (int) was.pid, WTERMSIG (status),
                  strsignal (WTERMSIG (status)));
    else
        snprintf (err, sizeof err, "the Python executor (pid %d) died while running the "
                  "task: exit status %d", (int) was.pid, WEXITSTATUS (status));
    sq_warn ("%s", err);
    s_gone (self, &was, err, "its Python executor died");
}

//  The executor's instance was made: calls that waited go now.
static void
s_constructed (s_exec_t *ex)
{
    ex->task = NULL;
    s_calls_write (ex);
}

//  The executor replied to the task it ran and moves on to the next one
//  written to it, if any: that one runs now (stopped ones it skips, or
//  runs, and we drop their replies); it says when it started it.
static void
s_next_piped (pyexec_t *self, s_exec_t *ex)
{
    if (ex->host) {
        s_calls_next (ex);
        return;
    }
    uint32_t i = 0;
    for (; i < ex->n_piped && !ex->piped [i].task; i++)
        ex->discard++;
    if (i < ex->n_piped) {
        ex->task = ex->piped [i++].task;
        ex->unstarted = true;
        s_push (self, ex->task, PYEXEC_RUNS, NULL);
    }
    memmove (ex->piped, ex->piped + i, (ex->n_piped - i) * sizeof ex->piped [0]);
    ex->n_piped -= i;
}

//  A piped task runs now (S_REPLY_STARTED: u8 3, u64 CLOCK_MONOTONIC ns
//  when it started). One that comes while replies are to be dropped is a
//  stopped task's, which the executor reached before its cancel.
static void
s_started (pyexec_t *self, s_exec_t *ex, const uint8_t *body, uint64_t size)
{
    if (ex->discard || !ex->task || !ex->unstarted)
        return;
    ex->unstarted = false;
    uint64_t now = task_now_ns ();
    uint64_t at = size == 9? s_get (body + 1, 8): 0;
    //  Written at start_ns, so it cannot have started before (nor later
    //  than now): a time out of that range is the executor's mistake. Nor
    //  before the one before it ended, as timed here (when its reply was
    //  read): the run times of one executor never overlap.
    uint64_t after = ex->task->start_ns > ex->replied_ns? ex->task->start_ns: ex->replied_ns;
    ex->task->start_ns = at >= after && at <= now? at: at < after && after <= now? after: now;
    s_push (self, ex->task, PYEXEC_STARTED, NULL);
}

//  The running task waits on tasks it submitted (seceded), or goes on.
//  Said by a task whose reply is to be dropped (a stopped piped task the
//  executor ran anyway), or before its start, it is ignored; so is it from
//  an actor's executor. Tasks piped behind one that waits are handed back
//  (cancelled here, PYEXEC_UNRUN): they may be the very tasks it waits on.
static void
s_seceded (pyexec_t *self, s_exec_t *ex, bool seceded, uint64_t size)
{
    if (size != 1 || ex->discard || !ex->task || ex->unstarted || ex->host
    ||  ex->seceded == seceded)
        return;
    ex->seceded = seceded;
    s_push (self, ex->task, seceded? PYEXEC_SECEDED: PYEXEC_REJOINED, NULL);
    for (uint32_t k = 0; seceded && k < ex->n_piped; k++) {
        task_t *piped = ex->piped [k].task;
        if (!piped)
            continue;
        uint8_t cancel [13], *p = s_put64 (cancel, 5);
        *p++ = S_OP_CANCEL;
        s_put32 (p, ex->piped [k].seq);
        ex->piped [k].task = NULL;
        if (sq_write_all (ex->fd, cancel, sizeof cancel))
            sq_debug ("cannot cancel a piped task: its executor is gone");
        s_push (self, piped, PYEXEC_UNRUN, NULL);
    }
}

//  The next memory file the executor sent, -1 if none came.
static int
s_take_fd (s_exec_t *ex)
{
    if (ex->n_fdq == 0)
        return -1;
    int fd = ex->fdq [0];
    memmove (ex->fdq, ex->fdq + 1, --ex->n_fdq * sizeof ex->fdq [0]);
    return fd;
}

//  A reply that is not taken (dropped, or an actor's constructor's): the
//  memory files of its outputs go.
static void
s_drop_outputs (s_exec_t *ex, const uint8_t *body, uint64_t size)
{
    if (body [0] != 0 || size < 5)
        return;
    uint64_t pos = 5;
    for (uint64_t j = s_get (body + 1, 4); j > 0 && pos + 8 <= size; j--) {
        uint64_t out = s_get (body + pos, 8);
        pos += 8;
        if (out & S_SEG_OUTPUT)
            close (s_take_fd (ex));
        else
        if (out > size - pos)
            break;
        else
            pos += out;
    }
}

//  One whole reply of the executor (size >= 1 bytes of body).
static void
s_replied (pyexec_t *self, s_exec_t *ex, const uint8_t *body, uint64_t size)
{
    char err [S_MESSAGE_MAX];
    if (body [0] == S_REPLY_RAN) {
        if (ex->n_runs == 0 || size < 2) {
            sq_warn ("Python executor %d answered a run it was not given: stopped",
                     (int) ex->pid);
            s_died (self, ex);
            return;
        }
        uint64_t run = ex->runs [0];
        memmove (ex->runs, ex->runs + 1, --ex->n_runs * sizeof ex->runs [0]);
        s_run_answer (self, run, ex->pid, body [1] != 0, body + 2, size - 2);
        return;
    }
    if (body [0] == S_REPLY_RELEASED) {
        if (s_seg_released (ex, body, size)) {
            sq_warn ("Python executor %d sent a malformed release: stopped", (int) ex->pid);
            s_died (self, ex);
        }
        return;
    }
    if (body [0] == S_REPLY_STARTED) {
        s_started (self, ex, body, size);
        return;
    }
    if (body [0] == S_REPLY_SECEDED || body [0] == S_REPLY_REJOINED) {
        s_seceded (self, ex, body [0] == S_REPLY_SECEDED, size);
        return;
    }
    if (body [0] == S_REPLY_SYNC) {
        uint8_t synced [9], *p = s_put64 (synced, 1);
        *p = S_OP_SYNCED;
        if (ex->fd >= 0 && sq_write_all (ex->fd, synced, sizeof synced))
            sq_debug ("cannot answer Python executor %d: it is gone", (int) ex->pid);
        return;
    }
    if (body [0] == S_REPLY_CREDENTIAL) {
        if (size == 1 && !ex->discard && ex->task && !ex->unstarted && !ex->host)
            s_push (self, ex->task, PYEXEC_CREDENTIAL, NULL);
        return;
    }
    if (body [0] == S_REPLY_READY) {
        //  Its task, if any, was given to it before: it counts from here.
        if (!ex->ready && size == 9)
            ex->task_rss = s_get (body + 1, 8);
        ex->ready = true;
        return;
    }
    if (ex->discard) {          //  a stopped call's or piped task's
        ex->discard--;
        s_drop_outputs (ex, body, size);
        return;
    }
    task_t *task = ex->task? ex->task: ex->host;
    if (!task) {
        //  A reply nobody asked for: the executor is not to be trusted.
        if (!ex->host) {
            sq_warn ("Python executor %d sent a reply nobody asked for: stopped", (int) ex->pid);
            s_stop (self, ex, false);
            return;
        }
        snprintf (err, sizeof err, "the Python executor of actor %u sent a reply nobody "
                  "asked for", sq_key_id (ex->host->key));
        s_exec_t was = *ex;
        s_stop (self, ex, false);
        s_gone (self, &was, err, err);
        return;
    }
    size_t len = size - 1 < sizeof err - 1? size - 1: sizeof err - 1;
    if (task == ex->host) {
        //  The instance is made (it stays), or its constructor failed.
        if (body [0] == 0) {
            s_drop_outputs (ex, body, size);
            s_constructed (ex);
            return;
        }
        memcpy (err, body + 1, len);
        err [len] = 0;
        char why [300];
        snprintf (why, sizeof why, "its constructor failed: %.*s",
                  (int) strcspn (err, "\n"), err);
        s_exec_t was = *ex;
        s_stop (self, ex, false);
        s_gone (self, &was, err, why);
        return;
    }
    ex->task = NULL;
    ex->seceded = false;
    ex->replied_ns = task_now_ns ();
    bool unstarted = ex->unstarted;
    ex->unstarted = false;
    if (body [0] == S_REPLY_NOT_RUN && size == 1) {
        //  An input it was to find in the executor was not kept there
        //  (nor, then, may anything else it is thought to keep be).
        s_cache_clear (ex);
        s_push (self, task, PYEXEC_UNRUN, NULL);
        s_next_piped (self, ex);
        s_cache_flush (ex);
        return;
    }
    if (unstarted)              //  it did not say so, but it ran
        s_push (self, task, PYEXEC_STARTED, NULL);
    if (body [0] == 1) {
        memcpy (err, body + 1, len);
        err [len] = 0;
        s_push (self, task, PYEXEC_FAILED, err);
        s_next_piped (self, ex);
        return;
    }
    bool ok = body [0] == 0 && size >= 5 && s_get (body + 1, 4) == task->n_outputs;
    uint64_t pos = 5;
    for (uint32_t j = 0; ok && j < task->n_outputs; j++) {
        uint64_t out = pos + 8 <= size? s_get (body + pos, 8): UINT64_MAX;
        if (out != UINT64_MAX && (out & S_SEG_OUTPUT)) {
            //  Written by the executor into a memory file: ours from now
            //  on, sealed, served as it is (no copy here).
            int fd = s_take_fd (ex);
            task->results [j] = fd >= 0? sq_blob_shm_adopt (fd, out & ~S_SEG_OUTPUT): NULL;
            ok = task->results [j] != NULL;
            if (!ok)
                sq_warn ("Python executor %d sent an output segment that cannot be taken: "
                         "%s", (int) ex->pid, fd < 0? "none came": strerror (errno));
            pos += 8;
            continue;
        }
        ok = out <= size - pos - 8;
        if (ok) {
            task->results [j] = sq_blob_copy (body + pos + 8, out);
            ok = task->results [j] != NULL;
            pos += 8 + out;
        }
    }
    if (ok && pos == size) {
        s_push (self, task, PYEXEC_DONE, NULL);
        s_next_piped (self, ex);
        return;
    }
    for (uint32_t j = 0; j < task->n_outputs; j++)
        sq_blob_unref (&task->results [j]);
    s_stop (self, ex, false);
    s_push (self, task, PYEXEC_FAILED,
            "malformed reply from the Python executor (or out of memory)");
}

//  A reply too big for the read buffer: the part in it, then the rest
//  read straight into a buffer of its own (the executor is writing it).
static void
s_replied_big (pyexec_t *self, s_exec_t *ex, uint64_t size)
{
    uint8_t *body = size <= S_REPLY_MAX? (uint8_t *) malloc (size): NULL;
    size_t have = ex->rlen - 8;
    if (!body) {
        char err [128];
        snprintf (err, sizeof err, "Python executor reply of %" PRIu64 " bytes refused "
                  "(or out of memory)", size);
        sq_warn ("%s", err);
        s_exec_t was = *ex;
        s_stop (self, ex, false);
        s_gone (self, &was, err, "its Python executor was stopped");
        return;
    }
    memcpy (body, ex->rbuf + 8, have);
    ex->rlen = 0;
    if (s_read_all (ex->fd, body + have, size - have))
        s_died (self, ex);
    else
        s_replied (self, ex, body, size);
    free (body);
}

void
pyexec_read (pyexec_t *self, int fd)
{
    s_exec_t *ex = NULL;
    for (size_t i = 0; i < self->n_execs && !ex; i++)
        if (self->execs [i].fd == fd && s_watched (&self->execs [i]))
            ex = &self->execs [i];
    if (!ex)
        return;
    if (!ex->rbuf && !(ex->rbuf = (uint8_t *) malloc (S_RBUF_SIZE))) {
        sq_error ("out of memory reading a Python executor's reply: it is stopped");
        s_died (self, ex);
        return;
    }
    //  Memory files of outputs come with the first byte of the write that
    //  carries their reply (at most S_SEGS_MAX): queued for it, in order.
    char control [CMSG_SPACE (S_SEGS_MAX * sizeof (int))];
    struct iovec iov = { ex->rbuf + ex->rlen, S_RBUF_SIZE - ex->rlen };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
                          .msg_control = control, .msg_controllen = sizeof control };
    ssize_t n;
    while ((n = recvmsg (fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    bool overflow = n > 0 && (msg.msg_flags & MSG_CTRUNC);
    for (struct cmsghdr *c = n > 0? CMSG_FIRSTHDR (&msg): NULL; c; c = CMSG_NXTHDR (&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (c->cmsg_len - CMSG_LEN (0)) / sizeof (int);
        for (size_t k = 0; k < count; k++) {
            int got;
            memcpy (&got, CMSG_DATA (c) + k * sizeof (int), sizeof got);
            if (ex->n_fdq < S_FDQ_MAX)
                ex->fdq [ex->n_fdq++] = got;
            else {
                close (got);
                overflow = true;
            }
        }
    }
    if (n <= 0 || overflow) {
        if (overflow)
            sq_warn ("Python executor %d sent more memory files than its replies may "
                     "carry: stopped", (int) ex->pid);
        s_died (self, ex);
        return;
    }
    ex->rlen += (size_t) n;
    //  Every whole reply that came; a part of one waits for the rest.
    size_t pos = 0;
    while (ex->fd >= 0 && ex->rlen - pos >= 8) {
        uint64_t size = s_get (ex->rbuf + pos, 8);
        if (size == 0) {
            sq_warn ("Python executor %d sent an empty reply: stopped", (int) ex->pid);
            s_died (self, ex);
            return;
        }
        if (size > S_RBUF_SIZE - 8) {
            memmove (ex->rbuf, ex->rbuf + pos, ex->rlen - pos);
            ex->rlen -= pos;
            pos = 0;
            s_replied_big (self, ex, size);
            continue;
        }
        if (size > ex->rlen - pos - 8)
            break;
        s_replied (self, ex, ex->rbuf + pos + 8, size);
        pos += 8 + size;
    }
    if (ex->fd >= 0) {
        memmove (ex->rbuf, ex->rbuf + pos, ex->rlen - pos);
        ex->rlen -= pos;
    }
}

void
pyexec_abandon (pyexec_t *self, task_t *task)
{
    for (size_t i = self->first_outcome; i < self->n_outcomes; i++)
        if (self->outcomes [i].task == task) {
            free (self->outcomes [i].message);
            memmove (self->outcomes + i, self->outcomes + i + 1,
                     (self->n_outcomes - i - 1) * sizeof self->outcomes [0]);
            self->n_outcomes--;
            i--;
        }
    for (size_t i = 0; i < self->n_execs; i++) {
        s_exec_t *ex = &self->execs [i];
        for (uint32_t k = 0; k < ex->n_piped; k++)
            if (ex->piped [k].task == task) {
                //  Not run yet: the executor skips it if the cancel comes
                //  before it gets there (else it runs); the reply is
                //  dropped either way.
                uint8_t cancel [13], *p = s_put64 (cancel, 5);
                *p++ = S_OP_CANCEL;
                s_put32 (p, ex->piped [k].seq);
                ex->piped [k].task = NULL;
                if (sq_write_all (ex->fd, cancel, sizeof cancel))
                    sq_debug ("cannot cancel a piped task: its executor is gone");
                return;
            }
        //  A call stopped: the actor lives on; its reply, if it was
        //  sent, is dropped when it comes.
        if (ex->host && ex->host != task && s_call_stop (ex, task))
            return;
        else
        if (ex->task == task || ex->host == task) {
            sq_debug ("killing Python executor %d: its task stopped", (int) ex->pid);
            s_exec_t was = *ex;
            s_stop (self, ex, false);
            if (was.host == task)
                s_actor_gone (self, &was, task, "the actor was stopped");
        }
    }
}

void
pyexec_credential (pyexec_t *self, task_t *task, const char *text)
{
    for (size_t i = 0; i < self->n_execs; i++) {
        s_exec_t *ex = &self->execs [i];
        if (ex->task != task || ex->host || ex->fd < 0)
            continue;
        size_t len = strlen (text);
        uint8_t frame [8 + 1 + 2 + 3 * 41 + 24];
        if (len > sizeof frame - 9)
            return;
        uint8_t *p = s_put64 (frame, 1 + len);
        *p++ = S_OP_CREDENTIAL;
        memcpy (p, text, len);
        //  A write that fails means it died: its end of file says so.
        if (sq_write_all (ex->fd, frame, 9 + len))
            sq_debug ("cannot answer a task's credential: its executor is gone");
        return;
    }
}

size_t
pyexec_retired (pyexec_t *self, const char *tenant)
{
    size_t n = 0;
    for (size_t i = 0; i < self->n_execs; i++) {
        s_exec_t *ex = &self->execs [i];
        if (!ex->pid || !ex->retired || !ex->tenant || strcmp (ex->tenant, tenant))
            continue;
        if (!ex->task && !ex->host && !ex->n_piped && !ex->discard) {
            sq_debug ("stopping Python executor %d: its tenant restarted", (int) ex->pid);
            s_stop (self, ex, false);
        }
        else
            n++;
    }
    return n;
}

void
pyexec_refresh (pyexec_t *self, const char *tenant)
{
    size_t stopped = 0, retired = 0;
    for (size_t i = 0; i < self->n_execs; i++) {
        s_exec_t *ex = &self->execs [i];
        //  A fresh one never ran anything: it stays, for whoever comes.
        if (!ex->pid || !ex->tenant || ex->fresh || strcmp (ex->tenant, tenant))
            continue;
        ex->retired = true;
        if (!ex->task && !ex->host && !ex->n_piped && !ex->discard) {
            s_stop (self, ex, false);
            stopped++;
        }
        else
            retired++;
    }
    sq_info ("tenant '%s' restarted: %zu Python executors stopped, %zu to stop once done",
             tenant, stopped, retired);
}

//  --------------------------------------------------------------------------
//  RUN

static size_t
s_runs_bytes (const pyexec_t *self)
{
    size_t bytes = 0;
    for (size_t i = 0; i < self->n_runs; i++)
        bytes += self->runs [i].results.buf.size;
    return bytes;
}

static void
s_run_drop (pyexec_t *self, size_t i)
{
    sq_wbuf_release (&self->runs [i].results);
    self->runs [i] = self->runs [--self->n_runs];
    //  The packer points at its own buffer: moved, it must be told where
    //  (else a moved run's answers went into the freed slot's buffer).
    sq_wbuf_t *moved = &self->runs [i].results;
    msgpack_packer_init (&moved->pk, &moved->buf, msgpack_sbuffer_write);
}

//  Kept runs past S_RAN_KEEP_NS go.
static void
s_runs_expire (pyexec_t *self)
{
    uint64_t now = task_now_ns ();
    for (size_t i = 0; i < self->n_runs; )
        if (self->runs [i].done && now - self->runs [i].done_ns > S_RAN_KEEP_NS)
            s_run_drop (self, i);
        else
            i++;
}

//  Drops the oldest kept run; false if none is kept.
static bool
s_run_evict (pyexec_t *self)
{
    size_t oldest = self->n_runs;
    for (size_t i = 0; i < self->n_runs; i++)
        if (self->runs [i].done
        &&  (oldest == self->n_runs || self->runs [i].done_ns < self->runs [oldest].done_ns))
            oldest = i;
    if (oldest == self->n_runs)
        return false;
    s_run_drop (self, oldest);
    return true;
}

static void
s_run_answer (pyexec_t *self, uint64_t run, pid_t pid, bool ok, const void *data, size_t size)
{
    s_run_t *r = NULL;
    for (size_t i = 0; i < self->n_runs && !r; i++)
        if (self->runs [i].id == run && !self->runs [i].done)
            r = &self->runs [i];
    if (!r)
        return;
    char why [S_RAN_ROOM - S_RAN_ENTRY];
    if (size > S_RAN_ROOM - S_RAN_ENTRY) {
        uint64_t id = r->id;
        while (s_runs_bytes (self) + S_RAN_ENTRY + size > SQ_RUN_RESULTS_MAX && s_run_evict (self))
            ;
        //  The runs moved: find ours again (it is not kept, so not evicted).
        r = NULL;
        for (size_t i = 0; i < self->n_runs && !r; i++)
            if (self->runs [i].id == id && !self->runs [i].done)
                r = &self->runs [i];
        if (!r)
            return;
        if (s_runs_bytes (self) + S_RAN_ENTRY + size > SQ_RUN_RESULTS_MAX) {
            ok = false;
            snprintf (why, sizeof why, "its answer (%zu bytes) was too large: a governor keeps "
                      "at most %u MiB of answers to runs", size, SQ_RUN_RESULTS_MAX >> 20);
            data = why;
            size = strlen (why);
        }
    }
    sq_pack_ran_result (&r->results.pk, (uint64_t) pid, ok, data, size);
    r->n++;
    if (r->waiting)
        r->waiting--;
}

int
pyexec_run (pyexec_t *self, uint64_t run, const char *tenant, const void *fn, size_t size)
{
    s_runs_expire (self);
    //  The broker's run ids start again with a new broker: an old run's
    //  answers under this id are not this run's.
    for (size_t i = 0; i < self->n_runs; i++)
        if (self->runs [i].id == run && self->runs [i].done) {
            s_run_drop (self, i);
            break;
        }
    if (self->n_runs == S_RUNS_MAX && !s_run_evict (self))
        return -1;
    s_run_t *r = &self->runs [self->n_runs++];
    memset (r, 0, sizeof *r);
    r->id = run;
    sq_wbuf_init (&r->results);
    //  The answers' count is not known yet: an array32 header, patched.
    static const char head32 [S_RAN_HEAD] = { (char) 0xdd, 0, 0, 0, 0 };
    r->results.pk.callback (r->results.pk.data, head32, S_RAN_HEAD);
    uint8_t head [9];
    s_put64 (head, 1 + size);
    head [8] = S_OP_RUN;
    for (size_t i = 0; i < self->n_execs; i++) {
        s_exec_t *ex = &self->execs [i];
        //  A fresh one never ran anything of the tenant; a retired one is
        //  on its way out (RESTART).
        if (!ex->pid || ex->fd < 0 || !ex->tenant || ex->fresh || ex->retired
        ||  strcmp (ex->tenant, tenant))
            continue;
        if (r->n + r->waiting >= SQ_RUN_EXECS_MAX)
            break;
        r->waiting++;           //  answered below if it cannot be asked
        bool busy = ex->task || ex->host || ex->n_piped || ex->discard || !ex->ready;
        if (busy && size > S_PIPE_FRAME_MAX) {
            const char *why = "the executor was busy and the function over 16 KiB";
            s_run_answer (self, run, ex->pid, false, why, strlen (why));
        }
        else
        if (sq_write_all (ex->fd, head, sizeof head) || sq_write_all (ex->fd, fn, size)) {
            const char *why = "the executor could not be written to";
            s_run_answer (self, run, ex->pid, false, why, strlen (why));
        }
        else
            ex->runs [ex->n_runs++] = run;
    }
    return 0;
}

void
pyexec_ran (pyexec_t *self, pyexec_ran_fn *done, void *arg)
{
    for (size_t i = 0; i < self->n_runs; ) {
        s_run_t *r = &self->runs [i];
        if (r->waiting || r->done) {
            i++;
            continue;
        }
        if (r->n == 0) {
            //  Nothing to read (no executor of the tenant): not kept.
            done (arg, r->id, 0, 0);
            s_run_drop (self, i);
            continue;
        }
        uint8_t *head = (uint8_t *) r->results.buf.data;
        for (int k = 0; k < 4; k++)
            head [1 + k] = (uint8_t) (r->n >> (24 - 8 * k));
        r->done = true;
        r->done_ns = task_now_ns ();
        done (arg, r->id, r->n, r->results.buf.size);
        i++;
    }
}

int
pyexec_ran_read (pyexec_t *self, uint64_t run, uint64_t offset, size_t length,
                 uint8_t **data, size_t *size, uint64_t *total)
{
    s_runs_expire (self);
    for (size_t i = 0; i < self->n_runs; i++) {
        s_run_t *r = &self->runs [i];
        if (r->id != run || !r->done)
            continue;
        size_t all = r->results.buf.size;
        if (offset > all)
            return -1;
        size_t n = all - offset < length? all - offset: length;
        *data = (uint8_t *) malloc (n? n: 1);
        if (!*data)
            return -1;
        memcpy (*data, (const char *) r->results.buf.data + offset, n);
        *size = n;
        *total = all;
        //  Read to the end: the client has it all.
        if (offset + n == all)
            s_run_drop (self, i);
        return 0;
    }
    return -1;
}
