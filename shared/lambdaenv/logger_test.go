package lambdaenv

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestNewLoggerLevel(t *testing.T) {
	for _, tc := range []struct {
		env       string
		wantDebug bool
		wantErr   string
	}{
		{env: "", wantDebug: false},
		{env: "debug", wantDebug: true},
		{env: "DEBUG", wantDebug: true},
		{env: "warn", wantDebug: false},
		{env: "loud", wantErr: EnvLogLevel + `="loud"`},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(EnvLogLevel, tc.env)
			var buf bytes.Buffer
			log, err := NewLogger(&buf)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := log.Enabled(context.Background(), slog.LevelDebug); got != tc.wantDebug {
				t.Fatalf("debug enabled = %v, want %v", got, tc.wantDebug)
			}
		})
	}
}
