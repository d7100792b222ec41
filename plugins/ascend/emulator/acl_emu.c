/*
 * acl_emu.c - a CPU emulator of the AscendCL runtime (ACL) and of the aclnn operator API.
 *
 * It exports the same C symbols as libascendcl / libacl_rt, libnnopbase and libopapi (the subset
 * minispore's Ascend plugin binds; see shared/reference/acl_api.md §11), so the plugin's ctypes
 * code runs unchanged against it. What makes it an *emulator* rather than a stub is that it keeps
 * the runtime's rules (§9), so plugin bugs that would break on an NPU also break here:
 *
 *  - Device memory is not host-addressable. aclrtMalloc hands out addresses from a reserved
 *    PROT_NONE range; the bytes live in a side table. Dereferencing a device pointer on the host
 *    faults, exactly as on a PCIe card. Only ACL/aclnn calls translate addresses.
 *  - Allocations: real size ALIGN_UP(size,32)+32, 64-byte aligned, filled with garbage (0xA5),
 *    a device budget (ACL_EMU_DEVICE_MEMORY bytes, default 8 GiB; less under an address-space limit,
 *    see "sizing the device") and 207001 when it runs out.
 *  - Streams are FIFOs executed by one worker thread each. Launches only enqueue. aclrtMemcpy
 *    (synchronous) does NOT drain streams: reading results before aclrtSynchronizeStream gives
 *    stale data. ACL_EMU_LAUNCH_DELAY_US (or aclemuSetLaunchDelayUs) delays every queued task so
 *    such a race is caught deterministically in tests.
 *  - Events capture the queue position at record time; StreamWaitEvent orders two streams.
 *  - Errors: argument errors at call time; faults during "device" execution (a freed buffer, a
 *    tensor outside its allocation) surface at the next synchronize as 507015. aclGetRecentErrMsg
 *    returns and clears a thread-local message.
 *  - aclnn: phase 1 validates (161001/161002) and snapshots every tensor into a single-use
 *    executor; phase 2 checks the workspace, enqueues and consumes the executor (a second phase 2
 *    returns 561103).
 *  - Kernels compute in double and round to the output dtype (fp16/bf16 included).
 *    FlashAttentionScore is tiled (online softmax over key/value blocks of ACL_EMU_FA_BLOCK rows):
 *    no Sq x Skv matrix is ever held; the backward recomputes probabilities from the saved
 *    row max/sum.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
typedef int aclError;
typedef int32_t aclnnStatus;

/* ---- error codes (acl_api.md §1, §5.2) ---- */
enum {
    ACL_SUCCESS = 0, ACL_ERROR_INVALID_PARAM = 100000, ACL_ERROR_UNINITIALIZE = 100001,
    ACL_ERROR_REPEAT_INITIALIZE = 100002, ACL_ERROR_REPEAT_FINALIZE = 100037,
    ACL_ERROR_RT_PARAM_INVALID = 107000, ACL_ERROR_RT_INVALID_DEVICEID = 107001,
    ACL_ERROR_RT_CONTEXT_NULL = 107002, ACL_ERROR_RT_STREAM_CONTEXT = 107003,
    ACL_ERROR_RT_INVALID_HANDLE = 107017, ACL_ERROR_RT_WAIT_TIMEOUT = 107019,
    ACL_ERROR_RT_FEATURE_NOT_SUPPORT = 207000, ACL_ERROR_RT_MEMORY_ALLOCATION = 207001,
    ACL_ERROR_RT_MEMORY_FREE = 207002, ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID = 107006,
    ACL_ERROR_RT_FAILURE = 500003,
    ACL_ERROR_RT_AICORE_EXCEPTION = 507015, ACL_ERROR_RT_EVENT_NOT_COMPLETE = 507006,
    ACLNN_ERR_PARAM_NULLPTR = 161001, ACLNN_ERR_PARAM_INVALID = 161002, ACLNN_ERR_INNER_NULLPTR = 561103,
};

/* ---- aclDataType (acl_api.md §3) ---- */
enum { DT_FLOAT = 0, DT_FLOAT16 = 1, DT_INT8 = 2, DT_INT32 = 3, DT_UINT8 = 4, DT_INT16 = 6, DT_INT64 = 9,
       DT_DOUBLE = 11, DT_BOOL = 12, DT_BF16 = 27 };

/* ---------------------------------------------------------------------------------------------
 * thread-local error message (aclGetRecentErrMsg returns and clears it)
 * ------------------------------------------------------------------------------------------- */
static __thread char t_msg[1024];
static __thread char t_msg_out[1024];
static __thread int t_has_msg;

static int fail(int code, const char *fmt, ...) {
    va_list ap;
    char buf[768];
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* newest message first */
    char old[256];
    snprintf(old, sizeof old, "%s", t_has_msg ? t_msg : "");
    snprintf(t_msg, sizeof t_msg, "EE%d: %s%s%s", code, buf, t_has_msg ? "\n" : "", old);
    t_has_msg = 1;
    return code;
}

EXPORT const char *aclGetRecentErrMsg(void) {
    if (!t_has_msg) return NULL;
    snprintf(t_msg_out, sizeof t_msg_out, "%s", t_msg);
    t_has_msg = 0;
    t_msg[0] = 0;
    return t_msg_out;
}

/* ---------------------------------------------------------------------------------------------
 * global state: one mutex + condition for all queues and events (simple and obviously correct),
 * a rwlock for the device memory table (kernels read it, aclrtFree writes it)
 * ------------------------------------------------------------------------------------------- */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t g_mem = PTHREAD_RWLOCK_INITIALIZER;
static int g_inited, g_finalized_once;
static long g_delay_us = -1;

#define MAX_DEV 16
typedef struct Stream Stream;
typedef struct Context { int device; int is_default; Stream *default_stream; } Context;
typedef struct Device { int refcount; Context *ctx; size_t used, peak, total; } Device;
static Device g_dev[MAX_DEV];
static __thread Context *t_ctx;

static long launch_delay(void) {
    if (g_delay_us < 0) {
        const char *e = getenv("ACL_EMU_LAUNCH_DELAY_US");
        g_delay_us = e ? atol(e) : 0;
    }
    return g_delay_us;
}
EXPORT void aclemuSetLaunchDelayUs(long us) { g_delay_us = us; }

static int device_count(void) {
    const char *e = getenv("ACL_EMU_DEVICE_COUNT");
    int phys = e ? atoi(e) : 2;
    if (phys < 1) phys = 1;
    if (phys > MAX_DEV) phys = MAX_DEV;
    const char *vis = getenv("ASCEND_RT_VISIBLE_DEVICES");
    if (!vis || !*vis) return phys;
    /* comma-separated ascending ids; parsing stops at the first bad character or invalid id */
    int n = 0, last = -1;
    const char *p = vis;
    while (*p) {
        if (*p < '0' || *p > '9') break;
        int id = (int)strtol(p, (char **)&p, 10);
        if (id >= phys || id <= last) break;
        last = id;
        n++;
        if (*p == ',') p++;
        else break;
    }
    return n;
}

/* ---------------------------------------------------------------------------------------------
 * sizing the device: the budget, capped by the address space this process can reserve
 *
 * Every device byte costs the process two bytes of address space: one in the PROT_NONE range that
 * device addresses come from, one in the host backing store that holds the bytes. A PROT_NONE,
 * MAP_NORESERVE mapping uses no memory, but it still counts against RLIMIT_AS (`ulimit -v`), so
 * under such a limit the 1 TiB range reserved by default cannot be mapped. There the range gets a
 * third of the address space still free (the backing stores may take another third, the rest of
 * the process keeps the last one) and a device is never larger than the range. An allocation
 * beyond it is then the device's ordinary out-of-memory, whose message says how big the device is
 * and why; a host that cannot back a device allocation, or a range that cannot be mapped at all,
 * is reported as what it is (malloc / mmap and errno), not as device memory running out.
 * ------------------------------------------------------------------------------------------- */
#define DEFAULT_BUDGET ((size_t)8 << 30)
#define MAX_RANGE ((size_t)1 << 40)
#define MIN_RANGE ((size_t)64 << 20)
#define RANGE_GRAIN ((size_t)2 << 20)

static size_t device_budget(void) {
    const char *e = getenv("ACL_EMU_DEVICE_MEMORY");
    return e ? (size_t)strtoull(e, NULL, 10) : DEFAULT_BUDGET;
}

/* "1.5 GiB" - messages state sizes the way a reader compares them */
static const char *fmt_bytes(char *buf, size_t n, size_t bytes) {
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) { v /= 1024; u++; }
    if (u == 0) snprintf(buf, n, "%zu B", bytes);
    else snprintf(buf, n, "%.1f %s", v, unit[u]);
    return buf;
}

/* the soft RLIMIT_AS, or 0 when there is none */
static size_t address_space_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 0;
    return (size_t)rl.rlim_cur;
}

/* address space this process has mapped now (VmSize), from /proc/self/statm; 0 when unknown */
static size_t mapped_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long pages = 0;
    int ok = fscanf(f, "%lu", &pages) == 1;
    fclose(f);
    return ok ? (size_t)pages * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

typedef struct Alloc { uintptr_t addr; size_t size, real; unsigned char *store; int device; int live; } Alloc;
static Alloc *g_allocs;
static size_t g_nalloc, g_capalloc, g_ndead;
static uintptr_t g_base, g_next, g_end;
static char g_range_note[320];   /* why the range has its size: "" when the limit played no part */

/* Reserve the device address range once (caller holds g_mem for writing). 0, or an errno after
 * setting the thread's error message. */
static int reserve_range(const char *func) {
    if (g_base) return 0;
    char a[32], b[32], c[32];
    size_t limit = address_space_limit(), want = MAX_RANGE, headroom = 0;
    if (limit) {
        size_t mapped = mapped_bytes();
        headroom = limit > mapped ? limit - mapped : 0;
        want = headroom / 3 / RANGE_GRAIN * RANGE_GRAIN;
        if (want > MAX_RANGE) want = MAX_RANGE;
        if (want < MIN_RANGE) want = MIN_RANGE;     /* a small device beats none: mmap decides */
    }
    int err = ENOMEM;
    for (size_t size = want; size >= MIN_RANGE; size /= 2) {
        void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) { err = errno; continue; }
        g_base = ((uintptr_t)p + 63) & ~(uintptr_t)63;
        g_next = g_base;
        g_end = (uintptr_t)p + size;
        if (limit)
            snprintf(g_range_note, sizeof g_range_note, "this process's address-space limit (RLIMIT_AS, ulimit -v) "
                     "is %s with %s of it free, and the emulator reserved %s of that (a third at most) for "
                     "device addresses (their host copies need as much again)", fmt_bytes(a, sizeof a, limit),
                     fmt_bytes(b, sizeof b, headroom), fmt_bytes(c, sizeof c, size));
        else if (size < MAX_RANGE)
            snprintf(g_range_note, sizeof g_range_note, "only %s of address space could be reserved for "
                     "device addresses (mmap refused more)", fmt_bytes(c, sizeof c, size));
        return 0;
    }
    if (limit)
        fail(ACL_ERROR_RT_FAILURE, "%s: cannot reserve the %s of address space device memory needs: "
             "mmap failed with errno %d (%s); this process's address-space limit (RLIMIT_AS, ulimit -v) is %s "
             "with %s of it free", func, fmt_bytes(a, sizeof a, MIN_RANGE), err, strerror(err),
             fmt_bytes(b, sizeof b, limit), fmt_bytes(c, sizeof c, headroom));
    else
        fail(ACL_ERROR_RT_FAILURE, "%s: cannot reserve the %s of address space device memory needs: "
             "mmap failed with errno %d (%s)", func, fmt_bytes(a, sizeof a, MIN_RANGE), err, strerror(err));
    return err;
}

/* *total = the size of a device being opened: its budget, no larger than the address range.
 * Nonzero (an errno) when the range cannot be reserved; the thread's message then says why. */
static int size_device(const char *func, size_t *total) {
    pthread_rwlock_wrlock(&g_mem);
    int err = reserve_range(func);
    size_t range = g_end - g_base;
    pthread_rwlock_unlock(&g_mem);
    if (err) return err;
    size_t budget = device_budget();
    *total = budget < range ? budget : range;
    return 0;
}

/* Why device `d` has `total` bytes, for the out-of-memory message. */
static void explain_size(char *buf, size_t n, int device, size_t total) {
    char a[32], b[32];
    size_t budget = device_budget();
    int set = getenv("ACL_EMU_DEVICE_MEMORY") != NULL;
    if (total < budget)
        snprintf(buf, n, "device %d has %s, less than the %s budget %s, because %s", device,
                 fmt_bytes(a, sizeof a, total), fmt_bytes(b, sizeof b, budget),
                 set ? "ACL_EMU_DEVICE_MEMORY asks for" : "the emulator gives by default", g_range_note);
    else
        snprintf(buf, n, "device %d has %s, %s", device, fmt_bytes(a, sizeof a, total),
                 set ? "the size ACL_EMU_DEVICE_MEMORY sets"
                     : "the emulator's default (ACL_EMU_DEVICE_MEMORY=<bytes> changes it)");
}

/* ---------------------------------------------------------------------------------------------
 * device memory: addresses from a reserved PROT_NONE range, bytes in a side table
 * ------------------------------------------------------------------------------------------- */

/* binary search: the live allocation containing addr (caller holds g_mem) */
static Alloc *find_alloc(uintptr_t addr) {
    size_t lo = 0, hi = g_nalloc;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g_allocs[mid].addr <= addr) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return NULL;
    Alloc *a = &g_allocs[lo - 1];
    if (!a->live || addr >= a->addr + a->real) return NULL;
    return a;
}

static int is_device_ptr(const void *p) {
    return g_base && (uintptr_t)p >= g_base && (uintptr_t)p < g_end;
}

/* host pointer to `n` device bytes at `addr`, or NULL (caller holds g_mem) */
static unsigned char *translate(uintptr_t addr, size_t n) {
    Alloc *a = find_alloc(addr);
    if (!a || addr + n > a->addr + a->real) return NULL;
    return a->store + (addr - a->addr);
}

static int need_device(void) {
    if (!t_ctx) return fail(ACL_ERROR_RT_CONTEXT_NULL, "no current context: call aclrtSetDevice first");
    return 0;
}

/* Drop freed entries from the table (caller holds g_mem for writing). */
static void compact_allocs(void) {
    size_t j = 0;
    for (size_t i = 0; i < g_nalloc; i++) if (g_allocs[i].live) g_allocs[j++] = g_allocs[i];
    g_nalloc = j;
    g_ndead = 0;
}

static size_t span_of(size_t real) { return (real + 63) & ~(size_t)63; }

/* Where `span` bytes go: the next fresh address while the range lasts (so a stale pointer keeps
 * faulting instead of landing in a newer buffer), else the first gap freed allocations left.
 * Sets *addr and *idx (the table position that keeps it sorted); -1 when nothing fits. Caller
 * holds g_mem for writing. */
static int place(size_t span, uintptr_t *addr, size_t *idx) {
    if (span <= g_end - g_next) {
        *addr = g_next;
        *idx = g_nalloc;
        return 0;
    }
    compact_allocs();
    uintptr_t prev_end = g_base;
    for (size_t i = 0; i <= g_nalloc; i++) {
        uintptr_t next = i < g_nalloc ? g_allocs[i].addr : g_end;
        if (next - prev_end >= span) {
            *addr = prev_end;
            *idx = i;
            return 0;
        }
        if (i < g_nalloc) prev_end = g_allocs[i].addr + span_of(g_allocs[i].real);
    }
    return -1;
}

static aclError do_malloc(void **devPtr, size_t size, int pad) {
    int rc = need_device();
    if (rc) return rc;
    if (!devPtr || size == 0) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: devPtr NULL or size 0");
    int dev = t_ctx->device;
    Device *d = &g_dev[dev];
    /* a size beyond the device is out of memory; not rounding it first keeps it from wrapping */
    size_t real = size > d->total ? SIZE_MAX : pad ? ((size + 31) / 32) * 32 + 32 : ((size + 31) / 32) * 32;
    char why[640], a[32];
    pthread_rwlock_wrlock(&g_mem);
    if (real > d->total - d->used) {
        size_t used = d->used, total = d->total;
        pthread_rwlock_unlock(&g_mem);
        explain_size(why, sizeof why, dev, total);
        return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMalloc: out of device memory on device %d "
                    "(asked %zu bytes, %zu of %zu in use); %s", dev, size, used, total, why);
    }
    uintptr_t addr;
    size_t idx;
    if (place(span_of(real), &addr, &idx)) {
        pthread_rwlock_unlock(&g_mem);
        return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMalloc: no free span of %zu bytes is left in the %s "
                    "device address range: the live allocations fragment it (device %d: %zu of %zu bytes in use)",
                    size, fmt_bytes(a, sizeof a, g_end - g_base), dev, d->used, d->total);
    }
    if (g_nalloc == g_capalloc) {
        size_t cap = g_capalloc ? g_capalloc * 2 : 256;
        Alloc *grown = realloc(g_allocs, cap * sizeof(Alloc));
        if (!grown) {
            int err = errno;
            pthread_rwlock_unlock(&g_mem);
            return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMalloc: the host is out of memory (not the device): "
                        "growing the allocation table failed with errno %d (%s)", err, strerror(err));
        }
        g_allocs = grown;
        g_capalloc = cap;
    }
    unsigned char *store = malloc(real);
    if (!store) {
        int err = errno;
        pthread_rwlock_unlock(&g_mem);
        return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMalloc: the host is out of memory (not the device): "
                    "malloc of the %zu-byte host copy of a device buffer failed with errno %d (%s); device %d has "
                    "%zu of %zu bytes in use", real, err, strerror(err), dev, d->used, d->total);
    }
    memset(store, 0xA5, real);                      /* device memory is not initialised */
    memmove(&g_allocs[idx + 1], &g_allocs[idx], (g_nalloc - idx) * sizeof(Alloc));
    g_allocs[idx] = (Alloc){addr, size, real, store, dev, 1};     /* the table stays sorted by address */
    g_nalloc++;
    if (addr == g_next) g_next += span_of(real);
    d->used += real;
    if (d->used > d->peak) d->peak = d->used;
    *devPtr = (void *)addr;
    pthread_rwlock_unlock(&g_mem);
    return ACL_SUCCESS;
}

EXPORT aclError aclrtMalloc(void **devPtr, size_t size, int policy) { (void)policy; return do_malloc(devPtr, size, 1); }
EXPORT aclError aclrtMallocCached(void **devPtr, size_t size, int policy) { (void)policy; return do_malloc(devPtr, size, 1); }
EXPORT aclError aclrtMallocAlign32(void **devPtr, size_t size, int policy) { (void)policy; return do_malloc(devPtr, size, 0); }

EXPORT aclError aclrtFree(void *devPtr) {
    if (!devPtr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtFree: NULL pointer");
    pthread_rwlock_wrlock(&g_mem);
    Alloc *a = find_alloc((uintptr_t)devPtr);
    if (!a || a->addr != (uintptr_t)devPtr) {
        pthread_rwlock_unlock(&g_mem);
        return fail(ACL_ERROR_RT_MEMORY_FREE, "aclrtFree: %p is not the start of a live device allocation", devPtr);
    }
    free(a->store);
    a->store = NULL;
    a->live = 0;
    g_dev[a->device].used -= a->real;
    if (++g_ndead > 1024 && g_ndead * 2 > g_nalloc) compact_allocs();
    pthread_rwlock_unlock(&g_mem);
    return ACL_SUCCESS;
}

EXPORT aclError aclrtMallocHost(void **hostPtr, size_t size) {
    if (!hostPtr || size == 0) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: NULL or size 0");
    if (posix_memalign(hostPtr, 64, size)) return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMallocHost failed");
    return ACL_SUCCESS;
}
EXPORT aclError aclrtFreeHost(void *hostPtr) {
    if (!hostPtr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: NULL");
    free(hostPtr);
    return ACL_SUCCESS;
}

EXPORT aclError aclrtGetMemInfo(int attr, size_t *freeb, size_t *total) {
    (void)attr;
    int rc = need_device();
    if (rc) return rc;
    if (!freeb || !total) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: NULL output");
    Device *d = &g_dev[t_ctx->device];
    *total = d->total;
    *freeb = d->total - d->used;
    return ACL_SUCCESS;
}

/* emulator-only: peak device bytes since the last reset (benchmarks read it) */
EXPORT size_t aclemuGetPeakMemory(int device) { return (device >= 0 && device < MAX_DEV) ? g_dev[device].peak : 0; }
EXPORT void aclemuResetPeakMemory(int device) {
    if (device >= 0 && device < MAX_DEV) g_dev[device].peak = g_dev[device].used;
}

/* check kind against the pointer classes, translate both sides (caller holds g_mem read lock) */
static aclError copy_now(void *dst, size_t destMax, const void *src, size_t count, int kind) {
    if (count == 0) return ACL_SUCCESS;
    if (!dst || !src) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpy: NULL dst or src");
    if (kind < 0 || kind > 5) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpy: kind %d outside the enum", kind);
    if (count > destMax) return fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtMemcpy: count %zu > destMax %zu", count, destMax);
    int dd = is_device_ptr(dst), sd = is_device_ptr(src);
    if (kind == 4) kind = dd ? (sd ? 3 : 1) : (sd ? 2 : 0);
    int want_dd = (kind == 1 || kind == 3 || kind == 5), want_sd = (kind == 2 || kind == 3);
    if (dd != want_dd || sd != want_sd)
        return fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpy: kind %d does not match the pointers (dst is %s, src is %s)",
                    kind, dd ? "device" : "host", sd ? "device" : "host");
    unsigned char *d = dd ? translate((uintptr_t)dst, count) : (unsigned char *)dst;
    const unsigned char *s = sd ? translate((uintptr_t)src, count) : (const unsigned char *)src;
    if (!d || !s) return fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtMemcpy: %zu bytes at %s %p are not inside one live device "
                              "allocation", count, !d ? "dst" : "src", !d ? dst : (void *)src);
    memmove(d, s, count);
    return ACL_SUCCESS;
}

EXPORT aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, int kind) {
    if (kind == 1 || kind == 2 || kind == 3) {
        int rc = need_device();
        if (rc) return rc;
    }
    pthread_rwlock_rdlock(&g_mem);
    aclError rc = copy_now(dst, destMax, src, count, kind);     /* no stream is drained */
    pthread_rwlock_unlock(&g_mem);
    return rc;
}

EXPORT aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count) {
    if (count == 0) return ACL_SUCCESS;
    if (!devPtr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMemset: NULL");
    if (count > maxCount) return fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtMemset: count > maxCount");
    pthread_rwlock_rdlock(&g_mem);
    unsigned char *d = is_device_ptr(devPtr) ? translate((uintptr_t)devPtr, count) : devPtr;
    if (d) memset(d, value, count);
    pthread_rwlock_unlock(&g_mem);
    return d ? ACL_SUCCESS : fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtMemset: range outside a live allocation");
}

/* ---------------------------------------------------------------------------------------------
 * streams: a FIFO of tasks run by one worker thread
 * ------------------------------------------------------------------------------------------- */
typedef struct Task Task;
typedef void (*task_fn)(Task *, Stream *);
struct Task { task_fn run; Task *next; void *a; void *b; size_t n; uint64_t seq; int is_kernel; unsigned char inline_buf[]; };
struct Stream {
    int device, busy, stop, error;
    char errmsg[512];
    Task *head, *tail;
    pthread_t th;
    pthread_cond_t cv;
};

typedef struct Event { uint64_t recorded, completed; double stamp_ms; int flag; } Event;

/* handle registries: bad handles give 107017 instead of a crash */
#define REG_MAX 4096
static void *g_streams[REG_MAX], *g_events[REG_MAX], *g_ctxs[REG_MAX];
static int reg_add(void **reg, void *p) {
    for (int i = 0; i < REG_MAX; i++) if (!reg[i]) { reg[i] = p; return 0; }
    return -1;
}
static int reg_has(void **reg, void *p) {
    if (!p) return 0;
    for (int i = 0; i < REG_MAX; i++) if (reg[i] == p) return 1;
    return 0;
}
static void reg_del(void **reg, void *p) {
    for (int i = 0; i < REG_MAX; i++) if (reg[i] == p) { reg[i] = NULL; return; }
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void stream_fault(Stream *s, int code, const char *fmt, ...) {
    pthread_mutex_lock(&g_mu);
    if (!s->error) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->errmsg, sizeof s->errmsg, fmt, ap);
        va_end(ap);
        s->error = code;
    }
    pthread_mutex_unlock(&g_mu);
}

static void *worker(void *arg) {
    Stream *s = arg;
    pthread_mutex_lock(&g_mu);
    for (;;) {
        while (!s->head && !s->stop) pthread_cond_wait(&s->cv, &g_mu);
        if (!s->head && s->stop) break;
        Task *t = s->head;
        s->head = t->next;
        if (!s->head) s->tail = NULL;
        s->busy = 1;
        pthread_mutex_unlock(&g_mu);
        long d = launch_delay();
        if (d > 0 && t->is_kernel) usleep((useconds_t)d);
        t->run(t, s);
        free(t);
        pthread_mutex_lock(&g_mu);
        s->busy = 0;
        pthread_cond_broadcast(&g_cv);
    }
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

/* A stream with its worker thread, or NULL (with the error recorded by fail()) when the thread
 * cannot be started: a handle without a worker would accept launches and then hang every
 * synchronize, so creation must fail instead. */
static Stream *new_stream(int device) {
    Stream *s = calloc(1, sizeof *s);
    if (!s) { fail(ACL_ERROR_RT_FAILURE, "stream creation: out of host memory"); return NULL; }
    s->device = device;
    pthread_cond_init(&s->cv, NULL);
    int rc = pthread_create(&s->th, NULL, worker, s);
    if (rc) {
        pthread_cond_destroy(&s->cv);
        free(s);
        fail(ACL_ERROR_RT_FAILURE, "stream creation: pthread_create failed with %d (%s)", rc, strerror(rc));
        return NULL;
    }
    pthread_mutex_lock(&g_mu);
    reg_add(g_streams, s);
    pthread_mutex_unlock(&g_mu);
    return s;
}

static void enqueue(Stream *s, Task *t) {
    pthread_mutex_lock(&g_mu);
    t->next = NULL;
    if (s->tail) s->tail->next = t;
    else s->head = t;
    s->tail = t;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&g_mu);
}

/* the stream a call uses: NULL is the current context's default stream */
static int resolve_stream(void *h, Stream **out) {
    int rc = need_device();
    if (rc) return rc;
    if (!h) { *out = t_ctx->default_stream; return 0; }
    pthread_mutex_lock(&g_mu);
    int ok = reg_has(g_streams, h);
    pthread_mutex_unlock(&g_mu);
    if (!ok) return fail(ACL_ERROR_RT_INVALID_HANDLE, "invalid stream handle %p", h);
    Stream *s = h;
    if (s->device != t_ctx->device)
        return fail(ACL_ERROR_RT_STREAM_CONTEXT, "stream of device %d used while device %d is current", s->device, t_ctx->device);
    *out = s;
    return 0;
}

static aclError drain(Stream *s) {
    pthread_mutex_lock(&g_mu);
    while (s->head || s->busy) pthread_cond_wait(&g_cv, &g_mu);
    int err = s->error;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", s->errmsg);
    s->error = 0;
    s->errmsg[0] = 0;
    pthread_mutex_unlock(&g_mu);
    if (err) return fail(err, "asynchronous device error: %s", msg);
    return ACL_SUCCESS;
}

static void destroy_stream_obj(Stream *s) {
    drain(s);
    pthread_mutex_lock(&g_mu);
    s->stop = 1;
    pthread_cond_signal(&s->cv);
    reg_del(g_streams, s);
    pthread_mutex_unlock(&g_mu);
    pthread_join(s->th, NULL);
    pthread_cond_destroy(&s->cv);
    free(s);
}

EXPORT aclError aclrtCreateStream(void **stream) {
    int rc = need_device();
    if (rc) return rc;
    if (!stream) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: NULL");
    Stream *s = new_stream(t_ctx->device);
    if (!s) return ACL_ERROR_RT_FAILURE;            /* the message is set; *stream is untouched */
    *stream = s;
    return ACL_SUCCESS;
}
EXPORT aclError aclrtCreateStreamWithConfig(void **stream, uint32_t prio, uint32_t flag) {
    (void)prio; (void)flag;
    return aclrtCreateStream(stream);
}
EXPORT aclError aclrtDestroyStream(void *stream) {
    Stream *s;
    if (!stream) return fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream: NULL (the default stream cannot be destroyed)");
    int rc = resolve_stream(stream, &s);
    if (rc) return rc;
    destroy_stream_obj(s);
    return ACL_SUCCESS;
}
EXPORT aclError aclrtSynchronizeStream(void *stream) {
    Stream *s;
    int rc = resolve_stream(stream, &s);
    if (rc) return rc;
    return drain(s);
}
EXPORT aclError aclrtSynchronizeStreamWithTimeout(void *stream, int32_t timeout) { (void)timeout; return aclrtSynchronizeStream(stream); }
EXPORT aclError aclrtStreamQuery(void *stream, int *status) {
    Stream *s;
    int rc = resolve_stream(stream, &s);
    if (rc) return rc;
    if (!status) return fail(ACL_ERROR_INVALID_PARAM, "aclrtStreamQuery: NULL");
    pthread_mutex_lock(&g_mu);
    *status = (s->head || s->busy) ? 1 : 0;
    pthread_mutex_unlock(&g_mu);
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------
 * init, devices, contexts
 * ------------------------------------------------------------------------------------------- */
EXPORT aclError aclInit(const char *configPath) {
    (void)configPath;
    pthread_mutex_lock(&g_mu);
    int again = g_inited++;
    pthread_mutex_unlock(&g_mu);
    if (again) return fail(ACL_ERROR_REPEAT_INITIALIZE, "aclInit: already initialised");
    return ACL_SUCCESS;
}
EXPORT aclError aclnnInit(const char *configPath) { (void)configPath; return ACL_SUCCESS; }
EXPORT aclError aclnnFinalize(void) { return ACL_SUCCESS; }

EXPORT aclError aclFinalize(void) {
    pthread_mutex_lock(&g_mu);
    int was = g_inited;
    g_inited = 0;
    pthread_mutex_unlock(&g_mu);
    if (!was) {
        if (g_finalized_once) return fail(ACL_ERROR_REPEAT_FINALIZE, "aclFinalize: already finalised");
        return fail(ACL_ERROR_UNINITIALIZE, "aclFinalize: aclInit was never called");
    }
    g_finalized_once = 1;
    return ACL_SUCCESS;
}

EXPORT aclError aclrtGetVersion(int32_t *major, int32_t *minor, int32_t *patch) {
    if (!major || !minor || !patch) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetVersion: NULL");
    *major = 1; *minor = 15; *patch = 0;
    return ACL_SUCCESS;
}
EXPORT const char *aclrtGetSocName(void) { return "Ascend910B1 (minispore CPU emulator)"; }
EXPORT int aclemuIsEmulator(void) { return 1; }

EXPORT aclError aclrtGetDeviceCount(uint32_t *count) {
    if (!count) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount: NULL");
    *count = (uint32_t)device_count();
    return ACL_SUCCESS;
}

EXPORT aclError aclrtSetDevice(int32_t deviceId) {
    int n = device_count();
    if (deviceId < 0 || deviceId >= n)
        return fail(ACL_ERROR_RT_INVALID_DEVICEID, "aclrtSetDevice: device id %d out of range (%d visible devices)", deviceId, n);
    size_t total;
    if (size_device("aclrtSetDevice", &total)) return ACL_ERROR_RT_FAILURE;   /* the message says why */
    pthread_mutex_lock(&g_mu);
    Device *d = &g_dev[deviceId];
    int create = d->refcount++ == 0 || !d->ctx;
    if (create) {
        d->ctx = calloc(1, sizeof(Context));
        d->ctx->device = deviceId;
        d->ctx->is_default = 1;
        d->total = total;
    }
    pthread_mutex_unlock(&g_mu);
    if (create && !(d->ctx->default_stream = new_stream(deviceId))) {
        pthread_mutex_lock(&g_mu);                  /* undo: the device stays unopened */
        d->refcount--;
        free(d->ctx);
        d->ctx = NULL;
        pthread_mutex_unlock(&g_mu);
        return ACL_ERROR_RT_FAILURE;
    }
    t_ctx = d->ctx;
    return ACL_SUCCESS;
}

EXPORT aclError aclrtResetDevice(int32_t deviceId) {
    if (deviceId < 0 || deviceId >= device_count())
        return fail(ACL_ERROR_RT_INVALID_DEVICEID, "aclrtResetDevice: device id %d out of range", deviceId);
    Device *d = &g_dev[deviceId];
    if (d->refcount == 0) return ACL_SUCCESS;
    if (d->ctx && d->ctx->default_stream) drain(d->ctx->default_stream);
    if (--d->refcount == 0) {
        /* the default context goes; its memory stays accounted until freed (the plugin frees first) */
        Context *c = d->ctx;
        d->ctx = NULL;
        if (t_ctx == c) t_ctx = NULL;
        destroy_stream_obj(c->default_stream);
        free(c);
    }
    return ACL_SUCCESS;
}

EXPORT aclError aclrtGetDevice(int32_t *deviceId) {
    int rc = need_device();
    if (rc) return rc;
    if (!deviceId) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: NULL");
    *deviceId = t_ctx->device;
    return ACL_SUCCESS;
}

EXPORT aclError aclrtSynchronizeDevice(void) {
    int rc = need_device();
    if (rc) return rc;
    int dev = t_ctx->device;
    aclError first = ACL_SUCCESS;
    for (int i = 0; i < REG_MAX; i++) {
        pthread_mutex_lock(&g_mu);
        Stream *s = g_streams[i];
        pthread_mutex_unlock(&g_mu);
        if (s && s->device == dev) {
            aclError e = drain(s);
            if (e && !first) first = e;
        }
    }
    return first;
}

EXPORT aclError aclrtCreateContext(void **context, int32_t deviceId) {
    if (!context) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateContext: NULL");
    if (deviceId < 0 || deviceId >= device_count())
        return fail(ACL_ERROR_RT_INVALID_DEVICEID, "aclrtCreateContext: device id %d out of range", deviceId);
    Device *d = &g_dev[deviceId];
    if (!d->total && size_device("aclrtCreateContext", &d->total)) return ACL_ERROR_RT_FAILURE;
    Context *c = calloc(1, sizeof *c);
    c->device = deviceId;
    if (!(c->default_stream = new_stream(deviceId))) {
        free(c);
        return ACL_ERROR_RT_FAILURE;
    }
    pthread_mutex_lock(&g_mu);
    reg_add(g_ctxs, c);
    pthread_mutex_unlock(&g_mu);
    t_ctx = c;
    *context = c;
    return ACL_SUCCESS;
}
EXPORT aclError aclrtDestroyContext(void *context) {
    pthread_mutex_lock(&g_mu);
    int ok = reg_has(g_ctxs, context);
    if (ok) reg_del(g_ctxs, context);
    pthread_mutex_unlock(&g_mu);
    if (!ok) return fail(ACL_ERROR_RT_INVALID_HANDLE, "aclrtDestroyContext: not an explicitly created context");
    Context *c = context;
    destroy_stream_obj(c->default_stream);
    if (t_ctx == c) t_ctx = NULL;
    free(c);
    return ACL_SUCCESS;
}
EXPORT aclError aclrtSetCurrentContext(void *context) {
    if (!context) return fail(ACL_ERROR_INVALID_PARAM, "aclrtSetCurrentContext: NULL");
    int ok = 0;
    pthread_mutex_lock(&g_mu);
    ok = reg_has(g_ctxs, context);
    for (int i = 0; i < MAX_DEV && !ok; i++) ok = g_dev[i].ctx == context;
    pthread_mutex_unlock(&g_mu);
    if (!ok) return fail(ACL_ERROR_RT_INVALID_HANDLE, "aclrtSetCurrentContext: unknown context");
    t_ctx = context;
    return ACL_SUCCESS;
}
EXPORT aclError aclrtGetCurrentContext(void **context) {
    int rc = need_device();
    if (rc) return rc;
    if (!context) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetCurrentContext: NULL");
    *context = t_ctx;
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------
 * events
 * ------------------------------------------------------------------------------------------- */
static int check_event(void *e) {
    pthread_mutex_lock(&g_mu);
    int ok = reg_has(g_events, e);
    pthread_mutex_unlock(&g_mu);
    return ok ? 0 : fail(ACL_ERROR_RT_INVALID_HANDLE, "invalid event handle %p", e);
}

EXPORT aclError aclrtCreateEventWithFlag(void **event, uint32_t flag) {
    int rc = need_device();
    if (rc) return rc;
    if (!event) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateEvent: NULL");
    Event *e = calloc(1, sizeof *e);
    e->flag = (int)flag;
    pthread_mutex_lock(&g_mu);
    reg_add(g_events, e);
    pthread_mutex_unlock(&g_mu);
    *event = e;
    return ACL_SUCCESS;
}
EXPORT aclError aclrtCreateEvent(void **event) { return aclrtCreateEventWithFlag(event, 0x1 | 0x8); }
EXPORT aclError aclrtDestroyEvent(void *event) {
    int rc = check_event(event);
    if (rc) return rc;
    pthread_mutex_lock(&g_mu);
    reg_del(g_events, event);
    pthread_mutex_unlock(&g_mu);
    free(event);
    return ACL_SUCCESS;
}

static void run_record(Task *t, Stream *s) {
    (void)s;
    Event *e = t->a;
    pthread_mutex_lock(&g_mu);
    if (t->seq > e->completed) { e->completed = t->seq; e->stamp_ms = now_ms(); }
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}
static void run_wait(Task *t, Stream *s) {
    (void)s;
    Event *e = t->a;
    pthread_mutex_lock(&g_mu);
    while (e->completed < t->seq) pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
}

EXPORT aclError aclrtRecordEvent(void *event, void *stream) {
    Stream *s;
    int rc = check_event(event);
    if (rc || (rc = resolve_stream(stream, &s))) return rc;
    Task *t = calloc(1, sizeof *t);
    t->run = run_record;
    t->a = event;
    pthread_mutex_lock(&g_mu);
    t->seq = ++((Event *)event)->recorded;          /* captures the work queued so far */
    pthread_mutex_unlock(&g_mu);
    enqueue(s, t);
    return ACL_SUCCESS;
}
EXPORT aclError aclrtResetEvent(void *event, void *stream) {
    int rc = check_event(event);
    if (rc) return rc;
    (void)stream;
    return ACL_SUCCESS;
}
EXPORT aclError aclrtStreamWaitEvent(void *stream, void *event) {
    Stream *s;
    int rc = check_event(event);
    if (rc || (rc = resolve_stream(stream, &s))) return rc;
    Event *e = event;
    if (!(e->flag & 0x1)) return fail(ACL_ERROR_INVALID_PARAM, "aclrtStreamWaitEvent: event created without ACL_EVENT_SYNC");
    Task *t = calloc(1, sizeof *t);
    t->run = run_wait;
    t->a = e;
    pthread_mutex_lock(&g_mu);
    t->seq = e->recorded;                           /* wait for the latest record made before this call */
    pthread_mutex_unlock(&g_mu);
    enqueue(s, t);
    return ACL_SUCCESS;
}
EXPORT aclError aclrtSynchronizeEvent(void *event) {
    int rc = check_event(event);
    if (rc) return rc;
    Event *e = event;
    pthread_mutex_lock(&g_mu);
    while (e->completed < e->recorded) pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    return ACL_SUCCESS;
}
EXPORT aclError aclrtQueryEventStatus(void *event, int *status) {
    int rc = check_event(event);
    if (rc) return rc;
    if (!status) return fail(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus: NULL");
    Event *e = event;
    pthread_mutex_lock(&g_mu);
    *status = e->completed >= e->recorded ? 1 : 0;  /* COMPLETE=1 (also before the first record) */
    pthread_mutex_unlock(&g_mu);
    return ACL_SUCCESS;
}
EXPORT aclError aclrtEventElapsedTime(float *ms, void *start, void *end) {
    int rc = check_event(start);
    if (rc || (rc = check_event(end))) return rc;
    if (!ms) return fail(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: NULL");
    Event *a = start, *b = end;
    if (!a->recorded || !b->recorded || a->completed < a->recorded || b->completed < b->recorded)
        return fail(ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID, "aclrtEventElapsedTime: both events must have completed a record");
    *ms = (float)(b->stamp_ms - a->stamp_ms);
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------
 * async copies and memset
 * ------------------------------------------------------------------------------------------- */
static void run_copy(Task *t, Stream *s) {
    pthread_rwlock_rdlock(&g_mem);
    int kind = (int)t->seq;
    int rc = copy_now(t->a, t->n, t->b ? t->b : t->inline_buf, t->n, kind);
    pthread_rwlock_unlock(&g_mem);
    if (rc) stream_fault(s, ACL_ERROR_RT_AICORE_EXCEPTION, "async memcpy of %zu bytes failed (%d): a buffer was freed "
                         "before the stream ran the copy", t->n, rc);
    aclGetRecentErrMsg();
}

EXPORT aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, int kind, void *stream) {
    Stream *s;
    int rc = resolve_stream(stream, &s);
    if (rc) return rc;
    if (count == 0) return ACL_SUCCESS;
    if (!dst || !src) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpyAsync: NULL dst or src");
    if (kind < 0 || kind > 5) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpyAsync: bad kind %d", kind);
    if (count > destMax) return fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtMemcpyAsync: count > destMax");
    int dd = is_device_ptr(dst), sd = is_device_ptr(src);
    if (!dd && !sd) return fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "aclrtMemcpyAsync: host-to-host is not supported");
    /* The emulator treats every host pointer as pinned (queued); a D2H destination must then stay
     * alive until the sync, as with aclrtMallocHost memory on hardware. H2D sources are staged at
     * call time so a pageable source may be reused at once (the runtime's pageable rule). */
    Task *t = calloc(1, sizeof *t + (sd ? 0 : count));
    t->run = run_copy;
    t->is_kernel = 1;
    t->a = dst;
    t->n = count;
    t->seq = (uint64_t)kind;
    if (sd) t->b = (void *)src;
    else memcpy(t->inline_buf, src, count);
    enqueue(s, t);
    return ACL_SUCCESS;
}

static void run_memset(Task *t, Stream *s) {
    pthread_rwlock_rdlock(&g_mem);
    unsigned char *d = translate((uintptr_t)t->a, t->n);
    if (d) memset(d, (int)t->seq, t->n);
    pthread_rwlock_unlock(&g_mem);
    if (!d) stream_fault(s, ACL_ERROR_RT_AICORE_EXCEPTION, "async memset outside a live allocation");
}
EXPORT aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count, void *stream) {
    Stream *s;
    int rc = resolve_stream(stream, &s);
    if (rc) return rc;
    if (count == 0) return ACL_SUCCESS;
    if (!devPtr || !is_device_ptr(devPtr)) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMemsetAsync: not a device pointer");
    if (count > maxCount) return fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtMemsetAsync: count > maxCount");
    Task *t = calloc(1, sizeof *t);
    t->run = run_memset;
    t->is_kernel = 1;
    t->a = devPtr;
    t->n = count;
    t->seq = (uint64_t)(value & 0xff);
    enqueue(s, t);
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------
 * aclnn meta objects
 * ------------------------------------------------------------------------------------------- */
#define MAXD 8
typedef struct aclTensor { int64_t ndim, dims[MAXD], strides[MAXD], offset; int dtype, fmt; void *data; int64_t sdims_n; } aclTensor;
typedef struct aclScalar { double v; int dtype; } aclScalar;
typedef struct aclIntArray { uint64_t n; int64_t v[]; } aclIntArray;
typedef struct aclTensorList { uint64_t n; aclTensor *orig[64]; aclTensor t[]; } aclTensorList;  /* owns its tensors, as on CANN */

static size_t dt_size(int dt) {
    switch (dt) {
    case DT_FLOAT: case DT_INT32: return 4;
    case DT_FLOAT16: case DT_BF16: case DT_INT16: return 2;
    case DT_INT8: case DT_UINT8: case DT_BOOL: return 1;
    case DT_INT64: case DT_DOUBLE: return 8;
    default: return 0;
    }
}
EXPORT size_t aclDataTypeSize(int dt) { return dt_size(dt); }

EXPORT aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t n, int dt, const int64_t *stride, int64_t offset,
                                  int fmt, const int64_t *storageDims, uint64_t sn, void *data) {
    if (n > MAXD || (n && !viewDims) || !dt_size(dt) || offset < 0) {
        fail(ACLNN_ERR_PARAM_INVALID, "aclCreateTensor: bad rank/dtype/offset (rank %llu, dtype %d)", (unsigned long long)n, dt);
        return NULL;
    }
    (void)storageDims;
    aclTensor *t = calloc(1, sizeof *t);
    t->ndim = (int64_t)n;
    int64_t acc = 1;
    for (int i = (int)n - 1; i >= 0; i--) {
        if (viewDims[i] < 0) { free(t); fail(ACLNN_ERR_PARAM_INVALID, "aclCreateTensor: negative dim"); return NULL; }
        t->dims[i] = viewDims[i];
        t->strides[i] = stride ? stride[i] : acc;
        acc *= viewDims[i];
    }
    t->offset = offset;
    t->dtype = dt;
    t->fmt = fmt;
    t->data = data;
    t->sdims_n = (int64_t)sn;
    return t;
}
EXPORT aclnnStatus aclDestroyTensor(const aclTensor *t) { free((void *)t); return 0; }
EXPORT aclnnStatus aclGetViewShape(const aclTensor *t, int64_t **dims, uint64_t *n) {
    if (!t || !dims || !n) return fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetViewShape: NULL");
    *n = (uint64_t)t->ndim;
    *dims = malloc(sizeof(int64_t) * MAXD);
    memcpy(*dims, t->dims, sizeof(int64_t) * MAXD);
    return 0;
}

EXPORT aclScalar *aclCreateScalar(void *value, int dt) {
    if (!value || !dt_size(dt)) { fail(ACLNN_ERR_PARAM_INVALID, "aclCreateScalar: NULL value or bad dtype %d", dt); return NULL; }
    aclScalar *s = calloc(1, sizeof *s);
    s->dtype = dt;
    switch (dt) {                                   /* the host value is copied now */
    case DT_FLOAT: s->v = *(float *)value; break;
    case DT_DOUBLE: s->v = *(double *)value; break;
    case DT_INT32: s->v = *(int32_t *)value; break;
    case DT_INT64: s->v = (double)*(int64_t *)value; break;
    case DT_BOOL: case DT_UINT8: s->v = *(uint8_t *)value; break;
    case DT_INT8: s->v = *(int8_t *)value; break;
    default: free(s); fail(ACLNN_ERR_PARAM_INVALID, "aclCreateScalar: dtype %d unsupported", dt); return NULL;
    }
    return s;
}
EXPORT aclnnStatus aclDestroyScalar(const aclScalar *s) { free((void *)s); return 0; }
EXPORT aclIntArray *aclCreateIntArray(const int64_t *v, uint64_t n) {
    if (n && !v) { fail(ACLNN_ERR_PARAM_NULLPTR, "aclCreateIntArray: NULL"); return NULL; }
    aclIntArray *a = calloc(1, sizeof *a + sizeof(int64_t) * (n ? n : 1));
    a->n = n;
    if (n) memcpy(a->v, v, sizeof(int64_t) * n);
    return a;
}
EXPORT aclnnStatus aclDestroyIntArray(const aclIntArray *a) { free((void *)a); return 0; }
EXPORT aclTensorList *aclCreateTensorList(const aclTensor *const *v, uint64_t n) {
    if (!v && n) { fail(ACLNN_ERR_PARAM_NULLPTR, "aclCreateTensorList: NULL"); return NULL; }
    if (n > 64) { fail(ACLNN_ERR_PARAM_INVALID, "aclCreateTensorList: the emulator takes at most 64 tensors"); return NULL; }
    aclTensorList *l = calloc(1, sizeof *l + sizeof(aclTensor) * (n ? n : 1));
    l->n = n;
    for (uint64_t i = 0; i < n; i++) {
        if (!v[i]) { free(l); fail(ACLNN_ERR_PARAM_NULLPTR, "aclCreateTensorList: NULL element %llu", (unsigned long long)i); return NULL; }
        l->t[i] = *v[i];
        l->orig[i] = (aclTensor *)v[i];
    }
    return l;
}
EXPORT aclnnStatus aclDestroyTensorList(const aclTensorList *l) {
    if (!l) return 0;
    for (uint64_t i = 0; i < l->n; i++) free(l->orig[i]);
    free((void *)l);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * executors (phase 1 snapshots everything; phase 2 consumes)
 * ------------------------------------------------------------------------------------------- */
#define MAXT 40
typedef struct Exec Exec;
typedef void (*kernel_fn)(Exec *, Stream *, unsigned char **ptrs, unsigned char *ws);
struct Exec {
    const char *name;
    kernel_fn fn;
    int nt, repeatable;
    aclTensor t[MAXT];           /* snapshots; an absent optional tensor has data == NULL and ndim -1 */
    int64_t iv[16];
    double dv[4];
    int64_t arr[MAXD * 2];
    int narr;
    char layout[8];
    uint64_t ws;
};
static void *g_execs[REG_MAX];

static int64_t numel(const aclTensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->dims[i];
    return n;
}

static Exec *new_exec(const char *name, kernel_fn fn) {
    Exec *e = calloc(1, sizeof *e);
    e->name = name;
    e->fn = fn;
    return e;
}
/* snapshot a tensor (absent optional: ndim = -1) */
static int add_t(Exec *e, const aclTensor *t) {
    if (t) e->t[e->nt] = *t;
    else { memset(&e->t[e->nt], 0, sizeof(aclTensor)); e->t[e->nt].ndim = -1; }
    return e->nt++;
}

static aclnnStatus finish_phase1(Exec *e, uint64_t ws, uint64_t *workspaceSize, void **executor) {
    for (int i = 0; i < e->nt; i++) {
        aclTensor *t = &e->t[i];
        if (t->ndim < 0 || numel(t) == 0) continue;
        const char *name = e->name;
        void *data = t->data;
        if (!is_device_ptr(data)) {
            free(e);
            return fail(ACLNN_ERR_PARAM_INVALID, "%s: tensor %d's data %p is not a device address", name, i, data);
        }
        if (((uintptr_t)data) % 32) {
            free(e);
            return fail(ACLNN_ERR_PARAM_INVALID, "%s: tensor %d's data %p is not 32-byte aligned", name, i, data);
        }
    }
    e->ws = ws;
    *workspaceSize = ws;
    pthread_mutex_lock(&g_mu);
    reg_add(g_execs, e);
    pthread_mutex_unlock(&g_mu);
    *executor = e;
    return 0;
}

/* byte extent of a strided view, checked at execution time */
static unsigned char *tensor_ptr(const aclTensor *t) {
    if (t->ndim < 0) return NULL;
    int64_t lo = t->offset, hi = t->offset;
    for (int i = 0; i < t->ndim; i++) {
        if (t->dims[i] == 0) return (unsigned char *)1;   /* empty: nothing is read or written */
        int64_t span = (t->dims[i] - 1) * t->strides[i];
        if (span < 0) lo += span; else hi += span;
    }
    size_t es = dt_size(t->dtype);
    unsigned char *base = translate((uintptr_t)t->data + (size_t)lo * es, (size_t)(hi - lo + 1) * es);
    return base ? base - (size_t)lo * es : NULL;
}

static void run_exec(Task *tk, Stream *s) {
    Exec *e = tk->a;
    unsigned char *ptrs[MAXT];
    pthread_rwlock_rdlock(&g_mem);
    int bad = -1;
    for (int i = 0; i < e->nt; i++) {
        ptrs[i] = tensor_ptr(&e->t[i]);
        if (e->t[i].ndim >= 0 && !ptrs[i]) { bad = i; break; }
    }
    unsigned char *ws = e->ws ? translate((uintptr_t)tk->b, e->ws) : NULL;
    if (bad >= 0) {
        stream_fault(s, ACL_ERROR_RT_AICORE_EXCEPTION, "%s: tensor %d (%p) lies outside every live device allocation "
                     "(freed before the stream ran the kernel?)", e->name, bad, e->t[bad].data);
    } else if (e->ws && !ws) {
        stream_fault(s, ACL_ERROR_RT_AICORE_EXCEPTION, "%s: workspace was freed before the kernel ran", e->name);
    } else {
        e->fn(e, s, ptrs, ws);
    }
    pthread_rwlock_unlock(&g_mem);
    if (!e->repeatable) free(e);
}

static aclnnStatus launch(const char *name, void *workspace, uint64_t wsSize, void *executor, void *stream) {
    Stream *s;
    int rc = resolve_stream(stream, &s);
    if (rc) return rc;
    pthread_mutex_lock(&g_mu);
    int ok = reg_has(g_execs, executor);
    Exec *e = executor;
    if (ok && !e->repeatable) reg_del(g_execs, executor);      /* single use: consumed now */
    pthread_mutex_unlock(&g_mu);
    if (!ok) return fail(ACLNN_ERR_INNER_NULLPTR, "%s: executor %p is not live (phase 2 called twice, or never phase 1)", name, executor);
    if (wsSize != e->ws || (e->ws && !is_device_ptr(workspace))) {
        unsigned long long want = (unsigned long long)e->ws;
        if (!e->repeatable) free(e);
        return fail(ACLNN_ERR_PARAM_INVALID, "%s: workspace must be a device buffer of the phase-1 size %llu (got %p, %llu)",
                    name, want, workspace, (unsigned long long)wsSize);
    }
    Task *t = calloc(1, sizeof *t);
    t->run = run_exec;
    t->is_kernel = 1;
    t->a = e;
    t->b = workspace;
    enqueue(s, t);
    return 0;
}

EXPORT aclnnStatus aclSetAclOpExecutorRepeatable(void *executor) {
    pthread_mutex_lock(&g_mu);
    int ok = reg_has(g_execs, executor);
    if (ok) ((Exec *)executor)->repeatable = 1;
    pthread_mutex_unlock(&g_mu);
    return ok ? 0 : fail(ACLNN_ERR_INNER_NULLPTR, "aclSetAclOpExecutorRepeatable: executor not live");
}
EXPORT aclnnStatus aclDestroyAclOpExecutor(void *executor) {
    pthread_mutex_lock(&g_mu);
    int ok = reg_has(g_execs, executor);
    if (ok) reg_del(g_execs, executor);
    pthread_mutex_unlock(&g_mu);
    if (!ok) return fail(ACLNN_ERR_INNER_NULLPTR, "aclDestroyAclOpExecutor: executor not live");
    free(executor);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * element access: everything is computed in double
 * ------------------------------------------------------------------------------------------- */
static float h2f(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, f;
    if (e == 0) {
        if (m == 0) f = s;
        else {                                       /* subnormal */
            float v = ldexpf((float)m, -24);
            return s ? -v : v;
        }
    } else if (e == 31) f = s | 0x7f800000u | (m << 13);
    else f = s | ((e + 112) << 23) | (m << 13);
    float out;
    memcpy(&out, &f, 4);
    return out;
}
static uint16_t f2h(float x) {
    uint32_t f;
    memcpy(&f, &x, 4);
    uint32_t s = (f >> 16) & 0x8000;
    int32_t e = (int32_t)((f >> 23) & 0xff);
    uint32_t m = f & 0x7fffff;
    if (e == 255) return (uint16_t)(s | 0x7c00 | (m ? 0x200 : 0));
    int32_t he = e - 127 + 15;
    if (he >= 31) return (uint16_t)(s | 0x7c00);
    if (he <= 0) {                                  /* subnormal or zero, round to nearest even */
        if (he < -10) return (uint16_t)s;
        m |= 0x800000;
        int shift = 14 - he;
        uint32_t hm = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (hm & 1))) hm++;
        return (uint16_t)(s | hm);
    }
    uint32_t hm = m >> 13, rem = m & 0x1fff;
    uint32_t out = s | ((uint32_t)he << 10) | hm;
    if (rem > 0x1000 || (rem == 0x1000 && (hm & 1))) out++;      /* carries into the exponent correctly */
    return (uint16_t)out;
}
static float bf2f(uint16_t b) { uint32_t f = (uint32_t)b << 16; float o; memcpy(&o, &f, 4); return o; }
static uint16_t f2bf(float x) {
    uint32_t f;
    memcpy(&f, &x, 4);
    if ((f & 0x7fffffff) > 0x7f800000) return (uint16_t)((f >> 16) | 0x40);
    uint32_t r = f + 0x7fff + ((f >> 16) & 1);
    return (uint16_t)(r >> 16);
}

static inline double rd(const unsigned char *p, int dt, int64_t i) {
    switch (dt) {
    case DT_FLOAT: return ((const float *)p)[i];
    case DT_DOUBLE: return ((const double *)p)[i];
    case DT_FLOAT16: return h2f(((const uint16_t *)p)[i]);
    case DT_BF16: return bf2f(((const uint16_t *)p)[i]);
    case DT_INT32: return ((const int32_t *)p)[i];
    case DT_INT64: return (double)((const int64_t *)p)[i];
    case DT_INT16: return ((const int16_t *)p)[i];
    case DT_INT8: return ((const int8_t *)p)[i];
    case DT_UINT8: case DT_BOOL: return p[i];
    }
    return 0;
}
static inline void wr(unsigned char *p, int dt, int64_t i, double v) {
    switch (dt) {
    case DT_FLOAT: ((float *)p)[i] = (float)v; break;
    case DT_DOUBLE: ((double *)p)[i] = v; break;
    case DT_FLOAT16: ((uint16_t *)p)[i] = f2h((float)v); break;
    case DT_BF16: ((uint16_t *)p)[i] = f2bf((float)v); break;
    case DT_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case DT_INT64: ((int64_t *)p)[i] = (int64_t)v; break;
    case DT_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
    case DT_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case DT_UINT8: p[i] = (unsigned char)v; break;
    case DT_BOOL: p[i] = v != 0; break;
    }
}

/* Visit every index of `shape` (rank n) in row-major order, tracking the element offset in a view
 * whose per-dimension strides are `st` (a stride 0 broadcasts). */
static void gather(const aclTensor *t, const unsigned char *p, const int64_t *shape, int n, const int64_t *st, double *out) {
    int64_t idx[MAXD] = {0}, total = 1;
    for (int i = 0; i < n; i++) total *= shape[i];
    int64_t off = t->offset;
    for (int64_t k = 0; k < total; k++) {
        out[k] = rd(p, t->dtype, off);
        for (int d = n - 1; d >= 0; d--) {
            if (++idx[d] < shape[d]) { off += st[d]; break; }
            off -= st[d] * (shape[d] - 1);
            idx[d] = 0;
        }
    }
}
static void scatter(const aclTensor *t, unsigned char *p, const double *in) {
    int n = (int)t->ndim;
    int64_t idx[MAXD] = {0}, total = numel(t), off = t->offset;
    for (int64_t k = 0; k < total; k++) {
        wr(p, t->dtype, off, in[k]);
        for (int d = n - 1; d >= 0; d--) {
            if (++idx[d] < t->dims[d]) { off += t->strides[d]; break; }
            off -= t->strides[d] * (t->dims[d] - 1);
            idx[d] = 0;
        }
    }
}
/* load t broadcast to `shape` (numpy rules: align trailing dims) */
static double *load_bcast(const aclTensor *t, const unsigned char *p, const int64_t *shape, int n) {
    int64_t st[MAXD], total = 1;
    for (int i = 0; i < n; i++) {
        int j = i - (n - (int)t->ndim);
        st[i] = (j < 0 || (t->dims[j] == 1 && shape[i] != 1)) ? 0 : t->strides[j];
        total *= shape[i];
    }
    double *out = malloc(sizeof(double) * (total ? total : 1));
    gather(t, p, shape, n, st, out);
    return out;
}
static double *load(const aclTensor *t, const unsigned char *p) { return load_bcast(t, p, t->dims, (int)t->ndim); }

static int bcast_ok(const aclTensor *a, const aclTensor *out) {
    if (a->ndim > out->ndim) return 0;
    for (int i = 0; i < a->ndim; i++) {
        int64_t da = a->dims[a->ndim - 1 - i], d = out->dims[out->ndim - 1 - i];
        if (da != d && da != 1) return 0;
    }
    return 1;
}

#define NEED(x, what) do { if (!(x)) return fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is NULL", OPNAME, what); } while (0)
#define CHECK(c, ...) do { if (!(c)) { free(e); return fail(ACLNN_ERR_PARAM_INVALID, __VA_ARGS__); } } while (0)

static int is_float(int dt) { return dt == DT_FLOAT || dt == DT_FLOAT16 || dt == DT_BF16 || dt == DT_DOUBLE; }

/* ---- elementwise binary: Add (alpha), Sub (alpha), Mul, Div ---- */
enum { B_ADD, B_SUB, B_MUL, B_DIV };
static void k_binary(Exec *e, Stream *s, unsigned char **p, unsigned char *ws) {
    (void)s; (void)ws;
    aclTensor *out = &e->t[2];
    int n = (int)out->ndim;
    double *a = load_bcast(&e->t[0], p[0], out->dims, n), *b = load_bcast(&e->t[1], p[1], out->dims, n);
    int64_t total = numel(out);
    double alpha = e->dv[0];
    for (int64_t i = 0; i < total; i++) {
        switch (e->iv[0]) {
        case B_ADD: a[i] = a[i] + alpha * b[i]; break;
        case B_SUB: a[i] = a[i] - alpha * b[i]; break;
        case B_MUL: a[i] = a[i] * b[i]; break;
        case B_DIV: a[i] = a[i] / b[i]; break;
        }
    }
    scatter(out, p[2], a);
    free(a);
    free(b);
}
static aclnnStatus binary_p1(const char *OPNAME, int op, const aclTensor *self, const aclTensor *other, const aclScalar *alpha,
                             const aclTensor *out, uint64_t *ws, void **ex) {
    NEED(self, "self"); NEED(other, "other"); NEED(out, "out"); NEED(ws, "workspaceSize"); NEED(ex, "executor");
    Exec *e = new_exec(OPNAME, k_binary);
    CHECK(bcast_ok(self, out) && bcast_ok(other, out), "%s: self/other do not broadcast to out's shape", OPNAME);
    add_t(e, self); add_t(e, other); add_t(e, out);
    e->iv[0] = op;
    e->dv[0] = alpha ? alpha->v : 1.0;
    return finish_phase1(e, 0, ws, ex);
}
EXPORT aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor *a, const aclTensor *b, const aclScalar *alpha, aclTensor *out, uint64_t *ws, void **ex) {
    if (!alpha) return fail(ACLNN_ERR_PARAM_NULLPTR, "aclnnAdd: alpha is NULL");
    return binary_p1("aclnnAdd", B_ADD, a, b, alpha, out, ws, ex);
}
EXPORT aclnnStatus aclnnSubGetWorkspaceSize(const aclTensor *a, const aclTensor *b, const aclScalar *alpha, aclTensor *out, uint64_t *ws, void **ex) {
    if (!alpha) return fail(ACLNN_ERR_PARAM_NULLPTR, "aclnnSub: alpha is NULL");
    return binary_p1("aclnnSub", B_SUB, a, b, alpha, out, ws, ex);
}
EXPORT aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor *a, const aclTensor *b, aclTensor *out, uint64_t *ws, void **ex) {
    return binary_p1("aclnnMul", B_MUL, a, b, NULL, out, ws, ex);
}
EXPORT aclnnStatus aclnnDivGetWorkspaceSize(const aclTensor *a, const aclTensor *b, aclTensor *out, uint64_t *ws, void **ex) {
    return binary_p1("aclnnDiv", B_DIV, a, b, NULL, out, ws, ex);
}
#define PHASE2(NAME) EXPORT aclnnStatus NAME(void *w, uint64_t n, void *ex, void *st) { return launch(#NAME, w, n, ex, st); }
PHASE2(aclnnAdd) PHASE2(aclnnSub) PHASE2(aclnnMul) PHASE2(aclnnDiv)

/* ---- elementwise unary: Exp, Silu, Gelu (erf / tanh), Cast, Neg ---- */
enum { U_EXP, U_SILU, U_GELU, U_GELU_TANH, U_CAST, U_NEG };
static void k_unary(Exec *e, Stream *s, unsigned char **p, unsigned char *ws) {
    (void)s; (void)ws;
    double *x = load(&e->t[0], p[0]);
    int64_t total = numel(&e->t[0]);
    for (int64_t i = 0; i < total; i++) {
        double v = x[i];
        switch (e->iv[0]) {
        case U_EXP: v = exp(v); break;
        case U_SILU: v = v / (1.0 + exp(-v)); break;
        case U_GELU: v = 0.5 * v * erfc(-v / sqrt(2.0)); break;
        case U_GELU_TANH: v = 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); break;
        case U_CAST:
            if (!is_float(e->t[1].dtype) && e->t[1].dtype != DT_BOOL) v = trunc(v);  /* float -> int truncates */
            break;
        case U_NEG: v = -v; break;
        }
        x[i] = v;
    }
    scatter(&e->t[1], p[1], x);
    free(x);
}
static aclnnStatus unary_p1(const char *OPNAME, int op, const aclTensor *self, const aclTensor *out, uint64_t *ws, void **ex) {
    NEED(self, "self"); NEED(out, "out"); NEED(ws, "workspaceSize"); NEED(ex, "executor");
    Exec *e = new_exec(OPNAME, k_unary);
    CHECK(self->ndim == out->ndim && numel(self) == numel(out), "%s: out must have self's shape", OPNAME);
    for (int i = 0; i < self->ndim; i++) CHECK(self->dims[i] == out->dims[i], "%s: out must have self's shape", OPNAME);
    if (op != U_CAST) CHECK(is_float(self->dtype) && is_float(out->dtype), "%s: needs floating tensors (got dtype %d)", OPNAME, self->dtype);
    add_t(e, self); add_t(e, out);
    e->iv[0] = op;
    return finish_phase1(e, 0, ws, ex);
}
EXPORT aclnnStatus aclnnExpGetWorkspaceSize(const aclTensor *a, aclTensor *out, uint64_t *ws, void **ex) { return unary_p1("aclnnExp", U_EXP, a, out, ws, ex); }
EXPORT aclnnStatus aclnnSiluGetWorkspaceSize(const aclTensor *a, aclTensor *out, uint64_t *ws, void **ex) { return unary_p1("aclnnSilu", U_SILU, a, out, ws, ex); }
EXPORT aclnnStatus aclnnGeluGetWorkspaceSize(const aclTensor *a, aclTensor *out, uint64_t *ws, void **ex) { return unary_p1("aclnnGelu", U_GELU, a, out, ws, ex); }
EXPORT aclnnStatus aclnnGeluV2GetWorkspaceSize(const aclTensor *a, int64_t approximate, aclTensor *out, uint64_t *ws, void **ex) {
    if (approximate != 0 && approximate != 1) return fail(ACLNN_ERR_PARAM_INVALID, "aclnnGeluV2: approximate must be 0 or 1");
    return unary_p1("aclnnGeluV2", approximate ? U_GELU_TANH : U_GELU, a, out, ws, ex);
}
EXPORT aclnnStatus aclnnNegGetWorkspaceSize(const aclTensor *a, aclTensor *out, uint64_t *ws, void **ex) { return unary_p1("aclnnNeg", U_NEG, a, out, ws, ex); }
EXPORT aclnnStatus aclnnCastGetWorkspaceSize(const aclTensor *a, int dtype, aclTensor *out, uint64_t *ws, void **ex) {
    if (out && dtype != out->dtype) return fail(ACLNN_ERR_PARAM_INVALID, "aclnnCast: dtype %d differs from out's %d", dtype, out->dtype);
    return unary_p1("aclnnCast", U_CAST, a, out, ws, ex);
}
/* aclnnInplaceCopy(selfRef, src): a strided, dtype-converting copy (src broadcast to selfRef) */
static void k_copy(Exec *e, Stream *s, unsigned char **p, unsigned char *ws) {
    (void)s; (void)ws;
    double *x = load_bcast(&e->t[1], p[1], e->t[0].dims, (int)e->t[0].ndim);
    scatter(&e->t[0], p[0], x);
    free(x);
}
EXPORT aclnnStatus aclnnInplaceCopyGetWorkspaceSize(aclTensor *self, const aclTensor *src, uint64_t *ws, void **ex) {
    const char *OPNAME = "aclnnInplaceCopy";
    NEED(self, "selfRef"); NEED(src, "src"); NEED(ws, "workspaceSize"); NEED(ex, "executor");
    Exec *e = new_exec(OPNAME, k_copy);
    CHECK(bcast_ok(src, self), "%s: src does not broadcast to selfRef", OPNAME);
    add_t(e, self); add_t(e, src);
    return finish_phase1(e, 0, ws, ex);
}
PHASE2(aclnnExp) PHASE2(aclnnSilu) PHASE2(aclnnGelu) PHASE2(aclnnGeluV2) PHASE2(aclnnNeg) PHASE2(aclnnCast) PHASE2(aclnnInplaceCopy)

/* ---- Matmul: batch dims broadcast, [..,M,K] x [..,K,N] ---- */
static void k_matmul(Exec *e, Stream *s, unsigned char **p, unsigned char *ws) {
    (void)s; (void)ws;
    aclTensor *A = &e->t[0], *B = &e->t[1], *O = &e->t[2];
    int n = (int)O->ndim;
    int64_t M = O->dims[n - 2], N = O->dims[n - 1], K = A->dims[A->ndim - 1];
    int64_t sa[MAXD], sb[MAXD];
    memcpy(sa, O->dims, sizeof sa); sa[n - 1] = K;
    memcpy(sb, O->dims, sizeof sb); sb[n - 2] = K;
    double *a = load_bcast(A, p[0], sa, n), *b = load_bcast(B, p[1], sb, n);
    int64_t batch = (M * N > 0) ? numel(O) / (M * N) : 0;
    double *o = calloc((size_t)(batch * M * N > 0 ? batch * M * N : 1), sizeof(double));
    for (int64_t q = 0; q < batch; q++) {
        double *aq = a + q * M * K, *bq = b + q * K * N, *oq = o + q * M * N;
        for (int64_t i = 0; i < M; i++)
            for (int64_t k = 0; k < K; k++) {
                double av = aq[i * K + k];
                const double *brow = bq + k * N;
                double *orow = oq + i * N;
                for (int64_t j = 0; j < N; j++) orow[j] += av * brow[j];
            }
    }
    scatter(O, p[2], o);
    free(a); free(b); free(o);
}
EXPORT aclnnStatus aclnnMatmulGetWorkspaceSize(const aclTensor *self, const aclTensor *mat2, aclTensor *out, int8_t cubeMathType, uint64_t *ws, void **ex) {
    const char *OPNAME = "aclnnMatmul";
    NEED(self, "self"); NEED(mat2, "mat2"); NEED(out, "out"); NEED(ws, "workspaceSize"); NEED(ex, "executor");
    Exec *e = new_exec(OPNAME, k_matmul);
    CHECK(cubeMathType >= 0 && cubeMathType <= 4, "%s: cubeMathType %d outside 0..4", OPNAME, cubeMathType);
    CHECK(self->ndim >= 2 && mat2->ndim >= 2 && out->ndim >= 2, "%s: the emulator takes tensors of rank >= 2 (reshape 1-D first)", OPNAME);
    int64_t K = self->dims[self->ndim - 1];
    CHECK(mat2->dims[mat2->ndim - 2] == K, "%s: self's last dim %lld != mat2's second-to-last %lld", OPNAME,
          (long long)K, (long long)mat2->dims[mat2->ndim - 2]);
    CHECK(out->dims[out->ndim - 2] == self->dims[self->ndim - 2] && out->dims[out->ndim - 1] == mat2->dims[mat2->ndim - 1],
          "%s: out's matrix dims do not match", OPNAME);
    add_t(e, self); add_t(e, mat2); add_t(e, out);
    return finish_phase1(e, 0, ws, ex);
}
EXPORT aclnnStatus aclnnBatchMatMulGetWorkspaceSize(const aclTensor *a, const aclTensor *b, aclTensor *out, int8_t c, uint64_t *ws, void **ex) {
    return aclnnMatmulGetWorkspaceSize(a, b, out, c, ws, ex);
}
PHASE2(aclnnMatmul) PHASE2(aclnnBatchMatMul)

/* ---- Softmax(dim) and ReduceSum(dims, keepDims, dtype): view as (outer, axis, inner) ---- */
static void k_softmax(Exec *e, Stream *s, unsigned char **p, unsigned char *ws) {
    (void)s; (void)ws;
    aclTensor *x = &e->t[0];
    int d = (int)e->iv[0];
    double *v = load(x, p[0]);
    int64_t L = x->dims[d], inner = 1, outer = 1;
    for (int i = d + 1; i < x->ndim; i++) inner *= x->dims[i];
    for (int i = 0; i < d; i++) outer *= x->dims[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            double *r = v + o * L * inner + in, m = -INFINITY, sum = 0;
            for (int64_t j = 0; j < L; j++) if (r[j * inner] > m) m = r[j * inner];
            if (!isfinite(m)) m = 0;
            for (int64_t j = 0; j < L; j++) { r[j * inner] = exp(r[j * inner] - m); sum += r[j * inner]; }
            for (int64_t j = 0; j < L; j++) r[j * inner] /= sum;
        }
    scatter(&e->t[1], p[1], v);
    free(v);
}
EXPORT aclnnStatus aclnnSoftmaxGetWorkspaceSize(const aclTensor *self, int64_t dim, aclTensor *out, uint64_t *ws, void **ex) {
    const char *OPNAME = "aclnnSoftmax";
    NEED(self, "self"); NEED(out, "out"); NEED(ws, "workspaceSize"); NEED(ex, "executor");
    Exec *e = new_exec(OPNAME, k_softmax);
    if (dim < 0) dim += self->ndim;
    CHECK(dim >= 0 && dim < self->ndim, "%s: dim out of range", OPNAME);
    CHECK(is_float(self->dtype) && numel(self) == numel(out), "%s: floating self and out of its shape", OPNAME);
    add_t(e, self); add_t(e, out);
    e->iv[0] = dim;
    return finish_phase1(e, 0, ws, ex);
}
PHASE2(aclnnSoftmax)

static void k_reduce_sum(Exec *e, Stream *s, unsigned char **p, unsigned char *ws) {
    (void)s; (void)ws;
    aclTensor *x = &e->t[0];
    double *v = load(x, p[0]);
    int64_t total = numel(x), outn = numel(&e->t[1]);
    double *o = calloc((size_t)(outn ? outn : 1), sizeof(double));
    int64_t idx[MAXD] = {0};
    for (int64_t k = 0; k < total; k++) {
        int64_t oi = 0;                       /* row-major index with reduced dims dropped */
        for (int d = 0; d < x->ndim; d++) if (!(e->iv[1] >> d & 1)) oi = oi * x->dims[d] + idx[d];
        o[oi] += v[k];
        for (int d = (int)x->ndim - 1; d >= 0; d--) { if (++idx[d] < x->dims[d]) break; idx[d] = 0; }
    }
    scatter(&e->t[1], p[1], o);
    free(v); free(o);
}
EXPORT aclnnStatus aclnnReduceSumGetWorkspaceSize(const aclTensor *self, const aclIntArray *dims, bool keepDims, int dtype,
                                                  aclTensor *out, uint64_t *ws, void **ex) {
    const char *OPNAME = "aclnnReduceSum";
    NEED(self, "self"); NEED(dims, "dims"); NEED(out, "out"); NEED(ws, "workspaceSize"); NEED(ex, "executor");
    Exec *e = new_exec(OPNAME, k_reduce_sum);
    int64_t mask = 0, kept = 1;
    for (uint64_t i = 0; i < dims->n; i++) {
        int64_t d = dims->v[i] < 0 ? dims->v[i] + self->ndim : dims->v[i];
        CHECK(d >= 0 && d < self->ndim, "%s: dim %lld out of range", OPNAME, (long long)dims->v[i]);
        mask |= (int64_t)1 << d;
    }
    if (dims->n == 0) mask = ((int64_t)1 << self->ndim) - 1;   /* empty dims: reduce everything */
    for (int d = 0; d < self->ndim; d++) if (!(mask >> d & 1)) kept *= self->dims[d];
    CHECK(numel(out) == kept, "%s: out has %lld elements, expected %lld", OPNAME, (long long)numel(out), (long long)kept);
    CHECK(dtype == out->dtype, "%s: dtype %d differs from out's %d", OPNAME, dtype, out->dtype);
    (void)keepDims;
    add_t(e, self); add_t(e, out);
    e->iv[1] = mask;
    return finish_phase1(e, 0, ws, ex);
}
PHASE2(aclnnReduceSum)

/* ---- Permute(dims) ---- */
static void k_permute(Exec *e, Stream *s, unsigned char **p, unsigned char *ws) {
    (void)s; (void)ws;
    aclTensor *x = &e->t[0], *o = &e->t[1];
    int64_t st[MAXD];
    for (int i = 0; i < x->ndim; i++) st[i] = x->strides[e->arr[i]];
    double *v = malloc(sizeof(double) * (numel(o) ? numel(o) : 1));
    gather(x, p[0], o->dims, (int)o->ndim, st, v);
    scatter(o, p[1], v);
    free(v);
}
EXPORT aclnnStatus aclnnPermuteGetWorkspaceSize(const aclTensor *self, const aclIntArray *dims, aclTensor *out, uint64_t *ws, void **ex) {
    const char *OPNAME = "aclnnPermute";
    NEED(self, "self"); NEED(dims, "dims"); NEED(out, "out"); NEED(ws, "workspaceSize"); NEED(ex, "executor");
    Exec *e = new_exec(OPNAME, k_permute);
    CHECK((int64_t)dims->n == self->ndim && out->ndim == self->ndim, "%s: dims must list every axis once", OPNAME);
    int seen = 0;
    for (int i = 0; i < self->ndim; i++) {
        int64_t d = dims->v[i] < 0 ? dims->v[i] + self->ndim : dims->v[i];
        CHECK(d >= 0 && d < self->ndim && !(seen >> d & 1), "%s: dims must be a permutation", OPNAME);
        CHECK(out->dims[i] == self->dims[d], "%s: out's shape is not the permuted shape", OPNAME);
        seen |= 1 << d;
        e->arr[i] = d;
    }
    add_t(e, self); add_t(e, out);
    return finish_phase1(e, 0, ws, ex);
}
PHASE2(aclnnPermute)

/* ---- Cat(tensors, dim) ---- */
static void k_cat(Exec *e, Stream *s, unsigned char **p, unsigned char *ws) {
    (void)s; (void)ws;
    int k = e->nt - 1, d = (int)e->iv[0];
    aclTensor *o = &e->t[k];
    int64_t inner = 1, outer = 1, L = o->dims[d];
    for (int i = d + 1; i < o->ndim; i++) inner *= o->dims[i];
    for (int i = 0; i < d; i++) outer *= o->dims[i];
    double *out = malloc(sizeof(double) * (numel(o) ? numel(o) : 1));
    int64_t start = 0;
    for (int t = 0; t < k; t++) {
        int64_t l = e->t[t].dims[d];
        double *v = load(&e->t[t], p[t]);
        for (int64_t a = 0; a < outer; a++)
            memcpy(out + (a * L + start) * inner, v + a * l * inner, sizeof(double) * (size_t)(l * inner));
        start += l;
        free(v);
    }
    scatter(o, p[k], out);
    free(out);
}
EXPORT aclnnStatus aclnnCatGetWorkspaceSize(const aclTensorList *tensors, int64_t dim, aclTensor *out, uint64_t *ws, void **ex) {
    const char *OPNAME = "aclnnCat";
    NEED(tensors, "tensors"); NEED(out, "out"); NEED(ws, "workspaceSize"); NEED(ex, "executor");
    Exec *e = new_exec(OPNAME, k_cat);
    CHECK(tensors->n >= 1 && tensors->n < MAXT, "%s: 1..%d tensors", OPNAME, MAXT - 1);
    if (dim < 0) dim += out->ndim;
    CHECK(dim >= 0 && dim < out->ndim, "%s: dim out of range", OPNAME);
    int64_t total = 0;
    for (uint64_t i = 0; i < tensors->n; i++) {
        const aclTensor *t = &tensors->t[i];
        CHECK(t->ndim == out->ndim, "%s: tensor %llu has rank %lld, out %lld", OPNAME, (unsigned long long)i, (long long)t->ndim, (long long)out->ndim);
        for (int d = 0; d < t->ndim; d++) CHECK(d == dim || t->dims[d] == out->dims[d], "%s: shapes differ off the cat dim", OPNAME);
        total += t->dims[dim];
        add_t(e, t);
    }
    CHECK(total == out->dims[dim], "%s: out's cat dim is %lld, inputs sum to %lld", OPNAME, (long long)out->dims[dim], (long long)total);
    add_t(e, out);
    e->iv[0] = dim;
    return finish_phase1(e, 0, ws, ex);
}
PHASE2(aclnnCat)

/* ---- Embedding(weight, indices, out): out[..., :] = weight[indices[...]] ---- */
static void k_embedding(Exec *e, Stream *s, unsigned char **p, unsigned char *ws) {
    (void)ws;
    aclTensor *w = &e->t[0], *ids = &e->t[1], *o = &e->t[2];
    double *wv = load(w, p[0]), *iv = load(ids, p[1]);
    int64_t V = w->dims[0], H = w->dims[1], n = numel(ids);
    double *out = malloc(sizeof(double) * (size_t)(n * H > 0 ? n * H : 1));
    for (int64_t i = 0; i < n; i++) {
        int64_t r = (int64_t)iv[i];
        if (r < 0 || r >= V) {
            stream_fault(s, 507035, "aclnnEmbedding: index %lld out of range [0, %lld)", (long long)r, (long long)V);
            free(wv); free(iv); free(out);
            return;
        }
        memcpy(out + i * H, wv + r * H, sizeof(double) * (size_t)H);
    }
    scatter(o, p[2], out);
    free(wv); free(iv); free(out);
}
EXPORT aclnnStatus aclnnEmbeddingGetWorkspaceSize(const aclTensor *weight, const aclTensor *indices, const aclTensor *out, uint64_t *ws, void **ex) {
    const char *OPNAME = "aclnnEmbedding";
    NEED(weight, "weight"); NEED(indices, "indices"); NEED(out, "out"); NEED(ws, "workspaceSize"); NEED(ex, "executor");
    Exec *e = new_exec(OPNAME, k_embedding);
    CHECK(weight->ndim == 2, "%s: weight must be 2-D", OPNAME);
    CHECK(indices->dtype == DT_INT32 || indices->dtype == DT_INT64, "%s: indices must be int32/int64", OPNAME);
    CHECK(numel(out) == numel(indices) * weight->dims[1], "%s: out must be indices.shape + (H,)", OPNAME);
    add_t(e, weight); add_t(e, indices); add_t(e, out);
    return finish_phase1(e, 0, ws, ex);
}
PHASE2(aclnnEmbedding)

/* ---- RmsNorm(x, gamma, eps, y, rstd): rows over gamma's trailing dims ---- */
static void k_rms_norm(Exec *e, Stream *s, unsigned char **p, unsigned char *ws) {
    (void)s; (void)ws;
    aclTensor *x = &e->t[0], *g = &e->t[1];
    double *xv = load(x, p[0]), *gv = load(g, p[1]);
    int64_t n = numel(g), rows = numel(x) / (n ? n : 1);
    double *rstd = malloc(sizeof(double) * (size_t)(rows ? rows : 1));
    for (int64_t r = 0; r < rows; r++) {
        double *row = xv + r * n, ss = 0;
        for (int64_t j = 0; j < n; j++) ss += row[j] * row[j];
        double rs = 1.0 / sqrt(ss / (double)n + e->dv[0]);
        rstd[r] = rs;
        for (int64_t j = 0; j < n; j++) row[j] = row[j] * rs * gv[j];
    }
    scatter(&e->t[2], p[2], xv);
    scatter(&e->t[3], p[3], rstd);
    free(xv); free(gv); free(rstd);
}
EXPORT aclnnStatus aclnnRmsNormGetWorkspaceSize(const aclTensor *x, const aclTensor *gamma, double eps, const aclTensor *y,
                                                const aclTensor *rstd, uint64_t *ws, void **ex) {
    const char *OPNAME = "aclnnRmsNorm";
    NEED(x, "x"); NEED(gamma, "gamma"); NEED(y, "yOut"); NEED(rstd, "rstdOut"); NEED(ws, "workspaceSize"); NEED(ex, "executor");
    Exec *e = new_exec(OPNAME, k_rms_norm);
    CHECK(gamma->ndim >= 1 && gamma->ndim <= x->ndim, "%s: gamma's rank", OPNAME);
    for (int i = 0; i < gamma->ndim; i++)
        CHECK(gamma->dims[i] == x->dims[x->ndim - gamma->ndim + i], "%s: gamma must match x's trailing dims", OPNAME);
    CHECK(is_float(x->dtype) && (rstd->dtype == DT_FLOAT || rstd->dtype == DT_DOUBLE), "%s: rstd must be float32", OPNAME);
    CHECK(numel(rstd) * numel(gamma) == numel(x) && numel(y) == numel(x), "%s: y/rstd shapes", OPNAME);
    add_t(e, x); add_t(e, gamma); add_t(e, y); add_t(e, rstd);
    e->dv[0] = eps;
    return finish_phase1(e, 0, ws, ex);
}
PHASE2(aclnnRmsNorm)

/* ---------------------------------------------------------------------------------------------
 * FlashAttentionScore: tiled forward with online softmax; backward recomputes from max/sum
 * ------------------------------------------------------------------------------------------- */
enum { FA_Q, FA_K, FA_V, FA_MASK, FA_MAX, FA_SUM, FA_OUT,       /* forward tensor slots */
       FG_DY = 3, FG_MASK, FG_MAX, FG_SUM, FG_ATTN, FG_DQ, FG_DK, FG_DV };

typedef struct FaDims { int64_t B, N, Nkv, Sq, Skv, D; int layout; } FaDims;  /* layout 0 BNSD, 1 BSND, 2 BSH */

static int fa_layout(const char *s) {
    if (!s) return -1;
    if (!strcmp(s, "BNSD")) return 0;
    if (!strcmp(s, "BSND")) return 1;
    if (!strcmp(s, "BSH")) return 2;
    return -1;
}
/* element offset of (b, head, s, d) in a q/k/v-like tensor */
static inline int64_t fa_off(const aclTensor *t, int layout, int64_t D, int64_t b, int64_t h, int64_t s, int64_t d) {
    const int64_t *st = t->strides;
    switch (layout) {
    case 0: return t->offset + b * st[0] + h * st[1] + s * st[2] + d * st[3];
    case 1: return t->offset + b * st[0] + s * st[1] + h * st[2] + d * st[3];
    default: return t->offset + b * st[0] + s * st[1] + (h * D + d) * st[2];
    }
}
static int fa_dims(const aclTensor *q, const aclTensor *k, int layout, int64_t headNum, FaDims *f) {
    f->layout = layout;
    if (layout == 2) {
        if (q->ndim != 3 || k->ndim != 3 || headNum <= 0 || q->dims[2] % headNum) return -1;
        f->B = q->dims[0]; f->Sq = q->dims[1]; f->N = headNum; f->D = q->dims[2] / headNum;
        f->Skv = k->dims[1];
        if (k->dims[2] % f->D) return -1;
        f->Nkv = k->dims[2] / f->D;
    } else {
        if (q->ndim != 4 || k->ndim != 4) return -1;
        int sI = layout == 0 ? 2 : 1, nI = layout == 0 ? 1 : 2;
        f->B = q->dims[0]; f->N = q->dims[nI]; f->Sq = q->dims[sI]; f->D = q->dims[3];
        f->Nkv = k->dims[nI]; f->Skv = k->dims[sI];
        if (k->dims[3] != f->D || f->N != headNum) return -1;
    }
    if (f->Nkv <= 0 || f->N % f->Nkv || k->dims[0] != f->B) return -1;
    return 0;
}
/* is (i, j) masked out? mask 1 = masked; sparse modes 2/3 are causal by position */
static inline int fa_masked(const Exec *e, const aclTensor *m, const unsigned char *mp, const FaDims *f,
                            int64_t b, int64_t n, int64_t i, int64_t j) {
    int mode = (int)e->iv[2];
    if (mode == 2) return j > i;                               /* leftUpCausal */
    if (mode == 3) return j > i + (f->Skv - f->Sq);            /* rightDownCausal */
    if (m->ndim < 0) return 0;
    if (mode == 0 && (j < i - e->iv[0] || j > i + e->iv[1])) return 1;   /* pre/next token band */
    int64_t off = m->offset + i * m->strides[m->ndim - 2] + j * m->strides[m->ndim - 1];
    if (m->ndim == 4) off += (m->dims[0] > 1 ? b * m->strides[0] : 0) + (m->dims[1] > 1 ? n * m->strides[1] : 0);
    return rd(mp, m->dtype, off) != 0;
}

static int64_t fa_block(void) {
    const char *e = getenv("ACL_EMU_FA_BLOCK");
    int64_t b = e ? atoll(e) : 64;
    return b > 0 ? b : 64;
}

static void k_fa_fwd(Exec *e, Stream *s, unsigned char **p, unsigned char *ws) {
    (void)s; (void)ws;
    FaDims f;
    fa_dims(&e->t[FA_Q], &e->t[FA_K], (int)e->iv[4], e->iv[3], &f);
    const aclTensor *q = &e->t[FA_Q], *k = &e->t[FA_K], *v = &e->t[FA_V], *m = &e->t[FA_MASK], *o = &e->t[FA_OUT];
    double scale = e->dv[0];
    int64_t BK = fa_block(), g = f.N / f.Nkv, D = f.D;
    double *qrow = malloc(sizeof(double) * D), *acc = malloc(sizeof(double) * D), *sc = malloc(sizeof(double) * BK);
    for (int64_t b = 0; b < f.B; b++)
        for (int64_t n = 0; n < f.N; n++) {
            int64_t nk = n / g;
            for (int64_t i = 0; i < f.Sq; i++) {
                for (int64_t d = 0; d < D; d++) qrow[d] = rd(p[FA_Q], q->dtype, fa_off(q, f.layout, D, b, n, i, d));
                double mx = -INFINITY, l = 0;
                memset(acc, 0, sizeof(double) * D);
                for (int64_t j0 = 0; j0 < f.Skv; j0 += BK) {             /* one key/value tile at a time */
                    int64_t j1 = j0 + BK < f.Skv ? j0 + BK : f.Skv;
                    double tmax = -INFINITY;
                    for (int64_t j = j0; j < j1; j++) {
                        if (fa_masked(e, m, p[FA_MASK], &f, b, n, i, j)) { sc[j - j0] = -INFINITY; continue; }
                        double dot = 0;
                        for (int64_t d = 0; d < D; d++) dot += qrow[d] * rd(p[FA_K], k->dtype, fa_off(k, f.layout, D, b, nk, j, d));
                        sc[j - j0] = dot * scale;
                        if (sc[j - j0] > tmax) tmax = sc[j - j0];
                    }
                    if (tmax == -INFINITY) continue;
                    double nm = mx > tmax ? mx : tmax, corr = exp(mx - nm);   /* rescale what we have */
                    l *= corr;
                    for (int64_t d = 0; d < D; d++) acc[d] *= corr;
                    for (int64_t j = j0; j < j1; j++) {
                        if (sc[j - j0] == -INFINITY) continue;
                        double pj = exp(sc[j - j0] - nm);
                        l += pj;
                        for (int64_t d = 0; d < D; d++) acc[d] += pj * rd(p[FA_V], v->dtype, fa_off(v, f.layout, D, b, nk, j, d));
                    }
                    mx = nm;
                }
                for (int64_t d = 0; d < D; d++)                           /* a fully masked row gives 0 */
                    wr(p[FA_OUT], o->dtype, fa_off(o, f.layout, D, b, n, i, d), l > 0 ? acc[d] / l : 0.0);
                const aclTensor *tm = &e->t[FA_MAX], *ts = &e->t[FA_SUM];
                for (int r = 0; r < 8; r++) {
                    int64_t base = ((b * f.N + n) * f.Sq + i) * 8 + r;
                    wr(p[FA_MAX], tm->dtype, tm->offset + base, l > 0 ? mx : -3.4e38);
                    wr(p[FA_SUM], ts->dtype, ts->offset + base, l);
                }
            }
        }
    free(qrow); free(acc); free(sc);
}

static aclnnStatus fa_check_common(Exec *e, const char *OPNAME, const aclTensor *q, const aclTensor *k, const aclTensor *v,
                                   const aclTensor *mask, double keepProb, int64_t headNum, const char *layout,
                                   int64_t sparseMode, FaDims *f) {
    int lay = fa_layout(layout);
    if (lay < 0) { free(e); return fail(ACLNN_ERR_PARAM_INVALID, "%s: inputLayout must be BNSD, BSND or BSH (got %s)", OPNAME, layout ? layout : "NULL"); }
    CHECK(is_float(q->dtype) && q->dtype == k->dtype && q->dtype == v->dtype, "%s: q/k/v must share a floating dtype", OPNAME);
    CHECK(fa_dims(q, k, lay, headNum, f) == 0, "%s: q/k shapes do not fit layout %s with headNum %lld (Nq must be a multiple of Nkv)",
          OPNAME, layout, (long long)headNum);
    CHECK(v->ndim == k->ndim, "%s: v must have k's shape", OPNAME);
    for (int i = 0; i < k->ndim; i++) CHECK(v->dims[i] == k->dims[i], "%s: v must have k's shape", OPNAME);
    CHECK(keepProb == 1.0, "%s: the emulator implements keepProb == 1 only (no dropout)", OPNAME);
    CHECK(sparseMode == 0 || sparseMode == 1 || sparseMode == 2 || sparseMode == 3, "%s: sparseMode %lld not emulated (0..3)", OPNAME, (long long)sparseMode);
    if (mask) {
        CHECK(mask->dtype == DT_BOOL || mask->dtype == DT_UINT8, "%s: attenMask must be BOOL/UINT8", OPNAME);
        CHECK((mask->ndim == 2 || mask->ndim == 4) && mask->dims[mask->ndim - 2] == f->Sq && mask->dims[mask->ndim - 1] == f->Skv,
              "%s: attenMask must be [Sq,Skv] or [B|1,N|1,Sq,Skv]", OPNAME);
    }
    e->iv[3] = headNum;
    e->iv[4] = lay;
    e->iv[2] = sparseMode;
    return 0;
}

EXPORT aclnnStatus aclnnFlashAttentionScoreGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *realShift,
    const aclTensor *dropMask, const aclTensor *paddingMask, const aclTensor *attenMask, const aclIntArray *prefix,
    double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char *inputLayout,
    int64_t innerPrecise, int64_t sparseMode, const aclTensor *softmaxMaxOut, const aclTensor *softmaxSumOut,
    const aclTensor *softmaxOutOut, const aclTensor *attentionOutOut, uint64_t *ws, void **ex) {
    const char *OPNAME = "aclnnFlashAttentionScore";
    NEED(query, "query"); NEED(key, "key"); NEED(value, "value"); NEED(softmaxMaxOut, "softmaxMaxOut");
    NEED(softmaxSumOut, "softmaxSumOut"); NEED(attentionOutOut, "attentionOutOut"); NEED(ws, "workspaceSize"); NEED(ex, "executor");
    (void)dropMask; (void)paddingMask; (void)prefix; (void)innerPrecise; (void)softmaxOutOut;
    Exec *e = new_exec(OPNAME, k_fa_fwd);
    CHECK(!realShift, "%s: realShift (pse) is not emulated", OPNAME);
    FaDims f;
    int rc = fa_check_common(e, OPNAME, query, key, value, attenMask, keepProb, headNum, inputLayout, sparseMode, &f);
    if (rc) return rc;
    CHECK(softmaxMaxOut->dtype == DT_FLOAT && numel(softmaxMaxOut) == f.B * f.N * f.Sq * 8 && numel(softmaxSumOut) == f.B * f.N * f.Sq * 8,
          "%s: softmaxMax/Sum must be float32 [B,N,Sq,8]", OPNAME);
    CHECK(numel(attentionOutOut) == numel(query) && attentionOutOut->dtype == query->dtype, "%s: attentionOut must be like query", OPNAME);
    add_t(e, query); add_t(e, key); add_t(e, value); add_t(e, attenMask);
    add_t(e, softmaxMaxOut); add_t(e, softmaxSumOut); add_t(e, attentionOutOut);
    e->dv[0] = scaleValue;
    e->iv[0] = preTokens;
    e->iv[1] = nextTokens;
    return finish_phase1(e, 0, ws, ex);
}
PHASE2(aclnnFlashAttentionScore)

/* Backward (FlashAttention-2): for each row recompute p_ij = exp(s_ij - max_i) / sum_i tile by tile;
 * Di = rowsum(dO_i * O_i); ds = p (dp - Di); dq += scale ds k; dk += scale ds q; dv += p dO.
 * dk/dv accumulate in the workspace (float64, [B, Nkv, Skv, D] each), so GQA heads can share. */
static void k_fa_bwd(Exec *e, Stream *s, unsigned char **p, unsigned char *ws) {
    (void)s;
    FaDims f;
    fa_dims(&e->t[FA_Q], &e->t[FA_K], (int)e->iv[4], e->iv[3], &f);
    const aclTensor *q = &e->t[FA_Q], *k = &e->t[FA_K], *v = &e->t[FA_V], *dy = &e->t[FG_DY], *m = &e->t[FG_MASK];
    const aclTensor *tmx = &e->t[FG_MAX], *tsm = &e->t[FG_SUM], *at = &e->t[FG_ATTN];
    const aclTensor *dq = &e->t[FG_DQ], *dk = &e->t[FG_DK], *dv = &e->t[FG_DV];
    double scale = e->dv[0];
    int64_t BK = fa_block(), g = f.N / f.Nkv, D = f.D;
    double *dkacc = (double *)ws, *dvacc = dkacc + f.B * f.Nkv * f.Skv * D;
    memset(ws, 0, sizeof(double) * 2 * (size_t)(f.B * f.Nkv * f.Skv * D));
    double *qrow = malloc(sizeof(double) * D), *dor = malloc(sizeof(double) * D), *dqr = malloc(sizeof(double) * D);
    double *pt = malloc(sizeof(double) * BK);
    for (int64_t b = 0; b < f.B; b++)
        for (int64_t n = 0; n < f.N; n++) {
            int64_t nk = n / g;
            for (int64_t i = 0; i < f.Sq; i++) {
                int64_t mi = ((b * f.N + n) * f.Sq + i) * 8;
                double mx = rd(p[FG_MAX], tmx->dtype, tmx->offset + mi), l = rd(p[FG_SUM], tsm->dtype, tsm->offset + mi);
                double Di = 0;
                for (int64_t d = 0; d < D; d++) {
                    qrow[d] = rd(p[FA_Q], q->dtype, fa_off(q, f.layout, D, b, n, i, d));
                    dor[d] = rd(p[FG_DY], dy->dtype, fa_off(dy, f.layout, D, b, n, i, d));
                    Di += dor[d] * rd(p[FG_ATTN], at->dtype, fa_off(at, f.layout, D, b, n, i, d));
                    dqr[d] = 0;
                }
                if (l > 0)
                    for (int64_t j0 = 0; j0 < f.Skv; j0 += BK) {
                        int64_t j1 = j0 + BK < f.Skv ? j0 + BK : f.Skv;
                        for (int64_t j = j0; j < j1; j++) {
                            if (fa_masked(e, m, p[FG_MASK], &f, b, n, i, j)) continue;
                            double dot = 0, dp = 0;
                            for (int64_t d = 0; d < D; d++) {
                                dot += qrow[d] * rd(p[FA_K], k->dtype, fa_off(k, f.layout, D, b, nk, j, d));
                                dp += dor[d] * rd(p[FA_V], v->dtype, fa_off(v, f.layout, D, b, nk, j, d));
                            }
                            double pj = exp(dot * scale - mx) / l, ds = pj * (dp - Di);
                            double *dkr = dkacc + ((b * f.Nkv + nk) * f.Skv + j) * D, *dvr = dvacc + ((b * f.Nkv + nk) * f.Skv + j) * D;
                            for (int64_t d = 0; d < D; d++) {
                                dqr[d] += scale * ds * rd(p[FA_K], k->dtype, fa_off(k, f.layout, D, b, nk, j, d));
                                dkr[d] += scale * ds * qrow[d];
                                dvr[d] += pj * dor[d];
                            }
                        }
                    }
                for (int64_t d = 0; d < D; d++) wr(p[FG_DQ], dq->dtype, fa_off(dq, f.layout, D, b, n, i, d), dqr[d]);
            }
        }
    for (int64_t b = 0; b < f.B; b++)
        for (int64_t n = 0; n < f.Nkv; n++)
            for (int64_t j = 0; j < f.Skv; j++)
                for (int64_t d = 0; d < D; d++) {
                    int64_t a = ((b * f.Nkv + n) * f.Skv + j) * D + d;
                    wr(p[FG_DK], dk->dtype, fa_off(dk, f.layout, D, b, n, j, d), dkacc[a]);
                    wr(p[FG_DV], dv->dtype, fa_off(dv, f.layout, D, b, n, j, d), dvacc[a]);
                }
    free(qrow); free(dor); free(dqr); free(pt);
}

EXPORT aclnnStatus aclnnFlashAttentionScoreGradGetWorkspaceSize(
    const aclTensor *query, const aclTensor *keyIn, const aclTensor *value, const aclTensor *dy,
    const aclTensor *pseShift, const aclTensor *dropMask, const aclTensor *paddingMask, const aclTensor *attenMask,
    const aclTensor *softmaxMax, const aclTensor *softmaxSum, const aclTensor *softmaxIn, const aclTensor *attentionIn,
    const aclIntArray *prefix, double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum,
    char *inputLayout, int64_t innerPrecise, int64_t sparseMode, const aclTensor *dqOut, const aclTensor *dkOut,
    const aclTensor *dvOut, const aclTensor *dpseOut, uint64_t *ws, void **ex) {
    const char *OPNAME = "aclnnFlashAttentionScoreGrad";
    NEED(query, "query"); NEED(keyIn, "keyIn"); NEED(value, "value"); NEED(dy, "dy"); NEED(dqOut, "dqOut");
    NEED(dkOut, "dkOut"); NEED(dvOut, "dvOut"); NEED(ws, "workspaceSize"); NEED(ex, "executor");
    NEED(softmaxMax, "softmaxMax (the emulator always recomputes from the saved max/sum)");
    NEED(softmaxSum, "softmaxSum"); NEED(attentionIn, "attentionIn");
    (void)dropMask; (void)paddingMask; (void)prefix; (void)innerPrecise; (void)softmaxIn; (void)dpseOut;
    Exec *e = new_exec(OPNAME, k_fa_bwd);
    CHECK(!pseShift, "%s: pseShift is not emulated", OPNAME);
    FaDims f;
    int rc = fa_check_common(e, OPNAME, query, keyIn, value, attenMask, keepProb, headNum, inputLayout, sparseMode, &f);
    if (rc) return rc;
    CHECK(numel(dy) == numel(query) && numel(dqOut) == numel(query) && numel(dkOut) == numel(keyIn) && numel(dvOut) == numel(value),
          "%s: dy/dq like query, dk/dv like key/value", OPNAME);
    CHECK(numel(softmaxMax) == f.B * f.N * f.Sq * 8 && numel(softmaxSum) == f.B * f.N * f.Sq * 8, "%s: softmaxMax/Sum [B,N,Sq,8]", OPNAME);
    add_t(e, query); add_t(e, keyIn); add_t(e, value); add_t(e, dy); add_t(e, attenMask); add_t(e, softmaxMax);
    add_t(e, softmaxSum); add_t(e, attentionIn); add_t(e, dqOut); add_t(e, dkOut); add_t(e, dvOut);
    e->dv[0] = scaleValue;
    e->iv[0] = preTokens;
    e->iv[1] = nextTokens;
    return finish_phase1(e, sizeof(double) * 2 * (uint64_t)(f.B * f.Nkv * f.Skv * f.D), ws, ex);
}
PHASE2(aclnnFlashAttentionScoreGrad)
