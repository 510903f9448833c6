package main

// withJob records the job engine's launch in run.json.
func (s savedRun) withJob(f *rootFlags) savedRun {
	if f.engine == "job" {
		s.Launcher, s.Command, s.CommandFormat, s.JobIters = f.launcher, f.command, f.commandFormat, f.jobIters
	}
	return s
}

// applyJob takes the job engine's launch from run.json unless the flags
// name it again.
func (s savedRun) applyJob(f *rootFlags, changed func(string) bool) {
	if s.Engine != "job" {
		return
	}
	if !changed("launcher") && s.Launcher != "" {
		f.launcher = s.Launcher
	}
	if !changed("command") {
		f.command = s.Command
	}
	if !changed("command-format") {
		f.commandFormat = s.CommandFormat
	}
	if !changed("job-iters") && s.JobIters > 0 {
		f.jobIters = s.JobIters
	}
}
