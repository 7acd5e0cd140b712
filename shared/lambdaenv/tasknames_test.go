package lambdaenv

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/shared/control"
)

// The static task names are optional; when set they reach the
// configuration, and a bad name is an error naming the variable and the
// name. Only the CheckTaskNames option turns the check on.
func TestTaskNamesFromEnv(t *testing.T) {
	cases := []struct {
		value   string
		want    []string
		wantErr string
	}{
		{value: "", want: nil},
		{value: "wordcount.map,wordcount.reduce", want: []string{"wordcount.map", "wordcount.reduce"}},
		{value: "wordcount.map, bad/name", wantErr: `"bad/name"`},
		{value: "ok,../etc", wantErr: `"../etc"`},
	}
	for _, c := range cases {
		t.Run(c.value, func(t *testing.T) {
			for _, n := range EnvNames {
				t.Setenv(n, "x/"+n)
			}
			t.Setenv(EnvTaskNames, c.value)
			got, err := FromEnv()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), EnvTaskNames) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("FromEnv: %v, want an error naming %s and %s", err, EnvTaskNames, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got.TaskNames); diff != "" {
				t.Errorf("task names (-want +got):\n%s", diff)
			}
			if got.CheckTaskNames {
				t.Error("FromEnv turned the check on; only the submitting functions' option does")
			}
			CheckTaskNames(&got)
			if !got.CheckTaskNames {
				t.Error("the CheckTaskNames option left the check off")
			}
		})
	}
}

// The control plane names the variable in its messages without importing
// this package.
func TestTaskNamesHintIsTheVariable(t *testing.T) {
	if control.EnvTaskNamesHint != EnvTaskNames {
		t.Fatalf("control.EnvTaskNamesHint = %q, want %q", control.EnvTaskNamesHint, EnvTaskNames)
	}
}

// The static exec programs (the Fargate image's, listed at deploy) reach
// the configuration; a name no exec stage could hold is an error naming
// the variable and the name.
func TestExecProgramsFromEnv(t *testing.T) {
	cases := []struct {
		value   string
		want    []string
		wantErr string
	}{
		{value: "", want: nil},
		{value: "wordcount.py, sum.sh,wordcount.py", want: []string{"wordcount.py", "sum.sh"}},
		{value: "ok.sh,../bin/sh", wantErr: `"../bin/sh"`},
	}
	for _, c := range cases {
		t.Run(c.value, func(t *testing.T) {
			for _, n := range EnvNames {
				t.Setenv(n, "x/"+n)
			}
			t.Setenv(EnvExecPrograms, c.value)
			got, err := FromEnv()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), EnvExecPrograms) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("FromEnv: %v, want an error naming %s and %s", err, EnvExecPrograms, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got.ExecPrograms); diff != "" {
				t.Errorf("programs (-want +got):\n%s", diff)
			}
		})
	}
	if control.EnvExecProgramsHint != EnvExecPrograms {
		t.Fatalf("control.EnvExecProgramsHint = %q, want %q", control.EnvExecProgramsHint, EnvExecPrograms)
	}
}
