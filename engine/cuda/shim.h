// A minimal CUDA driver API shim: our own declarations, loaded with dlopen
// at run time, so cgtune builds without CUDA headers or libraries and runs
// (reporting "no CUDA driver") where there is no driver.
#ifndef CGT_SHIM_H
#define CGT_SHIM_H

#include <stddef.h>
#include <stdint.h>

typedef int cgt_result;
typedef uint64_t cgt_devptr;
typedef void *cgt_handle;

// Error codes cgtune reacts to (values from the driver API's CUresult).
#define CGT_SUCCESS 0
#define CGT_ERROR_OUT_OF_MEMORY 2
#define CGT_ERROR_NOT_INITIALIZED 3
#define CGT_NO_DRIVER -1 // ours: libcuda.so.1 could not be loaded
#define CGT_NO_SYMBOL -2 // ours: a driver entry point is missing

int cgt_load(char *err, size_t errlen);
const char *cgt_missing_symbol(void);
const char *cgt_error_name(cgt_result r);
const char *cgt_error_string(cgt_result r);

cgt_result cgt_init(void);
cgt_result cgt_driver_version(int *v);
cgt_result cgt_device_count(int *n);
cgt_result cgt_device_get(int *dev, int ordinal);
cgt_result cgt_device_name(char *name, int len, int dev);
cgt_result cgt_device_attribute(int *v, int attr, int dev);
cgt_result cgt_device_total_mem(size_t *bytes, int dev);
cgt_result cgt_primary_ctx_retain(cgt_handle *ctx, int dev);
cgt_result cgt_primary_ctx_release(int dev);
cgt_result cgt_ctx_set_current(cgt_handle ctx);
cgt_result cgt_ctx_synchronize(void);
cgt_result cgt_module_load_data(cgt_handle *mod, const void *image);
cgt_result cgt_module_get_function(cgt_handle *fn, cgt_handle mod, const char *name);
cgt_result cgt_module_unload(cgt_handle mod);
cgt_result cgt_mem_alloc(cgt_devptr *p, size_t bytes);
cgt_result cgt_mem_free(cgt_devptr p);
cgt_result cgt_mem_get_info(size_t *free_bytes, size_t *total_bytes);
cgt_result cgt_memcpy_htod(cgt_devptr dst, const void *src, size_t bytes);
cgt_result cgt_memcpy_dtoh(void *dst, cgt_devptr src, size_t bytes);
cgt_result cgt_memset_d8(cgt_devptr dst, unsigned char v, size_t bytes);
cgt_result cgt_mem_alloc_host(void **p, size_t bytes);
cgt_result cgt_mem_free_host(void *p);
cgt_result cgt_stream_create(cgt_handle *s);
cgt_result cgt_stream_destroy(cgt_handle s);
cgt_result cgt_stream_synchronize(cgt_handle s);
cgt_result cgt_stream_begin_capture(cgt_handle s);
cgt_result cgt_stream_end_capture(cgt_handle s, cgt_handle *graph);
cgt_result cgt_event_create(cgt_handle *e);
cgt_result cgt_event_record(cgt_handle e, cgt_handle s);
cgt_result cgt_event_synchronize(cgt_handle e);
cgt_result cgt_event_elapsed(float *ms, cgt_handle start, cgt_handle end);
cgt_result cgt_event_destroy(cgt_handle e);
cgt_result cgt_graph_instantiate(cgt_handle *exec, cgt_handle graph);
cgt_result cgt_graph_launch(cgt_handle exec, cgt_handle s);
cgt_result cgt_graph_exec_destroy(cgt_handle exec);
cgt_result cgt_graph_destroy(cgt_handle graph);
cgt_result cgt_graph_node_count(cgt_handle graph, size_t *n);
cgt_result cgt_launch(cgt_handle fn, unsigned grid, unsigned block, cgt_handle s, void **params);

// A step program: a list of items run back to back by cgt_run, so the
// per-op cost on the host is the framework cost we emulate plus what a C
// loop around cuLaunchKernel costs, never Go's.
enum {
	CGT_ITEM_KERNEL = 0, // host spin, then launch fn with (p0, p1, n) or (p0, iters)
	CGT_ITEM_SYNC = 1,   // host spin, async copy of n bytes to pinned host, then wait for the stream
	CGT_ITEM_GRAPH = 2,  // host spin, then cuGraphLaunch
	CGT_ITEM_EVENT = 3,  // event record
};

typedef struct {
	int32_t kind;
	uint32_t grid, block;
	int32_t iters;      // spin kernels: loop count
	int64_t host_ns;    // emulated framework cost before the launch
	cgt_handle fn;      // kernel
	cgt_handle handle;  // graph exec or event
	cgt_devptr p0, p1;  // kernel arguments / sync source
	uint64_t n;         // kernel element count / sync bytes
	void *host;         // sync destination (pinned)
} cgt_item;

// cgt_run runs items[0..count) on stream s; on failure it returns the error
// and the failing index in *failed.
cgt_result cgt_run(const cgt_item *items, int count, cgt_handle s, int *failed);

// cgt_spin_ns busy-waits on the host for ns nanoseconds.
void cgt_spin_ns(int64_t ns);
int64_t cgt_now_ns(void);

// cgt_launch_loop launches fn (no arguments) count times and returns the
// host nanoseconds it took: the probe of raw launch cost.
cgt_result cgt_launch_loop(cgt_handle fn, int count, cgt_handle s, int64_t *ns);
#endif
