package cuda

import (
	"context"

	"cgtune/presets"
	"cgtune/stepmodel"
)

// Microbenchmarks the probes run on the engine's own launch paths, so that
// what they report is what candidates pay.

// noopProgram is count launches of the streaming kernel with nothing to
// stream (one block of 32 threads): pure launch cost.
func (e *Engine) noopProgram(count int) *Program {
	p := NewProgram(count)
	for range count {
		p.Stream("noop", e.k.Stream, 1, 32, 0, 0, 0, 0)
	}
	return p
}

// bound runs f with the engine's context current on this thread.
func (e *Engine) bound(f func() error) error {
	unbind, err := e.dev.Bind()
	if err != nil {
		return err
	}
	defer unbind()
	return f()
}

// LaunchCostUs is the host time of one launch through the executor's C
// loop (Program.Run), the path every eager op takes: median of rounds of
// count launches.
func (e *Engine) LaunchCostUs(count, rounds int) (float64, error) {
	var out float64
	err := e.bound(func() error {
		p := e.noopProgram(count)
		defer p.Free()
		var per []float64
		for i := 0; i < rounds+1; i++ {
			t0 := NowNs()
			if err := p.Run(e.stream, 0, p.Len()); err != nil {
				return err
			}
			dt := NowNs() - t0
			if err := e.stream.Sync(); err != nil {
				return err
			}
			if i > 0 {
				per = append(per, float64(dt)/float64(count)/1000)
			}
		}
		out = median(per)
		return nil
	})
	return out, err
}

// GraphNodeUs captures count no-op launches into one graph and returns the
// GPU time per node of its replay (median of rounds), and the host time of
// one cuGraphLaunch.
func (e *Engine) GraphNodeUs(count, rounds int) (nodeUs, launchUs float64, err error) {
	err = e.bound(func() error {
		p := e.noopProgram(count)
		defer p.Free()
		if err := e.stream.BeginCapture(); err != nil {
			return err
		}
		runErr := p.Run(e.stream, 0, p.Len())
		g, err := e.stream.EndCapture()
		if runErr != nil {
			return runErr
		}
		if err != nil {
			return err
		}
		defer g.Destroy()
		x, err := g.Instantiate()
		if err != nil {
			return err
		}
		defer x.Destroy()
		replay := NewProgram(1)
		defer replay.Free()
		replay.Graph("graph", x, 0)
		t, err := newEventTimer()
		if err != nil {
			return err
		}
		defer t.destroy()
		var nodes, launches []float64
		for i := 0; i < rounds+1; i++ {
			var dt int64
			ms, err := t.timeMs(e.stream, func() error {
				t0 := NowNs()
				err := replay.Run(e.stream, 0, 1)
				dt = NowNs() - t0
				return err
			})
			if err != nil {
				return err
			}
			if i > 0 {
				nodes = append(nodes, ms*1000/float64(count))
				launches = append(launches, float64(dt)/1000)
			}
		}
		nodeUs, launchUs = median(nodes), median(launches)
		return nil
	})
	return nodeUs, launchUs, err
}

// CopyGBps measures device copy bandwidth with the streaming kernel.
func (e *Engine) CopyGBps(bytes int64) (float64, error) {
	var out float64
	err := e.bound(func() error {
		var err error
		out, err = e.k.CopyBandwidth(e.stream, bytes)
		return err
	})
	return out, err
}

// MatrixTFLOPS measures the bf16 GEMM rate through cuBLAS at path.
func (e *Engine) MatrixTFLOPS(cublasPath string, n, reps int) (rate float64, version int, err error) {
	err = e.bound(func() error {
		var err error
		if version, err = LoadCuBLAS(cublasPath); err != nil {
			return err
		}
		rate, err = e.k.MatrixRate(e.stream, n, reps)
		return err
	})
	return rate, version, err
}

// SetRates replaces the rates that size the matrix and collective kernels
// (after the probes measured them).
func (e *Engine) SetRates(r stepmodel.Rates) { e.rates = r }

// TimeOpUs is op's GPU time alone, in microseconds (median of ten
// back-to-back launches behind a blocking kernel).
func (e *Engine) TimeOpUs(op stepmodel.Op) (float64, error) {
	var us float64
	err := e.bound(func() error {
		w := &stepmodel.Workload{Layers: []stepmodel.LayerTrace{{Fwd: []stepmodel.Op{op}}}, RunMicroBatches: 1, MicroBatches: 1}
		s := stepmodel.NewSchedule(w, stepmodel.PlanCapture(w, presets.Candidate{Impl: presets.ImplNone}, 0), stepmodel.Costs{Rates: e.rates, Host: e.host})
		r := &run{e: e, ctx: context.Background(), w: w, s: s}
		defer r.teardown()
		if err := r.setup(w); err != nil {
			return err
		}
		ms, _, err := r.kernelSums()
		us = ms * 1000
		return err
	})
	return us, err
}

// QueuedKernelUs is the GPU time of one minimal full-grid kernel when
// kernels are queued back to back (a blocking kernel holds the GPU while
// the host enqueues them): the fixed cost every kernel of a step pays.
func (e *Engine) QueuedKernelUs(count int) (float64, error) {
	var us float64
	err := e.bound(func() error {
		t, err := newEventTimer()
		if err != nil {
			return err
		}
		defer t.destroy()
		k := e.k
		// The blocker outlasts the host's enqueueing of count launches.
		p := k.queued(t, float64(count)*8+500, count, func(p *Program) {
			p.Spin("minimal", k.Spin, k.SpinGrid(), blockSize, k.spinOut, 0, 0)
		})
		defer p.Free()
		ms, err := medianOf(5, func() (float64, error) { return t.runMs(e.stream, p) })
		us = ms * 1000 / float64(count)
		return err
	})
	return us, err
}
