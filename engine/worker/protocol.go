// Package worker runs an engine in a child process, one per GPU, so that a
// sticky CUDA error, a crash or a hang costs one candidate and never the
// search. The parent and the worker speak JSON lines:
//
// Requests, on the worker's stdin, one JSON object per line:
//
//	{"v":1,"type":"run","id":"c3","spec":{...WorkloadSpec...},"candidate":{...},"opts":{...}}
//	{"v":1,"type":"ping","id":"p1"}
//	{"v":1,"type":"quit"}
//
// Replies, on its stdout:
//
//	{"v":1,"type":"hello","engine":"cuda","device":{...},"pid":123}  first, once the engine is up
//	{"v":1,"type":"sample","id":"c3","sample":{...StepSample...}}   while a candidate runs
//	{"v":1,"type":"result","id":"c3","result":{...Result...}}       when it ends (failures too)
//	{"v":1,"type":"pong","id":"p1"}
//	{"v":1,"type":"error","id":"c3","error":"..."}                  a request it could not take
//
// Requests run one at a time in order. A parent that sees a version other
// than its own stops the worker. Progress and logs go to stderr.
package worker

import (
	"cgtune/engine"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// Version of the protocol.
const Version = 1

// MaxLineBytes is the longest request or reply line either end reads. A
// request (workload spec, candidate) or a reply (a result) is a few KiB; a
// longer line is answered with an error reply (worker) or ends the worker
// as broken (client), and is never held in memory.
const MaxLineBytes = 16 << 20

// Message types.
const (
	TypeRun    = "run"
	TypePing   = "ping"
	TypeQuit   = "quit"
	TypeHello  = "hello"
	TypeSample = "sample"
	TypeResult = "result"
	TypePong   = "pong"
	TypeError  = "error"
)

// Request is a line the parent sends.
type Request struct {
	V         int                     `json:"v"`
	Type      string                  `json:"type"`
	ID        string                  `json:"id,omitempty"`
	Spec      *stepmodel.WorkloadSpec `json:"spec,omitempty"`
	Candidate *presets.Candidate      `json:"candidate,omitempty"`
	Opts      *engine.RunOptions      `json:"opts,omitempty"`
}

// Reply is a line the worker sends.
type Reply struct {
	V      int                `json:"v"`
	Type   string             `json:"type"`
	ID     string             `json:"id,omitempty"`
	Engine string             `json:"engine,omitempty"`
	Device *engine.DeviceInfo `json:"device,omitempty"`
	PID    int                `json:"pid,omitempty"`
	Sample *engine.StepSample `json:"sample,omitempty"`
	Result *engine.Result     `json:"result,omitempty"`
	Error  string             `json:"error,omitempty"`
	// Framework and Notes come with a framework worker's hello.
	Framework *engine.FrameworkInfo `json:"framework,omitempty"`
	Notes     []string              `json:"notes,omitempty"`
}
