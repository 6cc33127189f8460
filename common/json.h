/*  json: a msgpack value as JSON text, for INFO in libsquall
    (sq_client_info) and the broker's dashboard API. The reader is our
    strict one (mpreader): counts checked against the bytes, depth bounded,
    no asserts, so wire input is safe to convert.

    Ownership: the text is malloc'd; the caller frees it. */
#ifndef SQ_JSON_H
#define SQ_JSON_H

#include "proto.h"
#include <stdbool.h>
#include <stddef.h>

//  One msgpack value (a map if want_map) to NUL-terminated JSON text in
//  *json. 0; -1 for malformed input (err says why); -2 out of memory.
int sq_json_from_msgpack (const void *data, size_t size, bool want_map, char **json,
                          sq_errbuf_t *err);

#endif
