package kernel

import "testing"

func TestMeterWithoutMetricsIsTheNoOp(t *testing.T) {
	k := New(Config{}, nil, nil, nil, nil)
	if _, ok := k.Meter().(noMetrics); !ok {
		t.Fatalf("Meter() of a kernel without metrics is %T, want the no-op", k.Meter())
	}
}
