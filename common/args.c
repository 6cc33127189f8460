/*  args: strict parsing of command-line numbers and sizes. */
#include "args.h"
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
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
