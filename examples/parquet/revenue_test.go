package parquet_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/spec"
)

// The example's spec is valid, and its program sums decimal amounts per
// region exactly, map then reduce.
func TestRevenue(t *testing.T) {
	raw, err := os.ReadFile("job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := spec.Parse(raw); err != nil {
		t.Fatalf("job.yaml: %v", err)
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	run := func(mode, in string) string {
		cmd := exec.Command("python3", "revenue.py", mode)
		cmd.Stdin = strings.NewReader(in)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("revenue.py %s: %v", mode, err)
		}
		return string(out)
	}
	mapped := run("map", `{"region":"eu","amount":"0.10"}`+"\n"+`{"region":"us","amount":"5.00"}`+"\n"+
		`{"region":"eu","amount":"0.20"}`+"\n"+`{"region":null,"amount":"1.00"}`+"\n")
	if want := "eu\t0.30\nus\t5.00\n"; mapped != want {
		t.Fatalf("map wrote %q, want %q", mapped, want)
	}
	if got, want := run("reduce", mapped+"eu\t1.05\n"), `{"region": "eu", "total": "1.35"}`+"\n"+`{"region": "us", "total": "5.00"}`+"\n"; got != want {
		t.Errorf("reduce wrote %q, want %q", got, want)
	}
}
