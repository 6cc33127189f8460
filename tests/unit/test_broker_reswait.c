/*  test_broker_reswait: the set of tasks waiting for a governor that fits
    (broker/graph/reswait.c), in-process.

    - a task's budget is spent only by ticks with a governor connected;
      time with none connected does not count;
    - entries expire in one tick once their budget is spent, each passed to
      the callback once, and the others keep their own budgets;
    - adding a key twice keeps its first budget (a task tried again when a
      governor joins goes on waiting, it does not start over);
    - removal (a task placed or cancelled) keeps the others findable, also
      for the entry moved into the removed one's place;
    - the set is bounded: past max, add fails and the caller fails the task;
    - a callback that adds and removes entries while expiring is safe.
*/
#include "reswait.h"
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...) do { if (!(cond)) { \
    fprintf (stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
    fprintf (stderr, __VA_ARGS__); fprintf (stderr, "\n"); exit (1); } } while (0)

typedef struct {
    uint64_t keys [64];
    size_t n;
    reswait_t *set;             //  when set: the callback re-adds key+1000
} s_seen_t;

static void
s_expired (void *arg, uint64_t key)
{
    s_seen_t *seen = (s_seen_t *) arg;
    if (seen->n < 64)
        seen->keys [seen->n++] = key;
    if (seen->set && key < 1000) {
        reswait_remove (seen->set, key + 1);        //  whatever is there
        CHECK (reswait_add (seen->set, key + 1000) == 0, "re-add from the callback");
    }
}

static int64_t
s_left (reswait_t *set, uint64_t key)
{
    for (size_t i = 0; i < reswait_count (set); i++) {
        uint64_t k;
        int64_t left;
        reswait_get (set, i, &k, &left);
        if (k == key)
            return left;
    }
    return -1;
}

int
main (void)
{
    reswait_t *set = reswait_new (4, 1000);
    CHECK (set, "new");
    s_seen_t seen = { { 0 }, 0, NULL };

    //  Budgets are spent only while a governor is connected.
    CHECK (reswait_add (set, 1) == 0, "add 1");
    reswait_tick (set, 0, true, s_expired, &seen);
    reswait_tick (set, 5000, false, s_expired, &seen);         //  5 s, nobody connected
    CHECK (seen.n == 0 && s_left (set, 1) == 1000, "no governor: nothing spent (%lld)",
           (long long) s_left (set, 1));
    reswait_tick (set, 5400, true, s_expired, &seen);
    CHECK (s_left (set, 1) == 600, "400 ms spent: %lld left", (long long) s_left (set, 1));

    //  Adding again keeps the budget; a newcomer gets a full one.
    CHECK (reswait_add (set, 1) == 0 && s_left (set, 1) == 600, "re-add keeps the budget");
    CHECK (reswait_add (set, 2) == 0 && s_left (set, 2) == 1000, "add 2");
    CHECK (reswait_add (set, 3) == 0 && reswait_add (set, 4) == 0, "add 3, 4");
    CHECK (reswait_add (set, 5) == -1, "bounded: a fifth is refused");
    CHECK (reswait_count (set) == 4, "4 waiting");

    //  Removing one keeps the others findable, the moved one too.
    reswait_remove (set, 2);
    CHECK (s_left (set, 2) < 0 && s_left (set, 1) >= 0 && s_left (set, 3) >= 0
           && s_left (set, 4) >= 0, "remove 2");
    reswait_remove (set, 2);                                    //  twice: nothing
    reswait_remove (set, 4);
    reswait_remove (set, 1);
    CHECK (reswait_count (set) == 1 && s_left (set, 3) >= 0, "only 3 left");
    CHECK (reswait_add (set, 1) == 0 && reswait_add (set, 2) == 0, "add 1, 2 again");

    //  Expiry: 1 and 2 and 3 have 1000 ms now (1 started over after removal).
    reswait_tick (set, 6300, true, s_expired, &seen);          //  900 ms
    CHECK (seen.n == 0, "nothing spent yet");
    reswait_tick (set, 6400, true, s_expired, &seen);          //  1000 ms
    CHECK (seen.n == 3 && reswait_count (set) == 0, "all three expire at once (%zu)", seen.n);
    CHECK (seen.keys [0] + seen.keys [1] + seen.keys [2] == 6, "each once");

    //  A callback that changes the set while it expires.
    seen.n = 0;
    seen.set = set;
    CHECK (reswait_add (set, 7) == 0 && reswait_add (set, 8) == 0, "add 7, 8");
    reswait_tick (set, 8000, true, s_expired, &seen);          //  1600 ms: both expire
    CHECK (seen.n == 2 || seen.n == 1, "expired in a changing set: %zu", seen.n);
    CHECK (s_left (set, 1007) >= 0, "the callback's entry is there with a full budget");
    CHECK (s_left (set, 1007) == 1000, "fresh budget %lld", (long long) s_left (set, 1007));

    //  A clock going back spends nothing.
    reswait_tick (set, 100, true, s_expired, &seen);
    CHECK (s_left (set, 1007) == 1000, "clock going back");

    reswait_destroy (&set);
    CHECK (set == NULL, "destroy clears the pointer");
    reswait_destroy (&set);
    printf ("test_broker_reswait: all checks passed\n");
    return 0;
}
