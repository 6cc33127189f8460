/*  Unit test of common/args: numbers, sizes and endpoints as users write
    them on command lines, each malformed one refused. */
#include "args.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int s_failures = 0;

#define CHECK(cond) do { \
    if (!(cond)) { \
        fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        s_failures++; \
    } \
} while (0)

//  The endpoint text parses to `want`, or (want NULL) is refused with a
//  reason.
static void
s_endpoint (const char *text, const char *want)
{
    char out [64], err [300] = "";
    int rc = sq_parse_endpoint (text, out, sizeof out, err, sizeof err);
    if (want) {
        CHECK (rc == 0);
        if (rc == 0 && strcmp (out, want)) {
            fprintf (stderr, "%s: got %s, want %s\n", text, out, want);
            s_failures++;
        }
    }
    else {
        CHECK (rc == -1);
        CHECK (*err);
    }
}

int
main (void)
{
    s_endpoint ("tcp://127.0.0.1:7760", "tcp://127.0.0.1:7760");
    s_endpoint ("localhost:7760", "tcp://localhost:7760");
    s_endpoint ("tcp://*:7760", "tcp://*:7760");
    s_endpoint ("tcp://127.0.0.1:*", "tcp://127.0.0.1:*");
    s_endpoint ("tcp://127.0.0.1:0", "tcp://127.0.0.1:0");
    s_endpoint ("tcp://127.0.0.1:65535", "tcp://127.0.0.1:65535");
    s_endpoint ("[::1]:7760", "tcp://[::1]:7760");
    s_endpoint ("ipc:///tmp/squall.sock", "ipc:///tmp/squall.sock");
    s_endpoint ("inproc://x", "inproc://x");
    s_endpoint ("tcp://127.0.0.1:65536", NULL);      //  ZeroMQ would take it as 0
    s_endpoint ("tcp://127.0.0.1:99999", NULL);      //  ... and this as 34463
    s_endpoint (":99999", NULL);
    s_endpoint ("tcp://127.0.0.1:-1", NULL);
    s_endpoint ("tcp://127.0.0.1:77x", NULL);
    s_endpoint ("tcp://127.0.0.1:", NULL);
    s_endpoint ("tcp://127.0.0.1", NULL);
    s_endpoint ("localhost", NULL);
    s_endpoint (":7760", NULL);
    s_endpoint ("ftp://host:21", NULL);
    s_endpoint ("", NULL);
    s_endpoint (NULL, NULL);
    char longer [200];
    memset (longer, 'h', sizeof longer);
    memcpy (longer + sizeof longer - 6, ":7760", 6);
    s_endpoint (longer, NULL);                       //  not in 64 bytes: refused, not cut

    int64_t n;
    CHECK (sq_parse_int ("42", 0, 100, &n) == 0 && n == 42);
    CHECK (sq_parse_int ("-5", 0, 100, &n) == -1);
    CHECK (sq_parse_int ("101", 0, 100, &n) == -1);
    CHECK (sq_parse_int ("4x", 0, 100, &n) == -1);
    CHECK (sq_parse_int ("", 0, 100, &n) == -1);
    uint64_t size;
    CHECK (sq_parse_size ("4GiB", &size) == 0 && size == 4ull << 30);
    CHECK (sq_parse_size ("64k", &size) == 0 && size == 64ull << 10);
    CHECK (sq_parse_size ("-1", &size) == -1);
    CHECK (sq_parse_size ("1Q", &size) == -1);
    if (s_failures) {
        fprintf (stderr, "test_common_args: %d failure(s)\n", s_failures);
        return 1;
    }
    printf ("test_common_args: all checks passed\n");
    return 0;
}
