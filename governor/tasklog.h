/*  tasklog: every task's standard output and standard error, per task and
    attempt, kept on the governor up to a limit (docs/protocol.md, LOG and
    LOGREAD).

    While an attempt runs, each stream is a memory file (memfd): the
    task's fds 1 and 2 are descriptors of it (an execute program's, or a
    Python executor's for the task's duration), so nothing on the governor
    copies bytes while it runs, and starting a task creates no file on
    disk (which costs milliseconds on a busy disk, for every task, though
    most print nothing). The limit is applied to what is read and kept, not
    to what is written: of a stream of `total` bytes over `limit`, the first
    limit/2 (the head) and the last limit/2 (the tail) are kept, and the
    middle is punched out of the memory file (fallocate PUNCH_HOLE, every
    trim and at the end), so that memory holds about `limit` per stream
    whatever the task prints. A reader's offsets are the task's own byte
    offsets: one that falls in the dropped middle gets a marker line naming
    the count and goes on at the tail.

    When the attempt ends, a stream that holds anything is written to a
    file of the log directory (head and tail at their offsets, a hole
    between); an empty one leaves nothing. Logs of ended attempts are kept
    until S_KEEP_MAX newer ones ended (oldest first) or the governor stops;
    the directory is the governor's (mode 0700). Ownership: the tasklog owns
    its entries, memory files and files; the caller owns the descriptors
    tasklog_start hands out. */
#ifndef SQ_TASKLOG_H
#define SQ_TASKLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct _tasklog_t tasklog_t;

//  The default limit per stream per attempt (--log-limit).
#define TASKLOG_LIMIT_DEFAULT (1u << 20)

//  dir: made if missing; its old contents (an earlier governor's) go.
tasklog_t *tasklog_new (const char *dir, uint64_t limit);
void tasklog_destroy (tasklog_t **self_p);
//  Starts the capture of a task attempt: fds [0] and [1] are descriptors
//  for the task's fds 1 and 2 (the caller passes them on and closes them).
//  limit 0: the governor's. 0, or -1 with err.
int tasklog_start (tasklog_t *self, uint64_t key, uint32_t attempt, uint64_t limit,
                   int fds [2], char *err, size_t err_size);
//  A path the governor can open a stream by (1 stdout, 2 stderr): its
//  memory file's /proc path while it runs, its kept file's once ended.
void tasklog_path (tasklog_t *self, uint64_t key, uint32_t attempt, uint32_t stream,
                   char *out, size_t size);
//  The attempt ended: its log is complete (trimmed one last time).
void tasklog_end (tasklog_t *self, uint64_t key, uint32_t attempt);
//  Punches the dropped middles of running logs; call every few hundred ms.
void tasklog_trim (tasklog_t *self);
//  Reads up to `length` bytes of a stream (1 stdout, 2 stderr) from
//  `offset`: *data (malloc'd, NULL when empty), *size, where to go on
//  (*next), the bytes written so far (*total) and whether the attempt
//  ended and everything was read (*done). -1 if no such log is kept.
int tasklog_read (tasklog_t *self, uint64_t key, uint32_t attempt, uint32_t stream,
                  uint64_t offset, uint64_t length, uint8_t **data, size_t *size,
                  uint64_t *next, uint64_t *total, bool *done);
//  The last bytes of a stream, NUL-terminated in out (failure messages).
void tasklog_tail (tasklog_t *self, uint64_t key, uint32_t attempt, uint32_t stream,
                   char *out, size_t out_size);

#endif
