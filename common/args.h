/*  args: parsing of command-line values shared by every squall program,
    so that "--memory 64MiB" means the same to each of them. */
#ifndef SQ_ARGS_H
#define SQ_ARGS_H

#include <stdint.h>

//  A byte size: a whole number with an optional unit K, M, G, T (powers of
//  1024; "KiB", "KB", "k" are all accepted). 0 or -1 on a malformed value.
int sq_parse_size (const char *text, uint64_t *value);
//  A whole number in [min, max]. 0 or -1.
int sq_parse_int (const char *text, int64_t min, int64_t max, int64_t *value);

#endif
