package check

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/blob"
)

// The checker must not share code with what it checks.
func TestNoControlPlaneImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"/shared/", "/statemachine", "/internal/", "/examples/"} {
			if strings.HasPrefix(dep, "github.com/batchwork/batchwork") && strings.Contains(dep, banned) {
				t.Errorf("the checker depends on %s", dep)
			}
		}
	}
}

// The re-declared layout must still be the product's: a change there
// must be a deliberate change here.
func TestLayoutMatchesTheProduct(t *testing.T) {
	if got, want := outputKey("j1", "map", 12, 3, 4), blob.OutputKey("j1", "map", 12, 3, 4); got != want {
		t.Errorf("outputKey = %s, blob.OutputKey = %s", got, want)
	}
	if got, want := stageManifestKey("j1", "map"), blob.StageManifestKey("j1", "map"); got != want {
		t.Errorf("stageManifestKey = %s, blob.StageManifestKey = %s", got, want)
	}
	if got, want := jobManifestKey("j1"), blob.JobManifestKey("j1"); got != want {
		t.Errorf("jobManifestKey = %s, blob.JobManifestKey = %s", got, want)
	}
	stage, p, a, part, err := parseOutputKey("j1", blob.OutputKey("j1", "reduce", 7, 2, 1))
	if err != nil || stage != "reduce" || p != 7 || a != 2 || part != 1 {
		t.Errorf("parseOutputKey = %s %d %d %d %v", stage, p, a, part, err)
	}
}

func TestSinks(t *testing.T) {
	s := specDoc{Stages: []specStage{{Name: "map"}, {Name: "side"}, {Name: "join", After: []string{"map", "side"}}}}
	if got := s.sinks(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("sinks %v, want [2]", got)
	}
}

func TestSortedLines(t *testing.T) {
	if a, b := sortedLines([]byte("b\t1\na\t2\n")), sortedLines([]byte("a\t2\nb\t1\n")); string(a) != string(b) {
		t.Fatalf("%q != %q", a, b)
	}
}
