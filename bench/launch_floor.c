/* The floor under any launcher: cuLaunchKernel called from C, back to back.
 *
 *   cc -O2 -o launch_floor bench/launch_floor.c -ldl
 *   ./launch_floor KERNEL.cubin NAME THREADS SHARED_BYTES N [LAUNCHES [STREAM]]
 *
 * Loads NAME from the cubin (bench/launch.py writes axpby's), allocates its three
 * n-element bf16 arrays and launches it LAUNCHES times, on the legacy stream (STREAM
 * 0) or on a non-blocking stream of its own (STREAM 1), with prebuilt parameters (the axpby ABI: three (u64 pointer, i32 dim, i64 stride)
 * arrays, then f32 alpha and beta).  Prints microseconds per launch: enqueue alone,
 * and with the final synchronize.  The driver is opened with dlopen, so no CUDA
 * headers or toolkit are needed.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int (*fn_t)();
static void *lib;
static fn_t sym(const char *name) {
  fn_t f = (fn_t)dlsym(lib, name);
  if (!f) { fprintf(stderr, "missing %s\n", name); exit(2); }
  return f;
}
#define CHECK(call) do { int rc = (call); if (rc) { fprintf(stderr, "%s failed: %d\n", #call, rc); exit(1); } } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc < 6) { fprintf(stderr, "usage: %s cubin name threads shared n [launches]\n", argv[0]); return 2; }
  int threads = atoi(argv[3]), shared = atoi(argv[4]), n = atoi(argv[5]);
  int launches = argc > 6 ? atoi(argv[6]) : 10000;
  /* 0: the legacy default stream (NULL), 1: a created non-blocking stream */
  int stream_kind = argc > 7 ? atoi(argv[7]) : 0;
  lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) { fprintf(stderr, "no libcuda.so.1\n"); return 2; }
  FILE *f = fopen(argv[1], "rb");
  if (!f) { perror(argv[1]); return 2; }
  fseek(f, 0, SEEK_END); long size = ftell(f); fseek(f, 0, SEEK_SET);
  char *image = malloc(size);
  if (fread(image, 1, size, f) != (size_t)size) { perror("read"); return 2; }
  fclose(f);
  int dev; void *ctx, *mod, *fun;
  uint64_t buf[3];
  CHECK(sym("cuInit")(0));
  CHECK(sym("cuDeviceGet")(&dev, 0));
  CHECK(sym("cuDevicePrimaryCtxRetain")(&ctx, dev));
  CHECK(sym("cuCtxSetCurrent")(ctx));
  CHECK(sym("cuModuleLoadData")(&mod, image));
  CHECK(sym("cuModuleGetFunction")(&fun, mod, argv[2]));
  for (int i = 0; i < 3; i++) CHECK(sym("cuMemAlloc_v2")(&buf[i], (size_t)n * 2));
  int32_t dims[3] = {n, n, n};
  int64_t strides[3] = {1, 1, 1};
  float alpha = 0.5f, beta = -2.0f;
  void *params[11] = {&buf[0], &dims[0], &strides[0], &buf[1], &dims[1], &strides[1],
                      &buf[2], &dims[2], &strides[2], &alpha, &beta};
  fn_t launch = sym("cuLaunchKernel"), sync = sym("cuCtxSynchronize");
  void *stream = NULL;
  if (stream_kind == 1) CHECK(sym("cuStreamCreate")(&stream, 1 /* CU_STREAM_NON_BLOCKING */));
  for (int i = 0; i < 1000; i++) CHECK(launch(fun, 1, 1, 1, threads, 1, 1, shared, stream, params, NULL));
  CHECK(sync());
  for (int round = 0; round < 5; round++) {
    double t0 = now();
    for (int i = 0; i < launches; i++) launch(fun, 1, 1, 1, threads, 1, 1, shared, stream, params, NULL);
    double t1 = now();
    CHECK(sync());
    double t2 = now();
    printf("C cuLaunchKernel: enqueue %.2f us, wall %.2f us per launch\n",
           (t1 - t0) / launches * 1e6, (t2 - t0) / launches * 1e6);
  }
  return 0;
}
