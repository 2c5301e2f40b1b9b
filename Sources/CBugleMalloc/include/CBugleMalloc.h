#ifndef CBUGLE_MALLOC_H
#define CBUGLE_MALLOC_H

/// Caps the number of glibc malloc arenas (`mallopt(M_ARENA_MAX, count)`), as the `MALLOC_ARENA_MAX` environment
/// variable does at process start. Swift's Glibc module does not export `mallopt`, hence this shim.
/// Returns 1 when the cap was set, 0 when it was refused or the C library is not glibc.
int bugle_limit_malloc_arenas(int count);

/// Fixes glibc's mmap threshold (`mallopt(M_MMAP_THRESHOLD, bytes)`), as `MALLOC_MMAP_THRESHOLD_` does at process
/// start: blocks of at least `bytes` are mapped, and returned to the system when freed, and the threshold no longer
/// rises with the largest mapped block freed. Returns 1 when set, 0 when refused or the C library is not glibc.
int bugle_set_mmap_threshold(int bytes);

#endif
