/*  order: depth-first post-order numbering of a submitted batch. */
#include "order.h"
#include <stdlib.h>

typedef struct {
    uint32_t *first;            //  CSR: deps of i are dep [first [i] .. first [i+1])
    uint32_t *dep;
    uint32_t *height;
    const uint32_t *sort_height;
} s_graph_t;

static int
s_by_height (const void *a, const void *b, void *arg)
{
    const uint32_t *height = (const uint32_t *) arg;
    uint32_t ha = height [*(const uint32_t *) a], hb = height [*(const uint32_t *) b];
    return ha < hb? 1: ha > hb? -1: 0;
}

//  Iterative post-order DFS from `root` over deps; calls visit (i) after
//  all of i's deps. `seen` marks visited nodes.
static void
s_walk (s_graph_t *g, uint32_t root, uint8_t *seen, uint32_t *stack, uint32_t *pos,
        void (*visit) (s_graph_t *g, uint32_t i, void *arg), void *arg)
{
    if (seen [root])
        return;
    size_t depth = 0;
    stack [depth] = root;
    pos [depth] = g->first [root];
    seen [root] = 1;
    depth++;
    while (depth > 0) {
        uint32_t node = stack [depth - 1];
        if (pos [depth - 1] < g->first [node + 1]) {
            uint32_t next = g->dep [pos [depth - 1]++];
            if (!seen [next]) {
                seen [next] = 1;
                stack [depth] = next;
                pos [depth] = g->first [next];
                depth++;
            }
            continue;
        }
        visit (g, node, arg);
        depth--;
    }
}

static void
s_height (s_graph_t *g, uint32_t i, void *arg)
{
    (void) arg;
    uint32_t h = 0;
    for (uint32_t e = g->first [i]; e < g->first [i + 1]; e++)
        if (g->height [g->dep [e]] > h)
            h = g->height [g->dep [e]];
    g->height [i] = h + 1;
}

typedef struct {
    task_t **tasks;
    uint64_t *next;
} s_number_t;

static void
s_number (s_graph_t *g, uint32_t i, void *arg)
{
    (void) g;
    s_number_t *number = (s_number_t *) arg;
    number->tasks [i]->order = (*number->next)++;
}

//  While the dependencies are collected, a task of the batch carries its
//  index in `order`, counted down from the top of the range: earlier
//  submits' numbers are far below, so no map is needed to tell them apart.
#define S_MARK UINT64_MAX

int
order_assign (task_t **tasks, uint32_t n, uint64_t *next)
{
    if (n == 0)
        return 0;
    size_t n_edges = 0;
    for (uint32_t i = 0; i < n; i++)
        n_edges += tasks [i]->n_inputs;
    s_graph_t g = {
        (uint32_t *) calloc (n + 1, sizeof (uint32_t)),
        (uint32_t *) malloc ((n_edges + 1) * sizeof (uint32_t)),
        (uint32_t *) calloc (n, sizeof (uint32_t)), NULL
    };
    uint8_t *seen = (uint8_t *) calloc (n, 1);
    uint8_t *has_dependent = (uint8_t *) calloc (n, 1);
    uint32_t *stack = (uint32_t *) malloc (n * sizeof (uint32_t));
    uint32_t *pos = (uint32_t *) malloc (n * sizeof (uint32_t));
    int rc = 0;
    if (!g.first || !g.dep || !g.height || !seen || !has_dependent || !stack || !pos) {
        for (uint32_t i = 0; i < n; i++)
            tasks [i]->order = (*next)++;
        rc = -1;
        goto done;
    }
    for (uint32_t i = 0; i < n; i++)
        tasks [i]->order = S_MARK - i;
    //  Dependencies inside the batch, as a CSR list.
    size_t edges = 0;
    for (uint32_t i = 0; i < n; i++) {
        g.first [i] = (uint32_t) edges;
        for (uint32_t k = 0; k < tasks [i]->n_inputs; k++) {
            task_t *producer = tasks [i]->io [k]->producer;
            if (producer && producer->order > S_MARK - n) {
                uint32_t j = (uint32_t) (S_MARK - producer->order);
                g.dep [edges++] = j;
                has_dependent [j] = 1;
            }
        }
    }
    g.first [n] = (uint32_t) edges;
    //  Heights (longest chain of dependencies), then dependencies sorted
    //  longest chain first, then the numbering walk from the final tasks.
    for (uint32_t i = 0; i < n; i++)
        s_walk (&g, i, seen, stack, pos, s_height, NULL);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t count = g.first [i + 1] - g.first [i];
        if (count > 1)
            qsort_r (g.dep + g.first [i], count, sizeof (uint32_t), s_by_height, g.height);
    }
    for (uint32_t i = 0; i < n; i++)
        seen [i] = 0;
    s_number_t number = { tasks, next };
    for (uint32_t i = 0; i < n; i++)
        if (!has_dependent [i])
            s_walk (&g, i, seen, stack, pos, s_number, &number);
done:
    free (g.first);
    free (g.dep);
    free (g.height);
    free (seen);
    free (has_dependent);
    free (stack);
    free (pos);
    return rc;
}
