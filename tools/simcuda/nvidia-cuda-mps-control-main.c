/* nvidia-cuda-mps-control-main.c - simcuda's stand-in for NVIDIA's MPS control daemon and its client: what rotad
 * --mps starts, asks and stops on a node without a GPU. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * As NVIDIA's nvidia-cuda-mps-control: `-d` starts the daemon in the background (exit 0 once it listens; 1 with
 * "An instance of this daemon is already running" when one answers), `-f` in the foreground; without options it
 * is the client, sending each line of its stdin to the daemon and printing the answers (1 with "Cannot find MPS
 * control daemon process" when none answers). Both find each other by CUDA_MPS_PIPE_DIRECTORY (default
 * /tmp/nvidia-mps), where the daemon listens on the socket "control" and writes its pid to
 * "nvidia-cuda-mps-control.pid" (the stand-in's own: tests kill it there). Commands: quit,
 * get_default_active_thread_percentage, set_default_active_thread_percentage PCT, get_server_list (empty: the
 * stand-in runs no server process). simcuda's MPS server itself is the node knob SIMCUDA_MPS=1 (docs/simcuda.md):
 * the stand-in models the control daemon's lifecycle (start, attach, answer, die), not the server's.
 */
#define USAGE "usage: nvidia-cuda-mps-control [-d | -f]\n"
#define EXIT_USAGE 2

static char sock_path[108], pid_path[4096];
static double default_pct = 100.0;

static int dir_paths(void)
{
    const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
    if (!dir || !dir[0]) dir = "/tmp/nvidia-mps";
    if ((size_t)snprintf(sock_path, sizeof sock_path, "%s/control", dir) >= sizeof sock_path) {
        fprintf(stderr, "nvidia-cuda-mps-control: fatal: CUDA_MPS_PIPE_DIRECTORY '%s' is too long\n", dir);
        return -1;
    }
    snprintf(pid_path, sizeof pid_path, "%s/nvidia-cuda-mps-control.pid", dir);
    if (mkdir(dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "nvidia-cuda-mps-control: fatal: unable to create %s: %s\n", dir, strerror(errno));
        return -1;
    }
    return 0;
}

static int sock_connect(void)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, sock_path, strlen(sock_path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One command line; its answer into out. Returns 1 for quit. */
static int daemon_command(char *line, FILE *out)
{
    char *nl = strchr(line, '\n');
    if (nl) *nl = '\0';
    double v;
    char *end;
    if (!strcmp(line, "quit")) return 1;
    if (!strcmp(line, "get_default_active_thread_percentage")) {
        fprintf(out, "%.1f\n", default_pct);
    } else if (!strncmp(line, "set_default_active_thread_percentage ", 37) &&
               (v = strtod(line + 37, &end), end != line + 37 && !*end && v > 0 && v <= 100)) {
        default_pct = v;
        fprintf(out, "%.1f\n", v);
    } else if (!strcmp(line, "get_server_list")) {
        /* no server processes: simcuda's server is the node itself */
    } else if (line[0]) {
        fprintf(out, "Unknown command: %s\n", line);
    }
    return 0;
}

static int daemon_serve(int lfd)
{
    for (;;) {
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            return 1;
        }
        FILE *in = fdopen(c, "r+");
        if (!in) {
            close(c);
            continue;
        }
        char line[256];
        int quit = 0;
        while (!quit && fgets(line, sizeof line, in)) {
            quit = daemon_command(line, in);
            fflush(in);
        }
        fclose(in);
        if (quit) {
            unlink(sock_path);
            unlink(pid_path);
            return 0;
        }
    }
}

static int daemon_start(bool background)
{
    int fd = sock_connect();
    if (fd >= 0) {
        close(fd);
        fprintf(stderr, "An instance of this daemon is already running\n");
        return 1;
    }
    unlink(sock_path); /* a dead daemon's */
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, sock_path, strlen(sock_path) + 1);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 16)) {
        fprintf(stderr, "nvidia-cuda-mps-control: fatal: unable to listen on %s: %s\n", sock_path, strerror(errno));
        return 1;
    }
    const char *pct = getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
    if (pct) {
        char *end;
        double v = strtod(pct, &end);
        if (end != pct && !*end && v > 0 && v <= 100) default_pct = v;
    }
    if (background) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "nvidia-cuda-mps-control: fatal: unable to fork: %s\n", strerror(errno));
            return 1;
        }
        if (pid > 0) _exit(0); /* listening already: a client that connects now is served */
        setsid();
        int dn = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (dn >= 0) {
            dup2(dn, 0), dup2(dn, 1), dup2(dn, 2);
            if (dn > 2) close(dn);
        }
    }
    FILE *p = fopen(pid_path, "w");
    if (p) {
        fprintf(p, "%d\n", (int)getpid());
        fclose(p);
    }
    return daemon_serve(lfd);
}

static int client_run(void)
{
    int fd = sock_connect();
    if (fd < 0) {
        fprintf(stderr, "Cannot find MPS control daemon process\n");
        return 1;
    }
    char buf[4096];
    ssize_t n;
    while ((n = read(0, buf, sizeof buf)) > 0)
        if (write(fd, buf, (size_t)n) != n) break;
    shutdown(fd, SHUT_WR);
    while ((n = read(fd, buf, sizeof buf)) > 0)
        if (write(1, buf, (size_t)n) != n) break;
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc > 2 || (argc == 2 && strcmp(argv[1], "-d") && strcmp(argv[1], "-f"))) {
        if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
            fputs(USAGE, stdout);
            return 0;
        }
        fputs(USAGE, stderr);
        return EXIT_USAGE;
    }
    if (dir_paths()) return 1;
    if (argc == 2) return daemon_start(!strcmp(argv[1], "-d"));
    return client_run();
}
