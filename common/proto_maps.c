/*  proto_maps: the maps of the message table (proto_messages.def's SQ_MAP
    rows: INFO's body and its parts, a job, the dashboard's sessions), each
    packed by a function made from its rows, sqp_pack_map_NAME, and those
    that are read (SQ_MAP_RW: a job) read by sqp_read_map_NAME. A key is
    packed and read by how its row says (S_PACK_UINT, S_READ_UINT ...). */
#include "proto_internal.h"

//  Each map's count of keys
#define SQ_MAP(NAME, type_t) enum { S_KEYS_##NAME = 0
#define SQ_KEY(NAME, HOW, member, n, key, with) + 1
#define SQ_MAP_END(NAME) };
#include "proto_messages.def"

//  A key's value, from m, by how its row says
#define S_PACK_UINT(member, n, with) msgpack_pack_uint64 (pk, (uint64_t) m->member)
#define S_PACK_CSTR(member, n, with) sq_pack_cstr (pk, m->member? m->member: "")
#define S_PACK_RESOURCES(member, n, with) \
    if (m->n) \
        sqp_pack_resources (pk, m->member, m->n); \
    else \
        msgpack_pack_map (pk, 0)
#define S_PACK_LIST(member, n, with) \
    msgpack_pack_array (pk, (uint32_t) m->n); \
    for (size_t i = 0; i < m->n; i++) \
        sqp_pack_map_##with (pk, &m->member [i])
#define S_PACK_OMAP(member, n, with) \
    if (m->member) \
        sqp_pack_map_##with (pk, m->member); \
    else \
        msgpack_pack_nil (pk)
#define S_PACK_SUB(member, n, with) sqp_pack_map_##with (pk, m)
#define S_PACK_STATES(member, n, with) \
    msgpack_pack_map (pk, (uint32_t) m->n); \
    for (size_t i = 0; i < m->n; i++) { \
        sq_pack_cstr (pk, m->member [i]); \
        msgpack_pack_uint64 (pk, m->with [i]); \
    }

#define S_PACK_BOOL(member, n, with) \
    if (m->member) \
        msgpack_pack_true (pk); \
    else \
        msgpack_pack_false (pk)
#define S_PACK_OU64(member, n, with) \
    if (m->member) \
        msgpack_pack_uint64 (pk, m->member); \
    else \
        msgpack_pack_nil (pk)
#define S_PACK_ESTR(member, n, with) \
    if (m->member.len) \
        sq_pack_mstr (pk, m->member); \
    else \
        msgpack_pack_nil (pk)
#define S_PACK_JSTATE(member, n, with) sqp_pack_job_state (pk, m->member)
#define S_PACK_TCOUNTS(member, n, with) sqp_pack_task_counts (pk, m->member)

#define SQ_MAP(NAME, type_t) \
    void sqp_pack_map_##NAME (msgpack_packer *pk, const type_t *m) \
    { \
        msgpack_pack_map (pk, S_KEYS_##NAME);
#define SQ_KEY(NAME, HOW, member, n, key, with) \
        sq_pack_cstr (pk, key); \
        S_PACK_##HOW (member, n, with);
#define SQ_MAP_END(NAME) }
#include "proto_messages.def"

//  A key's value into m, by how its row says; only the HOWs a map that is
//  read (SQ_MAP_RW) has
#define S_READ_UINT(member, n, with) { \
        uint64_t v; \
        if (mpr_uint (r, &v) == 0 && (uint64_t) (m->member = v) != v) \
            mpr_fail (r, "out of range"); \
    }
#define S_READ_BOOL(member, n, with) mpr_bool (r, &m->member)
#define S_READ_OU64(member, n, with) \
    if (!mpr_try_nil (r)) \
        mpr_uint (r, &m->member)
#define S_READ_ESTR(member, n, with) \
    if (!mpr_try_nil (r)) \
        mpr_str (r, &m->member, n)
#define S_READ_JSTATE(member, n, with) sqp_read_job_state (r, &m->member)
#define S_READ_TCOUNTS(member, n, with) sqp_read_task_counts (r, m->member)

//  (The HOWs of maps that are only packed: their readers are never called)
#define S_READ_CSTR(member, n, with) mpr_fail (r, "not read")
#define S_READ_RESOURCES S_READ_CSTR
#define S_READ_LIST S_READ_CSTR
#define S_READ_OMAP S_READ_CSTR
#define S_READ_SUB S_READ_CSTR
#define S_READ_STATES S_READ_CSTR

//  Each map that is read: its entries, each key found among its rows (the
//  bit of its row in seen), then every key seen. A map that is only packed
//  gets one too, static and never called (so the compiler drops it), as
//  its rows expand alike in every map.
#define SQ_MAP(NAME, type_t) \
    static __attribute__ ((unused)) S_READER (NAME, type_t, s_unread_##NAME)
#define SQ_MAP_RW(NAME, type_t) S_READER (NAME, type_t, sqp_read_map_##NAME)
#define S_READER(NAME, type_t, fn) \
    int fn (mpr_t *r, type_t *m) \
    { \
        uint32_t n, seen = 0; \
        memset (m, 0, sizeof *m); \
        if (mpr_map (r, &n)) \
            return -1; \
        for (uint32_t i = 0; i < n && mpr_ok (r); i++) { \
            mpr_str_t key; \
            uint32_t at = 0; \
            bool known = false; \
            mpr_field (r, #NAME " key"); \
            if (mpr_str (r, &key, 64)) \
                break;
#define SQ_KEY(NAME, HOW, member, n, key_, with) \
            if (!known && mpr_str_eq (key, key_)) { \
                known = true; \
                if (seen & (1u << at)) \
                    mpr_fail (r, "a key twice"); \
                seen |= 1u << at; \
                mpr_field (r, key_); \
                if (mpr_ok (r)) { \
                    S_READ_##HOW (member, n, with); \
                } \
            } \
            at++;
#define SQ_MAP_END(NAME) \
            if (!known) { \
                mpr_field (r, #NAME " value"); \
                mpr_skip (r, NULL, NULL); \
            } \
        } \
        _Static_assert (S_KEYS_##NAME <= 32, #NAME ": more keys than seen has bits"); \
        if (mpr_ok (r) && seen != (uint32_t) ((1ull << S_KEYS_##NAME) - 1)) \
            mpr_fail (r, "a key missing"); \
        return mpr_ok (r)? 0: -1; \
    }
#include "proto_messages.def"

void
sq_pack_info (msgpack_packer *pk, const sq_info_t *info)
{
    sqp_pack_map_INFO (pk, info);
}

void
sq_pack_sessions (msgpack_packer *pk, const sq_info_session_t *sessions, size_t n)
{
    msgpack_pack_array (pk, (uint32_t) n);
    for (size_t i = 0; i < n; i++)
        sqp_pack_map_SESSION_ROW (pk, &sessions [i]);
}
