/*  execute: the execute task's child process and its private directory.

    The compute thread makes a task's directory with execute_new and starts
    its child with execute_start, watches execute_fd
    (a pidfd) in its poll set, or calls execute_poll every few milliseconds
    when the kernel has no pidfd_open, then collects the outputs with
    execute_finish.

    Ownership: an execute_t owns the child and the task directory (plus the
    stdin/stdout/stderr files beside it); execute_destroy kills and reaps a
    child still running and removes them all. */
#ifndef GOV_EXECUTE_H
#define GOV_EXECUTE_H

#include <stddef.h>
#include <stdbool.h>
#include "task.h"
#include "store.h"
#include "sandbox.h"

//  Makes the task's directory (the identity the sandbox gives the task's
//  tenant owns it, mode 0700) and finds its working directory (the config's
//  cwd: made when relative, inside the task's directory; checked when
//  absolute: a directory the task may enter and, under Landlock, reach).
//  NULL with a message in err when the task fails before running (the
//  directory is removed then).
execute_t *execute_new (task_t *task, const char *workdir, sandbox_t *sandbox,
                        char *err, size_t err_size);
//  Its working directory, absolute: what %{CWD} expands to.
const char *execute_cwd (execute_t *self);
//  Writes the inputs and starts the program. log_fds: the task's log
//  descriptors (tasklog.h) for its fds 2 and, unless stdout is an output,
//  1, and stderr_log the stderr log's path (failure messages quote its
//  tail); or NULL, NULL (stderr to a file of its own, stdout nowhere).
//  0, or -1 with a message in err (the caller destroys it).
int execute_start (execute_t *self, task_t *task, store_t *store, const int *log_fds,
                   const char *stderr_log, char *err, size_t err_size);
//  `text` with every %{CWD} replaced by cwd, NUL-terminated, or NULL when
//  out of memory. Free it.
char *execute_expand_cwd (const char *text, size_t len, const char *cwd);
void execute_destroy (execute_t **self_p);
//  Resident memory of the program and everything it started (its process
//  group), in bytes; 0 once it exited.
uint64_t execute_rss (execute_t *self);
//  The governor's end of a stream pipe (input: the program's stdin, to
//  write; else its stdout, to read), taken over by the caller; -1 if the
//  task has no such stream.
int execute_take_pipe (execute_t *self, bool input);
//  Every reader of its stream output left: the program dying of SIGPIPE
//  (or a shell exiting 141 for it) is not a failure.
void execute_allow_sigpipe (execute_t *self);
//  pidfd readable when the child exits, -1 if polling is needed.
int execute_fd (execute_t *self);
//  Reaps the child if it exited: 1 (status kept), 0 still running.
int execute_poll (execute_t *self);
//  SIGKILLs the child's process group (timeouts, STOP).
void execute_kill (execute_t *self);
//  After execute_poll returned 1: reads outputs into task->results. 0, or -1
//  with the failure message (exit status, stderr tail, missing output).
int execute_finish (execute_t *self, task_t *task, char *err, size_t err_size);
//  The program's exit status once it ended (negative: the signal that
//  killed it): true with *code, false if it has not ended.
bool execute_exit_code (execute_t *self, int32_t *code);

#endif
