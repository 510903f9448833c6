package tui

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/exp/teatest/v2"
)

// TestFlowToOverridesFile drives the whole program as a person would: the
// model screen, the GPU screen, the space, the run (a scripted search:
// plan, starts, samples, results, memory, done), the results, and writing
// the overrides file, which must hold the winner's overrides.
func TestFlowToOverridesFile(t *testing.T) {
	f := newFake(t)
	clk := &clock{t: t0}
	m := New(f, Options{NoColor: true, Version: "0.1.0-test", Now: clk.now, Model: "llama3_70b"})
	tm := teatest.NewTestModel(t, inspectable{m},
		teatest.WithInitialTermSize(80, 24),
		teatest.WithProgramOptions(tea.WithColorProfile(colorprofile.Ascii)),
	)
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("Llama 3 70B")) },
		teatest.WithDuration(5*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
	until := waiter(t, tm)

	flowToResults(tm, until)
	tm.Send(keyMsg("w"))
	until("the path prompt", func(m *App) bool { return m.resScr.prompt == promptPath })
	tm.Send(keyMsg("enter"))
	until("the file to be written", func(m *App) bool {
		return strings.HasPrefix(m.status, "wrote "+filepath.Join(f.dir, "cgtune-overrides.yaml")+" ")
	})
	tm.Send(keyMsg("q"))

	final := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(inspectable).App
	if final.done == nil || final.done.Winner == nil {
		t.Fatal("the final model has no result")
	}
	if len(f.started) != 1 || f.started[0].Model.Name != "llama3_70b" || len(f.started[0].GPUs) != 1 {
		t.Fatalf("searches started: %+v", f.started)
	}
	want := winnerFile(t, f.started[0], final.done)
	if final.done.Winner.Result.Candidate.Key() != cTEAttnMLP.Key() {
		t.Fatalf("winner %s", final.done.Winner.Result.Candidate.Key())
	}
	got := mustRead(t, filepath.Join(f.dir, "cgtune-overrides.yaml"))
	if got != want {
		t.Errorf("overrides file:\n%s\nwant:\n%s", got, want)
	}
}

// waiter makes the flow's wait: each step waits on the model's state (read
// on the program's own goroutine), not on the output stream: the renderer
// sends only the cells that changed, so a word on screen need not appear
// whole in it.
// flowToResults walks from the model screen to the results of the scripted
// search with enter on every screen.
func flowToResults(tm *teatest.TestModel, until func(string, func(*App) bool)) {
	until("the GPU list", func(m *App) bool { return m.gpuScr.loaded })
	tm.Send(keyMsg("enter"))
	until("the GPU screen", func(m *App) bool { return m.screen == screenGPU })
	tm.Send(keyMsg("enter"))
	until("the plan", func(m *App) bool {
		return m.screen == screenSpace && !m.spaceScr.planning && m.spaceScr.validCount() > 0
	})
	tm.Send(keyMsg("enter"))
	until("the results of the scripted search", func(m *App) bool { return m.screen == screenResults && m.done != nil })
}

func waiter(t *testing.T, tm *teatest.TestModel) func(what string, cond func(*App) bool) {
	return func(what string, cond func(*App) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			got := make(chan bool, 1)
			tm.Send(inspectMsg(func(m *App) { got <- cond(m) }))
			select {
			case ok := <-got:
				if ok {
					return
				}
			case <-time.After(time.Second): // the program is not answering
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestFlowWriteAsksBeforeOverwriting: w onto a file that is already there
// asks first; n keeps the old file, y replaces it.
func TestFlowWriteAsksBeforeOverwriting(t *testing.T) {
	f := newFake(t)
	path := filepath.Join(f.dir, "cgtune-overrides.yaml")
	if err := os.WriteFile(path, []byte("old: file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: t0}
	m := New(f, Options{NoColor: true, Version: "0.1.0-test", Now: clk.now, Model: "llama3_70b"})
	tm := teatest.NewTestModel(t, inspectable{m},
		teatest.WithInitialTermSize(80, 24),
		teatest.WithProgramOptions(tea.WithColorProfile(colorprofile.Ascii)),
	)
	until := waiter(t, tm)
	flowToResults(tm, until)

	tm.Send(keyMsg("w"))
	until("the path prompt", func(m *App) bool { return m.resScr.prompt == promptPath })
	tm.Send(keyMsg("enter"))
	until("the overwrite question", func(m *App) bool { return m.resScr.prompt == promptOverwriteFile })
	if got := mustRead(t, path); got != "old: file\n" {
		t.Fatalf("the file was replaced before the answer:\n%s", got)
	}
	tm.Send(keyMsg("n"))
	until("no", func(m *App) bool {
		return m.resScr.prompt == promptNone && strings.Contains(m.status, "nothing written")
	})
	if got := mustRead(t, path); got != "old: file\n" {
		t.Fatalf("n replaced the file:\n%s", got)
	}
	tm.Send(keyMsg("w"))
	until("the path prompt again", func(m *App) bool { return m.resScr.prompt == promptPath })
	tm.Send(keyMsg("enter"))
	until("the question again", func(m *App) bool { return m.resScr.prompt == promptOverwriteFile })
	tm.Send(keyMsg("y"))
	until("the file to be written", func(m *App) bool {
		return strings.HasPrefix(m.status, "wrote "+filepath.Join(f.dir, "cgtune-overrides.yaml")+" ")
	})
	tm.Send(keyMsg("q"))
	final := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(inspectable).App
	want := winnerFile(t, f.started[0], final.done)
	if got := mustRead(t, path); got != want {
		t.Errorf("after y:\n%s\nwant:\n%s", got, want)
	}
}

// inspectMsg runs a function on the model inside Update, where reading it
// does not race with the program.
type inspectMsg func(*App)

// inspectable wraps the model for teatest so tests can send inspectMsg.
type inspectable struct{ *App }

func (i inspectable) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if f, ok := msg.(inspectMsg); ok {
		f(i.App)
		return i, nil
	}
	_, cmd := i.App.Update(msg)
	return i, cmd
}
