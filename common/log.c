/*  log: leveled logging. A single fprintf per line keeps lines of several
    threads from interleaving (stdio locks the stream per call). */
#include "log.h"
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static sq_log_level_t s_level = SQ_LOG_INFO;
static char s_name [64] = "squall";
static const char *s_names [] = { "ERROR", "WARN", "INFO", "DEBUG" };

void
sq_log_set_level (sq_log_level_t level)
{
    s_level = level;
}

int
sq_log_parse_level (const char *text)
{
    for (int i = 0; i < 4; i++)
        if (strcasecmp (text, s_names [i]) == 0)
            return i;
    if (strcasecmp (text, "warning") == 0)
        return SQ_LOG_WARN;
    return -1;
}

void
sq_log_set_name (const char *name)
{
    snprintf (s_name, sizeof s_name, "%s", name);
}

void
sq_log (sq_log_level_t level, const char *format, ...)
{
    if (level > s_level)
        return;
    char text [1024];
    va_list args;
    va_start (args, format);
    vsnprintf (text, sizeof text, format, args);
    va_end (args);
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r (&ts.tv_sec, &tm);
    fprintf (stderr, "%02d:%02d:%02d.%03ld %s %-5s %s\n",
             tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
             s_name, s_names [level], text);
}

int64_t
sq_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool
sq_ratelimit_take (sq_ratelimit_t *self, unsigned burst, int window_ms)
{
    int64_t now = sq_now_ms ();
    if (self->start == 0 || now - self->start >= window_ms) {
        self->start = now;
        self->lines = 0;
    }
    if (self->lines < burst) {
        self->lines++;
        return true;
    }
    self->withheld++;
    return false;
}

unsigned
sq_ratelimit_withheld (sq_ratelimit_t *self, int window_ms)
{
    if (!self->withheld || sq_now_ms () - self->start < window_ms)
        return 0;
    unsigned n = self->withheld;
    self->withheld = 0;
    return n;
}

void
sq_stop_watchdog (int signum)
{
    static const char text [] = "stopping took too long; leaving now\n";
    (void) signum;
    if (write (STDERR_FILENO, text, sizeof text - 1) < 0)
        _exit (1);
    _exit (1);
}
