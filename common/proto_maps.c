/*  proto_maps: the maps of the message table (proto_messages.def's SQ_MAP
    rows: INFO's body and its parts, the dashboard's sessions), each packed
    by a function made from its rows, sqp_pack_map_NAME. A key is packed by
    how its row says (S_PACK_UINT etc. below). */
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

#define SQ_MAP(NAME, type_t) \
    void sqp_pack_map_##NAME (msgpack_packer *pk, const type_t *m) \
    { \
        msgpack_pack_map (pk, S_KEYS_##NAME);
#define SQ_KEY(NAME, HOW, member, n, key, with) \
        sq_pack_cstr (pk, key); \
        S_PACK_##HOW (member, n, with);
#define SQ_MAP_END(NAME) }
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
