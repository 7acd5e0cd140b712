package emulator

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const shortChildEnv = "BATCHWORK_EMULATOR_TEST_SHORT_CHILD"

// TestShortChild is not a test: TestRefusesUnderShort runs the test
// binary with it, and -test.short, to call Start as a TestMain of the
// unit tier would.
func TestShortChild(t *testing.T) {
	if os.Getenv(shortChildEnv) != "1" {
		t.Skip("run by TestRefusesUnderShort")
	}
	e, err := Start(context.Background())
	if err == nil {
		_ = e.Stop()
	}
	if !errors.Is(err, ErrShort) {
		t.Fatalf("Start under -short = %v, want ErrShort", err)
	}
	t.Log("refused")
}

// The unit tier starts no emulator: under -short every kind that would
// start a process is refused before anything starts (no moto_server or
// DynamoDB Local is needed to see it), whatever the tests forgot.
func TestRefusesUnderShort(t *testing.T) {
	for _, kind := range []string{"", KindMoto, KindLocalstack} {
		t.Run("BATCHWORK_EMULATOR="+kind, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestShortChild$", "-test.v", "-test.short")
			cmd.Env = []string{shortChildEnv + "=1", EnvEmulator + "=" + kind, EnvMotoServer + "=/nonexistent/moto_server",
				EnvDynamoDBLocalDir + "=/nonexistent", "PATH=" + os.Getenv("PATH")}
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "refused") {
				t.Fatalf("child: %v\n%s", err, out)
			}
		})
	}
}
