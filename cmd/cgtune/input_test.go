package main

import (
	"bufio"
	"fmt"
	"strings"
	"testing"
	"time"

	"cgtune/presets"
)

// Before: a preset whose space lists warm-ups 0 to 1000 was accepted and
// planned for minutes, deaf to Ctrl-C; it is bad input, refused at once
// with the line, the bound and why.
func TestOversizedSpaceRefusedAtParse(t *testing.T) {
	isolate(t)
	var ws []string
	for w := range presets.MaxWarmup + 1 {
		ws = append(ws, fmt.Sprint(w))
	}
	preset := writeFile(t, "big.yaml", `version: 1
name: big
model: llama3_8b
gpu: h100
space:
  impls: [none, local, transformer_engine]
  warmups: [`+strings.Join(ws, ",")+`]
mbridge: "0.4"
`)
	for _, args := range [][]string{
		{"--headless", "--preset", preset, "--engine", "estimate"},
		{"check", "--preset", preset},
	} {
		code, out, errb := cgtuneWithin(t, args...)
		if code != exitBadInput || strings.Count(errb, "\n") != 1 || !strings.Contains(errb, preset+":5: ") ||
			!strings.Contains(errb, "130131 candidates") || !strings.Contains(errb, "more than the 4096 cgtune plans: each is checked against the rules") {
			t.Errorf("%v: exit %d, stderr %q, stdout %q", args, code, errb, out)
		}
	}
}

// Before: a 100 MB request line killed `cgtune worker` ("bufio.Scanner:
// token too long"); it answers with an error naming the line and the
// limit, keeps serving, and exits 0 when told to quit.
func TestWorkerCommandSurvivesAnOverlongLine(t *testing.T) {
	cache := isolate(t)
	cmd := asMain(t, cache, "worker", "--engine", "estimate")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	must(t, cmd.Start())
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.Contains(sc.Text(), `"hello"`) {
		t.Fatalf("no hello: %q", sc.Text())
	}
	go func() {
		piece := []byte(strings.Repeat("x", 1<<20))
		for range 100 {
			if _, err := in.Write(piece); err != nil {
				return
			}
		}
		in.Write([]byte("\n" + `{"v":1,"type":"ping","id":"p"}` + "\n" + `{"v":1,"type":"quit"}` + "\n"))
	}()
	if !sc.Scan() || !strings.Contains(sc.Text(), `"type":"error"`) || !strings.Contains(sc.Text(), "stdin line 1 is longer than 16 MiB") {
		t.Errorf("long line: %q", sc.Text())
	}
	if !sc.Scan() || !strings.Contains(sc.Text(), `"type":"pong"`) {
		t.Errorf("ping after the long line: %q", sc.Text())
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("worker: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("worker still running 10 s after quit")
	}
}
