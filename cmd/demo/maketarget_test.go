package main

import (
	"os"
	"strings"
	"testing"
)

// The Makefile's targets that run until Ctrl-C build their program and run
// it, never through `go run`: go run exits 1 when it is interrupted, even
// when the program it runs stops cleanly with 0, so `make demo SERVE=1`
// ended with "make: *** [demo] Error 1" on Ctrl-C.
func TestInterruptibleMakeTargetsDoNotGoRun(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	recipes := map[string][]string{}
	var target string
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "\t") && target != "":
			recipes[target] = append(recipes[target], line)
		case line == "" || strings.HasPrefix(line, "#"):
			target = ""
		case strings.Contains(line, ":") && !strings.Contains(line, "="):
			target = strings.TrimSpace(line[:strings.Index(line, ":")])
		}
	}
	for _, name := range []string{"demo", "emulator"} {
		t.Run(name, func(t *testing.T) {
			lines := recipes[name]
			if len(lines) == 0 {
				t.Fatalf("the Makefile has no %s recipe", name)
			}
			for _, l := range lines {
				if strings.Contains(l, "$(GO) run") || strings.Contains(l, "go run") {
					t.Errorf("%s runs through go run, which exits 1 on Ctrl-C: %q", name, strings.TrimSpace(l))
				}
			}
		})
	}
}
