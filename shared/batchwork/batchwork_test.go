package batchwork

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/shared/domain"
)

func nop(context.Context, *Task) error { return nil }

// Registering a task wrongly is a programming error, found at start.
func TestRegisterPanics(t *testing.T) {
	cases := []struct {
		name      string
		register  func(r *Registry)
		wantPanic string
	}{
		{"empty name", func(r *Registry) { r.Register("", nop) }, "empty task name"},
		{"space", func(r *Registry) { r.Register("word count", nop) }, `task name "word count": want a letter or digit`},
		{"leading dot", func(r *Registry) { r.Register(".map", nop) }, `task name ".map"`},
		{"too long", func(r *Registry) { r.Register(strings.Repeat("a", 65), nop) }, "at most 64 characters"},
		{"nil function", func(r *Registry) { r.Register("a", nil) }, `"a" with a nil function`},
		{"twice", func(r *Registry) { r.Register("a", nop); r.Register("a", nop) }, `task "a" registered twice`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				p := recover()
				if p == nil || !strings.Contains(fmt.Sprint(p), tc.wantPanic) {
					t.Fatalf("panic %v, want one saying %q", p, tc.wantPanic)
				}
			}()
			tc.register(NewRegistry())
		})
	}
}

// Names are sorted whatever the order of registration, and the runner's
// registry (behind the public one) finds every function under its name.
func TestRegistryNames(t *testing.T) {
	r := NewRegistry()
	for _, n := range []string{"c", "a", "b"} {
		r.Register(n, nop)
	}
	if got := r.Names(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("Names() = %v, want [a b c]", got)
	}
	exec := executor.PublicRegistry(r)
	for _, n := range []string{"a", "b", "c"} {
		if _, ok := exec.Lookup(n); !ok {
			t.Errorf("the executor registry has no %q", n)
		}
	}
	if _, ok := exec.Lookup("d"); ok {
		t.Error("the executor registry has an unregistered name")
	}
	if executor.PublicRegistry(nil) != nil || executor.PublicRegistry((*Registry)(nil)) != nil {
		t.Error("PublicRegistry of nil is not nil")
	}
}

// The package-level Register adds to the registry Main runs.
func TestRegisterUsesDefaultRegistry(t *testing.T) {
	Register("batchwork_test.default", nop)
	if !slices.Contains(DefaultRegistry.Names(), "batchwork_test.default") {
		t.Fatalf("DefaultRegistry.Names() = %v, want it to hold the registered task", DefaultRegistry.Names())
	}
}

// A function registered here sees the executor's task through the public
// fields.
func TestAdaptMapsTheExecutorTask(t *testing.T) {
	r := NewRegistry()
	var got *Task
	r.Register("f", func(_ context.Context, t *Task) error { got = t; return errors.New("f failed") })
	fn, _ := executor.PublicRegistry(r).Lookup("f")
	in := strings.NewReader("x\n")
	log := slog.New(slog.DiscardHandler)
	err := fn(context.Background(), &executor.Task{
		Ref: domain.TaskRef{Job: "j1", Stage: 2, Partition: 5}, Stage: "reduce", Attempt: 3,
		Params: map[string]string{"k": "v"}, Input: in, Format: "csv", Header: []string{"a", "b"}, Log: log,
	})
	if err == nil || err.Error() != "f failed" {
		t.Fatalf("err = %v, want the function's", err)
	}
	want := Task{Job: "j1", Stage: "reduce", Partition: 5, Attempt: 3, Params: map[string]string{"k": "v"},
		Input: in, Format: "csv", Header: []string{"a", "b"}, Log: log}
	if got.Job != want.Job || got.Stage != want.Stage || got.Partition != want.Partition || got.Attempt != want.Attempt ||
		got.Params["k"] != "v" || got.Input != want.Input || got.Format != want.Format ||
		!slices.Equal(got.Header, want.Header) || got.Log != want.Log || got.Out == nil {
		t.Fatalf("task = %+v, want %+v", *got, want)
	}
}

// RunTask behaves as an executor would for what a function can observe.
func TestRunTask(t *testing.T) {
	cases := []struct {
		name    string
		fn      Func
		in      TaskInput
		want    []string
		wantErr string
	}{
		{"defaults", func(_ context.Context, t *Task) error {
			_, err := fmt.Fprintf(t.Out, "%s %s %d %d %v %v", t.Job, t.Stage, t.Partition, t.Attempt, t.Input == nil, t.Out.Parts())
			return err
		}, TaskInput{}, []string{"local stage 0 1 true 1"}, ""},
		{"input read", func(_ context.Context, t *Task) error {
			_, err := io.Copy(t.Out, t.Input)
			return err
		}, TaskInput{Input: strings.NewReader("a\nb\n")}, []string{"a\nb\n"}, ""},
		{"emit to partitions", func(_ context.Context, t *Task) error {
			return errors.Join(t.Out.Emit("b", "2"), t.Out.Emit("a", "1"))
		}, TaskInput{Parts: 2}, []string{"a\t1\n", "b\t2\n"}, ""},
		{"part", func(_ context.Context, t *Task) error {
			_, err := t.Out.Part(2).Write([]byte("x"))
			return err
		}, TaskInput{Parts: 3}, []string{"", "", "x"}, ""},
		{"part out of range", func(_ context.Context, t *Task) error {
			_, err := t.Out.Part(3).Write([]byte("x"))
			return err
		}, TaskInput{Parts: 3}, []string{"", "", ""}, "output partition 3: the task has 3 (0 to 2)"},
		{"tab in key", func(_ context.Context, t *Task) error { return t.Out.Emit("a\tb", "1") },
			TaskInput{}, []string{""}, "keys must not contain tab"},
		{"newline in value", func(_ context.Context, t *Task) error { return t.Out.Emit("a", "1\n2") },
			TaskInput{}, []string{""}, "values no newline"},
		{"panic", func(context.Context, *Task) error { panic("bad record") },
			TaskInput{}, []string{""}, "task panicked: bad record"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := RunTask(context.Background(), tc.fn, tc.in)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			var got []string
			for _, p := range res.Parts {
				got = append(got, string(p))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("parts = %q, want %q", got, tc.want)
			}
		})
	}
}

// Main's exit status and streams for what it decides before any host
// starts: listing the names, and refusing to run nothing.
func TestRun(t *testing.T) {
	withTasks := NewRegistry()
	withTasks.Register("b", nop)
	withTasks.Register("a", nop)
	cases := []struct {
		name       string
		reg        *Registry
		env        map[string]string
		wantStatus int
		wantOut    string
		wantErr    string
	}{
		{"list", withTasks, map[string]string{EnvListTasks: "1"}, 0, `["a","b"]` + "\n", ""},
		{"list none", NewRegistry(), map[string]string{EnvListTasks: "1"}, 0, "[]\n", ""},
		{"nothing to run", NewRegistry(), nil, 1, "", "no task functions registered"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			status := run(tc.reg, func(k string) string { return tc.env[k] }, &out, &errOut)
			if status != tc.wantStatus || out.String() != tc.wantOut || !strings.Contains(errOut.String(), tc.wantErr) ||
				(tc.wantErr == "" && errOut.Len() > 0) {
				t.Fatalf("run: status %d, stdout %q, stderr %q; want %d, %q, stderr with %q",
					status, out.String(), errOut.String(), tc.wantStatus, tc.wantOut, tc.wantErr)
			}
		})
	}
}
