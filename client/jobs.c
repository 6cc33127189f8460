/*  jobs: the requests about jobs that need no session handle (SESSIONS,
    SESSION_WAIT, TASKS, RESUBMIT, JOB_CANCEL, FORGET), their replies made
    into the plain structs of squall.h. docs/protocol.md, "Jobs". */
#include "sq_client_private.h"
#include <stdlib.h>
#include <string.h>

static int
s_call (sq_client_t *self, sq_request_t *request, int timeout_ms, sq_reply_t *reply)
{
    request->req = sq_client_next_req (self);
    sq_wbuf_reset (&self->w);
    sq_request_encode (&self->w, request);
    return sq_client_call (self, request->req, NULL, 0, timeout_ms, reply);
}

static void
s_copy_str (char *to, size_t size, mpr_str_t from)
{
    size_t n = from.len < size - 1? from.len: size - 1;
    if (n)
        memcpy (to, from.ptr, n);
    to [n] = 0;
}

static void
s_job_out (const sq_job_info_t *in, sq_job_t *out)
{
    memset (out, 0, sizeof *out);
    out->id = in->id;
    s_copy_str (out->name, sizeof out->name, in->name);
    out->state = in->state;
    out->detached = in->detached;
    out->attached = in->attached;
    memcpy (out->tasks, in->tasks, sizeof out->tasks);
    out->created_ms = (int64_t) in->created_ms;
    out->ended_ms = (int64_t) in->ended_ms;
}

int
sq_client_jobs (sq_client_t *self, uint32_t states, uint32_t session, const char *name,
                sq_job_t **jobs, size_t *n)
{
    if (!self || !jobs || !n)
        return self? sq_client_seterr (self, SQ_E_INVALID, 0, 0, "jobs or n is NULL"): SQ_E_INVALID;
    *jobs = NULL;
    *n = 0;
    if (states > 15 || (name && (!*name || strlen (name) > SQ_JOB_NAME_MAX)))
        return sq_client_seterr (self, SQ_E_INVALID, 0, 0, "unknown state bits or a bad name");
    sq_request_t request = { .type = SQ_MSG_SESSIONS, .states = states, .session = session };
    if (name) {
        request.has_name = true;
        request.name = (mpr_str_t) { name, (uint32_t) strlen (name) };
    }
    sq_reply_t reply;
    int rc = s_call (self, &request, SQ_CLIENT_CALL_TIMEOUT, &reply);
    if (rc)
        return rc;
    sq_iter_t it;
    sq_errbuf_t err;
    uint32_t count;
    if (sq_jobs_reply_begin (&it, reply.body, reply.body_size, &count, &err))
        return sq_client_seterr (self, SQ_E_PROTOCOL, 0, 0, "malformed %s", err.text);
    sq_job_t *list = count? (sq_job_t *) calloc (count, sizeof *list): NULL;
    if (count && !list) {
        sq_iter_release (&it);
        return sq_client_seterr (self, SQ_E_NOMEM, 0, 0, "out of memory");
    }
    sq_job_info_t job;
    size_t got = 0;
    while ((rc = sq_jobs_reply_next (&it, &job)) == 1)
        s_job_out (&job, &list [got++]);
    sq_iter_release (&it);
    if (rc < 0) {
        free (list);
        return sq_client_seterr (self, SQ_E_PROTOCOL, 0, 0, "malformed %s", err.text);
    }
    *jobs = list;
    *n = got;
    return 0;
}

int
sq_client_job_wait (sq_client_t *self, uint32_t session, int timeout_ms, sq_job_t *job)
{
    if (!self)
        return SQ_E_INVALID;
    sq_request_t request = {
        .type = SQ_MSG_SESSION_WAIT, .session = session,
        .timeout_ms = timeout_ms < 0? -1: timeout_ms
    };
    int wait = timeout_ms < 0 || timeout_ms > INT32_MAX - SQ_CLIENT_WAIT_MARGIN
             ? -1: timeout_ms + SQ_CLIENT_WAIT_MARGIN;
    sq_reply_t reply;
    int rc = s_call (self, &request, wait, &reply);
    if (rc)
        return rc;
    sq_job_info_t info;
    sq_errbuf_t err;
    if (sq_job_decode (&info, reply.body, reply.body_size, &err))
        return sq_client_seterr (self, SQ_E_PROTOCOL, 0, 0, "malformed SESSION_WAIT reply: %s",
                                 err.text);
    if (job)
        s_job_out (&info, job);
    return 0;
}

int
sq_client_tasks (sq_client_t *self, uint32_t session, uint32_t states, uint64_t offset,
                 uint32_t limit, sq_task_record_t **tasks, size_t *n, uint64_t *total)
{
    if (!self || !tasks || !n)
        return self? sq_client_seterr (self, SQ_E_INVALID, 0, 0, "tasks or n is NULL"): SQ_E_INVALID;
    *tasks = NULL;
    *n = 0;
    if (states > 31 || limit > SQ_TASKS_PAGE_MAX)
        return sq_client_seterr (self, SQ_E_INVALID, 0, 0,
                                 "unknown state bits, or a limit above 10000");
    sq_request_t request = {
        .type = SQ_MSG_TASKS, .session = session, .states = states, .offset = offset,
        .limit = limit
    };
    sq_reply_t reply;
    int rc = s_call (self, &request, SQ_CLIENT_CALL_TIMEOUT, &reply);
    if (rc)
        return rc;
    sq_iter_t it;
    sq_errbuf_t err;
    uint64_t all = 0;
    uint32_t count;
    if (sq_tasks_reply_begin (&it, reply.body, reply.body_size, &all, &count, &err))
        return sq_client_seterr (self, SQ_E_PROTOCOL, 0, 0, "malformed %s", err.text);
    sq_task_record_t *list = count? (sq_task_record_t *) calloc (count, sizeof *list): NULL;
    if (count && !list) {
        sq_iter_release (&it);
        return sq_client_seterr (self, SQ_E_NOMEM, 0, 0, "out of memory");
    }
    sq_task_info_t info;
    size_t got = 0;
    while ((rc = sq_tasks_reply_next (&it, &info)) == 1) {
        sq_task_record_t *t = &list [got++];
        t->id = info.id;
        t->index = info.index.has? info.index.value: -1;
        t->state = info.state;
        t->has_exit_code = info.exit_code.has;
        t->exit_code = (int32_t) info.exit_code.value;
        t->governor = info.governor;
        t->attempts = info.attempts;
        t->started_ms = (int64_t) info.started_ms;
        t->ended_ms = (int64_t) info.ended_ms;
        s_copy_str (t->error, sizeof t->error, info.error);
        s_copy_str (t->name, sizeof t->name, info.name);
        t->task = info.task;
    }
    sq_iter_release (&it);
    if (rc < 0) {
        free (list);
        return sq_client_seterr (self, SQ_E_PROTOCOL, 0, 0, "malformed %s", err.text);
    }
    *tasks = list;
    *n = got;
    if (total)
        *total = all;
    return 0;
}

int
sq_client_resubmit (sq_client_t *self, uint32_t session, const uint32_t *ids, size_t n,
                    uint64_t *again)
{
    if (!self || (n && !ids) || n > UINT32_MAX)
        return self? sq_client_seterr (self, SQ_E_INVALID, 0, 0, "ids is NULL"): SQ_E_INVALID;
    sq_request_t request = {
        .type = SQ_MSG_RESUBMIT, .session = session, .ids = (uint32_t *) ids,
        .n_ids = (uint32_t) n
    };
    sq_reply_t reply;
    int rc = s_call (self, &request, SQ_CLIENT_CALL_TIMEOUT, &reply);
    if (rc)
        return rc;
    sq_count_t count;
    sq_errbuf_t err;
    if (sq_record_decode (SQ_REC_COUNT, &count, reply.body, reply.body_size, "reply", &err))
        return sq_client_seterr (self, SQ_E_PROTOCOL, 0, 0, "malformed RESUBMIT %s", err.text);
    if (again)
        *again = count.n;
    return 0;
}

static int
s_call_nil (sq_client_t *self, uint32_t type, uint32_t session)
{
    if (!self)
        return SQ_E_INVALID;
    sq_request_t request = { .type = type, .session = session };
    sq_reply_t reply;
    int rc = s_call (self, &request, SQ_CLIENT_CALL_TIMEOUT, &reply);
    return sq_client_nil_reply (self, rc, &reply);
}

int
sq_client_job_cancel (sq_client_t *self, uint32_t session)
{
    return s_call_nil (self, SQ_MSG_JOB_CANCEL, session);
}

int
sq_client_forget (sq_client_t *self, uint32_t session)
{
    return s_call_nil (self, SQ_MSG_FORGET, session);
}
