/* The physical floor of a request on loopback: one TCP connection on 127.0.0.1, a child
 * that echoes SIZE bytes back as they come, and a parent that sends SIZE bytes and
 * waits for all of them back, ROUNDS times after WARMUP unrecorded round trips; each
 * side pinned to its own CPU when given one (-1: not pinned). Blocking sockets,
 * TCP_NODELAY, no event loop. Prints each recorded round trip in nanoseconds, one a
 * line (bench_instrument.py builds and runs it; its Python twin is there too).
 *
 *     cc -O2 -o loopback_pingpong loopback_pingpong.c
 *     ./loopback_pingpong ROUNDS SIZE CLIENT_CPU SERVER_CPU
 */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WARMUP 1000
#define MAX_SIZE 65536

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void pin(int cpu) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) die("sched_setaffinity");
}

/* Read exactly n bytes; 0 on the peer's close before any. */
static size_t read_all(int fd, char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0) die("read");
        if (r == 0) return got;
        got += (size_t)r;
    }
    return got;
}

static void write_all(int fd, const char *buf, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0) die("write");
        buf += w;
        n -= (size_t)w;
    }
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s ROUNDS SIZE CLIENT_CPU SERVER_CPU\n", argv[0]);
        return 2;
    }
    long rounds = atol(argv[1]), size = atol(argv[2]);
    int client_cpu = atoi(argv[3]), server_cpu = atoi(argv[4]);
    if (rounds < 1 || size < 1 || size > MAX_SIZE) {
        fprintf(stderr, "%s: ROUNDS must be 1 or more and SIZE 1 to %d\n", argv[0], MAX_SIZE);
        return 2;
    }
    int one = 1;
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    if (listener < 0) die("socket");
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0) die("bind");
    if (listen(listener, 1) != 0) die("listen");
    if (getsockname(listener, (struct sockaddr *)&addr, &len) != 0) die("getsockname");
    static char buf[MAX_SIZE];
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
        pin(server_cpu);
        int fd = accept(listener, NULL, NULL);
        if (fd < 0) die("accept");
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        while (read_all(fd, buf, (size_t)size) == (size_t)size) write_all(fd, buf, (size_t)size);
        _exit(0);
    }
    pin(client_cpu);
    close(listener);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) die("connect");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    memset(buf, 'x', (size_t)size);
    long *ns = malloc(sizeof(long) * (size_t)rounds);
    if (ns == NULL) die("malloc");
    for (long i = -WARMUP; i < rounds; i++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        write_all(fd, buf, (size_t)size);
        if (read_all(fd, buf, (size_t)size) != (size_t)size) {
            fprintf(stderr, "%s: the echo closed early\n", argv[0]);
            return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (i >= 0) ns[i] = (t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec);
    }
    close(fd);
    waitpid(child, NULL, 0);
    for (long i = 0; i < rounds; i++) printf("%ld\n", ns[i]);
    return 0;
}
