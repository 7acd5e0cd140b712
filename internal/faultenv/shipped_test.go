package faultenv

import (
	"os/exec"
	"strings"
	"testing"
)

// What users and deployments run (the public SDK, the Lambda functions,
// the CLI) links no test machinery in a default build: no fault injector,
// no test doubles, no testcontainers, nothing under integration/. The binaries of chaos
// runs, built with -tags faults, do link the injector.
func TestShippedBinariesCarryNoTestMachinery(t *testing.T) {
	forbidden := []string{
		"github.com/batchwork/batchwork/internal/faults",
		"github.com/batchwork/batchwork/integration/",
		"github.com/batchwork/batchwork/internal/testtier",
		"github.com/batchwork/batchwork/internal/testdouble",
		"github.com/testcontainers/",
	}
	for _, tc := range []struct {
		name     string
		tags     string
		packages []string
		want     string // a package the closure must contain; "" for none
	}{
		{name: "default build", packages: []string{"./shared/batchwork", "./functions/...", "./cmd/batchwork", "./cmd/batchwork-executor"}},
		{name: "lambda build", tags: "lambda.norpc", packages: []string{"./functions/..."}},
		{name: "chaos build", tags: "faults", packages: []string{"./cmd/batchwork-local", "./cmd/batchwork-executor"},
			want: "github.com/batchwork/batchwork/internal/faults"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"list", "-deps", "-tags", tc.tags}, tc.packages...)
			cmd := exec.Command("go", args...)
			cmd.Dir = "../.."
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go %s: %v", strings.Join(args, " "), err)
			}
			deps := strings.Fields(string(out))
			if tc.want != "" {
				found := false
				for _, d := range deps {
					found = found || d == tc.want
				}
				if !found {
					t.Errorf("go %s: %s missing", strings.Join(args, " "), tc.want)
				}
				return
			}
			for _, d := range deps {
				for _, f := range forbidden {
					if strings.HasPrefix(d, f) {
						t.Errorf("go %s: links %s", strings.Join(args, " "), d)
					}
				}
			}
		})
	}
}
