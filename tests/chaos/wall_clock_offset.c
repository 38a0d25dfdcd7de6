/*
 * The chaos suite's wall-clock jumps (tests/chaos/clock.py): an LD_PRELOAD library that adds an
 * offset to the wall clock of the process it is loaded into, and to nothing else.
 *
 * The offset (seconds, e.g. "+5400" or "-1800", fractions allowed) is read from the file named by
 * CHAOS_WALL_CLOCK_OFFSET_FILE, again whenever 10 ms of monotonic time have passed since the
 * last reading, so a step the suite writes there is seen within 10 ms. A missing or unreadable
 * file means offset 0.
 *
 * Overridden: clock_gettime (CLOCK_REALTIME, CLOCK_REALTIME_COARSE, CLOCK_REALTIME_ALARM and
 * CLOCK_TAI only; every other clock is passed through untouched), gettimeofday and time. Nothing
 * that waits is wrapped (sleeps, condition variables, semaphores, poll, epoll, timers): a real
 * step changes what the wall clock reads, not how long a thread waits for a relative timeout or
 * on the monotonic clock, and so must this.
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define REREAD_NS 10000000LL /* 10 ms */

typedef int (*clock_gettime_function)(clockid_t, struct timespec *);

static clock_gettime_function real_clock_gettime;
static const char *offset_path;
static int64_t offset_ns;          /* the last offset read */
static int64_t offset_read_at_ns;  /* monotonic time of that reading; 0: never */

static int system_clock_gettime(clockid_t clock, struct timespec *now) {
    if (real_clock_gettime != NULL) {
        return real_clock_gettime(clock, now);
    }
    return (int)syscall(SYS_clock_gettime, clock, now);
}

__attribute__((constructor)) static void initialise(void) {
    real_clock_gettime = (clock_gettime_function)dlsym(RTLD_NEXT, "clock_gettime");
    offset_path = getenv("CHAOS_WALL_CLOCK_OFFSET_FILE");
}

static int64_t parse_offset_ns(const char *text) {
    /* "[+|-]seconds[.fraction]", without strtod's locale */
    int64_t sign = 1, seconds = 0, fraction = 0, scale = 1000000000LL;
    const char *at = text;
    while (*at == ' ' || *at == '\t') {
        at++;
    }
    if (*at == '+' || *at == '-') {
        sign = *at == '-' ? -1 : 1;
        at++;
    }
    for (; *at >= '0' && *at <= '9'; at++) {
        seconds = seconds * 10 + (*at - '0');
    }
    if (*at == '.') {
        for (at++; *at >= '0' && *at <= '9' && scale > 1; at++) {
            scale /= 10;
            fraction += (*at - '0') * scale;
        }
    }
    return sign * (seconds * 1000000000LL + fraction);
}

static int64_t read_offset_ns(void) {
    char text[64];
    ssize_t length = 0;
    int file;
    if (offset_path == NULL || (file = open(offset_path, O_RDONLY | O_CLOEXEC)) < 0) {
        return 0;
    }
    length = read(file, text, sizeof text - 1);
    close(file);
    if (length <= 0) {
        return 0;
    }
    text[length] = '\0';
    return parse_offset_ns(text);
}

static int64_t current_offset_ns(void) {
    struct timespec monotonic;
    int64_t now_ns, read_at_ns;
    if (system_clock_gettime(CLOCK_MONOTONIC, &monotonic) != 0) {
        return __atomic_load_n(&offset_ns, __ATOMIC_RELAXED);
    }
    now_ns = (int64_t)monotonic.tv_sec * 1000000000LL + monotonic.tv_nsec;
    read_at_ns = __atomic_load_n(&offset_read_at_ns, __ATOMIC_ACQUIRE);
    if (read_at_ns == 0 || now_ns - read_at_ns >= REREAD_NS) {
        /* (threads may read at once: each stores a value the file held) */
        __atomic_store_n(&offset_ns, read_offset_ns(), __ATOMIC_RELAXED);
        __atomic_store_n(&offset_read_at_ns, now_ns, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&offset_ns, __ATOMIC_RELAXED);
}

static void add_ns(struct timespec *moment, int64_t ns) {
    int64_t total = (int64_t)moment->tv_sec * 1000000000LL + moment->tv_nsec + ns;
    moment->tv_sec = (time_t)(total / 1000000000LL);
    moment->tv_nsec = (long)(total % 1000000000LL);
    if (moment->tv_nsec < 0) {
        moment->tv_nsec += 1000000000L;
        moment->tv_sec -= 1;
    }
}

static int is_wall_clock(clockid_t clock) {
    return clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE ||
           clock == CLOCK_REALTIME_ALARM || clock == CLOCK_TAI;
}

int clock_gettime(clockid_t clock, struct timespec *now) {
    int result = system_clock_gettime(clock, now);
    if (result == 0 && is_wall_clock(clock)) {
        add_ns(now, current_offset_ns());
    }
    return result;
}

int gettimeofday(struct timeval *restrict now, void *restrict zone) {
    struct timespec moment;
    if (zone != NULL) { /* obsolete: glibc fills it with zeros */
        ((struct timezone *)zone)->tz_minuteswest = 0;
        ((struct timezone *)zone)->tz_dsttime = 0;
    }
    if (clock_gettime(CLOCK_REALTIME, &moment) != 0) {
        return -1;
    }
    now->tv_sec = moment.tv_sec;
    now->tv_usec = moment.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *now) {
    struct timespec moment;
    if (clock_gettime(CLOCK_REALTIME, &moment) != 0) {
        return (time_t)-1;
    }
    if (now != NULL) {
        *now = moment.tv_sec;
    }
    return moment.tv_sec;
}
