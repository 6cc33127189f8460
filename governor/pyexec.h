/*  pyexec: the pool of persistent Python executor processes that run "py"
    tasks (governor/executor.py, embedded in the binary).

    Executors are started on demand, one task at a time each, and reused; the
    pool keeps at most as many as tasks run at once (so --cpus for cpus=1
    tasks). The compute thread hands a task over with pyexec_start (or
    pipes it behind a running one, pyexec_pipe), polls the busy executors'
    sockets (pyexec_items), reads them (pyexec_read) and collects what
    became of its tasks with pyexec_next. An executor that dies mid-task fails that task with a
    message saying so and is replaced on the next start; one whose task is
    abandoned (timeout, STOP, shutdown) is killed, since a Python call
    cannot be interrupted safely. The interpreter is $SQUALL_PYTHON (set by
    the governor's --python), else "python3" from PATH.

    Ownership: the pool owns its processes and sockets and borrows the tasks
    it runs (the compute thread owns them); pyexec_destroy kills and reaps
    every executor.

    Actors (a task with `actor` true): the executor that made the instance
    keeps it and serves only its calls (tasks with `call`) until the host
    task stops; the host stays running meanwhile, holding its cpus. A call
    that is stopped does not kill the actor: its reply is dropped. */
#ifndef GOV_PYEXEC_H
#define GOV_PYEXEC_H

#include <stddef.h>
#include <zmq.h>
#include "task.h"
#include "store.h"
#include "sandbox.h"

typedef struct _pyexec_t pyexec_t;

//  A pool for a governor with `cpus` slots; writes the executor script into
//  workdir (read-only). Executors run as the identity the sandbox (borrowed)
//  gives their tenant, each serving one tenant's tasks only (task->tenant),
//  in a directory of its own when that is not the governor's identity.
//  NULL if out of memory or the script cannot be written.
pyexec_t *pyexec_new (uint32_t cpus, const char *workdir, sandbox_t *sandbox);
void pyexec_destroy (pyexec_t **self_p);
//  Sends the task (its config and its inputs from the store) to an idle
//  executor, starting one if needed, with fds (the executor's ends of the
//  task's stream pipes: its stream input's, then its stream output's, then
//  with log_fds its two log descriptors (tasklog.h); the caller closes its
//  copies). 0, or -1 with the failure message.
int pyexec_start (pyexec_t *self, task_t *task, store_t *store, const int *fds, size_t n_fds,
                  bool log_fds, char *err, size_t err_size);
//  Pipelining: writes a small plain task to an executor busy with another
//  such task, to run when that one is done; it holds no cpus until then
//  (PYEXEC_RUNS says when it takes over the cpu of the one before). Its
//  inputs are in the store, or (a chain) are all outputs of the task
//  written last to that executor, which keeps them for it (if it cannot,
//  the task comes back PYEXEC_UNRUN). 0, or -1 when it cannot be (not
//  plain, too big, no executor to take it, or the socket is full).
//  log_fds, once an executor is chosen, gives the task's two log
//  descriptors (0; both -1: none), which go with its frame and are closed
//  here, or refuses (-1: the task is not piped then). May be NULL.
typedef int (pyexec_log_fn) (void *arg, task_t *task, int fds [2]);
int pyexec_pipe (pyexec_t *self, task_t *task, store_t *store, pyexec_log_fn *log_fds,
                 void *arg);
//  The store's object (key, generation gen) left it (store_set_forget):
//  no executor keeps its value from now on (pyexec.c, "Input cache").
void pyexec_forget (pyexec_t *self, uint64_t key, uint64_t gen);
//  Chains: the tasks written last to executors that may take another
//  behind them, one per call from *cursor (start at 0); NULL at the end.
task_t *pyexec_tail (pyexec_t *self, size_t *cursor);
//  Number of busy executors; of those to poll (busy, or holding an
//  actor); and their sockets as poll items (at most max).
size_t pyexec_busy (pyexec_t *self);
size_t pyexec_watched (pyexec_t *self);
size_t pyexec_items (pyexec_t *self, zmq_pollitem_t *items, size_t max);
//  After the socket `fd` polled readable: reads what the executor sent
//  and handles every whole reply (outcomes for pyexec_next). Nothing if
//  no executor is watched on fd.
void pyexec_read (pyexec_t *self, int fd);

//  Memory limits (a task's `memory`): whether a running task has one; and
//  the running tasks whose executor's resident memory grew by more than
//  that since the task was given to it (since the executor said it was
//  ready, for a new one), one per call from *cursor (start at 0), with the
//  growth; NULL at the end. The caller stops them (pyexec_abandon kills
//  the executor). Actors' executors are not looked at.
bool pyexec_limited (pyexec_t *self);
task_t *pyexec_over_memory (pyexec_t *self, size_t *cursor, uint64_t *grown);

//  What became of a task the pool had, in the order it happened.
typedef enum {
    PYEXEC_DONE,                //  replied: its results are in task->results
    PYEXEC_FAILED,              //  failed, or ended with its executor or
                                //  actor: err says why
    PYEXEC_RUNS,                //  piped, its executor got to it: it takes
                                //  over the cpu of the one before
    PYEXEC_STARTED,             //  piped, its executor says it started it
                                //  (after PYEXEC_RUNS), at task->start_ns
    PYEXEC_UNRUN,               //  written but never run (its executor died
                                //  or was killed first, or the task before it
                                //  seceded): to be run again
    PYEXEC_SECEDED,             //  it waits on tasks it submitted: its cpus
                                //  may go to others (squall.secede)
    PYEXEC_REJOINED,            //  it goes on (squall.rejoin)
    PYEXEC_CREDENTIAL           //  it asks for a key pair for its client
                                //  (squall.get_client(): pyexec_credential)
} pyexec_outcome_t;

//  The next outcome, NULL when there is none. Call after pyexec_read and
//  pyexec_abandon until NULL.
task_t *pyexec_next (pyexec_t *self, pyexec_outcome_t *outcome, char *err, size_t err_size);
//  The task stops running without its reply (timeout, STOP, shutdown): its
//  executor, if any, is killed and reaped (one that waits piped is
//  cancelled instead, the executor lives on); its outcomes not taken yet
//  are forgotten.
void pyexec_abandon (pyexec_t *self, task_t *task);
//  Answers a task's PYEXEC_CREDENTIAL: the text ("k", then the Z85 public
//  key, secret key and the broker's public key, space separated; "-"
//  without keys; "!" and why when refused) goes
//  to its executor over its socket, nowhere else. Nothing if the task no
//  longer runs there.
void pyexec_credential (pyexec_t *self, task_t *task, const char *text);
//  A client restarted its tenant's executors (RESTART): the idle ones of
//  the tenant are stopped now, busy ones (a task, an actor) once their
//  work ends, and none is given another task; its next tasks start fresh
//  ones. Other tenants' executors are left alone.
void pyexec_refresh (pyexec_t *self, const char *tenant);
//  Executors of the tenant that pyexec_refresh retired and that have not
//  stopped yet (busy with their task, piped tasks or actor); those that
//  became idle stop now.
size_t pyexec_retired (pyexec_t *self, const char *tenant);

//  RUN (GRUN): every live executor of the tenant (not a fresh or retired
//  one) runs the pickled call fn: an idle one now, a busy one between its
//  tasks. -1 if too many runs wait for answers already (16).
int pyexec_run (pyexec_t *self, uint64_t run, const char *tenant, const void *fn, size_t size);
//  Calls done once for each run all of whose executors answered (or
//  stopped), with how many answers and their size (a msgpack array of
//  RAN_RESULT records), which stay here for pyexec_ran_read.
typedef void (pyexec_ran_fn) (void *arg, uint64_t run, uint32_t n, uint64_t size);
void pyexec_ran (pyexec_t *self, pyexec_ran_fn *done, void *arg);
//  RUNREAD: a copy (*data, malloc'd, *size bytes) of at most length bytes of
//  run's answers from offset, and their *total size; the answers are
//  forgotten once read to their end. -1 if not kept here (never, read,
//  expired or evicted; see pyexec.c) or offset is past the end.
int pyexec_ran_read (pyexec_t *self, uint64_t run, uint64_t offset, size_t length,
                     uint8_t **data, size_t *size, uint64_t *total);

#endif
