package lazylog

import (
	"bytes"
	"log/slog"
	"testing"
	"time"
)

// Every sequence of With, WithGroup and logging writes the same bytes
// through the wrapper as straight through the JSON and text handlers.
func TestSameOutput(t *testing.T) {
	steps := []struct {
		name string
		do   func(*slog.Logger) *slog.Logger
		lazy func(*slog.Logger) *slog.Logger // the wrapper's way, when not do
	}{
		{"log", func(l *slog.Logger) *slog.Logger { l.Info("plain", "n", 1); return l }, nil},
		{"with", func(l *slog.Logger) *slog.Logger { return l.With("job_id", "j1", "stage", 3, "partition", 42) }, nil},
		{"with none", func(l *slog.Logger) *slog.Logger { return l.With() }, nil},
		{"group", func(l *slog.Logger) *slog.Logger { return l.WithGroup("task") }, nil},
		{"empty group", func(l *slog.Logger) *slog.Logger { return l.WithGroup("") }, nil},
		{"with group attr", func(l *slog.Logger) *slog.Logger {
			return l.With(slog.Group("g", slog.String("a", "b")), slog.Duration("d", time.Second))
		}, nil},
		{"log attrs", func(l *slog.Logger) *slog.Logger { l.Warn("attrs", "err", "boom", "tok", "x\"y"); return l }, nil},
		{"debug (off)", func(l *slog.Logger) *slog.Logger { l.Debug("hidden", "n", 2); return l }, nil},
		{"with more", func(l *slog.Logger) *slog.Logger { return l.With("executor_id", "e-1") }, nil},
		{"with func", func(l *slog.Logger) *slog.Logger { return l.With("task", "j1/3/42", "attempt", 2) },
			func(l *slog.Logger) *slog.Logger {
				return WithFunc(l.Handler(), func() []slog.Attr {
					return []slog.Attr{slog.String("task", "j1/3/42"), slog.Int("attempt", 2)}
				})
			}},
	}
	handlers := []struct {
		name string
		mk   func(*bytes.Buffer) slog.Handler
	}{
		{"json", func(b *bytes.Buffer) slog.Handler {
			return slog.NewJSONHandler(b, &slog.HandlerOptions{ReplaceAttr: noTime})
		}},
		{"text", func(b *bytes.Buffer) slog.Handler {
			return slog.NewTextHandler(b, &slog.HandlerOptions{ReplaceAttr: noTime})
		}},
	}
	// Every ordered pair and triple of steps, each ending in a log line.
	var seqs [][]int
	for i := range steps {
		for j := range steps {
			seqs = append(seqs, []int{i, j, 0})
			for k := range steps {
				seqs = append(seqs, []int{i, j, k, 6})
			}
		}
	}
	for _, h := range handlers {
		for _, seq := range seqs {
			var want, got bytes.Buffer
			direct, lazy := slog.New(h.mk(&want)), New(h.mk(&got))
			for _, s := range seq {
				do := steps[s].lazy
				if do == nil {
					do = steps[s].do
				}
				direct, lazy = steps[s].do(direct), do(lazy)
			}
			if want.String() != got.String() {
				t.Fatalf("%s, steps %v:\nwant %s\ngot  %s", h.name, seq, want.String(), got.String())
			}
		}
	}
}

func noTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// A derived logger shared by goroutines applies its ops once.
func TestConcurrentFirstLog(t *testing.T) {
	b := syncBuffer{mu: make(chan struct{}, 1)}
	l := New(slog.NewJSONHandler(&b, &slog.HandlerOptions{ReplaceAttr: noTime})).With("job_id", "j1")
	done := make(chan struct{})
	for i := 0; i < 8; i++ {
		go func() { l.Info("m"); done <- struct{}{} }()
	}
	for i := 0; i < 8; i++ {
		<-done
	}
	want := bytes.Repeat([]byte(`{"level":"INFO","msg":"m","job_id":"j1"}`+"\n"), 8)
	if b.String() != string(want) {
		t.Fatalf("got %s", b.String())
	}
}

type syncBuffer struct {
	mu  chan struct{}
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	if s.mu == nil {
		panic("syncBuffer without its channel")
	}
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string { return s.buf.String() }

// A logger made per task and never logged to: the wrapper's With against
// the JSON handler's.
func BenchmarkWith(b *testing.B) {
	var sink bytes.Buffer
	for _, c := range []struct {
		name string
		l    *slog.Logger
	}{
		{"json", slog.New(slog.NewJSONHandler(&sink, nil))},
		{"lazy", New(slog.NewJSONHandler(&sink, nil))},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = c.l.With("job_id", "j1a1fd8fa5144ffa078bd8", "stage", 3, "partition", 42, "task", "j1a1fd8fa5144ffa078bd8/3/42").With("executor_id", "e-1")
			}
		})
	}
}

// A task's logger made of three Withs and logged to once, as the control
// plane's commit line is: the wrapper's against the JSON handler's.
func BenchmarkWithThenLog(b *testing.B) {
	var sink bytes.Buffer
	for _, c := range []struct {
		name string
		l    *slog.Logger
	}{
		{"json", slog.New(slog.NewJSONHandler(&sink, nil))},
		{"lazy", New(slog.NewJSONHandler(&sink, nil))},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink.Reset()
				c.l.With("job_id", "j1a1fd8fa5144ffa078bd8", "stage", 3, "task", "j1a1fd8fa5144ffa078bd8/3/42").
					With("partition", 42, "attempt", 1).With("executor_id", "e-1").Info("task committed", "outputs", 0)
			}
		})
	}
}
