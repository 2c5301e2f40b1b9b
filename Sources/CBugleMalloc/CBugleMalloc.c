#include "CBugleMalloc.h"

// Any C library header defines __GLIBC__ on glibc (through <features.h>); test it only after one is included.
#include <stdlib.h>

#if defined(__linux__) && defined(__GLIBC__)
#include <malloc.h>

int bugle_limit_malloc_arenas(int count) {
    return mallopt(M_ARENA_MAX, count);
}

int bugle_set_mmap_threshold(int bytes) {
    return mallopt(M_MMAP_THRESHOLD, bytes);
}
#else
int bugle_limit_malloc_arenas(int count) {
    (void)count;
    return 0;
}

int bugle_set_mmap_threshold(int bytes) {
    (void)bytes;
    return 0;
}
#endif
