/* proto.h - rotad protocol helpers: message framing, validation, fd passing, names of ABI values. */
#ifndef ROTA_PROTO_H
#define ROTA_PROTO_H

#include "runtime/abi.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Fills a header for a message of this type and size. */
void proto_hdr_init(rota_msg_hdr_t *h, unsigned type, size_t size, uint32_t seq);

/* Validates one received packet of n bytes: magic, ABI version, known type, exact size, and every field of the
 * body (ranges, reserved flags, NUL-terminated strings). Returns the type, or -EPROTO for another ABI version
 * (with the peer's version in *abi when abi is not NULL) or -EBADMSG for anything else; *why says what. */
int proto_check(const void *buf, size_t n, uint32_t *abi, const char **why);

/* One packet, with up to nfds descriptors (SCM_RIGHTS). MSG_NOSIGNAL; returns 0 or -errno (-EAGAIN on a full
 * non-blocking socket). */
int proto_send(int fd, const void *msg, size_t n, const int *fds, int nfds);
/* Receives one packet into buf (cap >= ROTA_MSG_MAX); descriptors that came with it are stored in fds (up to
 * *nfds, which is updated; extra ones are closed; NULL fds closes them all). Returns the packet length, 0 on
 * EOF, -EMSGSIZE for a truncated packet, or -errno. flags go to recvmsg (MSG_DONTWAIT). */
ssize_t proto_recv(int fd, void *buf, size_t cap, int *fds, int *nfds, int flags);

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (nvidia-smi's form), NUL-terminated. */
#define PROTO_UUID_STR 41
void proto_uuid_str(const uint8_t uuid[ROTA_UUID_LEN], char out[PROTO_UUID_STR]);

/* Checks a mapped region / channel / board / table header against this build's ABI; returns 0, -EPROTO (another version) or
 * -EBADMSG (not a rota object, wrong size). why gets a sentence for the message. */
int proto_region_check(const volatile void *map, size_t mapped, const char **why);
int proto_channel_check(const volatile void *map, size_t mapped, const char **why);
int proto_board_check(const volatile void *map, size_t mapped, const char **why);
int proto_table_check(const volatile void *map, size_t mapped, const char **why);

/* Copies a possibly unterminated, possibly hostile string of at most cap bytes into out (cap bytes), keeping
 * printable ASCII only (others become '?'), always NUL-terminated. */
void proto_sanitize(char *out, const char *in, size_t cap);

#endif
