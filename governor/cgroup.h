/*  cgroup: the memory and CPU limits of the control group this process
    runs in (a container's, a Slurm step's, a systemd unit's), so that a
    governor's defaults fit the box it is really in: `--memory` defaults to
    the smaller of the machine's memory and the group's limit (a governor
    that believed the host's memory would be killed before it spills), and
    `--cpus` to the smaller of the CPUs it may run on and the group's CPU
    quota, rounded up.

    Both cgroup versions: v2 (memory.max, cpu.max) and v1
    (memory.limit_in_bytes, cpu.cfs_quota_us / cpu.cfs_period_us), mixed
    as hybrid hosts mix them. The group is found through /proc/self/cgroup
    and where its hierarchy is mounted through /proc/self/mountinfo; every
    level from the group up to the mount point counts, since a parent's
    limit binds its children. Files are read with a bound and parsed
    strictly: anything missing or malformed is no limit, never an error.

    `root` prefixes every path ("" for the real system), so the unit test
    builds whole fake systems in a directory. */
#ifndef SQ_CGROUP_H
#define SQ_CGROUP_H

#include <stdint.h>

typedef struct {
    uint64_t memory;            //  bytes; 0: no limit found
    double cpus;                //  quota / period; 0: no limit found
} cgroup_limits_t;

void cgroup_limits (const char *root, cgroup_limits_t *limits);

/*  What the group uses now, read again and again by a governor that must
    stay under the group's limit whatever else runs in it (store.h,
    store_set_box): its memory usage (v2 memory.current, v1
    memory.usage_in_bytes) less its file pages (active_file and
    inactive_file of memory.stat; v1's total_ ones), which the kernel
    writes back and drops rather than kill. The group is this process's
    own (a container's, a Slurm step's). */
typedef struct _cgroup_usage_t cgroup_usage_t;

//  NULL when no memory group with a usage file is found (or out of memory).
cgroup_usage_t *cgroup_usage_new (const char *root);
void cgroup_usage_destroy (cgroup_usage_t **self_p);
//  Bytes in use besides file pages: 0 with *bytes, or -1 if unreadable.
int cgroup_usage_read (cgroup_usage_t *self, uint64_t *bytes);

#endif
