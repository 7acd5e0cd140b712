package join

import (
	"testing"

	"github.com/batchwork/batchwork/shared/spec"
)

func TestSpec(t *testing.T) {
	sp, err := spec.Parse(Spec("j", 3, 2, 4))
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	src, ok := sp.ShuffleSource(2)
	if !ok || sp.Stages[src].Name != "map" {
		t.Fatalf("join reads shuffle of %v (%v), want map", src, ok)
	}
	if got := sp.Sinks(); len(got) != 1 || sp.Stages[got[0]].Name != "join" {
		t.Fatalf("sinks %v, want [join]", got)
	}
}
