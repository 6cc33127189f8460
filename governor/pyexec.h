/*  pyexec: the pool of persistent Python executor processes that run "py"
    tasks (governor/executor.py, embedded in the binary).

    Executors are started on demand, one task at a time each, and reused; the
    pool keeps at most as many as tasks run at once (so --cpus for cpus=1
    tasks). The compute thread hands a task over with pyexec_start, polls the
    busy executors' sockets (pyexec_items) and collects the outcome with
    pyexec_reply. An executor that dies mid-task fails that task with a
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

typedef struct _pyexec_t pyexec_t;

//  A pool for a governor with `cpus` slots; writes the executor script into
//  workdir. NULL if out of memory or the script cannot be written.
pyexec_t *pyexec_new (uint32_t cpus, const char *workdir);
void pyexec_destroy (pyexec_t **self_p);
//  Sends the task (its config and its inputs from the store) to an idle
//  executor, starting one if needed, with fds (the executor's ends of the
//  task's stream pipes: its stream input's, then its stream output's; the
//  caller closes its copies). 0, or -1 with the failure message.
int pyexec_start (pyexec_t *self, task_t *task, store_t *store, const int *fds, size_t n_fds,
                  char *err, size_t err_size);
//  Number of busy executors; of those to poll (busy, or holding an
//  actor); and their sockets as poll items (at most max).
size_t pyexec_busy (pyexec_t *self);
size_t pyexec_watched (pyexec_t *self);
size_t pyexec_items (pyexec_t *self, zmq_pollitem_t *items, size_t max);
//  A task that ended without a reply of its own (the actor it calls died
//  or was stopped, or it is the host of an actor whose executor died
//  while a call ran): err says why. NULL when there is none. Call after
//  pyexec_reply and pyexec_abandon until NULL.
task_t *pyexec_orphan (pyexec_t *self, char *err, size_t err_size);
//  After the socket `fd` polled readable: reads the reply into the task's
//  results. Returns the task, *rc 0 on success or -1 with err filled; NULL
//  if no executor is busy on fd.
task_t *pyexec_reply (pyexec_t *self, int fd, int *rc, char *err, size_t err_size);
//  The task stops running without its reply (timeout, STOP, shutdown): its
//  executor, if any, is killed and reaped. Nothing if it has none.
void pyexec_abandon (pyexec_t *self, task_t *task);

#endif
