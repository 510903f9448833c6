package cuda

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Program is a list of launches, syncs, graph launches and event records
// kept in C memory and run by one C loop (cgt_run): the Go side builds it
// once per candidate, so a launch costs what it costs from C.
type Program struct {
	items []C.cgt_item // backed by C memory
	base  unsafe.Pointer
	n     int
	Names []string // op name of each item, for error messages
}

// NewProgram allocates room for capacity items.
func NewProgram(capacity int) *Program {
	if capacity < 1 {
		capacity = 1
	}
	base := C.calloc(C.size_t(capacity), C.size_t(unsafe.Sizeof(C.cgt_item{})))
	return &Program{base: base, items: unsafe.Slice((*C.cgt_item)(base), capacity), Names: make([]string, 0, capacity)}
}

func (p *Program) next(name string) *C.cgt_item {
	if p.n == len(p.items) {
		grown := NewProgram(2 * len(p.items))
		copy(grown.items, p.items)
		C.free(p.base)
		p.base, p.items = grown.base, grown.items
	}
	it := &p.items[p.n]
	*it = C.cgt_item{}
	p.n++
	p.Names = append(p.Names, name)
	return it
}

// Len is the number of items.
func (p *Program) Len() int { return p.n }

// Stream adds a launch of the streaming kernel over n 16-byte vectors.
func (p *Program) Stream(name string, f Function, grid, block int, src, dst DevPtr, n int64, hostNs int64) {
	it := p.next(name)
	it.kind = C.CGT_ITEM_KERNEL
	it.fn = f.h
	it.grid, it.block = C.uint32_t(grid), C.uint32_t(block)
	it.iters = -1
	it.p0, it.p1 = C.cgt_devptr(src), C.cgt_devptr(dst)
	it.n = C.uint64_t(n)
	it.host_ns = C.int64_t(hostNs)
}

// Spin adds a launch of the spin kernel for iters rounds.
func (p *Program) Spin(name string, f Function, grid, block int, out DevPtr, iters int, hostNs int64) {
	it := p.next(name)
	it.kind = C.CGT_ITEM_KERNEL
	it.fn = f.h
	it.grid, it.block = C.uint32_t(grid), C.uint32_t(block)
	it.iters = C.int32_t(max(iters, 0))
	it.p0 = C.cgt_devptr(out)
	it.host_ns = C.int64_t(hostNs)
}

// Sync adds a device-to-host copy of bytes from src that the host waits for.
func (p *Program) Sync(name string, src DevPtr, bytes int64, dst *HostBuffer, hostNs int64) {
	it := p.next(name)
	it.kind = C.CGT_ITEM_SYNC
	it.p0 = C.cgt_devptr(src)
	it.n = C.uint64_t(min(bytes, dst.size))
	it.host = dst.p
	it.host_ns = C.int64_t(hostNs)
}

// Graph adds a graph launch.
func (p *Program) Graph(name string, x GraphExec, hostNs int64) {
	it := p.next(name)
	it.kind = C.CGT_ITEM_GRAPH
	it.handle = x.h
	it.host_ns = C.int64_t(hostNs)
}

// Event adds an event record.
func (p *Program) Event(e Event) {
	it := p.next("event")
	it.kind = C.CGT_ITEM_EVENT
	it.handle = e.h
}

// Run runs items [from, to) on s.
func (p *Program) Run(s Stream, from, to int) error {
	if to <= from {
		return nil
	}
	var failed C.int
	r := C.cgt_run(&p.items[from], C.int(to-from), s.h, &failed)
	if r == C.CGT_SUCCESS {
		return nil
	}
	i := from + int(failed)
	return fmt.Errorf("%w (op %s)", check(r, itemCall(p.items[i].kind)), p.Names[i])
}

func itemCall(kind C.int32_t) string {
	switch kind {
	case C.CGT_ITEM_KERNEL:
		return "cuLaunchKernel"
	case C.CGT_ITEM_SYNC:
		return "cuStreamSynchronize"
	case C.CGT_ITEM_GRAPH:
		return "cuGraphLaunch"
	}
	return "cuEventRecord"
}

// Free releases the C memory.
func (p *Program) Free() {
	if p.base != nil {
		C.free(p.base)
		p.base, p.items, p.n = nil, nil, 0
	}
}
