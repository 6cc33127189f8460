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

#endif
