/*  jobs: sessions that outlive their client (docs/protocol.md, "Jobs"). */
#include "jobs.h"

struct _jobwait_t {
    peer_t *peer;
    uint32_t req;
    uint32_t session;
    int64_t deadline;           //  monotonic ms, < 0 for none
};

//  A session's job state beyond what the graph keeps (arrays: jobs_array.c
//  adds to it). Allocated on first use.
struct _jobx_t {
    int unused;
};

void
jobx_destroy (struct _jobx_t **self_p)
{
    if (*self_p) {
        free (*self_p);
        *self_p = NULL;
    }
}

//  --------------------------------------------------------------------------
//  What a job is now

static uint64_t
s_unfinished (const session_t *session)
{
    return session->unfinished;
}

static void
s_job_info (const session_t *session, sq_job_info_t *job)
{
    memset (job, 0, sizeof *job);
    job->id = session->id;
    if (session->name)
        job->name = (mpr_str_t) { session->name, (uint32_t) strlen (session->name) };
    job->detached = session->job;
    job->attached = session->client != NULL;
    const uint32_t *c = session->counts;
    job->tasks [0] = (uint64_t) c [TASK_WAITING] + c [TASK_READY] + c [TASK_ASSIGNED];
    job->tasks [1] = c [TASK_RUNNING];
    job->tasks [2] = c [TASK_FINISHED];
    job->tasks [3] = c [TASK_FAILED];
    job->tasks [4] = c [TASK_CANCELLED];
    if (s_unfinished (session))
        job->state = SQ_JOBSTATE_RUNNING;
    else
    if (job->tasks [3])
        job->state = SQ_JOBSTATE_FAILED;
    else
    if (job->tasks [4])
        job->state = SQ_JOBSTATE_CANCELLED;
    else
        job->state = SQ_JOBSTATE_FINISHED;
    job->created_ms = (uint64_t) session->created_ms;
    job->ended_ms = job->state == SQ_JOBSTATE_RUNNING? 0: (uint64_t) session->ended_ms;
}

//  The session named by id or name, if this peer may see it.
static session_t *
s_find (broker_t *self, peer_t *peer, uint32_t id, const sq_request_t *q)
{
    session_t *session = NULL;
    if (id)
        session = graph_session (self->graph, id);
    else
    if (q && q->has_name) {
        size_t cursor = 0;
        session_t *s;
        while ((s = graph_session_next (self->graph, &cursor)))
            if (s->name && strlen (s->name) == q->name.len
            &&  memcmp (s->name, q->name.ptr, q->name.len) == 0 && bx_same_tenant (peer, s)) {
                session = s;
                break;
            }
    }
    if (session && !bx_same_tenant (peer, session))
        session = NULL;
    return session;
}

//  The same answer for a job that is not there and another tenant's.
static void
s_unknown (broker_t *self, peer_t *peer, const sq_request_t *q, uint32_t id)
{
    char message [200];
    if (!id && q->has_name)
        snprintf (message, sizeof message, "no job named %.*s", (int) q->name.len, q->name.ptr);
    else
        snprintf (message, sizeof message, "no job %u", id);
    bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_SESSION, message, 0);
}

static void
s_reply_job (broker_t *self, peer_t *peer, uint32_t req, const session_t *session)
{
    sq_job_info_t job;
    s_job_info (session, &job);
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, req);
    sq_pack_job (&self->out.pk, &job);
    bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

//  --------------------------------------------------------------------------
//  Opening

int
jobs_open (broker_t *self, peer_t *peer, session_t *session, const sq_request_t *q,
           char *message, size_t message_size)
{
    session->created_ms = (int64_t) sq_wall_ms ();
    session->ended_ms = session->created_ms;
    if (!q->has_name && !q->detached)
        return SQ_OK;
    if (q->has_name) {
        size_t cursor = 0;
        session_t *s;
        while ((s = graph_session_next (self->graph, &cursor)))
            if (s != session && s->name && strlen (s->name) == q->name.len
            &&  memcmp (s->name, q->name.ptr, q->name.len) == 0
            &&  (s->tenant? peer->tenant && strcmp (s->tenant, peer->tenant) == 0: !peer->tenant)) {
                snprintf (message, message_size, "a job named %.*s exists (job %u)",
                          (int) q->name.len, q->name.ptr, s->id);
                return SQ_E_DUPLICATE_ID;
            }
        session->name = mpr_strdup (q->name);
        if (!session->name) {
            snprintf (message, message_size, "out of memory");
            return SQ_E_NOMEM;
        }
    }
    session->job = q->detached;
    return SQ_OK;
}

//  --------------------------------------------------------------------------
//  Parked SESSION_WAITs

static void
s_wait_remove (broker_t *self, size_t i)
{
    peer_t *peer = self->jobwaits [i].peer;
    if (peer->outstanding)
        peer->outstanding--;
    self->jobwaits [i] = self->jobwaits [--self->n_jobwaits];
}

//  Answers the waits on a session that stopped running.
static void
s_waits_answer (broker_t *self, session_t *session)
{
    for (size_t i = 0; i < self->n_jobwaits; )
        if (self->jobwaits [i].session == session->id) {
            s_reply_job (self, self->jobwaits [i].peer, self->jobwaits [i].req, session);
            s_wait_remove (self, i);
        }
        else
            i++;
}

static void
s_session_wait (broker_t *self, peer_t *peer, const sq_request_t *q, session_t *session)
{
    if (!s_unfinished (session)) {
        s_reply_job (self, peer, q->req, session);
        return;
    }
    if (q->timeout_ms == 0) {
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_TIMEOUT,
                        "the job is still running", 0);
        return;
    }
    if (peer->outstanding >= self->config.max_requests) {
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_BUSY,
                        "too many waits and fetches outstanding on this connection", 0);
        return;
    }
    if (self->n_jobwaits == self->cap_jobwaits) {
        size_t cap = self->cap_jobwaits? self->cap_jobwaits * 2: 16;
        struct _jobwait_t *p = realloc (self->jobwaits, cap * sizeof *p);
        if (!p) {
            bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_NOMEM,
                            "out of memory", 0);
            return;
        }
        self->jobwaits = p;
        self->cap_jobwaits = cap;
    }
    peer->outstanding++;
    self->jobwaits [self->n_jobwaits++] = (struct _jobwait_t) {
        peer, q->req, session->id, bx_deadline (q->timeout_ms)
    };
}

void
jobs_session_closing (broker_t *self, session_t *session)
{
    for (size_t i = 0; i < self->n_jobwaits; )
        if (self->jobwaits [i].session == session->id) {
            peer_t *peer = self->jobwaits [i].peer;
            char message [80];
            snprintf (message, sizeof message, "job %u was closed", session->id);
            bx_reply_error (self, peer->identity, peer->identity_size, self->jobwaits [i].req,
                            SQ_E_SESSION, message, 0);
            s_wait_remove (self, i);
        }
        else
            i++;
}

void
jobs_drop_client (broker_t *self, peer_t *peer)
{
    for (size_t i = 0; i < self->n_jobwaits; )
        if (self->jobwaits [i].peer == peer)
            s_wait_remove (self, i);
        else
            i++;
}

//  --------------------------------------------------------------------------
//  Events

static task_extra_t *
s_run_extra (task_t *task)
{
    return task->session->job? graph_task_extra (task): NULL;
}

static void
s_count_run (task_extra_t *extra, task_t *task, gov_t *gov)
{
    extra->run_gov = gov->id;
    if (extra->run_attempt != task->attempt + 1) {
        extra->run_attempt = task->attempt + 1;
        extra->runs++;
        extra->started_ms = (int64_t) sq_wall_ms ();
        extra->has_exit_code = false;
    }
}

void
jobs_task_started (broker_t *self, task_t *task, gov_t *gov)
{
    (void) self;
    task_extra_t *extra = s_run_extra (task);
    if (extra)
        s_count_run (extra, task, gov);
}

void
jobs_task_ran (broker_t *self, task_t *task, gov_t *gov, bool has_exit, int32_t exit_code)
{
    (void) self;
    task_extra_t *extra = s_run_extra (task);
    if (!extra)
        return;
    s_count_run (extra, task, gov);
    extra->has_exit_code = has_exit;
    extra->exit_code = exit_code;
}

void
jobs_task_ending (broker_t *self, task_t *task)
{
    (void) self;
    if (task->session->job && task->extra && !persist_replaying (self->persist))
        task->extra->ended_ms = (int64_t) sq_wall_ms ();
}

void
jobs_task_done (broker_t *self, task_t *task)
{
    session_t *session = task->session;
    if (!s_unfinished (session)) {
        session->ended_ms = (int64_t) sq_wall_ms ();
        s_waits_answer (self, session);
    }
}

void
jobs_submitted (broker_t *self, session_t *session)
{
    (void) self;
    if (s_unfinished (session))
        session->ended_ms = 0;
}

//  --------------------------------------------------------------------------
//  Requests

static int
s_by_id (const void *a, const void *b)
{
    uint32_t x = (*(session_t *const *) a)->id, y = (*(session_t *const *) b)->id;
    return x < y? -1: x > y;
}

static void
s_sessions (broker_t *self, peer_t *peer, const sq_request_t *q)
{
    //  Oldest first: sessions are listed in id order.
    size_t cursor = 0, n = 0;
    session_t *s;
    session_t **list = NULL;
    size_t cap = 0;
    while ((s = graph_session_next (self->graph, &cursor))) {
        if (!bx_same_tenant (peer, s))
            continue;
        if (q->session && s->id != q->session)
            continue;
        if (q->has_name && !(s->name && strlen (s->name) == q->name.len
                             && memcmp (s->name, q->name.ptr, q->name.len) == 0))
            continue;
        sq_job_info_t job;
        s_job_info (s, &job);
        if (q->states && !(q->states & job.state))
            continue;
        if (n == cap) {
            cap = cap? cap * 2: 64;
            session_t **p = realloc (list, cap * sizeof *p);
            if (!p) {
                free (list);
                bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_NOMEM,
                                "out of memory", 0);
                return;
            }
            list = p;
        }
        list [n++] = s;
    }
    //  The session map is not ordered: by id is by age.
    qsort (list, n, sizeof *list, s_by_id);
    if (n > SQ_JOBS_MAX)
        n = SQ_JOBS_MAX;
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, q->req);
    msgpack_pack_array (&self->out.pk, (uint32_t) n);
    for (size_t i = 0; i < n; i++) {
        sq_job_info_t job;
        s_job_info (list [i], &job);
        sq_pack_job (&self->out.pk, &job);
    }
    free (list);
    bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

//  ATTACH: the session onto this connection, as RESUME without its token
//  (being of its tenant is the right).
static void
s_attach (broker_t *self, peer_t *peer, const sq_request_t *q)
{
    if ((q->session != 0) == q->has_name) {
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_INVALID,
                        "ATTACH names a job by id or by name: one of them", 0);
        return;
    }
    session_t *session = s_find (self, peer, q->session, q);
    if (!session) {
        s_unknown (self, peer, q, q->session);
        return;
    }
    if (session->client != peer) {
        if (!bx_peer_add_session (peer, session->id)) {
            bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_BUSY,
                            "too many sessions open on this connection", 0);
            return;
        }
        if (session->client) {
            peer_t *old = (peer_t *) session->client;
            bx_peer_remove_session (old, session->id);
            watches_drop_session (self->watches, session);
        }
        session->client = peer;
        session->detached_at = 0;
        sq_info ("session %u attached by client %u (%s)", session->id, peer->id, peer->name);
    }
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, q->req);
    sq_pack_attached (&self->out.pk, session->max_id, session->id, session->token);
    bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

static uint32_t
s_task_bit (const task_t *task)
{
    switch (task->state) {
        case TASK_RUNNING: return 2;
        case TASK_FINISHED: return 4;
        case TASK_FAILED: return 8;
        case TASK_CANCELLED: return 16;
        default: return 1;
    }
}

static void
s_task_info (const task_t *task, sq_task_info_t *info)
{
    memset (info, 0, sizeof *info);
    const task_extra_t *extra = task_extra (task);
    info->id = sq_key_id (task->key);
    info->state = s_task_bit (task);
    info->has_exit_code = extra->has_exit_code;
    info->exit_code = extra->exit_code;
    info->governor = task->gov? task->gov->id: extra->run_gov;
    info->attempts = extra->runs;
    info->started_ms = (uint64_t) extra->started_ms;
    info->ended_ms = task->state >= TASK_FINISHED? (uint64_t) extra->ended_ms: 0;
    if (task->failure && task->failure->message)
        info->error = (mpr_str_t) { task->failure->message,
                                    (uint32_t) strlen (task->failure->message) };
    const char *name = extra->name? extra->name: "";
    info->name = (mpr_str_t) { name, (uint32_t) strlen (name) };
}

static void
s_tasks (broker_t *self, peer_t *peer, const sq_request_t *q, session_t *session)
{
    uint32_t limit = q->limit? q->limit: SQ_TASKS_PAGE_MAX;
    //  Two passes over the session: the total, then the page.
    uint64_t total = 0;
    size_t cursor = 0;
    task_t *task;
    while ((task = graph_session_next_task (session, &cursor)))
        if (!q->states || (q->states & s_task_bit (task)))
            total++;
    uint64_t skip = q->offset;
    uint32_t n = total > skip? (uint32_t) (total - skip < limit? total - skip: limit): 0;
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, q->req);
    sq_pack_tasks_head (&self->out.pk, total, n);
    cursor = 0;
    uint32_t packed = 0;
    while (packed < n && (task = graph_session_next_task (session, &cursor))) {
        if (q->states && !(q->states & s_task_bit (task)))
            continue;
        if (skip) {
            skip--;
            continue;
        }
        sq_task_info_t info;
        s_task_info (task, &info);
        sq_pack_task_info (&self->out.pk, &info);
        packed++;
    }
    bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

//  Cancels every unfinished task of the session.
static void
s_cancel_all (broker_t *self, session_t *session)
{
    size_t cursor = 0, n = 0, cap = 0;
    task_t *task, **list = NULL;
    //  Collected first: cancelling changes the states the walk reads.
    while ((task = graph_session_next_task (session, &cursor)))
        if (task->state < TASK_FINISHED) {
            if (n == cap) {
                cap = cap? cap * 2: 64;
                task_t **p = realloc (list, cap * sizeof *p);
                if (!p)
                    break;
                list = p;
            }
            list [n++] = task;
        }
    for (size_t i = 0; i < n; i++)
        if (list [i]->state < TASK_FINISHED)
            graph_cancel (self->graph, list [i]);
    free (list);
    persist_ids (self->persist, SQ_REC_CANCEL, session->id, NULL, 0);
}

bool
jobs_request (broker_t *self, peer_t *peer, const sq_request_t *q)
{
    switch (q->type) {
        case SQ_MSG_SESSIONS:
            s_sessions (self, peer, q);
            return true;
        case SQ_MSG_ATTACH:
            s_attach (self, peer, q);
            return true;
        case SQ_MSG_SESSION_WAIT: case SQ_MSG_TASKS: case SQ_MSG_RESUBMIT:
        case SQ_MSG_FORGET: case SQ_MSG_JOB_CANCEL:
            break;
        default:
            return false;
    }
    session_t *session = s_find (self, peer, q->session, NULL);
    if (!session) {
        s_unknown (self, peer, q, q->session);
        return true;
    }
    switch (q->type) {
        case SQ_MSG_SESSION_WAIT:
            s_session_wait (self, peer, q, session);
            break;
        case SQ_MSG_TASKS:
            s_tasks (self, peer, q, session);
            break;
        case SQ_MSG_RESUBMIT: {
            uint64_t again = 0;
            uint32_t bad = 0;
            int rc = jobs_resubmit (self, session, q->ids, q->n_ids, &again, &bad);
            if (rc) {
                char message [120];
                snprintf (message, sizeof message, "task %u is not a task of job %u",
                          bad, session->id);
                bx_reply_error (self, peer->identity, peer->identity_size, q->req, rc, message, bad);
                break;
            }
            sq_wbuf_reset (&self->out);
            sq_reply_begin (&self->out, q->req);
            sq_pack_count (&self->out.pk, again);
            bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
            break;
        }
        case SQ_MSG_FORGET: {
            peer_t *owner = (peer_t *) session->client;
            if (owner)
                bx_peer_remove_session (owner, session->id);
            sq_info ("job %u forgotten by client %u (%s)", session->id, peer->id, peer->name);
            bx_session_close (self, session);
            bx_reply_nil (self, peer, q->req);
            break;
        }
        case SQ_MSG_JOB_CANCEL:
            s_cancel_all (self, session);
            bx_reply_nil (self, peer, q->req);
            break;
        default:
            break;
    }
    return true;
}

//  --------------------------------------------------------------------------
//  Deadlines and retention

static int
s_by_ended (const void *a, const void *b)
{
    int64_t x = (*(session_t *const *) a)->ended_ms, y = (*(session_t *const *) b)->ended_ms;
    return x < y? -1: x > y;
}

//  Jobs that ended and that no client holds go after --job-retention, and
//  the oldest beyond --job-limit.
static void
s_retention (broker_t *self)
{
    int64_t wall = (int64_t) sq_wall_ms ();
    size_t cursor = 0, n = 0, cap = 0;
    session_t *s, **idle = NULL;
    while ((s = graph_session_next (self->graph, &cursor)))
        if (s->job && !s->client && !s_unfinished (s)) {
            if (n == cap) {
                cap = cap? cap * 2: 64;
                session_t **p = realloc (idle, cap * sizeof *p);
                if (!p)
                    break;
                idle = p;
            }
            idle [n++] = s;
        }
    if (n == 0) {
        free (idle);
        return;
    }
    qsort (idle, n, sizeof *idle, s_by_ended);
    for (size_t i = 0; i < n; i++) {
        bool over = n - i > self->config.job_limit;
        bool old = self->config.job_retention_ms > 0
                && wall - idle [i]->ended_ms >= self->config.job_retention_ms;
        if (!over && !old)
            continue;
        sq_info ("job %u dropped: %s", idle [i]->id,
                 over? "more ended jobs than --job-limit": "ended longer ago than --job-retention");
        bx_session_close (self, idle [i]);
    }
    free (idle);
}

int64_t
jobs_tick (broker_t *self, int64_t now)
{
    int64_t next = -1;
    for (size_t i = 0; i < self->n_jobwaits; ) {
        struct _jobwait_t *w = &self->jobwaits [i];
        if (w->deadline >= 0 && w->deadline <= now) {
            bx_reply_error (self, w->peer->identity, w->peer->identity_size, w->req,
                            SQ_E_TIMEOUT, "the job is still running", 0);
            s_wait_remove (self, i);
            continue;
        }
        if (w->deadline >= 0 && (next < 0 || w->deadline < next))
            next = w->deadline;
        i++;
    }
    return next;
}

void
jobs_expire (broker_t *self)
{
    s_retention (self);
}

int
jobs_resubmit (broker_t *self, session_t *session, const uint32_t *ids, uint32_t n,
               uint64_t *again, uint32_t *bad)
{
    (void) self;
    *again = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!graph_task (self->graph, sq_key (session->id, ids [i]))) {
            *bad = ids [i];
            return SQ_E_UNKNOWN_ID;
        }
    return SQ_OK;
}
