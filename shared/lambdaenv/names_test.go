package lambdaenv

import (
	"strings"
	"testing"
)

// TestEnvNamesAreWhatFromEnvReads proves the exported names are the
// variables FromEnv requires: all set, it succeeds; any one missing, it
// fails naming exactly that one.
func TestEnvNamesAreWhatFromEnvReads(t *testing.T) {
	setAll := func(t *testing.T) {
		for _, n := range EnvNames {
			t.Setenv(n, "x/"+n)
		}
	}
	t.Run("all set", func(t *testing.T) {
		setAll(t)
		if _, err := FromEnv(); err != nil {
			t.Fatalf("FromEnv with every EnvNames variable set: %v", err)
		}
	})
	for _, missing := range EnvNames {
		t.Run("without "+missing, func(t *testing.T) {
			setAll(t)
			t.Setenv(missing, "")
			_, err := FromEnv()
			if err == nil || !strings.Contains(err.Error(), missing) {
				t.Fatalf("FromEnv without %s: got %v, want an error naming it", missing, err)
			}
			for _, other := range EnvNames {
				if other != missing && strings.Contains(err.Error(), other+",") || other != missing && strings.HasSuffix(err.Error(), other) {
					t.Fatalf("FromEnv without %s also names %s: %v", missing, other, err)
				}
			}
		})
	}
}

// The timer queue is optional (only the sweep function has it) and, when
// set, reaches the control plane's queues.
func TestTimerQueueIsOptional(t *testing.T) {
	for _, n := range EnvNames {
		t.Setenv(n, "x/"+n)
	}
	c, err := FromEnv()
	if err != nil || c.Queues.Timer != "" {
		t.Fatalf("without %s: %+v, %v; want no error and no timer queue", EnvQueueTimer, c.Queues, err)
	}
	t.Setenv(EnvQueueTimer, "x/timer")
	if c, err = FromEnv(); err != nil || c.Queues.Timer != "x/timer" {
		t.Fatalf("with %s: %+v, %v", EnvQueueTimer, c.Queues, err)
	}
}

// Owner limits are optional; when set they reach the configuration, and a
// bad value is an error naming the variable and the entry.
func TestOwnerLimitsFromEnv(t *testing.T) {
	for _, n := range EnvNames {
		t.Setenv(n, "x/"+n)
	}
	c, err := FromEnv()
	if err != nil || c.OwnerLimits.Any() {
		t.Fatalf("without %s: %+v, %v; want no error and no limits", EnvOwnerMaxConcurrency, c.OwnerLimits, err)
	}
	t.Setenv(EnvOwnerMaxConcurrency, "*=200,arn:aws:iam::123456789012:role/etl=10")
	if c, err = FromEnv(); err != nil || c.OwnerLimits.Default != 200 || c.OwnerLimits.For("arn:aws:iam::123456789012:role/etl") != 10 {
		t.Fatalf("with %s: %+v, %v", EnvOwnerMaxConcurrency, c.OwnerLimits, err)
	}
	t.Setenv(EnvOwnerMaxConcurrency, "*=200,alice=lots")
	_, err = FromEnv()
	if err == nil || !strings.Contains(err.Error(), EnvOwnerMaxConcurrency) || !strings.Contains(err.Error(), `"alice=lots"`) {
		t.Fatalf("with a bad entry: %v, want an error naming %s and the entry", err, EnvOwnerMaxConcurrency)
	}
}

// The operator's input buckets are optional; when set they reach the
// control plane's configuration, and a bad name is an error naming the
// variable and the name.
func TestInputBucketsFromEnv(t *testing.T) {
	for _, n := range EnvNames {
		t.Setenv(n, "x/"+n)
	}
	cases := []struct {
		value   string
		want    []string
		wantErr string
	}{
		{value: "", want: nil},
		{value: "corp-data,raw.example.com", want: []string{"corp-data", "raw.example.com"}},
		{value: "corp-data,Bad_Name", wantErr: `"Bad_Name"`},
	}
	for _, c := range cases {
		t.Run(c.value, func(t *testing.T) {
			t.Setenv(EnvInputBuckets, c.value)
			got, err := FromEnv()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), EnvInputBuckets) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("FromEnv: %v, want an error naming %s and %s", err, EnvInputBuckets, c.wantErr)
				}
				return
			}
			if err != nil || strings.Join(got.InputBuckets, ",") != strings.Join(c.want, ",") {
				t.Fatalf("FromEnv: %v, %v; want input buckets %v", got.InputBuckets, err, c.want)
			}
		})
	}
}
