/*  log: leveled logging to stderr, one line per event, shared by every
    process. The level is process-wide, set once at start-up (--log-level). */
#ifndef SQ_LOG_H
#define SQ_LOG_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    SQ_LOG_ERROR = 0,
    SQ_LOG_WARN = 1,
    SQ_LOG_INFO = 2,
    SQ_LOG_DEBUG = 3
} sq_log_level_t;

void sq_log_set_level (sq_log_level_t level);
//  Parses "error", "warn", "info", "debug"; -1 if none of them.
int sq_log_parse_level (const char *text);
//  Name printed in every line ("broker", "governor g1", ...); copied.
void sq_log_set_name (const char *name);
void sq_log (sq_log_level_t level, const char *format, ...)
    __attribute__ ((format (printf, 2, 3)));

#define sq_error(...) sq_log (SQ_LOG_ERROR, __VA_ARGS__)
#define sq_warn(...) sq_log (SQ_LOG_WARN, __VA_ARGS__)
#define sq_info(...) sq_log (SQ_LOG_INFO, __VA_ARGS__)
#define sq_debug(...) sq_log (SQ_LOG_DEBUG, __VA_ARGS__)

//  A bound on the lines peers can make a process write (refused handshakes,
//  refused connections): at most `burst` lines per window; the lines
//  withheld are counted, to be said in one line once the window ends.
typedef struct {
    int64_t start;              //  the window's start, ms (monotonic)
    unsigned lines;             //  written in this window
    unsigned withheld;          //  not written since the last report
} sq_ratelimit_t;

//  Whether one more line may be written now.
bool sq_ratelimit_take (sq_ratelimit_t *self, unsigned burst, int window_ms);
//  Lines withheld, once the window they were withheld in has ended (then
//  forgotten): the caller logs their number. 0 if none, or not yet.
unsigned sq_ratelimit_withheld (sq_ratelimit_t *self, int window_ms);

//  A signal handler for SIGALRM that ends the process (status 1) saying
//  why: the bound on a stop, armed with alarm () when one begins, so that
//  nothing a peer does can hold a broker or a governor up. Async-signal
//  safe: it only writes and exits.
void sq_stop_watchdog (int signum);
//  Seconds a stop may take (a signal, or the starter gone) before the
//  process leaves anyway; the broker and governors arm alarm () with it.
#define SQ_STOP_GRACE_S 10
//  The monotonic clock in milliseconds.
int64_t sq_now_ms (void);

#endif
