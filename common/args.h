/*  args: parsing of command-line values shared by every squall program,
    so that "--memory 64MiB" means the same to each of them. */
#ifndef SQ_ARGS_H
#define SQ_ARGS_H

#include <stddef.h>
#include <stdint.h>

//  A byte size: a whole number with an optional unit K, M, G, T (powers of
//  1024; "KiB", "KB", "k" are all accepted). 0 or -1 on a malformed value.
int sq_parse_size (const char *text, uint64_t *value);
//  A whole number in [min, max]. 0 or -1.
int sq_parse_int (const char *text, int64_t min, int64_t max, int64_t *value);
//  A duration in ms: a whole number with a unit ms, s, m, h or d ("7d",
//  "90s"; no unit: seconds), at most 100 years. 0 or -1.
int sq_parse_duration_ms (const char *text, int64_t *ms);
//  A ZeroMQ endpoint as users write it: "tcp://HOST:PORT", or "HOST:PORT"
//  (tcp:// is then added); ipc:// and inproc:// pass as they are. A tcp
//  port is "*" or 0-65535: ZeroMQ itself takes 99999 as 34463. Writes the
//  endpoint to out; 0, or -1 with the reason in err.
int sq_parse_endpoint (const char *text, char *out, size_t out_size, char *err, size_t err_size);

#endif
