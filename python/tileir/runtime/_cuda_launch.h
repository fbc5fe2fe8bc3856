/* The CUDA driver's launch entry points as tileir's C pieces call them, without
 * cuda.h: the launch fast path (_fastlaunch.c, built at install) and the XLA FFI
 * handler (_xla_ffi.c, built on first use) resolve them from the driver at run time.
 * cuLaunchKernelEx's configuration is laid out as cuda.h's CUlaunchConfig and
 * CUlaunchAttribute (an id padded to 8 bytes, then a 64-byte value union): a kernel
 * that waits for / releases its neighbours in the stream launches with programmatic
 * stream serialization. */
#ifndef TILEIR_CUDA_LAUNCH_H
#define TILEIR_CUDA_LAUNCH_H

#include <stddef.h>

typedef int (*launch_fn)(void *function, unsigned gx, unsigned gy, unsigned gz,
                         unsigned bx, unsigned by, unsigned bz, unsigned shared,
                         void *stream, void **params, void **extra);
typedef struct {
    int id;
    char pad[4];
    union { char bytes[64]; int allowed; } value;
} LaunchAttribute;
typedef struct {
    unsigned grid[3], block[3], shared;
    void *stream;
    LaunchAttribute *attrs;
    unsigned nattrs;
} LaunchConfig;
typedef int (*launch_ex_fn)(const LaunchConfig *config, void *function, void **params,
                            void **extra);
#define PROGRAMMATIC_STREAM_SERIALIZATION 6   /* CU_LAUNCH_ATTRIBUTE_... */
_Static_assert(sizeof(LaunchAttribute) == 72, "CUlaunchAttribute is 72 bytes");
_Static_assert(offsetof(LaunchConfig, stream) == 32 && offsetof(LaunchConfig, attrs) == 40 &&
               offsetof(LaunchConfig, nattrs) == 48, "CUlaunchConfig's layout");

#endif
