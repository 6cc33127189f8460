/*  parentwatch: a process ends with the process that started it.

    The starter (LocalCluster, `squall start`) keeps the write end of a pipe
    and gives its children the read end, named by $SQUALL_PARENT_FD. The
    starter never writes; when it exits for any reason (killed, os._exit, a
    segfault) the kernel closes its end and the read end sees end of file.
    A thread of the watched process blocks in poll() on that fd; then it
    sends SIGTERM to its own process, which stops the way a user's SIGTERM
    does (cleanly, bounded by the program's own stop alarm), and if the
    process is still alive SQ_STOP_GRACE_S (log.h) seconds later it leaves with
    _exit. A pipe rather than PR_SET_PDEATHSIG: the death signal follows
    the starter's *thread* (a Python thread that started the cluster and
    ended would kill it), and it cannot cross an exec of a wrapper.

    Ownership: the watcher owns its thread and its wake pipe, not the
    parent fd (which the process received; it is made close-on-exec so that
    programs and executors the process starts do not hold it).
    parentwatch_destroy stops and joins the thread. */
#ifndef SQ_PARENTWATCH_H
#define SQ_PARENTWATCH_H

#include <stddef.h>

#define PARENTWATCH_ENV "SQUALL_PARENT_FD"

typedef struct _parentwatch_t parentwatch_t;

//  Watches $SQUALL_PARENT_FD if it is set, and removes it from the
//  environment (children of this process do not inherit the descriptor). 0 with *self_p NULL when it is
//  not set (nothing to watch), 0 with a watcher, or -1 with a message in
//  err when it is set but unusable (not a number, not an open descriptor,
//  not a pipe or socket) or the thread cannot start. Call it after the
//  process's signal mask is set: the thread blocks every signal itself, so
//  its SIGTERM goes to a thread that handles it.
int parentwatch_from_env (parentwatch_t **self_p, char *err, size_t err_size);
//  Watches fd (validated as above); NULL with err filled on failure.
parentwatch_t *parentwatch_new (int fd, char *err, size_t err_size);
//  Stops watching (the process stops for another reason); joins the thread.
void parentwatch_destroy (parentwatch_t **self_p);

#endif
