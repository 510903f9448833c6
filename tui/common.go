package tui

import "fmt"

// common is what the root model shares with every screen (as Common in
// charmbracelet/soft-serve pkg/ui/common, db5f041f, is): the backend, the
// options, the styles and keys, the window's size and the status line.
// There is one, owned by the root; screens hold a pointer to it.
type common struct {
	backend Backend
	opts    Options
	st      Styles
	keys    KeyMap

	width, height int

	status    string
	statusErr bool
}

func (c *common) setStatus(format string, args ...any) {
	c.status, c.statusErr = fmt.Sprintf(format, args...), false
}

func (c *common) setError(err error) {
	c.status, c.statusErr = err.Error(), true
}

func (c *common) clearStatus() {
	c.status, c.statusErr = "", false
}
