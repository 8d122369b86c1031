package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// Task is one running statement as a progress display sees it. Set replaces
// the status text shown beside the spinner (long-running SQL functions such as
// dp_avgmix can report their phase through it); Stop ends the display and is
// safe to call more than once.
type Task interface {
	Set(status string)
	Stop()
}

// spinnerDelay is how long a statement runs before the spinner appears.
const spinnerDelay = time.Second

// startTask begins the progress display of one statement: Main.Progress when
// set, else a spinner on Stderr when Stderr is a terminal, else nothing.
func (m *Main) startTask(label string) Task {
	if m.Progress != nil {
		return m.Progress(label)
	}
	if !isTerminal(m.Stderr) {
		return noTask{}
	}
	return newSpinner(m.Stderr, label, spinnerDelay, 100*time.Millisecond)
}

type noTask struct{}

func (noTask) Set(string) {}
func (noTask) Stop()      {}

func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// spinner draws "⠋ running 3s  status" on one line of w, redrawn every tick
// once delay has passed, and erases it on Stop.
type spinner struct {
	w     io.Writer
	label string
	start time.Time

	mu      sync.Mutex
	status  string
	drawn   bool
	stopped bool
	done    chan struct{}
	exited  chan struct{}
}

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

func newSpinner(w io.Writer, label string, delay, tick time.Duration) *spinner {
	s := &spinner{w: w, label: label, start: time.Now(), done: make(chan struct{}), exited: make(chan struct{})}
	go s.run(delay, tick)
	return s
}

func (s *spinner) run(delay, tick time.Duration) {
	defer close(s.exited)
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-s.done:
		return
	case <-t.C:
	}
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for frame := 0; ; frame++ {
		s.draw(frame)
		select {
		case <-s.done:
			return
		case <-tk.C:
		}
	}
}

func (s *spinner) draw(frame int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	line := fmt.Sprintf("%s running %s", spinnerFrames[frame%len(spinnerFrames)], time.Since(s.start).Truncate(time.Second))
	if s.status != "" {
		line += "  " + s.status
	} else if s.label != "" {
		line += "  " + s.label
	}
	if r := []rune(line); len(r) > 76 {
		line = string(r[:75]) + "…"
	}
	fmt.Fprintf(s.w, "\r\x1b[K%s", line)
	s.drawn = true
}

func (s *spinner) Set(status string) {
	s.mu.Lock()
	s.status = status
	s.mu.Unlock()
}

func (s *spinner) Stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	close(s.done)
	s.mu.Unlock()
	<-s.exited
	if s.drawn {
		fmt.Fprint(s.w, "\r\x1b[K")
	}
}
