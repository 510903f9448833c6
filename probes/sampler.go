package probes

import (
	"sync"
	"time"

	"cgtune/engine/cuda"
)

// Sample is one NVML reading of one GPU.
type Sample struct {
	Time     time.Time `json:"time"`
	Index    int       `json:"index"`
	UsedMiB  int64     `json:"used_mib"`
	TotalMiB int64     `json:"total_mib"`
	UtilGPU  int       `json:"util_gpu_pct"`
}

// Sampler reads NVML memory and utilisation of some GPUs on its own
// goroutine (NVML takes no CUDA context, so the engine never waits on it)
// and delivers samples on a channel; a slow reader misses samples rather
// than stalling the sampler.
type Sampler struct {
	C    <-chan Sample
	stop chan struct{}
	once sync.Once
	done chan struct{}
}

// NewSampler samples devices every interval (250 ms gives 4 Hz).
func NewSampler(n *cuda.NVML, devices []int, interval time.Duration) *Sampler {
	c := make(chan Sample, 64)
	s := &Sampler{C: c, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer close(c)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			for _, i := range devices {
				st, err := n.Status(i)
				if err != nil {
					continue
				}
				select {
				case c <- Sample{Time: time.Now(), Index: i, UsedMiB: st.UsedMiB, TotalMiB: st.TotalMiB, UtilGPU: st.UtilGPU}:
				default:
				}
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends sampling and closes C.
func (s *Sampler) Stop() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// SamplerRate runs a sampler at 100 ms on every GPU for d and returns the
// achieved readings per second per GPU.
func SamplerRate(d time.Duration) (float64, error) {
	n, err := cuda.OpenNVML()
	if err != nil {
		return 0, err
	}
	defer n.Close()
	count, err := n.Count()
	if err != nil || count == 0 {
		return 0, err
	}
	s := NewSampler(n, []int{0}, 100*time.Millisecond)
	deadline := time.After(d)
	got := 0
	for {
		select {
		case <-s.C:
			got++
		case <-deadline:
			s.Stop()
			return float64(got) / d.Seconds(), nil
		}
	}
}
