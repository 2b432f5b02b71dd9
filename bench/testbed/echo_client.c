/* A latency-sensitive pod's traffic, compiled: it replaced a Python client
 * (the same requests, schedule and records) at a fraction of its CPU, so
 * that the measurers of a run leave the shared 2-core machine room for
 * what they measure. bench/testbed/echo.py reads the records.
 *
 *   echo_client ADDRESS PORT OUT RATE SIZE DURATION
 *
 * Sends RATE requests a second of SIZE bytes on a fixed schedule (a slow
 * answer does not slow it) and appends to OUT every half second one record
 * per request, two native doubles: the send time (epoch seconds) and the
 * round trip in seconds, or -1 (LOST) when no answer came within a second.
 * A request carries its sequence number and send time (monotonic ns), both
 * 64-bit big-endian. SIGTERM or SIGINT stops it; the requests still
 * unanswered then count as lost.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LOST (-1.0)
#define TIMEOUT_NS 1000000000LL /* a request unanswered this long is lost */
#define FLUSH_NS 500000000LL    /* between appends to OUT */
#define HEADER 16               /* sequence number, send time */

struct pending {
    uint64_t seq;
    int64_t sent_ns; /* monotonic; 0: free */
    double sent_at;  /* epoch seconds */
};

static volatile sig_atomic_t stopping;
static double *records;
static size_t count, capacity;

static void stop(int signal_number) { (void)signal_number; stopping = 1; }

static int64_t monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
}

static double epoch(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (double)now.tv_sec + now.tv_nsec / 1e9;
}

static void record(double sent_at, double rtt) {
    if (count + 2 > capacity) {
        capacity = capacity ? 2 * capacity : 4096;
        records = realloc(records, capacity * sizeof *records);
        if (!records) { perror("realloc"); exit(1); }
    }
    records[count++] = sent_at;
    records[count++] = rtt;
}

static void flush(const char *out) {
    FILE *file = fopen(out, "ab");
    if (!file) { perror(out); exit(1); }
    if (count && fwrite(records, sizeof *records, count, file) != count) { perror(out); exit(1); }
    fclose(file);
    count = 0;
}

/* Every pending request sent before limit_ns: lost. */
static void expire(struct pending *ring, size_t slots, int64_t limit_ns) {
    for (size_t i = 0; i < slots; i++)
        if (ring[i].sent_ns && ring[i].sent_ns < limit_ns) {
            record(ring[i].sent_at, LOST);
            ring[i].sent_ns = 0;
        }
}

/* One answer per wake-up (ppoll said one is there): another queued wakes
 * the next ppoll at once, and the usual case costs no empty recv. */
static void receive(int fd, struct pending *ring, size_t slots) {
    unsigned char data[2048];
    ssize_t got = recv(fd, data, sizeof data, MSG_DONTWAIT);
    int64_t arrived = monotonic_ns();
    if (got < HEADER) return; /* refused, or not ours: the request counts as lost */
    uint64_t seq;
    memcpy(&seq, data, sizeof seq);
    seq = be64toh(seq);
    struct pending *slot = &ring[seq % slots];
    if (slot->sent_ns && slot->seq == seq) {
        record(slot->sent_at, (arrived - slot->sent_ns) / 1e9);
        slot->sent_ns = 0;
    }
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s ADDRESS PORT OUT RATE SIZE DURATION\n", argv[0]);
        return 2;
    }
    const char *out = argv[3];
    double rate = atof(argv[4]), duration = atof(argv[6]);
    size_t size = (size_t)atoi(argv[5]);
    if (rate <= 0 || duration <= 0) { fprintf(stderr, "RATE and DURATION must be above 0\n"); return 2; }
    if (size < HEADER) size = HEADER;
    if (size > 2048) size = 2048;
    struct sockaddr_in server = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &server.sin_addr) != 1) { fprintf(stderr, "bad address %s\n", argv[1]); return 2; }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&server, sizeof server) < 0) { perror("socket"); return 1; }
    signal(SIGTERM, stop);
    signal(SIGINT, stop);

    /* Twice the requests a timeout holds: a slot is free again long before reuse. */
    size_t slots = (size_t)(2 * rate * TIMEOUT_NS / 1e9) + 16;
    struct pending *ring = calloc(slots, sizeof *ring);
    unsigned char request[2048] = {0};
    int64_t interval = (int64_t)(1e9 / rate), start = monotonic_ns();
    int64_t end = start + (int64_t)(duration * 1e9), next_send = start, last_flush = start;
    uint64_t seq = 0;
    struct pollfd readable = {.fd = fd, .events = POLLIN};
    while (!stopping) {
        int64_t now = monotonic_ns();
        if (now >= end) break;
        if (now >= next_send) {
            struct pending *slot = &ring[seq % slots];
            if (slot->sent_ns) record(slot->sent_at, LOST); /* never answered */
            slot->seq = seq;
            slot->sent_at = epoch();
            slot->sent_ns = monotonic_ns();
            uint64_t wire_seq = htobe64(seq), wire_sent = htobe64((uint64_t)slot->sent_ns);
            memcpy(request, &wire_seq, 8);
            memcpy(request + 8, &wire_sent, 8);
            send(fd, request, size, MSG_DONTWAIT); /* a full buffer: lost, and counted so */
            seq++;
            next_send += interval;
            if (next_send < now - TIMEOUT_NS) next_send = now; /* asleep for long: no burst */
            continue;
        }
        int64_t wait = next_send - now;
        struct timespec timeout = {.tv_sec = wait / 1000000000LL, .tv_nsec = wait % 1000000000LL};
        if (ppoll(&readable, 1, &timeout, NULL) > 0) receive(fd, ring, slots);
        if (now - last_flush >= FLUSH_NS) {
            expire(ring, slots, monotonic_ns() - TIMEOUT_NS);
            flush(out);
            last_flush = now;
        }
    }
    expire(ring, slots, monotonic_ns() + 1);
    flush(out);
    return 0;
}
