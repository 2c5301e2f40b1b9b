#ifndef CBUGLE_MALLOC_H
#define CBUGLE_MALLOC_H

/// Caps the number of glibc malloc arenas (`mallopt(M_ARENA_MAX, count)`), as the `MALLOC_ARENA_MAX` environment
/// variable does at process start. Swift's Glibc module does not export `mallopt`, hence this shim.
/// Returns 1 when the cap was set, 0 when it was refused or the C library is not glibc.
int bugle_limit_malloc_arenas(int count);

#endif
