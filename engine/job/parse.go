package job

import (
	"errors"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"cgtune/engine"
	"cgtune/presets"
)

// The log lines this parser reads, as the training frameworks print them:
//
// Megatron-LM megatron/training/training.py (training_log, at commit
// d98e8a6) and Megatron-Bridge src/megatron/bridge/training/utils/
// train_utils.py (training_log, v0.4.0 to v0.6.0) both print, every
// log_interval iterations (and MLM also after the first one),
//
//	[2026-08-22 15:22:22.123456] iteration       12/      30 | consumed samples:           12 | elapsed time per iteration (ms): 41.3 | ...
//
// where the time is the average over the iterations since the previous
// line (MLM does not reset its timer after the first line, so its second
// line averages from iteration 1). Memory reports, after the first
// iterations:
//
//	MLM megatron/training/utils/common_utils.py report_memory:
//	  [Rank 0] (after 2 iterations) memory (MB) | allocated: 1234.56 | max allocated: 2345.67 | reserved: 3000.00 | max reserved: 3000.00
//	MB train_utils.py (memory_string, keys from MEMORY_KEYS, in 1e9 bytes):
//	  [Rank 0] (after 2 iterations) memory (GB) | mem-allocated-gigabytes: 1.2 | ... | mem-max-reserved-gigabytes: 3.1 | ...
//
// Failures are recognised by what PyTorch, CUDA and MCore print: PyTorch's
// "torch.OutOfMemoryError: CUDA out of memory", CUDA's stream-capture
// errors (cudaErrorStreamCaptureInvalidated, "operation not permitted when
// stream is capturing"), MCore's rerun state machine ("Unexpected result
// nan", megatron/core/rerun_state_machine.py) and NaN checks ("found NaN in
// local forward loss calculation", pretrain_gpt.py; "found NaN in local
// grad norm", megatron/core/distributed/param_and_grad_buffer.py).
var (
	iterRe  = regexp.MustCompile(`\biteration\s+(\d+)\s*/\s*(\d+)\s*\|.*?elapsed time per iteration \(ms\):\s*([0-9.]+(?:[eE][-+]?\d+)?)`)
	nanItRe = regexp.MustCompile(`number of nan iterations:\s*(\d+)`)
	// memory reports
	memMBRe    = regexp.MustCompile(`memory \(MB\)\s*\|`)
	memGBRe    = regexp.MustCompile(`memory \(GB\)\s*\|`)
	mlmMaxRes  = regexp.MustCompile(`\|\s*max reserved:\s*([0-9.]+)`)
	mlmMaxAll  = regexp.MustCompile(`\|\s*max allocated:\s*([0-9.]+)`)
	mbMaxRes   = regexp.MustCompile(`mem-max-reserved-gigabytes:\s*([0-9.eE+-]+)`)
	mbMaxAll   = regexp.MustCompile(`mem-max-allocated-gigabytes:\s*([0-9.eE+-]+)`)
	rankPrefix = regexp.MustCompile(`\[Rank (\d+)\]`)
	// failures
	oomRe     = regexp.MustCompile(`(?i)CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation`)
	captureRe = regexp.MustCompile(`(?i)cudaErrorStreamCapture\w*|operation not permitted when stream is capturing|stream capture|capture (?:was |is )?invalidated|cuda ?graph capture (?:failed|error)|CUDA Graph capture has already been finished`)
	nanRe     = regexp.MustCompile(`(?i)unexpected result -?(?:nan|inf)\b|found (?:nan|inf) in |loss is nan`)
	excRe     = regexp.MustCompile(`^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)(?::\s.*)?$`)
	cudaErrRe = regexp.MustCompile(`CUDA error|cudaError\w+|CUDA driver error|NCCL error`)
	// The prefixes launchers put before a rank's lines: torchrun's
	// "[default0]:" and "[rank0]:", srun --label's "0: ".
	linePrefix = regexp.MustCompile(`^(?:\[(?:default|rank)\d+\]:\s?|\d+:\s)+`)
)

// Iteration is one iteration line of the log.
type Iteration struct {
	Iter int     `json:"iter"` // the iteration the line reports
	Of   int     `json:"of"`   // train_iters
	Ms   float64 `json:"ms"`   // elapsed time per iteration, averaged over Span
	Span int     `json:"span"` // iterations the line covers (log_interval)
	Line int     `json:"line"` // line number in the log
}

// First is the first iteration the line covers.
func (it Iteration) First() int { return it.Iter - it.Span + 1 }

// Report is what a training log says.
type Report struct {
	Iterations []Iteration `json:"iterations"`
	// Peak memory over the memory reports of every rank, MiB: what the
	// PyTorch caching allocator reserved and allocated at most.
	MaxReservedMiB  float64 `json:"max_reserved_mib,omitempty"`
	MaxAllocatedMiB float64 `json:"max_allocated_mib,omitempty"`
	MemoryFormat    string  `json:"memory_format,omitempty"` // "megatron-lm" (MB) or "megatron-bridge" (GB)
	NaNIterations   int     `json:"nan_iterations,omitempty"`
	// ErrKind and Err are the job's own first error (engine.FailureOOM,
	// FailureCapture, FailureNaN, FailureCUDA or "" for another exception); empty
	// when the log shows none.
	ErrKind engine.FailureKind `json:"error_kind,omitempty"`
	Err     string             `json:"error,omitempty"`
	// Candidate is the configuration the log says it ran (cgtune's header
	// line, Megatron-LM's argument list or Megatron-Bridge's configuration
	// summary); nil when it does not say.
	Candidate *presets.Candidate `json:"candidate,omitempty"`
	Lines     int                `json:"lines"`
	// CutLines lines were longer than MaxLogLine: only their last
	// MaxLogLine bytes were read, CutBytes bytes before them were not.
	CutLines int   `json:"cut_lines,omitempty"`
	CutBytes int64 `json:"cut_bytes,omitempty"`
	// IterationsDropped iteration lines came after the first
	// maxIterations ones and were not kept.
	IterationsDropped int `json:"iterations_dropped,omitempty"`
}

// maxIterations is the most iteration lines a Report keeps: a tuning job
// runs tens of iterations and a whole training run's log a few hundred
// thousand; a log that repeats iteration lines without end must not grow
// the process.
const maxIterations = 1 << 20

// Parser reads a training log line by line.
type Parser struct {
	r        Report
	lastIter int
	exc      string // first exception line that is not a launcher's wrapper
	detect   candidateDetector
	split    lineSplitter
}

// LogLine is one line Feed or End parsed.
type LogLine struct {
	Text   string
	Cut    int64     // bytes dropped from the front of an overlong line
	Iter   Iteration // the iteration the line reports, if IsIter
	IsIter bool
}

// ParseLog reads a whole log.
func ParseLog(rd io.Reader) (Report, error) {
	var p Parser
	buf := make([]byte, 64<<10)
	for {
		n, err := rd.Read(buf)
		p.Feed(buf[:n], nil)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			p.End(nil)
			return p.Report(), err
		}
	}
	p.End(nil)
	return p.Report(), nil
}

// Feed parses the next chunk of a log, which may end anywhere in a line;
// on (may be nil) gets each line the chunk completes.
func (p *Parser) Feed(chunk []byte, on func(LogLine)) {
	p.split.feed(chunk, func(b []byte, cut int64) { p.parsed(b, cut, on) })
}

// End parses a last line that has no line end.
func (p *Parser) End(on func(LogLine)) {
	p.split.end(func(b []byte, cut int64) { p.parsed(b, cut, on) })
}

func (p *Parser) parsed(b []byte, cut int64, on func(LogLine)) {
	if cut > 0 {
		p.r.CutLines++
		p.r.CutBytes += cut
	}
	l := LogLine{Text: string(b), Cut: cut}
	l.Iter, l.IsIter = p.Line(l.Text)
	if on != nil {
		on(l)
	}
}

// Line feeds one line (without its newline); it returns the iteration the
// line reports, if it is an iteration line.
func (p *Parser) Line(raw string) (Iteration, bool) {
	p.r.Lines++
	s := strings.TrimRight(raw, "\r")
	p.detect.line(s)
	if m := iterRe.FindStringSubmatch(s); m != nil {
		it := Iteration{Line: p.r.Lines}
		it.Iter, _ = strconv.Atoi(m[1])
		it.Of, _ = strconv.Atoi(m[2])
		it.Ms, _ = strconv.ParseFloat(m[3], 64)
		it.Span = max(1, it.Iter-p.lastIter)
		if it.Iter <= p.lastIter {
			// A restarted job (or a second rank printing): the line
			// covers one iteration as far as we can tell.
			it.Span = 1
		}
		p.lastIter = it.Iter
		if n := nanItRe.FindStringSubmatch(s); n != nil {
			k, _ := strconv.Atoi(n[1])
			p.r.NaNIterations += k
		}
		if len(p.r.Iterations) < maxIterations {
			p.r.Iterations = append(p.r.Iterations, it)
		} else {
			p.r.IterationsDropped++
		}
		return it, true
	}
	switch {
	case memMBRe.MatchString(s):
		p.r.MemoryFormat = "megatron-lm"
		p.r.MaxReservedMiB = max(p.r.MaxReservedMiB, num(mlmMaxRes, s))
		p.r.MaxAllocatedMiB = max(p.r.MaxAllocatedMiB, num(mlmMaxAll, s))
		return Iteration{}, false
	case memGBRe.MatchString(s):
		// MB reports gigabytes of 1e9 bytes.
		p.r.MemoryFormat = "megatron-bridge"
		const gbToMiB = 1e9 / (1 << 20)
		p.r.MaxReservedMiB = max(p.r.MaxReservedMiB, num(mbMaxRes, s)*gbToMiB)
		p.r.MaxAllocatedMiB = max(p.r.MaxAllocatedMiB, num(mbMaxAll, s)*gbToMiB)
		return Iteration{}, false
	}
	p.failure(s)
	return Iteration{}, false
}

func num(re *regexp.Regexp, s string) float64 {
	m := re.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// failure records the first error of each kind; the most telling kind
// wins in Report (out of memory, then capture, then NaN, then any other
// exception).
func (p *Parser) failure(s string) {
	if p.r.ErrKind == engine.FailureOOM {
		return
	}
	line := strings.TrimSpace(linePrefix.ReplaceAllString(strings.TrimSpace(s), ""))
	switch {
	case oomRe.MatchString(line):
		p.r.ErrKind, p.r.Err = engine.FailureOOM, clip(line)
	case p.r.ErrKind == engine.FailureCapture:
	case captureRe.MatchString(line):
		p.r.ErrKind, p.r.Err = engine.FailureCapture, clip(line)
	case p.r.ErrKind == engine.FailureNaN:
	case nanRe.MatchString(line):
		p.r.ErrKind, p.r.Err = engine.FailureNaN, clip(line)
	case p.exc == "" && excRe.MatchString(line) && !strings.Contains(line, "ChildFailedError"):
		p.exc = clip(line)
	}
}

func clip(s string) string {
	const n = 400
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Report is what the lines so far say.
func (p *Parser) Report() Report {
	r := p.r
	r.Iterations = slices.Clone(r.Iterations)
	if r.ErrKind == "" && p.exc != "" {
		r.Err = p.exc
		if cudaErrRe.MatchString(p.exc) {
			r.ErrKind = engine.FailureCUDA
		}
	}
	r.Candidate = p.detect.candidate()
	return r
}

// candidateDetector finds the configuration a log ran.
type candidateDetector struct {
	header            *presets.Candidate // cgtune's own header line
	impl, mods        string
	warmup            int
	hasImpl, hasWarm  bool
	hasMods, mbConfig bool
}

// HeaderPrefix starts the line cgtune writes at the top of a job's log
// (local launcher) or that the batch script echoes (Slurm).
const HeaderPrefix = "[cgtune] candidate "

var (
	// MLM _print_args: "  cuda_graph_impl ........ local"
	mlmArgRe = regexp.MustCompile(`^\s*(cuda_graph_impl|cuda_graph_modules|cuda_graph_scope|cuda_graph_warmup_steps) \.+ (.*?)\s*$`)
	// MB log_non_default_values: "  cuda_graph_impl: 'local'  (Mcore default: 'none')"
	mbArgRe    = regexp.MustCompile(`^\s*(cuda_graph_impl|cuda_graph_modules|cuda_graph_scope|cuda_graph_warmup_steps): (.*?)(?:\s+\(Mcore default:.*)?$`)
	mbHeaderRe = regexp.MustCompile(`Configuration Summary \(Non-Default Values`)
	scopeWord  = regexp.MustCompile(`\b(full_iteration|attn|mlp|moe_router|moe_preprocess|moe|mamba)\b`)
)

// headerCandidate reads the candidate of a log's header line: its name
// (the default batch script follows it with " job ID on NODES"), or a key
// as older cgtune wrote it.
func headerCandidate(rest string) (presets.Candidate, bool) {
	rest = strings.TrimSpace(rest)
	if i := strings.Index(rest, " job "); i >= 0 {
		rest = rest[:i]
	}
	if c, err := presets.ParseName(strings.Trim(rest, "'")); err == nil {
		return c, true
	}
	first, _, _ := strings.Cut(rest, " ")
	c, err := presets.ParseName(first)
	return c, err == nil
}

func (d *candidateDetector) line(s string) {
	s = linePrefix.ReplaceAllString(s, "")
	if i := strings.Index(s, HeaderPrefix); i >= 0 && d.header == nil {
		if c, ok := headerCandidate(s[i+len(HeaderPrefix):]); ok {
			d.header = &c
		}
		return
	}
	if mbHeaderRe.MatchString(s) {
		d.mbConfig = true
		return
	}
	m := mlmArgRe.FindStringSubmatch(s)
	if m == nil {
		m = mbArgRe.FindStringSubmatch(s)
	}
	if m == nil {
		return
	}
	v := strings.Trim(m[2], `'"`)
	switch m[1] {
	case "cuda_graph_impl":
		d.impl, d.hasImpl = v, true
	case "cuda_graph_modules", "cuda_graph_scope":
		// Modules win over the deprecated scope; both print enums or names.
		if m[1] == "cuda_graph_modules" || !d.hasMods {
			d.mods, d.hasMods = v, true
		}
	case "cuda_graph_warmup_steps":
		if n, err := strconv.Atoi(v); err == nil {
			d.warmup, d.hasWarm = n, true
		}
	}
}

func (d *candidateDetector) candidate() *presets.Candidate {
	if d.header != nil {
		c := *d.header
		return &c
	}
	if !d.hasImpl && !d.mbConfig {
		return nil
	}
	impl := d.impl
	if !d.hasImpl {
		impl = presets.ImplNone // MB lists only values that differ from MCore's
	}
	warm := presets.DefaultWarmup
	if d.hasWarm {
		warm = d.warmup
	}
	scopes := []string{}
	for _, m := range scopeWord.FindAllStringSubmatch(d.mods, -1) {
		if !slices.Contains(scopes, m[1]) {
			scopes = append(scopes, m[1])
		}
	}
	c := presets.Candidate{Impl: impl, Scopes: scopes, Warmup: warm}
	switch {
	case impl == "full_iteration" || (impl == presets.ImplLocal && slices.Contains(scopes, presets.ScopeFullIteration)):
		c = presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: warm}
	case impl == presets.ImplNone:
		c.Scopes = []string{}
	case !slices.Contains(presets.Impls, impl):
		return nil
	}
	return &c
}

// ParseCandidateKey reads a candidate as cgtune names it (presets.ParseName:
// "te whole-layer w3", "full_iteration w3", "none") or keys it in its
// journals ("transformer_engine/layer/w3").
func ParseCandidateKey(key string) (presets.Candidate, error) {
	return presets.ParseName(key)
}
