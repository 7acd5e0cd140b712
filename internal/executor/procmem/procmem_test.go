package procmem

import (
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/spec"
)

func TestSizeFromEnv(t *testing.T) {
	tests := []struct {
		env     string
		want    spec.Size
		wantErr string
	}{
		{"", 0, ""},
		{"4GiB", 4 << 30, ""},
		{"1073741824", 1 << 30, ""},
		{"3GiB", 0, "not one of the executor sizes"},
		{"lots", 0, EnvExecutorMemory},
	}
	for _, tt := range tests {
		t.Setenv(EnvExecutorMemory, tt.env)
		got, err := SizeFromEnv()
		if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%q: %d, %v; want %d, error with %q", tt.env, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestLambdaLimit(t *testing.T) {
	for env, want := range map[string]spec.Size{"": 0, "1024": 1 << 30, "10240": 10 << 30, "x": 0} {
		got := LambdaLimit(func(k string) string {
			if k == "AWS_LAMBDA_FUNCTION_MEMORY_SIZE" {
				return env
			}
			return ""
		})
		if got != want {
			t.Errorf("%q: %d, want %d", env, got, want)
		}
	}
}
