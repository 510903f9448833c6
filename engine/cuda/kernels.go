package cuda

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"

	"cgtune/internal/fileio"
)

//go:embed kernels/kernels.ptx
var embeddedPTX []byte

// PTXEnv names a PTX file that replaces the embedded kernels, for working
// on kernels.cu without rebuilding cgtune.
const PTXEnv = "CGTUNE_PTX"

// maxPTXBytes bounds a PTX file put in place of the embedded kernels.
const maxPTXBytes = 64 << 20

// KernelPTX returns the kernels' PTX: the file named by $CGTUNE_PTX, or the
// embedded one.
func KernelPTX() ([]byte, error) {
	ptx := embeddedPTX
	if p := os.Getenv(PTXEnv); p != "" {
		b, err := fileio.ReadFileLimited(p, maxPTXBytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", PTXEnv, err)
		}
		ptx = b
	}
	if !strings.Contains(string(ptx), ".entry cgt_spin") {
		return nil, errors.New("kernels.ptx holds no kernels: run engine/cuda/kernels/gen.sh on a machine with nvcc")
	}
	return ptx, nil
}

const blockSize = 256

// Kernels are the loaded kernels and the spin kernel's calibration.
type Kernels struct {
	mod                       *Module
	Empty, Stream, Spin, Fill Function
	SMs                       int
	spinOut                   DevPtr
	// Spin kernel time in ns = SpinBaseNs + SpinNsPerIter × iters, on a
	// grid of SpinGrid() blocks.
	SpinBaseNs, SpinNsPerIter float64
}

// LoadKernels loads the module on the current context; the device must be bound.
func LoadKernels(d *Device) (*Kernels, error) {
	ptx, err := KernelPTX()
	if err != nil {
		return nil, err
	}
	mod, err := LoadModule(ptx)
	if err != nil {
		return nil, err
	}
	k := &Kernels{mod: mod, SMs: d.SMs}
	for name, dst := range map[string]*Function{"cgt_empty": &k.Empty, "cgt_stream": &k.Stream, "cgt_spin": &k.Spin, "cgt_fill": &k.Fill} {
		if *dst, err = mod.Function(name); err != nil {
			mod.Unload()
			return nil, err
		}
	}
	if k.spinOut, err = Alloc(int64(k.SpinGrid()) * blockSize * 4); err != nil {
		mod.Unload()
		return nil, err
	}
	return k, nil
}

// Close frees the kernels' memory and unloads the module.
func (k *Kernels) Close() {
	Free(k.spinOut)
	k.mod.Unload()
}

// SpinGrid is the spin kernel's grid: four blocks per SM keeps every SM busy.
func (k *Kernels) SpinGrid() int { return 4 * k.SMs }

// StreamGrid is the streaming kernel's grid for n vectors: enough blocks to
// cover all SMs eight deep, fewer for small ops.
func (k *Kernels) StreamGrid(n int64) int {
	need := (n + blockSize - 1) / blockSize
	return int(max(1, min(need, int64(8*k.SMs))))
}

// SpinIters is the loop count that makes the spin kernel last us.
func (k *Kernels) SpinIters(us float64) int {
	it := (us*1000 - k.SpinBaseNs) / k.SpinNsPerIter
	if it < 0 || math.IsNaN(it) {
		return 0
	}
	return int(math.Round(it))
}

// timeProgram returns the median GPU time in ns of reps runs of the
// program, each run bracketed by events.
func timeProgram(s Stream, p *Program, reps int) (float64, error) {
	t, err := newEventTimer()
	if err != nil {
		return 0, err
	}
	defer t.destroy()
	ms, err := medianOf(reps, func() (float64, error) {
		return t.timeMs(s, func() error { return p.Run(s, 0, p.Len()) })
	})
	return ms * 1e6, err
}

// Calibrate fits the spin kernel's time to its loop count. A first fit
// times single launches; the second times ten launches queued back to back
// behind a blocking kernel, which is how kernels run inside a step, so the
// per-launch overhead the fit absorbs is the one steps see.
func (k *Kernels) Calibrate(s Stream) error {
	const lo, hi = 1000, 21000
	single := func(iters int) (float64, error) {
		p := NewProgram(1)
		defer p.Free()
		p.Spin("calibrate", k.Spin, k.SpinGrid(), blockSize, k.spinOut, iters, 0)
		return timeProgram(s, p, 7)
	}
	if err := k.fit(single, lo, hi); err != nil {
		return err
	}
	queued := func(iters int) (float64, error) {
		t, err := newEventTimer()
		if err != nil {
			return 0, err
		}
		defer t.destroy()
		const reps = 10
		p := k.queued(t, 300, reps, func(p *Program) {
			p.Spin("calibrate", k.Spin, k.SpinGrid(), blockSize, k.spinOut, iters, 0)
		})
		defer p.Free()
		ms, err := medianOf(5, func() (float64, error) { return t.runMs(s, p) })
		return ms * 1e6 / reps, err
	}
	return k.fit(queued, lo, hi)
}

func (k *Kernels) fit(at func(int) (float64, error), lo, hi int) error {
	tlo, err := at(lo)
	if err != nil {
		return err
	}
	thi, err := at(hi)
	if err != nil {
		return err
	}
	k.SpinNsPerIter = (thi - tlo) / float64(hi-lo)
	k.SpinBaseNs = tlo - k.SpinNsPerIter*float64(lo)
	if k.SpinNsPerIter <= 0 {
		return fmt.Errorf("spin kernel calibration failed: %.0f ns at %d iterations, %.0f ns at %d", tlo, lo, thi, hi)
	}
	return nil
}

// CopyBandwidth measures the streaming kernel over bytes (read plus
// written), in GB/s.
func (k *Kernels) CopyBandwidth(s Stream, bytes int64) (float64, error) {
	buf, err := Alloc(bytes)
	if err != nil {
		return 0, err
	}
	defer Free(buf)
	if err := k.FillRandom(s, buf, bytes, 7); err != nil {
		return 0, err
	}
	n := bytes / 2 / 16
	p := NewProgram(1)
	defer p.Free()
	p.Stream("copy", k.Stream, k.StreamGrid(n), blockSize, buf, buf+DevPtr(bytes/2), n, 0)
	ns, err := timeProgram(s, p, 10)
	if err != nil {
		return 0, err
	}
	return float64(n*32) / ns, nil
}

// FillRandom fills bytes at p with random bf16 values.
func (k *Kernels) FillRandom(s Stream, p DevPtr, bytes int64, seed uint32) error {
	n := bytes / 2
	grid := k.StreamGrid(n)
	// cgt_fill takes (ptr, n, seed): the stream item's (p0, p1, n) slots
	// carry ptr, n and seed in the same registers order.
	prog := NewProgram(1)
	defer prog.Free()
	prog.Stream("fill", k.Fill, grid, blockSize, p, DevPtr(n), int64(seed), 0)
	if err := prog.Run(s, 0, 1); err != nil {
		return err
	}
	return s.Sync()
}
