package job

import "bytes"

// lineSplitter cuts a byte stream, fed in chunks of any size, into lines.
// A line ends at "\n", "\r\n" or a lone "\r": progress bars such as tqdm's
// redraw themselves with "\r" and would otherwise make one endless line.
// Each byte is looked at once, whatever the chunking, and the line being
// assembled never holds more than MaxLogLine bytes: the last ones (a
// redrawn bar's newest state, the end of a message); the bytes before them
// are dropped and counted (Report.CutLines, Report.CutBytes), so a progress
// bar that never ends its line or a binary dump cannot grow the process.
type lineSplitter struct {
	line    []byte // the current line's last MaxLogLine bytes at most
	cut     int64  // bytes dropped from the front of the current line
	afterCR bool   // the last chunk ended with "\r": a "\n" next belongs to it
}

// feed splits chunk; emit gets each line that ends in it, with the bytes
// cut from its front. The line passed to emit is only valid during the call.
func (s *lineSplitter) feed(chunk []byte, emit func(line []byte, cut int64)) {
	if s.afterCR && len(chunk) > 0 {
		s.afterCR = false
		if chunk[0] == '\n' {
			chunk = chunk[1:]
		}
	}
	for len(chunk) > 0 {
		i := bytes.IndexAny(chunk, "\r\n")
		if i < 0 {
			s.keep(chunk)
			return
		}
		s.keep(chunk[:i])
		end := chunk[i]
		chunk = chunk[i+1:]
		if end == '\r' {
			switch {
			case len(chunk) == 0:
				s.afterCR = true
			case chunk[0] == '\n':
				chunk = chunk[1:]
			}
		}
		emit(s.line, s.cut)
		s.line, s.cut = s.line[:0], 0
	}
}

// end emits what is left after the last line end (a last line without a
// newline), if anything.
func (s *lineSplitter) end(emit func(line []byte, cut int64)) {
	s.afterCR = false
	if len(s.line) == 0 && s.cut == 0 {
		return
	}
	emit(s.line, s.cut)
	s.line, s.cut = s.line[:0], 0
}

// keep appends b to the current line, dropping from its front whatever
// goes past MaxLogLine.
func (s *lineSplitter) keep(b []byte) {
	if len(b) >= MaxLogLine {
		s.cut += int64(len(s.line) + len(b) - MaxLogLine)
		s.line = append(s.line[:0], b[len(b)-MaxLogLine:]...)
		return
	}
	if over := len(s.line) + len(b) - MaxLogLine; over > 0 {
		s.cut += int64(over)
		s.line = s.line[:copy(s.line, s.line[over:])]
	}
	s.line = append(s.line, b...)
}
