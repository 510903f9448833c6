#include "shim.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef cgt_result (*fn_u)(unsigned);
typedef cgt_result (*fn_pi)(int *);
typedef cgt_result (*fn_pi_i)(int *, int);
typedef cgt_result (*fn_name)(char *, int, int);
typedef cgt_result (*fn_attr)(int *, int, int);
typedef cgt_result (*fn_totalmem)(size_t *, int);
typedef cgt_result (*fn_ctx_retain)(cgt_handle *, int);
typedef cgt_result (*fn_i)(int);
typedef cgt_result (*fn_h)(cgt_handle);
typedef cgt_result (*fn_void)(void);
typedef cgt_result (*fn_modload)(cgt_handle *, const void *, unsigned, int *, void **);
typedef cgt_result (*fn_getfn)(cgt_handle *, cgt_handle, const char *);
typedef cgt_result (*fn_alloc)(cgt_devptr *, size_t);
typedef cgt_result (*fn_free)(cgt_devptr);
typedef cgt_result (*fn_meminfo)(size_t *, size_t *);
typedef cgt_result (*fn_htod)(cgt_devptr, const void *, size_t);
typedef cgt_result (*fn_dtoh)(void *, cgt_devptr, size_t);
typedef cgt_result (*fn_dtoh_async)(void *, cgt_devptr, size_t, cgt_handle);
typedef cgt_result (*fn_memset)(cgt_devptr, unsigned char, size_t);
typedef cgt_result (*fn_allochost)(void **, size_t);
typedef cgt_result (*fn_freehost)(void *);
typedef cgt_result (*fn_stream_create)(cgt_handle *, unsigned);
typedef cgt_result (*fn_begin)(cgt_handle, int);
typedef cgt_result (*fn_end)(cgt_handle, cgt_handle *);
typedef cgt_result (*fn_event_create)(cgt_handle *, unsigned);
typedef cgt_result (*fn_hh)(cgt_handle, cgt_handle);
typedef cgt_result (*fn_elapsed)(float *, cgt_handle, cgt_handle);
typedef cgt_result (*fn_inst)(cgt_handle *, cgt_handle, unsigned long long);
typedef cgt_result (*fn_nodes)(cgt_handle, cgt_handle *, size_t *);
typedef cgt_result (*fn_launch)(cgt_handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                unsigned, cgt_handle, void **, void **);
typedef cgt_result (*fn_errstr)(cgt_result, const char **);

static struct {
	void *lib;
	const char *missing;
	fn_u init;
	fn_pi driver_version, device_count;
	fn_pi_i device_get;
	fn_name device_name;
	fn_attr device_attribute;
	fn_totalmem device_total_mem;
	fn_ctx_retain primary_ctx_retain;
	fn_i primary_ctx_release;
	fn_h ctx_set_current;
	fn_void ctx_synchronize;
	fn_modload module_load;
	fn_getfn module_get_function;
	fn_h module_unload;
	fn_alloc mem_alloc;
	fn_free mem_free;
	fn_meminfo mem_get_info;
	fn_htod memcpy_htod;
	fn_dtoh memcpy_dtoh;
	fn_dtoh_async memcpy_dtoh_async;
	fn_memset memset_d8;
	fn_allochost mem_alloc_host;
	fn_freehost mem_free_host;
	fn_stream_create stream_create;
	fn_h stream_destroy, stream_synchronize;
	fn_begin begin_capture;
	fn_end end_capture;
	fn_event_create event_create;
	fn_hh event_record;
	fn_h event_synchronize, event_destroy;
	fn_elapsed event_elapsed;
	fn_inst graph_instantiate;
	fn_hh graph_launch;
	fn_h graph_exec_destroy, graph_destroy;
	fn_nodes graph_get_nodes;
	fn_launch launch;
	fn_errstr error_name, error_string;
} d;

static void *sym(const char *a, const char *b) {
	void *p = dlsym(d.lib, a);
	if (!p && b) p = dlsym(d.lib, b);
	if (!p && !d.missing) d.missing = a;
	return p;
}

int cgt_load(char *err, size_t errlen) {
	if (d.lib) return d.missing ? CGT_NO_SYMBOL : CGT_SUCCESS;
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return CGT_NO_DRIVER;
	}
	d.lib = lib;
	d.init = (fn_u)sym("cuInit", 0);
	d.driver_version = (fn_pi)sym("cuDriverGetVersion", 0);
	d.device_count = (fn_pi)sym("cuDeviceGetCount", 0);
	d.device_get = (fn_pi_i)sym("cuDeviceGet", 0);
	d.device_name = (fn_name)sym("cuDeviceGetName", 0);
	d.device_attribute = (fn_attr)sym("cuDeviceGetAttribute", 0);
	d.device_total_mem = (fn_totalmem)sym("cuDeviceTotalMem_v2", 0);
	d.primary_ctx_retain = (fn_ctx_retain)sym("cuDevicePrimaryCtxRetain", 0);
	d.primary_ctx_release = (fn_i)sym("cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease");
	d.ctx_set_current = (fn_h)sym("cuCtxSetCurrent", 0);
	d.ctx_synchronize = (fn_void)sym("cuCtxSynchronize", 0);
	d.module_load = (fn_modload)sym("cuModuleLoadDataEx", 0);
	d.module_get_function = (fn_getfn)sym("cuModuleGetFunction", 0);
	d.module_unload = (fn_h)sym("cuModuleUnload", 0);
	d.mem_alloc = (fn_alloc)sym("cuMemAlloc_v2", 0);
	d.mem_free = (fn_free)sym("cuMemFree_v2", 0);
	d.mem_get_info = (fn_meminfo)sym("cuMemGetInfo_v2", 0);
	d.memcpy_htod = (fn_htod)sym("cuMemcpyHtoD_v2", 0);
	d.memcpy_dtoh = (fn_dtoh)sym("cuMemcpyDtoH_v2", 0);
	d.memcpy_dtoh_async = (fn_dtoh_async)sym("cuMemcpyDtoHAsync_v2", 0);
	d.memset_d8 = (fn_memset)sym("cuMemsetD8_v2", 0);
	d.mem_alloc_host = (fn_allochost)sym("cuMemAllocHost_v2", 0);
	d.mem_free_host = (fn_freehost)sym("cuMemFreeHost", 0);
	d.stream_create = (fn_stream_create)sym("cuStreamCreate", 0);
	d.stream_destroy = (fn_h)sym("cuStreamDestroy_v2", 0);
	d.stream_synchronize = (fn_h)sym("cuStreamSynchronize", 0);
	d.begin_capture = (fn_begin)sym("cuStreamBeginCapture_v2", 0);
	d.end_capture = (fn_end)sym("cuStreamEndCapture", 0);
	d.event_create = (fn_event_create)sym("cuEventCreate", 0);
	d.event_record = (fn_hh)sym("cuEventRecord", 0);
	d.event_synchronize = (fn_h)sym("cuEventSynchronize", 0);
	d.event_destroy = (fn_h)sym("cuEventDestroy_v2", 0);
	d.event_elapsed = (fn_elapsed)sym("cuEventElapsedTime_v2", "cuEventElapsedTime");
	d.graph_instantiate = (fn_inst)sym("cuGraphInstantiateWithFlags", 0);
	d.graph_launch = (fn_hh)sym("cuGraphLaunch", 0);
	d.graph_exec_destroy = (fn_h)sym("cuGraphExecDestroy", 0);
	d.graph_destroy = (fn_h)sym("cuGraphDestroy", 0);
	d.graph_get_nodes = (fn_nodes)sym("cuGraphGetNodes", 0);
	d.launch = (fn_launch)sym("cuLaunchKernel", 0);
	d.error_name = (fn_errstr)sym("cuGetErrorName", 0);
	d.error_string = (fn_errstr)sym("cuGetErrorString", 0);
	return d.missing ? CGT_NO_SYMBOL : CGT_SUCCESS;
}

const char *cgt_missing_symbol(void) { return d.missing; }

const char *cgt_error_name(cgt_result r) {
	const char *s = 0;
	if (d.error_name && d.error_name(r, &s) == CGT_SUCCESS && s) return s;
	return "CUDA_ERROR_UNKNOWN_CODE";
}

const char *cgt_error_string(cgt_result r) {
	const char *s = 0;
	if (d.error_string && d.error_string(r, &s) == CGT_SUCCESS && s) return s;
	return "";
}

cgt_result cgt_init(void) { return d.init(0); }
cgt_result cgt_driver_version(int *v) { return d.driver_version(v); }
cgt_result cgt_device_count(int *n) { return d.device_count(n); }
cgt_result cgt_device_get(int *dev, int ordinal) { return d.device_get(dev, ordinal); }
cgt_result cgt_device_name(char *name, int len, int dev) { return d.device_name(name, len, dev); }
cgt_result cgt_device_attribute(int *v, int attr, int dev) { return d.device_attribute(v, attr, dev); }
cgt_result cgt_device_total_mem(size_t *b, int dev) { return d.device_total_mem(b, dev); }
cgt_result cgt_primary_ctx_retain(cgt_handle *c, int dev) { return d.primary_ctx_retain(c, dev); }
cgt_result cgt_primary_ctx_release(int dev) { return d.primary_ctx_release(dev); }
cgt_result cgt_ctx_set_current(cgt_handle c) { return d.ctx_set_current(c); }
cgt_result cgt_ctx_synchronize(void) { return d.ctx_synchronize(); }
cgt_result cgt_module_load_data(cgt_handle *m, const void *image) { return d.module_load(m, image, 0, 0, 0); }
cgt_result cgt_module_get_function(cgt_handle *f, cgt_handle m, const char *n) { return d.module_get_function(f, m, n); }
cgt_result cgt_module_unload(cgt_handle m) { return d.module_unload(m); }
cgt_result cgt_mem_alloc(cgt_devptr *p, size_t b) { return d.mem_alloc(p, b); }
cgt_result cgt_mem_free(cgt_devptr p) { return d.mem_free(p); }
cgt_result cgt_mem_get_info(size_t *f, size_t *t) { return d.mem_get_info(f, t); }
cgt_result cgt_memcpy_htod(cgt_devptr dst, const void *src, size_t b) { return d.memcpy_htod(dst, src, b); }
cgt_result cgt_memcpy_dtoh(void *dst, cgt_devptr src, size_t b) { return d.memcpy_dtoh(dst, src, b); }
cgt_result cgt_memset_d8(cgt_devptr dst, unsigned char v, size_t b) { return d.memset_d8(dst, v, b); }
cgt_result cgt_mem_alloc_host(void **p, size_t b) { return d.mem_alloc_host(p, b); }
cgt_result cgt_mem_free_host(void *p) { return d.mem_free_host(p); }
// Non-blocking, so our stream does not wait on the legacy default stream.
cgt_result cgt_stream_create(cgt_handle *s) { return d.stream_create(s, 1); }
cgt_result cgt_stream_destroy(cgt_handle s) { return d.stream_destroy(s); }
cgt_result cgt_stream_synchronize(cgt_handle s) { return d.stream_synchronize(s); }
// Thread-local mode: other threads (NVML sampling, allocation of other
// candidates' buffers) cannot invalidate the capture.
cgt_result cgt_stream_begin_capture(cgt_handle s) { return d.begin_capture(s, 1); }
cgt_result cgt_stream_end_capture(cgt_handle s, cgt_handle *g) { return d.end_capture(s, g); }
cgt_result cgt_event_create(cgt_handle *e) { return d.event_create(e, 0); }
cgt_result cgt_event_record(cgt_handle e, cgt_handle s) { return d.event_record(e, s); }
cgt_result cgt_event_synchronize(cgt_handle e) { return d.event_synchronize(e); }
cgt_result cgt_event_elapsed(float *ms, cgt_handle a, cgt_handle b) { return d.event_elapsed(ms, a, b); }
cgt_result cgt_event_destroy(cgt_handle e) { return d.event_destroy(e); }
cgt_result cgt_graph_instantiate(cgt_handle *x, cgt_handle g) { return d.graph_instantiate(x, g, 0); }
cgt_result cgt_graph_launch(cgt_handle x, cgt_handle s) { return d.graph_launch(x, s); }
cgt_result cgt_graph_exec_destroy(cgt_handle x) { return d.graph_exec_destroy(x); }
cgt_result cgt_graph_destroy(cgt_handle g) { return d.graph_destroy(g); }
cgt_result cgt_graph_node_count(cgt_handle g, size_t *n) { return d.graph_get_nodes(g, 0, n); }
cgt_result cgt_launch(cgt_handle fn, unsigned grid, unsigned block, cgt_handle s, void **params) {
	return d.launch(fn, grid, 1, 1, block, 1, 1, 0, s, params, 0);
}

int64_t cgt_now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void cgt_spin_ns(int64_t ns) {
	if (ns <= 0) return;
	int64_t end = cgt_now_ns() + ns;
	while (cgt_now_ns() < end) {
	}
}

cgt_result cgt_run(const cgt_item *items, int count, cgt_handle s, int *failed) {
	for (int i = 0; i < count; i++) {
		const cgt_item *it = &items[i];
		cgt_result r = CGT_SUCCESS;
		cgt_spin_ns(it->host_ns);
		switch (it->kind) {
		case CGT_ITEM_KERNEL: {
			cgt_devptr p0 = it->p0, p1 = it->p1;
			uint64_t n = it->n;
			int32_t iters = it->iters;
			void *stream_args[3] = {&p0, &p1, &n};
			void *spin_args[2] = {&p0, &iters};
			r = d.launch(it->fn, it->grid, 1, 1, it->block, 1, 1, 0, s,
			             it->iters >= 0 ? spin_args : stream_args, 0);
			break;
		}
		case CGT_ITEM_SYNC:
			r = d.memcpy_dtoh_async(it->host, it->p0, (size_t)it->n, s);
			if (r == CGT_SUCCESS) r = d.stream_synchronize(s);
			break;
		case CGT_ITEM_GRAPH:
			r = d.graph_launch(it->handle, s);
			break;
		case CGT_ITEM_EVENT:
			r = d.event_record(it->handle, s);
			break;
		}
		if (r != CGT_SUCCESS) {
			*failed = i;
			return r;
		}
	}
	return CGT_SUCCESS;
}

cgt_result cgt_launch_loop(cgt_handle fn, int count, cgt_handle s, int64_t *ns) {
	int64_t t0 = cgt_now_ns();
	for (int i = 0; i < count; i++) {
		cgt_result r = d.launch(fn, 1, 1, 1, 32, 1, 1, 0, s, 0, 0);
		if (r != CGT_SUCCESS) return r;
	}
	*ns = cgt_now_ns() - t0;
	return CGT_SUCCESS;
}
