/*  serve: GFETCH, GREAD, PUT, LOGREAD and RUNREAD from clients, on the
    compute thread.
    Each takes the message as the receive thread passed it,
    [S][identity][request] (+ [bytes] for PUT), and sends its reply back
    through `pipe`. Malformed requests are dropped with a warning. */
#ifndef SQ_SERVE_H
#define SQ_SERVE_H

#include "store.h"
#include "transfer.h"
#include "tasklog.h"
#include "stream.h"
#include "pyexec.h"
#include "wire.h"

void serve_gfetch (store_t *store, void *pipe, sq_msg_t *msg);
void serve_gread (store_t *store, void *pipe, sq_msg_t *msg);
void serve_put (transfer_t *transfer, void *pipe, sq_msg_t *msg);
//  PUTLOCAL: a client of this host's upload, the memory file it handed to
//  our socket in the stream directory (stream.h) claimed by the token.
void serve_putlocal (transfer_t *transfer, stream_t *streams, void *pipe, sq_msg_t *msg);
//  LOGREAD: a range of a task's output (tasklog.h); tasklog may be NULL.
void serve_logread (tasklog_t *tasklog, void *pipe, sq_msg_t *msg);
//  RUNREAD: a range of a run's answers (pyexec_ran_read); pyexec may be NULL.
void serve_runread (pyexec_t *pyexec, void *pipe, sq_msg_t *msg);

#endif
