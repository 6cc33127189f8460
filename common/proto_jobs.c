/*  proto_jobs: the bodies of the replies about jobs (docs/protocol.md,
    "Jobs"): a job map (SESSIONS, SESSION_WAIT: the table's JOB map, whose
    job state and task counts are read and packed here), ATTACH's, TASKS' records
    (the table's TASK_INFO: its kind TSTATE and its check are here),
    RESUBMIT's count. The requests themselves are in proto_client.c. */
#include "proto_internal.h"

static const char *s_job_states [] = { "running", "finished", "failed", "cancelled" };
static const char *s_task_states [] = { "waiting", "running", "finished", "failed", "cancelled" };

static const char *
s_bit_name (uint32_t bit, const char **names, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (bit == 1u << i)
            return names [i];
    return NULL;
}

//  The bit of a state name, 0 if it is none.
static uint32_t
s_bit_of (mpr_str_t name, const char **names, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (mpr_str_eq (name, names [i]))
            return 1u << i;
    return 0;
}

//  A TASKS record's own task id only for an element of an array
int
sqp_task_of_element (mpr_t *r, const void *msg)
{
    const sq_task_info_t *m = (const sq_task_info_t *) msg;
    mpr_field (r, "task");
    if (m->task && !m->index.has)
        return mpr_fail (r, "a task id of 0 or of a plain task");
    return 0;
}

//  The kind TSTATE (proto_table.c): a task state bit as its name
void
sqp_kind_read_tstate (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    uint32_t *bit = SQP_AT (uint32_t, msg, f);
    mpr_str_t state;
    if (mpr_str (r, &state, 64) == 0) {
        *bit = s_bit_of (state, s_task_states, 5);
        if (!*bit)
            mpr_fail (r, "unknown task state");
    }
}

void
sqp_kind_pack_tstate (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    const char *state = s_bit_name (*SQP_CAT (uint32_t, msg, f), s_task_states, 5);
    sq_pack_cstr (pk, state? state: "waiting");
}

const char *
sq_job_state_name (uint32_t bit)
{
    return s_bit_name (bit, s_job_states, 4);
}

const char *
sq_task_state_bit_name (uint32_t bit)
{
    return s_bit_name (bit, s_task_states, 5);
}

//  The job map's own HOWs (proto_messages.def's JOB map)
int
sqp_read_job_state (mpr_t *r, uint32_t *bit)
{
    mpr_str_t state;
    if (mpr_str (r, &state, 64))
        return -1;
    *bit = s_bit_of (state, s_job_states, 4);
    return *bit? 0: mpr_fail (r, "unknown job state");
}

void
sqp_pack_job_state (msgpack_packer *pk, uint32_t bit)
{
    const char *state = sq_job_state_name (bit);
    sq_pack_cstr (pk, state? state: "running");
}

int
sqp_read_task_counts (mpr_t *r, uint64_t *counts)
{
    uint32_t n, got = 0;
    if (mpr_map (r, &n))
        return -1;
    for (uint32_t i = 0; i < n && mpr_ok (r); i++) {
        mpr_str_t state;
        uint64_t count;
        mpr_field (r, "tasks key");
        if (mpr_str (r, &state, 64))
            break;
        uint32_t bit = s_bit_of (state, s_task_states, 5);
        mpr_field (r, "tasks count");
        if (mpr_uint (r, &count))
            break;
        if (!bit || (got & bit))
            return mpr_fail (r, "unknown or repeated task state");
        got |= bit;
        counts [__builtin_ctz (bit)] = count;
    }
    return mpr_ok (r)? 0: -1;
}

void
sqp_pack_task_counts (msgpack_packer *pk, const uint64_t *counts)
{
    msgpack_pack_map (pk, 5);
    for (int i = 0; i < 5; i++) {
        sq_pack_cstr (pk, s_task_states [i]);
        msgpack_pack_uint64 (pk, counts [i]);
    }
}

void
sq_pack_job (msgpack_packer *pk, const sq_job_info_t *job)
{
    sqp_pack_map_JOB (pk, job);
}

//  Reads a job map (the table's JOB): keys it does not know are skipped (a
//  newer broker may say more), each known key at most once, all of them
//  required.
int
sq_job_read (mpr_t *r, sq_job_info_t *job)
{
    mpr_field (r, "job");
    return sqp_read_map_JOB (r, job);
}

int
sq_job_decode (sq_job_info_t *self, const uint8_t *body, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    mpr_init (&r, body, size);
    sq_job_read (&r, self);
    return sqp_end (&r, err, "job");
}

int
sq_jobs_reply_begin (sq_iter_t *self, const uint8_t *body, size_t size,
                     uint32_t *n, sq_errbuf_t *err)
{
    return sqp_list_begin (self, body, size, "SESSIONS reply", NULL, NULL, 0, "jobs",
                           SQ_JOBS_MAX, "more than 100000", n, err);
}

int
sq_jobs_reply_next (sq_iter_t *self, sq_job_info_t *job)
{
    int more = sqp_iter_more (self, "SESSIONS reply");
    if (more > 0 && sq_job_read (&self->r, job))
        return sqp_error (&self->r, self->err, "SESSIONS reply");
    return more;
}

void
sq_pack_attached (msgpack_packer *pk, uint32_t max_id, uint32_t session, const uint8_t *token)
{
    sq_attached_t m = { max_id, session, { (const char *) token, SQ_TOKEN_LEN } };
    sq_record_pack (pk, SQ_REC_ATTACHED, &m);
}

int
sq_attached_decode (const uint8_t *body, size_t size, uint32_t *max_id,
                    uint32_t *session, uint8_t *token, sq_errbuf_t *err)
{
    return sqp_session_body_decode (SQ_REC_ATTACHED, "ATTACH reply", body, size, max_id,
                                    session, token, err);
}

void
sq_pack_tasks_head (msgpack_packer *pk, uint64_t total, uint32_t n)
{
    sqp_pack_list_head (pk, &total, 1, n);
}

void
sq_pack_task_info (msgpack_packer *pk, const sq_task_info_t *task)
{
    sqp_pack_TASK_INFO (pk, task);
}

int
sq_tasks_reply_begin (sq_iter_t *self, const uint8_t *body, size_t size,
                      uint64_t *total, uint32_t *n, sq_errbuf_t *err)
{
    static const char *heads [] = { "total" };
    *total = 0;
    return sqp_list_begin (self, body, size, "TASKS reply", heads, total, 1, "records",
                           SQ_TASKS_PAGE_MAX, "more than 10000", n, err);
}

int
sq_tasks_reply_next (sq_iter_t *self, sq_task_info_t *task)
{
    return sqp_list_next (self, SQ_REC_TASK_INFO, task, "record", "TASKS reply");
}
