/*  jobs: sessions that outlive their client (docs/protocol.md, "Jobs"):
    names, detached sessions kept until closed, forgotten or dropped by
    retention, and the requests about them that need not hold the session
    (SESSIONS, ATTACH, SESSION_WAIT, TASKS, RESUBMIT, FORGET, JOB_CANCEL),
    with the tenancy check each passes. SESSION_WAITs are parked here,
    bounded by their client's outstanding requests.

    Ownership: the broker owns the parked waits (broker_t fields); a
    session's job state (session->jobx) is freed with the session. */
#ifndef SQ_JOBS_H
#define SQ_JOBS_H

#include "broker_internal.h"

//  SESSION_OPEN's options on a session just opened. SQ_OK, or an error
//  code with the message (the session must then be closed).
int jobs_open (broker_t *self, peer_t *peer, session_t *session, const sq_request_t *q,
               char *message, size_t message_size);
//  Handles the job requests (true), or leaves the request alone (false).
bool jobs_request (broker_t *self, peer_t *peer, const sq_request_t *q);
//  Graph and report events
void jobs_task_started (broker_t *self, task_t *task, gov_t *gov);
//  Before a FINISHED or FAILED report changes the graph: the governor and
//  an execute program's exit status (has_exit false: none reported).
void jobs_task_ran (broker_t *self, task_t *task, gov_t *gov, bool has_exit, int32_t exit_code);
//  A task reached a final state: first (its end time, before it is
//  journaled), then after (waits answered).
void jobs_task_ending (broker_t *self, task_t *task);
void jobs_task_done (broker_t *self, task_t *task);
//  A SUBMIT was accepted: the session runs again.
void jobs_submitted (broker_t *self, session_t *session);
//  Before a session closes: its SESSION_WAITs are answered SQ_E_SESSION.
void jobs_session_closing (broker_t *self, session_t *session);
void jobs_drop_client (broker_t *self, peer_t *peer);
//  Wait deadlines and retention: returns the next deadline (monotonic ms,
//  < 0 for none).
int64_t jobs_tick (broker_t *self, int64_t now);
//  RESUBMIT: runs again the failed and cancelled array elements of the
//  tasks in ids (all of the session's with n 0); *again: how many. SQ_OK,
//  or SQ_E_UNKNOWN_ID / SQ_E_INVALID with *bad the id.
int jobs_resubmit (broker_t *self, session_t *session, const uint32_t *ids, uint32_t n,
                   uint64_t *again, uint32_t *bad);
//  Retention (--job-retention, --job-limit), looked at with the session
//  graces; children's sessions are not dropped by it (their task's end,
//  or its session's close, closes them).
void jobs_expire (broker_t *self);
//  --after (SESSION_OPEN's `after`, graph.h jobs_after): jobs_hold keeps a
//  task that became ready from the scheduler while the jobs its job waits
//  for run (true: held); jobs_after_replayed settles every waiting job once
//  a journal was replayed.
bool jobs_hold (broker_t *self, task_t *task);
void jobs_after_replayed (broker_t *self);
//  An array task became ready: its elements may be made tasks.
void jobs_array_ready (broker_t *self, task_t *task);
//  Array elements made tasks (at most 1024 of an array at once) and array
//  tasks ended; once per reactor turn, outside any graph call.
//  Returns how many elements it made tasks.
size_t jobs_settle (broker_t *self);
//  ADOPT [85]: objects of a task's children's session (on this connection)
//  into the task's session; answered here.
void jobs_adopt (broker_t *self, peer_t *peer, const sq_request_t *q, session_t *session);
//  SQ_OK if a client may close (or forget) the session now; else the
//  error, with its message (an adopted children's session).
int jobs_close_check (const session_t *session, char *message, size_t message_size);
//  Once, when a broker restarted from its journal has recovered.
void jobs_recovered (broker_t *self);
//  Whether a session is a job (outlives its client).
static inline bool jobs_kept (const session_t *session) { return session->job; }

#endif
