package testtier

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

const childEnv = "BATCHWORK_TESTTIER_CHILD"

// TestChild is not a test: TestTiers runs the test binary with it to see
// what SkipUnderShort does with and without -short.
func TestChild(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("run by TestTiers")
	}
	SkipUnderShort(t, "the child's emulator")
	t.Log("ran")
}

// Under -short a test that needs more than the unit tier is skipped, and
// says what it needs; without -short it runs.
func TestTiers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		short bool
		want  string
	}{
		{name: "unit tier", short: true, want: "skipped under -short (the unit tier): needs the child's emulator"},
		{name: "everything", short: false, want: "ran"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"-test.run=^TestChild$", "-test.v", "-test.short=" + map[bool]string{true: "true", false: "false"}[tc.short]}
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(os.Environ(), childEnv+"=1")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %v\n%s", args, err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("%v: output does not contain %q:\n%s", args, tc.want, out)
			}
		})
	}
}
