/* The distance between two zones: every packet the kernel routes into the
 * tun device DEVICE comes back out of it DELAY_US microseconds later, in
 * order, where a policy rule (iif DEVICE) sends it on over the node's link.
 * The testbed's kernel has no netem; this is netem's "delay" alone, with
 * no jitter and no loss. Bounded: a packet that finds QUEUE packets
 * waiting is dropped, as a full netem queue drops it.
 *
 * usage: zone_delay DEVICE DELAY_US
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define QUEUE 4096
#define PACKET 2048

static unsigned char packets[QUEUE][PACKET];
static unsigned char dropped[PACKET];
static ssize_t sizes[QUEUE];
static long long due[QUEUE];
static volatile sig_atomic_t running = 1;

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void stop(int signal_number) {
    (void)signal_number;
    running = 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s DEVICE DELAY_US\n", argv[0]);
        return 2;
    }
    long long delay = atoll(argv[2]) * 1000LL;
    int tun = open("/dev/net/tun", O_RDWR | O_NONBLOCK);
    if (tun < 0) {
        perror("open /dev/net/tun");
        return 1;
    }
    struct ifreq request;
    memset(&request, 0, sizeof request);
    request.ifr_flags = IFF_TUN | IFF_NO_PI;
    strncpy(request.ifr_name, argv[1], IFNAMSIZ - 1);
    if (ioctl(tun, TUNSETIFF, &request) < 0) {
        perror("TUNSETIFF");
        return 1;
    }
    signal(SIGTERM, stop);
    signal(SIGINT, stop);
    size_t head = 0, count = 0;
    while (running) {
        long long now = now_ns();
        while (count && due[head] <= now) {
            if (write(tun, packets[head], (size_t)sizes[head]) < 0 && errno != EAGAIN)
                perror("write");
            head = (head + 1) % QUEUE;
            count--;
        }
        struct timespec wait = {1, 0};
        if (count) {
            long long left = due[head] - now;
            wait.tv_sec = left / 1000000000LL;
            wait.tv_nsec = left % 1000000000LL;
        }
        struct pollfd readable = {tun, POLLIN, 0};
        int ready = ppoll(&readable, 1, &wait, NULL);
        if (ready < 0 && errno != EINTR) {
            perror("ppoll");
            return 1;
        }
        if (ready <= 0)
            continue;
        for (;;) {
            size_t tail = (head + count) % QUEUE;
            if (count == QUEUE) { /* full: the packet is dropped */
                if (read(tun, dropped, PACKET) <= 0)
                    break;
                continue;
            }
            ssize_t size = read(tun, packets[tail], PACKET);
            if (size <= 0)
                break;
            sizes[tail] = size;
            due[tail] = now_ns() + delay;
            count++;
        }
    }
    return 0;
}
