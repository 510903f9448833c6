package job

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"cgtune/internal/fileio"
)

// DefaultBatchTemplate is the batch script cgtune submits when no
// --batch-template is given. Copy it, edit it (modules, containers, srun
// options, environment) and pass the copy with --batch-template FILE.
//
//go:embed batch.sbatch
var DefaultBatchTemplate string

// Placeholders of a batch-script template.
const (
	PhSbatch  = "sbatch"   // the #SBATCH lines for nodes, GPUs, time, partition, account
	PhCommand = "command"  // the rendered training command
	PhJobName = "job_name" // the job's name (letters, digits, '-', '_', '.')
)

var batchPlaceholders = []string{PhSbatch, PhCommand, PhCand, PhJobName}

// SlurmOptions are the resources each job asks for.
type SlurmOptions struct {
	Nodes       int    // --nodes (at least 1)
	GPUsPerNode int    // --gpus-per-node; 0 asks for none (the partition's default)
	Time        string // --time in a Slurm format (MM, HH:MM:SS, D-HH:MM); "" the partition's default
	Partition   string // --partition; "" the default partition
	Account     string // --account; "" the user's default
}

var (
	slurmNameRe = regexp.MustCompile(`^[A-Za-z0-9_.+-]+(?:,[A-Za-z0-9_.+-]+)*$`)
	slurmTimeRe = regexp.MustCompile(`^(?:\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+|\d+-\d+:\d{1,2}|\d+-\d+:\d{1,2}:\d{1,2}|UNLIMITED|INFINITE)$`)
	jobIDRe     = regexp.MustCompile(`^\d+$`)
)

// Check validates the options. Values go into #SBATCH lines, which no
// shell reads, so they are checked instead of quoted: a value with a
// newline or a space could otherwise add directives of its own.
func (o SlurmOptions) Check() error {
	if o.Nodes < 1 {
		return fmt.Errorf("--nodes %d: must be at least 1", o.Nodes)
	}
	if o.GPUsPerNode < 0 {
		return fmt.Errorf("--gpus-per-node %d: must be 0 (none requested) or more", o.GPUsPerNode)
	}
	if o.Time != "" && !slurmTimeRe.MatchString(o.Time) {
		return fmt.Errorf("--time %q: want a Slurm time such as 30, 1:30:00 or 1-00:00 (minutes, H:MM:SS, D-HH:MM)", o.Time)
	}
	for _, f := range []struct{ flag, v string }{{"--partition", o.Partition}, {"--account", o.Account}} {
		if f.v != "" && !slurmNameRe.MatchString(f.v) {
			return fmt.Errorf("%s %q: allowed: letters, digits and _.+- (comma-separated for several)", f.flag, f.v)
		}
	}
	return nil
}

// sbatchLines are the #SBATCH directives for the options.
func (o SlurmOptions) sbatchLines() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#SBATCH --nodes=%d\n", o.Nodes)
	if o.GPUsPerNode > 0 {
		fmt.Fprintf(&b, "#SBATCH --gpus-per-node=%d\n", o.GPUsPerNode)
	}
	if o.Time != "" {
		fmt.Fprintf(&b, "#SBATCH --time=%s\n", o.Time)
	}
	if o.Partition != "" {
		fmt.Fprintf(&b, "#SBATCH --partition=%s\n", o.Partition)
	}
	if o.Account != "" {
		fmt.Fprintf(&b, "#SBATCH --account=%s\n", o.Account)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Slurm submits each job as a batch script with sbatch and follows it
// with squeue (sacct and scontrol once it left the queue).
type Slurm struct {
	opts SlurmOptions
	segs []segment
	// Timeout bounds each call of a Slurm command (default 60 s).
	Timeout time.Duration
}

// ErrBatchTemplate is what NewSlurm's errors about the batch-script
// template's placeholders and first line wrap.
var ErrBatchTemplate = errors.New("batch template")

// NewSlurm checks the options and the batch-script template ("" takes
// DefaultBatchTemplate). The template must use {command}.
func NewSlurm(opts SlurmOptions, template string) (*Slurm, error) {
	if err := opts.Check(); err != nil {
		return nil, err
	}
	if template == "" {
		template = DefaultBatchTemplate
	}
	if strings.ContainsRune(template, 0) {
		return nil, fmt.Errorf("the batch template contains a NUL byte")
	}
	segs, err := parsePlaceholders(template, batchPlaceholders, false)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBatchTemplate, err)
	}
	n := 0
	for _, s := range segs {
		if s.ph == PhCommand {
			n++
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("%w: it must use {command} exactly once (it uses it %d times)", ErrBatchTemplate, n)
	}
	if !strings.HasPrefix(template, "#!") {
		return nil, fmt.Errorf("%w: the first line must be an interpreter line such as #!/bin/bash (sbatch requires it)", ErrBatchTemplate)
	}
	return &Slurm{opts: opts, segs: segs}, nil
}

// Name is "slurm".
func (s *Slurm) Name() string { return "slurm" }

// Nodes is --nodes.
func (s *Slurm) Nodes() int { return s.opts.Nodes }

// GPUs is --nodes × --gpus-per-node (0 when none were asked for).
func (s *Slurm) GPUs() int { return s.opts.Nodes * s.opts.GPUsPerNode }

// Script renders the batch script for r.
func (s *Slurm) Script(r Request) string {
	return expand(s.segs, map[string]string{
		PhSbatch:  s.opts.sbatchLines(),
		PhCommand: r.Command,
		PhCand:    Quote(r.Candidate),
		PhJobName: r.Name,
	})
}

func (s *Slurm) timeout() time.Duration {
	if s.Timeout <= 0 {
		return 60 * time.Second
	}
	return s.Timeout
}

// run runs a Slurm command (no shell) and returns its stdout.
func (s *Slurm) run(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = err.Error()
		}
		return out.String(), fmt.Errorf("%s: %s", name, msg)
	}
	return out.String(), nil
}

var jobNameRe = regexp.MustCompile(`^[A-Za-z0-9_.+-]+$`)

// Submit writes the batch script into r.Dir and submits it.
func (s *Slurm) Submit(ctx context.Context, r Request) (Job, error) {
	if !jobNameRe.MatchString(r.Name) {
		return nil, fmt.Errorf("job name %q: allowed: letters, digits and _.+-", r.Name)
	}
	abs, err := filepath.Abs(r.Dir)
	if err != nil {
		return nil, err
	}
	if strings.ContainsAny(abs, `%\`) {
		// sbatch expands %j, %x, ... in --output; a folder with % or \
		// would write the log somewhere else than cgtune reads it.
		return nil, fmt.Errorf("job folder %s: Slurm reads %% and \\ in output paths as patterns; use a folder without them", abs)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, err
	}
	script := filepath.Join(abs, r.Name+".sbatch")
	if err := fileio.WriteFresh(script, []byte(s.Script(r)), 0o644); err != nil {
		return nil, err
	}
	out := filepath.Join(abs, r.Name+"-%j.log")
	stdout, err := s.run(ctx, "sbatch", "--parsable", "--job-name="+r.Name, "--output="+out, script)
	if err != nil {
		return nil, err
	}
	// --parsable prints "jobid" or "jobid;cluster".
	id, _, _ := strings.Cut(strings.TrimSpace(stdout), ";")
	if !jobIDRe.MatchString(id) {
		return nil, fmt.Errorf("sbatch --parsable printed %q, not a job id", strings.TrimSpace(stdout))
	}
	return &slurmJob{s: s, ref: Ref{Launcher: "slurm", ID: id, Output: strings.ReplaceAll(out, "%j", id)}}, nil
}

// Attach follows a job an earlier cgtune submitted, if Slurm still knows it.
func (s *Slurm) Attach(ctx context.Context, ref Ref) (Job, error) {
	if ref.Launcher != "slurm" || !jobIDRe.MatchString(ref.ID) {
		return nil, ErrNotAttachable
	}
	j := &slurmJob{s: s, ref: ref}
	st, err := j.Status(ctx)
	if err != nil {
		return nil, err
	}
	if st.State == StateUnknown {
		return nil, ErrNotAttachable
	}
	return j, nil
}

type slurmJob struct {
	s   *Slurm
	ref Ref
}

func (j *slurmJob) Ref() Ref { return j.ref }

// Status asks squeue (which also lists finished jobs for MinJobAge), then
// sacct (accounting, where the cluster keeps it), then scontrol. A job
// none of them knows is UNKNOWN (done; the log decides). An error is a
// Slurm that does not answer; the caller asks again later.
func (j *slurmJob) Status(ctx context.Context) (Status, error) {
	out, err := j.s.run(ctx, "squeue", "-h", "-j", j.ref.ID, "-t", "all", "-o", "%T|%r")
	if err == nil && strings.TrimSpace(out) != "" {
		line := strings.SplitN(strings.TrimSpace(out), "\n", 2)[0]
		state, reason, _ := strings.Cut(line, "|")
		st := Status{State: baseState(state), Reason: reason}
		st.Done = terminal[st.State]
		if st.Done {
			st.ExitCode = j.exitCode(ctx)
		}
		return st, nil
	}
	if err != nil && !strings.Contains(err.Error(), "Invalid job id") {
		return Status{}, err
	}
	// The job left slurmctld's memory.
	if out, err := j.s.run(ctx, "sacct", "-n", "-X", "-P", "-j", j.ref.ID, "-o", "State,ExitCode"); err == nil && strings.TrimSpace(out) != "" {
		state, exit, _ := strings.Cut(strings.SplitN(strings.TrimSpace(out), "\n", 2)[0], "|")
		code, _ := strconv.Atoi(strings.SplitN(exit, ":", 2)[0])
		st := Status{State: baseState(state), ExitCode: code}
		st.Done = terminal[st.State]
		return st, nil
	}
	return Status{State: StateUnknown, Done: true}, nil
}

// baseState drops what sacct adds ("CANCELLED by 0") and squeue's
// flags ("COMPLETED+").
func baseState(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), " ")
	return strings.TrimRight(s, "+")
}

var exitCodeRe = regexp.MustCompile(`\bExitCode=(\d+):(\d+)`)

// exitCode is the batch script's exit code from scontrol (0 if unknown);
// a job killed by a signal reports 128+signal, as a shell would.
func (j *slurmJob) exitCode(ctx context.Context) int {
	out, err := j.s.run(ctx, "scontrol", "show", "job", "-o", j.ref.ID)
	if err != nil {
		return 0
	}
	m := exitCodeRe.FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	code, _ := strconv.Atoi(m[1])
	if sig, _ := strconv.Atoi(m[2]); code == 0 && sig > 0 {
		code = 128 + sig
	}
	return code
}

// Cancel runs scancel; a job that already ended is not an error.
func (j *slurmJob) Cancel(ctx context.Context) error {
	_, err := j.s.run(ctx, "scancel", j.ref.ID)
	if err != nil && (strings.Contains(err.Error(), "already completing or completed") || strings.Contains(err.Error(), "Invalid job id")) {
		return nil
	}
	return err
}
