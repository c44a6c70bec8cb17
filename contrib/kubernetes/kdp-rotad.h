/* kdp-rotad.h - rota-device-plugin's link to rotad: the node's GPUs, whether rotad serves, placement (plain C). */
#ifndef ROTA_KDP_ROTAD_H
#define ROTA_KDP_ROTAD_H

/*
 * The plugin is C++ (grpc++) and rota's client code is C11 with _Atomic types that C++ cannot include: this is
 * the one C file between them, over runtime/lib/conn.h, and its header holds plain types only.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KDP_MAX_GPUS 16  /* ROTA_MAX_DEVICES (checked in kdp-rotad.c) */
#define KDP_UUID_STR 41  /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" + NUL */

typedef struct kdp_gpu {
    char uuid[KDP_UUID_STR];
    uint8_t raw[16];    /* the UUID's bytes, as rotad keys GPUs */
    uint64_t total_mem; /* bytes, as rotad's probe found them */
} kdp_gpu_t;

typedef struct kdp_rotad kdp_rotad_t;

/* Connects to rotad at socket as an observer (no client slot). 0 and *out, or -errno with a sentence in err. */
int kdp_rotad_open(const char *socket, kdp_rotad_t **out, char *err, size_t errlen);
/* The GPUs rotad probed at its start (its region's ROTA_DEV_PROBED devices), up to KDP_MAX_GPUS: their count. */
int kdp_rotad_gpus(kdp_rotad_t *r, kdp_gpu_t out[KDP_MAX_GPUS]);
/* Waits up to timeout_ms for rotad's end to close; false once it has (rotad stopped or restarted). */
bool kdp_rotad_wait_alive(kdp_rotad_t *r, int timeout_ms);
void kdp_rotad_close(kdp_rotad_t *r);

/* Asks rotad (PLACE, on a connection of its own) which of the ncand GPUs a job of class prio (rota_prio: 0 high,
 * 1 normal, 2 low) and mem bytes should use; no waiting for room. 0 and *pick (an index into cand), or -errno with
 * a sentence in err. */
int kdp_rotad_place(const char *socket, unsigned prio, const kdp_gpu_t *cand, unsigned ncand, uint64_t mem,
                    int *pick, char *err, size_t errlen);

/* Grants the container about to be allocated, through rotad at socket (GRANT by token, runtime/lib/grant.h; the
 * plugin runs as root): at most limit bytes per GPU, class prio at best. token_hex gets the token (32 hexadecimal
 * digits) for the container's ROTA_GRANT: its first process that registers binds the grant to its cgroup. 0, or
 * -errno with a sentence in err (-ENOENT/-ECONNREFUSED/-ETIMEDOUT: rotad unreachable). */
#define KDP_TOKEN_HEX 33
int kdp_rotad_grant(const char *socket, unsigned prio, uint64_t limit, char token_hex[KDP_TOKEN_HEX], char *err,
                    size_t errlen);

/* Priority class names (prio.h, which C++ cannot include), as librota's ROTA_PRIORITY takes them: 0 and *prio, or -EINVAL. */
int kdp_prio_parse(const char *s, unsigned *prio);
const char *kdp_prio_name(unsigned prio);
#define KDP_PRIO_COUNT 3

#ifdef __cplusplus
}
#endif

#endif
