/* grant.h - what an admin's scheduler grants a job, told to rotad: for the Slurm plugin and the Kubernetes device
 * plugin (C or C++), which run as root (abi.h, GRANT). */
#ifndef ROTA_GRANT_H
#define ROTA_GRANT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Any user's processes in the cgroup (grant_t.uid). */
#define GRANT_ANY_UID UINT32_MAX

typedef struct grant {
    const char *cgroup;  /* cgroup v2 path as /proc/PID/cgroup's 0:: line names it ("/kubepods.slice/...-pod<UID>.slice",
                          * "/system.slice/slurmstepd.scope/job_7/step_0"); covers every process in it or below */
    uint32_t uid;        /* the job's user, or GRANT_ANY_UID */
    uint64_t mem_limit;  /* bytes per process and GPU, at most 2^56; 0: the grant sets no memory limit */
    unsigned max_prio;   /* the best class (0 high, 1 normal, 2 low: runtime/lib/prio.h); 0 also lets the job run
                          * high whatever rotad's high-* policy says */
    const uint8_t *token; /* NULL, or GRANT_TOKEN_LEN random bytes (grant_token_new): the grant is keyed by the
                           * token, which binds it to the cgroup of the first process presenting it (ROTA_GRANT);
                           * cgroup is then NULL or "" (any), or where that cgroup must lie */
} grant_t;

#define GRANT_TOKEN_LEN 16
#define GRANT_TOKEN_HEX (2 * GRANT_TOKEN_LEN + 1)

/* Fills token with GRANT_TOKEN_LEN bytes from the kernel's random source (getrandom) and hex with its 32 lowercase
 * hexadecimal digits, what ROTA_GRANT takes. 0 or -errno. */
int grant_token_new(uint8_t token[GRANT_TOKEN_LEN], char hex[GRANT_TOKEN_HEX]);

/* Tells the rotad at socket (NULL or "": the node-wide one, rotad's default path) to apply g to every process in
 * g->cgroup or below it from its next registration on: its memory limit per GPU is at most g->mem_limit (the
 * process's ROTA_MEM_LIMIT may only lower it) and its class at best g->max_prio. A grant for the same cgroup
 * replaces the one before. The caller must be root or rotad's user. Returns 0, or -errno with one sentence in err:
 * -EINVAL (not an absolute path, at most 255 characters, or a bad class or size), -ENOENT/-ECONNREFUSED (no rotad),
 * -EPERM (a rotad of another user listens there), -ECONNRESET (rotad refused the sender: not root), -ENOSPC
 * (rotad holds ROTA_MAX_GRANTS), -ETIMEDOUT (no answer within 5 s). */
int grant_set(const char *socket, const grant_t *g, char *err, size_t errlen);

/* Removes the grant of cgroup (at the job's end): processes that registered keep what they got. 0, -ENOENT
 * (there was none) or as grant_set. */
int grant_revoke(const char *socket, const char *cgroup, char *err, size_t errlen);
/* Removes the grant of token (grant_t.token), bound or not. As grant_revoke. */
int grant_revoke_token(const char *socket, const uint8_t token[GRANT_TOKEN_LEN], char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
