// Package daily holds a job spec and a schedule that name their day with
// run parameters; the test keeps both valid.
package daily

import (
	"os"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/schedule"
	"github.com/batchwork/batchwork/shared/spec"
)

func TestDailySpecResolves(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, err := spec.Parse(raw)
	if err != nil {
		t.Fatalf("job.yaml: %v", err)
	}
	r, err := j.Resolve(map[string]string{"date": "2026-03-01"})
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	if got := r.Stages[0].Partitions.Input.Prefix; got != "inputs:logs/2026-03-01/" {
		t.Errorf("prefix %q", got)
	}
	if _, err := j.Resolve(nil); err == nil {
		t.Error("resolved without the required date")
	}
}

func TestDailySchedule(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("schedule.json")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := schedule.Parse(raw)
	if err != nil {
		t.Fatalf("schedule.json: %v", err)
	}
	j, err := spec.Parse(sc.Spec)
	if err != nil {
		t.Fatal(err)
	}
	r, err := j.Resolve(sc.FiringParams(time.Date(2026, 3, 1, 2, 30, 0, 0, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Stages[0].Partitions.Input.Prefix; got != "inputs:logs/2026-03-01/" {
		t.Errorf("prefix %q", got)
	}
}
