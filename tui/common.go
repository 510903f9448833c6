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
	// alert is the last error too long for the status line; the error
	// view shows it whole while alertOpen (error_view.go).
	alert     string
	alertOpen bool
}

func (c *common) setStatus(format string, args ...any) {
	c.status, c.statusErr = fmt.Sprintf(format, args...), false
}

// setError puts err on the status line; one too long for it opens in the
// error view.
func (c *common) setError(err error) {
	c.status, c.statusErr = err.Error(), true
	if tooLongForStatus(c.status, c.width) {
		c.alert, c.alertOpen = c.status, true
	}
}

func (c *common) clearStatus() {
	c.status, c.statusErr = "", false
}
