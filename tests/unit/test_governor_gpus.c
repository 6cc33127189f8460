/*  Device assignment (governor/gpus.c): whole-device requests get devices
    nobody else holds, fractions pack onto the fullest device they fit
    (whole devices stay free) and never add above one device, what is
    given back is free again; bad --gpus lists are refused. */
#include "gpus.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int s_failures = 0;
#define CHECK(cond) do { if (!(cond)) { \
    fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    s_failures++; } } while (0)

static void
s_test_lists (void)
{
    char err [128];
    const char *bad [] = { "", ",", "0,", ",0", "0,,1", "0,0", "a b", "0;1", NULL };
    for (int i = 0; bad [i]; i++) {
        gpus_t *gpus = gpus_new (bad [i], err, sizeof err);
        //  "" is a valid list of no devices
        if (i == 0) {
            CHECK (gpus && gpus_count (gpus) == 0);
            gpus_destroy (&gpus);
            continue;
        }
        CHECK (!gpus && *err);
    }
    char many [GPUS_MAX * 4 + 8] = "";
    for (int i = 0; i <= GPUS_MAX; i++)
        sprintf (many + strlen (many), "%s%d", i? ",": "", i);
    CHECK (!gpus_new (many, err, sizeof err) && strstr (err, "at most"));
    gpus_t *gpus = gpus_new ("0,1,GPU-ab12:3", err, sizeof err);
    CHECK (gpus && gpus_count (gpus) == 3);
    char *names = gpus_names (gpus, 5);
    CHECK (names && strcmp (names, "0,GPU-ab12:3") == 0);
    free (names);
    names = gpus_names (gpus, 0);
    CHECK (names && strcmp (names, "") == 0);
    free (names);
    gpus_destroy (&gpus);
    CHECK (gpus == NULL);
}

static void
s_test_assignment (void)
{
    char err [128];
    gpus_t *gpus = gpus_new ("0,1,2,3", err, sizeof err);
    CHECK (gpus);
    //  Two halves share device 0; a third goes to device 1, not 0.
    uint64_t h1 = gpus_take (gpus, 500), h2 = gpus_take (gpus, 500), h3 = gpus_take (gpus, 500);
    CHECK (h1 == 1 && h2 == 1 && h3 == 2);
    //  A whole device: 2 and 3 are free; two of them: only once.
    CHECK (gpus_fit (gpus, 2000) && !gpus_fit (gpus, 3000));
    uint64_t w = gpus_take (gpus, 1000);
    CHECK (w == 4);
    CHECK (gpus_fit (gpus, 1000) && !gpus_fit (gpus, 2000));
    //  A quarter goes onto the half-full device 1, the fullest it fits.
    uint64_t q = gpus_take (gpus, 250);
    CHECK (q == 2);
    //  Half of device 0 is free again, but no whole device but 3.
    gpus_give (gpus, 500, h1);
    CHECK (gpus_fit (gpus, 1000) && !gpus_fit (gpus, 2000));
    uint64_t w2 = gpus_take (gpus, 1000);
    CHECK (w2 == 8);
    CHECK (!gpus_fit (gpus, 1000) && gpus_fit (gpus, 500) && !gpus_fit (gpus, 750));
    CHECK (gpus_fit (gpus, 0) && gpus_take (gpus, 0) == 0);
    gpus_give (gpus, 1000, w);
    gpus_give (gpus, 1000, w2);
    gpus_give (gpus, 500, h2);
    gpus_give (gpus, 500, h3);
    gpus_give (gpus, 250, q);
    //  All free: four whole devices at once.
    CHECK (gpus_fit (gpus, 4000));
    CHECK (gpus_take (gpus, 4000) == 15);
    gpus_give (gpus, 4000, 15);
    //  A task bigger than the governor, let run alone, gets every device.
    CHECK (!gpus_fit (gpus, 5000) && gpus_take (gpus, 5000) == 15);
    gpus_destroy (&gpus);
}

int
main (void)
{
    s_test_lists ();
    s_test_assignment ();
    if (s_failures) {
        fprintf (stderr, "test_governor_gpus: %d check(s) failed\n", s_failures);
        return 1;
    }
    printf ("test_governor_gpus: OK\n");
    return 0;
}
