/* notify.h - the systemd readiness protocol (sd_notify over $NOTIFY_SOCKET), without libsystemd. */
#ifndef ROTA_NOTIFY_H
#define ROTA_NOTIFY_H

/* Takes $NOTIFY_SOCKET (an absolute path, or '@' for the abstract namespace) and removes it from the environment
 * so that no child inherits it. 0 (also when it is not set) or -EINVAL (set but not a usable address). */
int notify_init(void);
/* Sends one datagram of "KEY=VALUE\n" lines ("READY=1", "RELOADING=1", "STOPPING=1", "STATUS=..."), MAINPID
 * added, when notify_init found a socket; never blocks. 0, or -errno. */
int notify_send(const char *state);

#endif
