/*  stream: both ends of streams on this governor (docs/protocol.md,
    "Streams"): objects read while a task writes them, never stored.

    Writer: a task's stream output is a pipe (execute: the program's
    stdout). The broker names its readers one by one (STREAM orders, or
    UNSTREAM for one that will not come); until every reader it was told
    of at ASSIGN is named, nothing is read from the pipe, so the program
    blocks on it rather than have its bytes buffered. Then each read of up
    to STREAM_CHUNK bytes becomes one SCHUNK to every reader (the same
    bytes, zero-copy), and the pipe is read again only while every reader
    has credit: at most STREAM_WINDOW chunks ahead of its SCREDITs. A slow
    reader slows the writer; memory stays within window x chunk per
    reader. Once the pipe is at its end and the program exited well, a
    last, empty chunk marked `end` says so; a writer that fails sends no
    end, and its readers fail with it (the broker stops them), so no
    reader finishes on the bytes of a writer that failed.

    Reader: SCHUNKs of a stream input queue (at most a window, since the
    writer keeps within it) until the task's pipe (execute: its stdin)
    takes them; each chunk written whole is credited back, so credit
    moves at the pace the program reads. At `end` the pipe is closed (the
    program sees end of file). A reader that stops early (its program
    closed stdin or ended) says SCREDIT 0, and the writer forgets it; with
    no reader left, the writer's pipe is closed (the program gets SIGPIPE,
    which does not fail it: its readers wanted no more).

    Chunks that arrive before their reader's ASSIGN wait, at most
    STREAM_EARLY_MS (and STREAM_MAX_EARLY of them, STREAM_MAX_EARLY_BYTES in
    all: past that they are refused); chunks for a reader that ended are
    answered SCREDIT 0.

    Same host: with a stream directory (--stream-dir), a writer with one
    reader whose governor has a socket there (named after its data
    endpoint) hands that governor its pipe's read end (SCM_RIGHTS) with a
    random token; a writer of several readers hands each such reader's
    governor a pipe of its own, which it fills from its pipe (a tee: what
    does not fit waits, and the next read waits for every tee); its end
    waits for each tee's reader to report its pipe's end. Either way the
    writer sends the token in the reader's first SCHUNK over the CURVE
    channel. The reader's governor takes a pipe only from a process of its
    own uid, and only for a token a governor sent it: it then moves the
    bytes from the writer's pipe to the reader's with splice (no copy,
    no encryption), and answers SLOCAL (taken with progress, the pipe's
    end with its bytes, or refused: the writer sends chunks after all).
    The writer's governor keeps its own read end until the stream ends, so
    a reader that leaves still ends the writer by SIGPIPE only once the
    writer's governor knows it was deserted; the end chunk still waits for
    the program to exit well (docs/security.md, "Streams on one host").

    Both ends run in the compute thread. Ownership: stream_new borrows the
    pipe; the stream_t owns every descriptor handed to it and closes them. */
#ifndef GOV_STREAM_H
#define GOV_STREAM_H

#include <stdint.h>
#include <stdbool.h>
#include <zmq.h>
#include "proto.h"
#include "wire.h"

#define STREAM_CHUNK (1u << 20)         //  bytes read from a writer's pipe at most at once
#define STREAM_WINDOW 4                 //  chunks ahead of a reader's credits
#define STREAM_EARLY_MS 20000           //  chunks of a reader not assigned yet
#define STREAM_MAX_EARLY 1024           //  such chunks held, in all
#define STREAM_MAX_EARLY_BYTES (64u << 20)  //  and their bytes

typedef struct _stream_t stream_t;

//  A governor's place in a stream directory (--stream-dir: a directory of
//  ours, mode 0700, made if missing): its socket there, named after its
//  data endpoint, and a second name made from its serve endpoint (as
//  clients know it, WHERE; NULL: none) for clients of this host to hand
//  memory files over (stream_take_segment). Made once per process before the broker knows the
//  governor, and lent to each incarnation's stream_t. NULL if out of
//  memory or the directory is unusable (not ours, open to others, the
//  socket cannot be bound: said in the log). Destroying it removes the
//  socket.
typedef struct _stream_dir_t stream_dir_t;
stream_dir_t *stream_dir_new (const char *dir, const char *endpoint,
                              const char *serve_endpoint);
void stream_dir_destroy (stream_dir_t **self_p);

//  A writer reached the end of its pipe and sent it whole, or every reader
//  left (`deserted`: its pipe was closed under the program, which gets
//  SIGPIPE as in a shell pipeline): `bytes` sent in all. Called from
//  stream_poll.
typedef void (stream_done_fn) (void *arg, uint64_t task, uint32_t attempt, uint64_t bytes,
                               bool deserted);
//  Progress of a writer (for the broker's STREAMED events), at most every
//  second per stream.
typedef void (stream_progress_fn) (void *arg, uint64_t object, uint64_t bytes);

//  A stream went over the same-host path (its reader's governor took the
//  pipe). Called from stream_on_local.
typedef void (stream_local_fn) (void *arg, uint64_t object);

typedef struct {
    void *pipe;                 //  PAIR to the receive thread (borrowed)
    uint32_t governor_id;
    const char *data_endpoint;  //  ours, where readers send SCREDITs
    stream_done_fn *done;
    stream_progress_fn *progress;
    stream_local_fn *local;
    //  Where governors of this host meet to hand pipes over (borrowed),
    //  or NULL: chunks only.
    const stream_dir_t *dir;
    void *arg;
} stream_args_t;

//  NULL if out of memory.
stream_t *stream_new (const stream_args_t *args);
void stream_destroy (stream_t **self_p);

//  Writer: the task `task` (attempt) writes stream `object` to the read end
//  `fd` (taken over, made non-blocking) for `readers` readers. 0, or -1
//  (fd closed).
int stream_writer_add (stream_t *self, uint64_t task, uint32_t attempt, uint64_t object,
                       uint32_t readers, int fd);
//  The writer's program exited well after its pipe's end: the readers get
//  the last chunk, marked end.
void stream_writer_end (stream_t *self, uint64_t task);
//  The task is gone (stopped): its writer goes, readers or not.
void stream_writer_remove (stream_t *self, uint64_t task);
//  STREAM and UNSTREAM orders (msg frame 1: the order batch).
void stream_on_order (stream_t *self, uint32_t type, sq_msg_t *msg);
void stream_on_credit (stream_t *self, sq_msg_t *msg);
//  A client of this host's upload (PUTLOCAL): the memory file handed to
//  our socket with `token` (16 bytes, from the client's CURVE channel),
//  taken out (the caller owns it), or -1 if none came with that token.
//  Files come only from our uid and expire unclaimed like pipes.
int stream_take_segment (stream_t *self, const uint8_t *token);
//  A copy to a governor of this host (LCOPY): `fd` (a sealed memory file,
//  still the caller's) handed to the socket in our stream directory of the
//  governor whose data endpoint is `endpoint` (`len` bytes), with a fresh
//  random `token` (16 bytes, written) for the LCOPY that names it. 0, or
//  -1 when it cannot go (no directory, no such socket: another host, or
//  its queue full): the copy then goes as chunks.
int stream_hand_segment (stream_t *self, const char *endpoint, size_t len, int fd,
                         uint8_t *token);
//  Memory files handed over and not claimed yet (a client that died
//  between its hand-over and its PUTLOCAL leaves one until it expires).
size_t stream_segments_waiting (stream_t *self);
//  SLOCAL from the governor a pipe was handed to.
void stream_on_local (stream_t *self, sq_msg_t *msg);

//  Reader: the task `consumer` reads stream `object` of producer attempt
//  `version` into the write end `fd` (taken over, made non-blocking). 0,
//  or -1 (fd closed).
int stream_reader_add (stream_t *self, uint64_t consumer, uint64_t object, uint32_t version,
                       int fd);
//  The task ended or was stopped: it reads no more (the writer is told).
void stream_reader_remove (stream_t *self, uint64_t consumer);
//  Whether the reader's stream broke off (chunks out of order, too many):
//  its program saw an early end and must not be trusted to have finished.
bool stream_reader_broken (stream_t *self, uint64_t consumer);
void stream_on_chunk (stream_t *self, sq_msg_t *msg);

//  Poll items for the pipes that can move now (writers with every reader
//  in credit, readers with bytes queued), at most max; stream_poll after
//  zmq_poll handles them and the timers. Returns the ms until a timer is
//  due, -1 if none.
size_t stream_items (stream_t *self, zmq_pollitem_t *items, size_t max);
long stream_poll (stream_t *self, zmq_pollitem_t *items, size_t n_items);
//  Bytes queued or in flight, for LOAD's memory.
uint64_t stream_bytes (stream_t *self);

#endif
