package scaffold

import (
	"os"
	"testing"

	"golang.org/x/mod/modfile"
)

// A new project's go directive is at least this module's, or the go
// command refuses to build it ("updates to go.mod needed") until the user
// runs go mod tidy: TestScaffold finds that only in the emulator tier.
func TestGoVersionIsTheModules(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax("go.mod", raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Go == nil || f.Go.Version != goVersion {
		t.Fatalf("goVersion = %q, this module's go directive is %v: keep them equal", goVersion, f.Go)
	}
}
