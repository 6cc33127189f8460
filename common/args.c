/*  args: strict parsing of command-line numbers and sizes. */
#include "args.h"
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int
sq_parse_int (const char *text, int64_t min, int64_t max, int64_t *value)
{
    if (!text || !*text)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll (text, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *value = v;
    return 0;
}

int
sq_parse_duration_ms (const char *text, int64_t *ms)
{
    if (!text || !isdigit ((unsigned char) *text))
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull (text, &end, 10);
    if (errno || v > 3153600000000ULL)
        return -1;
    uint64_t unit = 1000;
    if (strcmp (end, "ms") == 0) unit = 1;
    else if (strcmp (end, "s") == 0 || *end == 0) unit = 1000;
    else if (strcmp (end, "m") == 0) unit = 60000;
    else if (strcmp (end, "h") == 0) unit = 3600000;
    else if (strcmp (end, "d") == 0) unit = 86400000;
    else
        return -1;
    if (v > 3153600000000ULL / unit)
        return -1;
    *ms = (int64_t) (v * unit);
    return 0;
}

int
sq_parse_size (const char *text, uint64_t *value)
{
    if (!text || !isdigit ((unsigned char) *text))
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull (text, &end, 10);
    if (errno)
        return -1;
    int shift = 0;
    if (*end) {
        switch (toupper ((unsigned char) *end)) {
            case 'K': shift = 10; break;
            case 'M': shift = 20; break;
            case 'G': shift = 30; break;
            case 'T': shift = 40; break;
            case 'B': shift = 0; break;
            default: return -1;
        }
        const char *unit = end + 1;
        if (toupper ((unsigned char) *end) != 'B'
        &&  *unit && strcasecmp (unit, "iB") && strcasecmp (unit, "B"))
            return -1;
        if (toupper ((unsigned char) *end) == 'B' && *unit)
            return -1;
    }
    if (shift && v > (UINT64_MAX >> shift))
        return -1;
    *value = (uint64_t) v << shift;
    return 0;
}

int
sq_parse_endpoint (const char *text, char *out, size_t out_size, char *err, size_t err_size)
{
    if (!text || !*text) {
        snprintf (err, err_size, "an endpoint is needed (tcp://HOST:PORT)");
        return -1;
    }
    if (strncmp (text, "ipc://", 6) == 0 || strncmp (text, "inproc://", 9) == 0) {
        if (strlen (text) >= out_size) {
            snprintf (err, err_size, "endpoint too long");
            return -1;
        }
        strcpy (out, text);
        return 0;
    }
    const char *scheme = strstr (text, "://");
    if (scheme && strncmp (text, "tcp://", 6)) {
        snprintf (err, err_size, "'%.200s': only tcp://, ipc:// and inproc:// endpoints", text);
        return -1;
    }
    const char *address = scheme? text + 6: text;
    const char *colon = strrchr (address, ':');
    if (!colon || colon == address) {
        snprintf (err, err_size, "'%.200s' has no host and port (tcp://HOST:PORT)", text);
        return -1;
    }
    const char *port = colon + 1;
    int64_t number;
    if (strcmp (port, "*") && sq_parse_int (port, 0, 65535, &number)) {
        snprintf (err, err_size, "'%.200s': the port must be 0 to 65535 (or *)", text);
        return -1;
    }
    if (snprintf (out, out_size, "tcp://%s", address) >= (int) out_size) {
        snprintf (err, err_size, "endpoint too long");
        return -1;
    }
    return 0;
}
